"""One serving configuration: what runs today (the spec's `current`) or a candidate of the search.

One type for both, validated where it is built (a spec, a trial's parameters, a stored result read back):
precision+method x hardware x tensor-parallel degree x batch settings x KV dtype (x layout, expert-parallel degree and,
for disaggregated pools on two GPU types or at two degrees, the decode pool's GPU and degree). A pydantic dataclass, so
the spec validates `current` with it, positional construction stays cheap to read, and it hashes (the
evaluators key their caches on it).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, ConfigDict, Field, WithJsonSchema
from pydantic.dataclasses import dataclass

from recommender.quantize import QuantScheme, get_scheme, with_kv_cache
from recommender.quantize.precisions import PRECISION_NAMES, precision_family
from recommender.speculation.methods import NONE, parse_speculative


def _speculative(value: str) -> str:
    """The method's one spelling (ValueError naming the fix for anything else): ``ngram:4`` and ``ngram:04`` are
    plain ``ngram`` (K = 4 is the default), so a setting and its spelled-out default are one choice, never two."""
    method = parse_speculative(value)
    return NONE if method is None else method.name


#: A precision family's name (``quantize/precisions.py`` lists them).
Precision = Annotated[
    str,
    AfterValidator(lambda name: precision_family(name).name),
    WithJsonSchema({"type": "string", "enum": list(PRECISION_NAMES)}),
]
#: KV-cache storage dtypes, named as vLLM names them (`--kv-cache-dtype`); see perf/model/memory.py.
KVCacheDtype = Literal["auto", "fp8"]
#: How a candidate's GPUs are laid out: every replica prefills and decodes its own requests (`aggregated`), or a
#: prefill pool hands each prompt's KV cache to a decode pool (`disaggregated`,
#: ``fleet/layouts/disaggregated_plan.py``).
#: The words of `recommender plan --layout`.
Layout = Literal["aggregated", "disaggregated"]
LAYOUTS: tuple[Layout, ...] = ("aggregated", "disaggregated")
AGGREGATED: Layout = "aggregated"
DISAGGREGATED: Layout = "disaggregated"
#: Speculative decoding: "none", "ngram" or "ngram:K" (``speculation/methods.py``).
Speculative = Annotated[
    str, AfterValidator(_speculative), WithJsonSchema({"type": "string", "pattern": "^(none|ngram(:[0-9]{1,2})?)$"})
]

#: The hardware name that means "this machine, measured"; everything else is a catalog entry.
LOCAL_DEVICE = "local"
#: Tokens in a prompt or a completion: ten million, the longest context any released model claims.
MAX_TOKENS = 10_000_000
#: Concurrent sequences per replica (vLLM's max_num_seqs): 65,536, far over what any GPU's KV cache holds.
MAX_BATCH = 65_536
#: Tensor-parallel degree: 64 (the largest NVLink domains hold 72 GPUs).
MAX_TENSOR_PARALLEL = 64
#: Expert-parallel degree: 512 GPUs (DeepSeek's decode deployment spans 144; `plan` tries up to four nodes).
MAX_EXPERT_PARALLEL = 512
TokenCount = Annotated[int, Field(gt=0, le=MAX_TOKENS)]
#: vLLM's default token budget per step with chunked prefill.
DEFAULT_MAX_BATCHED_TOKENS = 8192


@dataclass(frozen=True, slots=True, config=ConfigDict(extra="forbid", allow_inf_nan=False))
class Candidate:
    """One concrete configuration (unknown fields are errors: a typo in a spec must not fall back to a default)."""

    precision: Precision
    method: str
    hardware: str
    batch_size: Annotated[int, Field(gt=0, le=MAX_BATCH)]
    tensor_parallel: Annotated[int, Field(gt=0, le=MAX_TENSOR_PARALLEL)] = 1
    max_num_batched_tokens: TokenCount = Field(
        default=DEFAULT_MAX_BATCHED_TOKENS, description="Token budget per engine step."
    )
    kv_cache_dtype: KVCacheDtype = "auto"
    speculative: Speculative = NONE
    #: Aggregated replicas, or a prefill and a decode pool (both at `tensor_parallel`, the decode pool's batch cap
    #: `batch_size`). Last, with a default: candidates stored before it read back as aggregated.
    layout: Layout = AGGREGATED
    #: A mixture-of-experts model's expert-parallel degree: 1, tensor parallelism only; N > 1, one replica of N GPUs
    #: with the experts split over them and N attention ranks (`plan --expert-parallel`), `tensor_parallel` unused.
    expert_parallel: Annotated[int, Field(gt=0, le=MAX_EXPERT_PARALLEL)] = 1
    #: A disaggregated candidate's decode pool GPU where it is not `hardware` (the prefill pool's); "" decodes on
    #: `hardware`. Naming `hardware` itself is read as "", so one configuration has one value and one key. Last, with
    #: a default: candidates stored before it read back with both pools on one GPU, as they were evaluated.
    decode_hardware: Annotated[str, Field(max_length=64)] = ""
    #: A disaggregated candidate's decode pool tensor-parallel degree where it is not `tensor_parallel` (the prefill
    #: pool's); 0 decodes at `tensor_parallel`, and naming that degree itself is read as 0 (one value, one key). Last,
    #: with a default: candidates stored before it read back with both pools at one degree, as they were evaluated.
    decode_tensor_parallel: Annotated[int, Field(ge=0, le=MAX_TENSOR_PARALLEL)] = 0

    def __post_init__(self) -> None:
        if self.decode_hardware == self.hardware:
            object.__setattr__(self, "decode_hardware", "")
        if self.decode_tensor_parallel == self.tensor_parallel:
            object.__setattr__(self, "decode_tensor_parallel", 0)
        for name in ("decode_hardware", "decode_tensor_parallel"):
            if (value := getattr(self, name)) and self.layout != DISAGGREGATED:
                raise ValueError(
                    f"{name} {value!r} names a disaggregated candidate's decode pool setting; "
                    f"set layout: disaggregated or drop {name}"
                )

    @property
    def decode_tp(self) -> int:
        """The decode pool's tensor-parallel degree: `decode_tensor_parallel`, else `tensor_parallel`."""
        return self.decode_tensor_parallel or self.tensor_parallel

    @property
    def decode_gpu(self) -> str:
        """The GPU the decode pool runs on: `decode_hardware`, else `hardware` (an aggregated replica's one GPU)."""
        return self.decode_hardware or self.hardware

    @property
    def key(self) -> str:
        """Unique per configuration; settings at their defaults are left out so keys stay short."""
        key = f"{self.precision}/{self.method}@{self.hardware}x{self.tensor_parallel}/bs{self.batch_size}"
        if self.max_num_batched_tokens != DEFAULT_MAX_BATCHED_TOKENS:
            key += f"/tok{self.max_num_batched_tokens}"
        if self.kv_cache_dtype != "auto":
            key += f"/kv-{self.kv_cache_dtype}"
        if self.speculative != NONE:
            key += f"/spec-{self.speculative}"
        if self.layout != AGGREGATED:
            key += "/disagg"
        if self.decode_hardware:
            key += f"/decode-{self.decode_hardware}"
        if self.decode_tensor_parallel:
            key += f"/decode-tp{self.decode_tensor_parallel}"
        if self.expert_parallel != 1:
            key += f"/ep{self.expert_parallel}"
        return key

    @property
    def base_scheme(self) -> QuantScheme:
        """The registry's scheme `method` names, before the KV-cache dtype: what the engines are asked to launch
        (their flags and refusals name it) and what the memory and step-cost models read beside `kv_cache_dtype`."""
        return get_scheme(self.method)

    @property
    def scheme(self) -> QuantScheme:
        """The scheme as scored and served: `base_scheme` with this candidate's KV-cache dtype applied
        (``quantize.with_kv_cache``; a ModelOpt scheme's own calibrated-KV variant). Quality is measured, cached and
        claimed under its name, and its checkpoint is the one the winner ships."""
        return with_kv_cache(self.base_scheme, self.kv_cache_dtype)
