"""What an engine takes, what it returns, and the rule every engine follows.

A recommendation ends with "how to launch it". `LaunchSettings` is that launch in the
engine-neutral terms the search uses (vLLM's vocabulary, since the simulator models a
vLLM-like scheduler); each `Engine` translates it into one engine's real flags.

The honesty rule lives here, once, so no engine can skip it: when an engine has no `Kernel`
row for the method's family, the engine has no equivalent scheme and the engine returns
`supported=False`, no command, and a note saying so — it never invents a flag. The same
holds per device: when the launch names its device, an engine that does not run the scheme
there with the measured numerics (its `kernels`) answers `supported=False` with the reason.
Every command is built as an argument list and joined with `shlex.join`,
so a model path with spaces or shell characters survives copy-paste.

A checkpoint scheme (`QuantScheme.checkpoint_format`) is served from the checkpoint
directory: `LaunchSettings.model` is that directory, and engines read the scheme from its
config.json, so no quantization flag is passed (its row's `flag` is "").
"""

from __future__ import annotations

import shlex
from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar

from recommender.engines.expert_parallel import expand_placeholders
from recommender.engines.kernels import Kernel, describe, kernel_refusal
from recommender.errors import BadInputError
from recommender.perf.sim.engine_profiles import EngineProfile

if TYPE_CHECKING:
    from recommender.device import DeviceInfo
    from recommender.engines.expert_parallel import ExpertParallelLaunch
    from recommender.quantize import QuantScheme

#: Activation/weight dtypes a launch may ask for (the 16-bit formats the methods compute in).
DTYPES = ("bfloat16", "float16")
#: KV-cache formats a launch may ask for; each engine maps "fp8" to its engine's name for e4m3.
KV_CACHE_DTYPES = ("auto", "fp8")

#: An engine option and its value, in command-line order.
Option = tuple[str, int | float | str]


@dataclass(frozen=True, kw_only=True)
class LaunchSettings:
    """One serving launch, engine-neutral.

    Args:
        model: a hub id or a local directory; for a checkpoint scheme, the checkpoint directory.
        method: the quantization method; its `kernel_family` picks each engine's row (and flag).
        dtype: "bfloat16" or "float16".
        tensor_parallel: GPUs the model is sharded over.
        max_num_seqs: most sequences decoded together (the batch cap).
        max_num_batched_tokens: token budget of one scheduler step (chunked prefill size).
        kv_cache_dtype: "auto" (the model dtype) or "fp8".
        gpu_memory_utilization: fraction of each GPU's memory the engine may use.
        max_model_len: longest prompt + completion, in tokens.
        port: HTTP port of the server.
        device: the device it runs on; when given, an engine that does not run the scheme there
            as measured refuses (None: not checked).
        speculative: "none", or the speculative method whose acceptance was measured ("ngram", "ngram:K":
            vLLM's n-gram proposer, ``recommender/speculation``); an engine without it refuses.
        expert_parallel: the expert-parallel replica this command is one node's part of (None: tensor
            parallelism over `tensor_parallel` GPUs); `tensor_parallel` is then the replica's GPUs and `max_num_seqs`
            the batch cap of one attention rank.
    """

    model: str
    method: QuantScheme
    dtype: str
    tensor_parallel: int
    max_num_seqs: int
    max_num_batched_tokens: int
    kv_cache_dtype: str
    gpu_memory_utilization: float
    max_model_len: int
    port: int = 8000
    device: DeviceInfo | None = None
    speculative: str = "none"
    expert_parallel: ExpertParallelLaunch | None = None

    def __post_init__(self) -> None:
        if not self.model.strip():
            raise BadInputError("launch.model", "empty model", "give a hub id or a local directory")
        if self.dtype not in DTYPES:
            raise BadInputError("launch.dtype", f"unknown dtype {self.dtype!r}", f"use one of {', '.join(DTYPES)}")
        if self.kv_cache_dtype not in KV_CACHE_DTYPES:
            raise BadInputError(
                "launch.kv_cache_dtype",
                f"unknown KV-cache dtype {self.kv_cache_dtype!r}",
                f"use one of {', '.join(KV_CACHE_DTYPES)}",
            )
        for name in ("tensor_parallel", "max_num_seqs", "max_num_batched_tokens"):
            if getattr(self, name) < 1:
                raise BadInputError(f"launch.{name}", f"must be >= 1, got {getattr(self, name)}")
        if self.max_model_len < 2:
            raise BadInputError(
                "launch.max_model_len",
                f"must be >= 2, got {self.max_model_len}",
                "leave room for at least one prompt token and one generated token",
            )
        # Every running sequence needs at least one token of each step's budget; vLLM's
        # SchedulerConfig refuses max_num_batched_tokens < max_num_seqs at startup.
        if self.max_num_batched_tokens < self.max_num_seqs:
            raise BadInputError(
                "launch.max_num_batched_tokens",
                f"{self.max_num_batched_tokens} is below max_num_seqs {self.max_num_seqs}",
                "use max(max_num_batched_tokens, max_num_seqs), as the simulator does",
            )
        if not 0.0 < self.gpu_memory_utilization <= 1.0:
            raise BadInputError(
                "launch.gpu_memory_utilization", f"must be in (0, 1], got {self.gpu_memory_utilization}"
            )
        if not 1 <= self.port <= 65535:
            raise BadInputError("launch.port", f"must be in 1..65535, got {self.port}")
        if self.expert_parallel is not None and self.expert_parallel.ep != self.tensor_parallel:
            raise BadInputError(
                "launch.tensor_parallel",
                f"{self.tensor_parallel} is not the expert-parallel replica's {self.expert_parallel.ep} GPUs",
                "give the replica's GPUs",
            )


