"""Measured kernel times for one serving configuration, read from NVIDIA's aiconfigurator-core.

aiconfigurator-core (Apache-2.0, pinned at :data:`AIC_VERSION`) ships per-engine tables of GEMM, attention
and collective times collected on real GPUs (L40S, H100 SXM, H200, B200, A100 SXM, RTX PRO 6000, ...). This is
the one module that imports it: the package's successor (``aisimulate``) keeps the namespace, so a switch
touches only this file. Where it has no data for a configuration (a GPU it never measured, a scheme its GEMM
tables lack, an engine version it has no slot for) it raises, and :class:`KernelTablesUnavailable` carries
its reason to the caller, which falls back to the datasheet step cost and says so.

The SDK is sampled once per configuration on a grid, and the simulator interpolates the grid (a step costs a
few microseconds instead of an SDK call):

- ``linear``: every non-attention op of a step of ``T`` tokens (GEMMs, norms, activations, the lm_head),
  all-reduces and point-to-point copies left out: collectives come from the topology
  (``features.StepFeatures``' all-reduce terms), not from whichever node a table was measured on (the
  package's own metadata says its 4- and 8-GPU L40S collection hung); each op at its fastest time at that many
  tokens or more (the package timed its GEMMs at the fallback tactic, an engine autotunes them: ``_tuned_linear``);
- ``context attention``: one prompt of ``s`` tokens attending to itself; a step of several chunks is priced
  at the single prompt with the same causal attention work (``sum_sq / 2 + sum_cross``);
- ``decode attention``: ``b`` sequences reading ``L`` KV tokens each.

Model shapes go to the SDK as a local config directory written from the :class:`ModelShape` (an unknown hub id
would make it try a download). Only dense decoders are passed: MoE layouts raise (datasheet fallback).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from recommender.perf.step.kernel_grid import KernelTable, tuned_envelope

if TYPE_CHECKING:
    from recommender.perf.model.shape import ModelShape
    from recommender.perf.scheme import Scheme

__all__ = [
    "AIC_VERSION",
    "ENGINES",
    "SYSTEMS",
    "KernelTable",
    "KernelTables",
    "KernelTablesUnavailable",
    "gemm_mode",
    "kernel_package_version",
]

#: The aiconfigurator-core release the tables are read from (pyproject pins it; another release is refused).
AIC_VERSION = "0.12.0"
#: Catalog GPU keys -> aiconfigurator-core system names (the GPUs it ships kernel tables for).
SYSTEMS = {
    "l40s": "l40s",
    "h100-sxm": "h100_sxm",
    "h200": "h200_sxm",
    "b200": "b200_sxm",
    "b300": "b300_sxm",
    "gb200": "gb200",
    "a100-80gb": "a100_sxm",
    "rtx-pro-6000": "rtx_pro_6000_server",
}
#: Our engine names -> the package's backend names.
ENGINES = {"vllm": "vllm", "sglang": "sglang", "trtllm": "trtllm"}
#: The narrowest model the package ships a config of (Qwen/Qwen3-0.6B, hidden_size 1024): its GEMM tables were
#: collected for layer widths from there up; a narrower model's kernels would be read off the tables' edge.
MIN_HIDDEN = 1024
#: Ops that are collectives: priced from the topology instead (module docstring).
_COLLECTIVE_MARKERS = ("_ar", "p2p", "all_reduce", "allreduce", "all_gather", "reduce_scatter", "alltoall")

_TOKENS = np.unique(np.round(np.geomspace(1, 65536, 49)).astype(int))
_PROMPTS = np.unique(np.round(np.geomspace(16, 131072, 25)).astype(int))
_SEQS = np.unique(np.round(np.geomspace(1, 4096, 25)).astype(int))
_CONTEXTS = np.unique(np.round(np.geomspace(16, 131072, 14)).astype(int))


class KernelTablesUnavailable(Exception):
    """No measured kernels for this configuration; the message says why (the provenance quotes it)."""


def kernel_package_version() -> str | None:
    """The installed aiconfigurator-core release, or None where it cannot be imported (not installed: no wheel
    for this platform or Python; or broken)."""
    try:
        import aiconfigurator_core  # noqa: F401
    except ImportError:
        return None
    try:
        return metadata.version("aiconfigurator-core")
    except metadata.PackageNotFoundError:
        return None


def gemm_mode(scheme: Scheme) -> str:
    """The package's GEMM quantization mode with `scheme`'s kernels, or KernelTablesUnavailable."""
    family, precision = scheme.kernel_family, scheme.precision
    if precision in ("bf16", "fp16"):
        return "bfloat16"
    if family.startswith("bnb") or family == "online-fp8" and scheme.weight_only:
        raise KernelTablesUnavailable(f"{scheme.name}'s kernels ({family}) are not in the kernel tables")
    modes = {
        ("fp8", False): "fp8_block" if "block" in family else "fp8",
        ("int8", False): "sq",
        ("int8", True): "int8_wo",
        ("int4", True): "int4_wo",
        ("fp4", False): "nvfp4" if "nvfp4" in family else "",
        ("fp4", True): "nvfp4_wo",
    }
    mode = modes.get((precision, scheme.weight_only), "")
    if not mode:
        raise KernelTablesUnavailable(f"{scheme.name} ({precision}, kernels {family}) has no kernel-table mode")
    return mode


def _config_json(shape: ModelShape) -> dict[str, Any]:
    """A Llama-architecture config.json with `shape`'s dimensions (dense decoders of LLM widths only)."""
    if shape.moe is not None:
        raise KernelTablesUnavailable("MoE layouts are not passed to the kernel tables yet")
    if shape.recurrent is not None or shape.sparse is not None or shape.window:
        raise KernelTablesUnavailable("sparse-attention, recurrent and window layers are not in the kernel tables")
    if shape.hidden < MIN_HIDDEN:
        raise KernelTablesUnavailable(
            f"hidden size {shape.hidden} is below the layer widths the kernel tables were collected for "
            f"(>= {MIN_HIDDEN}: the package's smallest model, Qwen3-0.6B)"
        )
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "torch_dtype": "bfloat16",
        "hidden_size": shape.hidden,
        "intermediate_size": shape.intermediate,
        "num_hidden_layers": shape.n_layers,
        "num_attention_heads": shape.n_heads,
        "num_key_value_heads": shape.n_kv_heads,
        "head_dim": shape.head_dim,
        "vocab_size": shape.vocab,
        "tie_word_embeddings": shape.tie_word_embeddings,
        "rms_norm_eps": 1e-5,
        "max_position_embeddings": 131072,
        "hidden_act": "silu",
    }


@contextmanager
def _quiet_sdk() -> Iterator[None]:
    """The SDK logs a warning per fallback row it loads; the provenance carries what matters."""
    logger = logging.getLogger("aiconfigurator_core")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


def _is_collective(name: str) -> bool:
    return any(marker in name for marker in _COLLECTIVE_MARKERS)


def _sample(handle: Any, system: str, engine: str) -> KernelTable:
    """The grid of module docstring, from one compiled engine handle."""
    linear_s, measured_share = _tuned_linear(handle)
    attention = np.array([handle.mixed_step_breakdown(int(s), 0, int(s), 2)[2] / 1e3 for s in _PROMPTS])
    decode = np.array([[handle.mixed_step_breakdown(0, int(b), int(c), 2)[3] / 1e3 for c in _CONTEXTS] for b in _SEQS])
    if not (np.all(linear_s > 0) and np.all(attention > 0) and np.all(decode > 0)):
        raise KernelTablesUnavailable(f"aiconfigurator-core returned a non-positive kernel time on {system}/{engine}")
    return KernelTable(
        source="",
        tokens=_TOKENS.astype(float),
        linear_s=linear_s,
        prompts=_PROMPTS.astype(float),
        context_attention_s=attention,
        seqs=_SEQS.astype(float),
        contexts=_CONTEXTS.astype(float),
        decode_attention_s=decode,
        measured_share=measured_share,
    )