@dataclass(frozen=True, kw_only=True)
class EngineLaunch:
    """One engine's answer for one launch.

    Args:
        engine: the engine's name ("vllm", "sglang", "tgi").
        supported: False when the engine has no scheme equivalent to the method.
        command: the launch command, every argument quoted with `shlex.join`; None when unsupported.
        config_yaml: the same settings as an engine config file, where the engine reads one.
        notes: what the command cannot say: hardware- or version-dependent behaviour, caveats.
        sources: the documentation and source files the flags were verified against.
    """

    engine: str
    supported: bool
    command: str | None
    config_yaml: str | None = None
    notes: list[str] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)

    @property
    def argv(self) -> list[str] | None:
        """The command split back into arguments (what a process launcher takes)."""
        return None if self.command is None else shlex.split(self.command)


class Engine(ABC):
    """Turns `LaunchSettings` into one engine's launch command.

    Subclasses set `name` (the registry key and the spec's name for the engine), `label` (the engine's
    name in prose), `sources`, `kernels` (where it runs each scheme family, and with which flag) and `profile`
    (how it batches, for the simulator), and implement `_emit`, which only ever sees methods the engine supports.
    """

    name: ClassVar[str]
    label: ClassVar[str]
    sources: ClassVar[tuple[str, ...]]
    kernels: ClassVar[tuple[Kernel, ...]]
    profile: ClassVar[EngineProfile]
    #: Why this engine does not launch the speculative decoding measured here (vLLM's n-gram proposer); ''
    #: for an engine that does (it then emits it from `LaunchSettings.speculative`).
    speculation_refusal: ClassVar[str] = "its speculative decoding was not measured"
    #: Why this engine does not launch an expert-parallel replica; '' for an engine that does (it then emits it from
    #: `LaunchSettings.expert_parallel`, its flags cited in its module).
    expert_parallel_refusal: ClassVar[str] = "its expert-parallel flags were not verified here"

    def row(self, family: str) -> Kernel | None:
        """This engine's row for a scheme family (None: it has no such scheme)."""
        return next((k for k in self.kernels if k.family == family), None)

    def refusal(self, method: QuantScheme, device: DeviceInfo) -> str | None:
        """Why this engine does not serve `method` on `device` as it was measured, or None when it does."""
        return kernel_refusal(self.row(method.kernel_family), method, device)

    def emit(self, settings: LaunchSettings) -> EngineLaunch:
        flag = self.flag_for(settings.method)
        if flag is None:
            return self._unsupported(self._no_equivalent(settings.method))
        if settings.speculative != "none" and self.speculation_refusal:
            return self._unsupported(
                f"{self.label} does not launch {settings.speculative} speculation as measured: "
                f"{self.speculation_refusal}."
            )
        if settings.expert_parallel is not None and self.expert_parallel_refusal:
            return self._unsupported(
                f"{self.label} does not launch an expert-parallel replica: {self.expert_parallel_refusal}."
            )
        device = settings.device
        why = None if device is None else self.refusal(settings.method, device)
        if device is not None and why is not None:
            return self._unsupported(
                f"{self.label} does not serve {settings.method.name} on {describe(device)} as it was measured: {why}."
            )
        return self._emit(settings, flag)

    def _unsupported(self, note: str) -> EngineLaunch:
        return EngineLaunch(engine=self.name, supported=False, command=None, notes=[note], sources=list(self.sources))

    def flag_for(self, method: QuantScheme) -> str | None:
        """This engine's flag for `method`: None = no such scheme, "" = no flag needed."""
        row = self.row(method.kernel_family)
        return None if row is None else row.flag

    def rocm_env(self, settings: LaunchSettings) -> list[str]:
        """``NAME=VALUE`` settings put before the command on ROCm (the row's ``amd_env``; none elsewhere)."""
        row = self.row(settings.method.kernel_family)
        on_rocm = settings.device is not None and settings.device.kind == "rocm"
        return list(row.amd_env) if row is not None and on_rocm else []

    def no_equivalent_hint(self, method: QuantScheme) -> str:
        """What to do instead when the engine has no equivalent; engines override with specifics."""
        return f"pick a method with a {self.label} equivalent"

    def _no_equivalent(self, method: QuantScheme) -> str:
        return (
            f"{self.label} has no scheme equivalent to {method.name} ({method.description}); "
            f"{self.no_equivalent_hint(method)}."
        )

    def _config(self, *, command: Sequence[str], notes: Iterable[str], config_yaml: str | None = None) -> EngineLaunch:
        return EngineLaunch(
            engine=self.name,
            supported=True,
            command=expand_placeholders(shlex.join(command)),
            config_yaml=config_yaml,
            notes=list(notes),
            sources=list(self.sources),
        )

    @abstractmethod
    def _emit(self, settings: LaunchSettings, flag: str) -> EngineLaunch: ...