def _tuned_linear(handle: Any) -> tuple[np.ndarray, float]:
    """The non-attention kernels of a step at each grid token count, s, and the share of that time from silicon rows.

    Each op at its fastest row at that many tokens *or more* (``tuned_envelope``): the package timed its GEMMs
    outside the engine's autotuner (ai-dynamo/aiconfigurator ``collector/trtllm/collect_gemm.py`` calls
    ``Linear.forward`` after one dry run, no ``autotune()``), i.e. at the fallback tactic, while an engine profiles
    every tactic per token bucket at start-up and keeps the fastest: a tactic that ran M' rows in t runs fewer in t.
    """
    per_op: dict[str, list[tuple[float, bool]]] = {}
    for tokens in _TOKENS:
        for op in handle.mixed_step_breakdown_per_op(int(tokens), 0, int(tokens), 2)[0]:
            if not _is_collective(op[0]):
                per_op.setdefault(op[0], []).append((float(op[1]), op[3] == "silicon"))
    total = np.zeros(len(_TOKENS))
    measured = np.zeros(len(_TOKENS))
    for rows in per_op.values():
        seconds = np.array([t for t, _ in rows]) / 1e3
        best, at = tuned_envelope(seconds)
        total += best
        measured += best * np.array([rows[i][1] for i in at])
    return total, float(measured.sum() / total.sum()) if total.sum() else 0.0


def _check_package() -> None:
    """KernelTablesUnavailable unless the pinned release is importable here."""
    version = kernel_package_version()
    if version is None:
        raise KernelTablesUnavailable("aiconfigurator-core is not installed (pip install aiconfigurator-core)")
    if version != AIC_VERSION:
        raise KernelTablesUnavailable(
            f"aiconfigurator-core {version} is installed; the tables are read at {AIC_VERSION}"
        )


def _build(
    shape: ModelShape, scheme: Scheme, gpu: str, engine: str, tensor_parallel: int, kv_dtype: str
) -> KernelTable:
    if gpu not in SYSTEMS:
        raise KernelTablesUnavailable(f"aiconfigurator-core {AIC_VERSION} has no kernel tables for {gpu}")
    if engine not in ENGINES:
        raise KernelTablesUnavailable(f"aiconfigurator-core has no {engine} kernel tables")
    mode, system = gemm_mode(scheme), SYSTEMS[gpu]
    with _quiet_sdk(), tempfile.TemporaryDirectory() as folder:
        (Path(folder) / "config.json").write_text(json.dumps(_config_json(shape)), encoding="utf-8")
        try:
            from aiconfigurator_core.sdk import EngineHandle

            handle = EngineHandle.compile(
                folder,
                system,
                ENGINES[engine],
                tp_size=tensor_parallel,
                gemm_quant_mode=mode,
                kvcache_quant_mode="fp8" if kv_dtype == "fp8" else None,
            )
            table = _sample(handle, system, engine)
            engine_version = _engine_version(system, ENGINES[engine])
        except KernelTablesUnavailable:
            raise
        except Exception as exc:  # the SDK's own errors (no data, unsupported mode) mean: no measured kernels here
            first = str(exc).strip().splitlines()[0][:160] if str(exc).strip() else type(exc).__name__
            raise KernelTablesUnavailable(f"aiconfigurator-core {AIC_VERSION}: {first}") from None
    source = (
        f"aiconfigurator-core {AIC_VERSION} kernel tables: {system}, {engine} {engine_version}, {mode} GEMMs, "
        f"{kv_dtype} KV; {table.measured_share:.0%} of the non-attention kernel time from silicon rows"
    )
    return _with_source(table, source)


def _with_source(table: KernelTable, source: str) -> KernelTable:
    return KernelTable(
        source=source,
        tokens=table.tokens,
        linear_s=table.linear_s,
        prompts=table.prompts,
        context_attention_s=table.context_attention_s,
        seqs=table.seqs,
        contexts=table.contexts,
        decode_attention_s=table.decode_attention_s,
        measured_share=table.measured_share,
    )


def _engine_version(system: str, backend: str) -> str:
    """The engine release the tables were collected with: the package's "current" slot for that system and
    backend (``systems/query_versions.yaml``)."""
    try:
        from aiconfigurator_core.sdk.engine import _literal_backend_version

        return str(_literal_backend_version(system, backend, None, None, None))
    except Exception:  # a later release may move the resolver: the label says so rather than guessing
        return "(the package's current release slot)"


#: Bumped when the sampling grid or what a table holds changes: older cached tables are not read.
_TABLE_FORMAT = 2
_ARRAYS = ("tokens", "linear_s", "prompts", "context_attention_s", "seqs", "contexts", "decode_attention_s")