def flatten(options: Iterable[Option]) -> list[str]:
    """``[("--tp", 2)]`` -> ``["--tp", "2"]``; floats keep their shortest exact spelling."""
    argv: list[str] = []
    for flag, value in options:
        argv += [flag, str(value)]
    return argv


def check_choice(engine: str, option: str, value: str, choices: Iterable[str]) -> None:
    """Refuse a value the engine's parser would reject: a wrong `Kernel.flag` is a bug here."""
    allowed = sorted(choices)
    if value not in allowed:
        raise ValueError(f"{engine} {option} does not accept {value!r} (accepted: {', '.join(allowed)})")


def checkpoint_note(method: QuantScheme, engine: str, flag: str = "") -> str | None:
    """What the model argument must be for a checkpoint scheme, or None for a scheme served from the model."""
    if method.checkpoint_format is None:
        return None
    where = "config.json (quantization_config)"
    if method.checkpoint_format == "modelopt":
        where = "config.json (quantization_config, quant_method modelopt) and hf_quant_config.json"
    elif method.checkpoint_format == "quark":
        where = "config.json (quantization_config, quant_method quark)"
    how = f"--quantization {flag} names its loader" if flag else "so no quantization flag is passed"
    return (
        f"the model argument is the {method.checkpoint_format} checkpoint directory written for {method.name} "
        f"(not the original model); {engine} reads the scheme from its {where}, {how}."
    )


def double_quant_note(method: QuantScheme, engine: str) -> str | None:
    """bitsandbytes 4-bit in vLLM, SGLang and TGI quantizes the absmax statistics too.

    All three call bitsandbytes with ``compress_statistics=True`` (double quantization);
    transformers' `BitsAndBytesConfig`, which the quality evaluation uses, leaves it off
    unless ``bnb_4bit_use_double_quant`` is set. Returns None when the evaluation matched.
    """
    # A wrapper (e.g. an fp8-KV variant) keeps the weight method it wraps in `base`.
    config = dict(getattr(getattr(method, "base", method), "config", ()))
    if config.get("bnb_4bit_use_double_quant", False):
        return None
    return (
        f"{engine} quantizes bitsandbytes 4-bit with double-quantized absmax statistics "
        f"(compress_statistics=True); {method.name} was evaluated with plain fp32 absmax, "
        "a small numeric difference"
    )