@dataclass
class KernelTables:
    """Kernel tables by configuration, built on first use and kept (each costs a second or two to sample).

    Held by whoever simulates many candidates (``CalibratedModel``); an unavailable configuration is kept too,
    with its reason, so it is asked once. With `cache_dir` (``paths.cache_root() / "kernel_tables"`` for the CLI),
    each table is also written there, keyed by everything it depends on (package release, grid, shape, scheme,
    GPU, engine, degree, KV dtype), so the next process reads it in milliseconds instead of sampling again.
    """

    cache_dir: Path | None = None
    _built: dict[tuple[object, ...], KernelTable | KernelTablesUnavailable] = field(default_factory=dict)

    def get(
        self, shape: ModelShape, scheme: Scheme, gpu: str, engine: str, tensor_parallel: int, kv_dtype: str
    ) -> KernelTable:
        """The table of that configuration, or KernelTablesUnavailable with the reason."""
        kv = "fp8" if kv_dtype == "fp8" else "auto"
        key = (shape, scheme.name, scheme.kernel_family, gpu, engine, tensor_parallel, kv)
        if key not in self._built:
            try:
                _check_package()  # a cached table is the package's figures: read only where the package is
            except KernelTablesUnavailable as exc:
                self._built[key] = exc  # an install can change that: never written to the cache
            else:
                self._built[key] = self._cached_or_built(key, shape, scheme, gpu, engine, tensor_parallel, kv)
        found = self._built[key]
        if isinstance(found, KernelTablesUnavailable):
            raise found
        return found

    def _path(self, key: tuple[object, ...]) -> Path | None:
        if self.cache_dir is None:
            return None
        digest = hashlib.sha256(repr((_TABLE_FORMAT, AIC_VERSION, *key)).encode()).hexdigest()[:24]
        return self.cache_dir / f"{digest}.npz"

    def _cached_or_built(
        self,
        key: tuple[object, ...],
        shape: ModelShape,
        scheme: Scheme,
        gpu: str,
        engine: str,
        tensor_parallel: int,
        kv: str,
    ) -> KernelTable | KernelTablesUnavailable:
        """The table read from the cache or sampled (and written), or why there is none (recorded for the next
        process)."""
        try:
            self._refused_before(key)
            return self._read(key) or self._write(key, _build(shape, scheme, gpu, engine, tensor_parallel, kv))
        except KernelTablesUnavailable as exc:
            self._write_refusal(key, exc)
            return exc

    def _refusal_path(self, key: tuple[object, ...]) -> Path | None:
        path = self._path(key)
        return None if path is None else path.with_suffix(".unavailable")

    def _refused_before(self, key: tuple[object, ...]) -> None:
        """Raise the reason an earlier process recorded for this configuration: the package's refusal (no data for
        that scheme, GPU or degree) comes only after a compile of a second or more, so it is cached like a table."""
        path = self._refusal_path(key)
        if path is not None and path.is_file():
            try:
                reason = path.read_text(encoding="utf-8").strip()
            except OSError:
                return
            if reason:
                raise KernelTablesUnavailable(reason)

    def _write_refusal(self, key: tuple[object, ...], exc: KernelTablesUnavailable) -> None:
        path = self._refusal_path(key)
        if path is None or path.is_file():
            return
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile("w", dir=path.parent, suffix=".tmp", delete=False) as tmp:
                tmp.write(str(exc))
            os.replace(tmp.name, path)
        except OSError:  # an unwritable cache only costs the next process the compile again
            pass

    def _read(self, key: tuple[object, ...]) -> KernelTable | None:
        path = self._path(key)
        if path is None or not path.is_file():
            return None
        try:
            with np.load(path, allow_pickle=False) as data:
                arrays = {name: np.array(data[name]) for name in _ARRAYS}
                return KernelTable(source=str(data["source"]), measured_share=float(data["measured_share"]), **arrays)
        except (OSError, ValueError, KeyError):  # a truncated or foreign file: sample again (and rewrite it)
            return None

    def _write(self, key: tuple[object, ...], table: KernelTable) -> KernelTable:
        path = self._path(key)
        if path is None:
            return table
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile(dir=path.parent, suffix=".npz", delete=False) as tmp:
                np.savez(
                    tmp,
                    source=np.array(table.source),
                    measured_share=np.array(table.measured_share),
                    **{name: getattr(table, name) for name in _ARRAYS},
                )
            os.replace(tmp.name, path)  # whole or not at all: a reader never sees half a table
        except OSError:  # an unwritable cache only costs the next process a resample
            pass
        return table
