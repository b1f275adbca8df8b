"""Measured MoE serving runs, aggregated and disaggregated: what the expert-parallel and two-pool step model is
judged on.

``measured_runs/moe_disagg_runs.csv`` (source and licence in ``measured_runs/SOURCE.md``) holds 1,179 closed-loop
runs of gpt-oss-120b, Qwen3-235B-A22B-FP8 and DeepSeek-V3 from NVIDIA AIConfigurator's silicon sample: each a fixed
client concurrency (``silicon_concurrency`` in the source column; ``batch_size`` where that is absent), fixed prompt
and output lengths, the mean TTFT and TPOT, and the layout: for ``agg`` the tensor-parallel degree, attention
data-parallel ranks and MoE TP x EP of one replica; for ``disagg`` each pool's workers and per worker the same.
A row the tool cannot replay (its GPU not in the catalog, its worker counts missing, an unknown scheme, prompts
sharing a cached prefix) is counted by reason, never dropped silently.

``measured_runs/dstack_deepseek_r1_runs.csv`` (``DSTACK_RUNS``), in the same columns plus ``kv_cache_dtype``,
``num_requests`` and ``shared_prefix_tokens``, is an independent campaign (DeepSeek-R1 on 8 x H200 and 8 x MI300X)
the fit never reads: ``benchmarks/moe_judge.py`` predicts it with the shipped fit, out of sample.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from recommender.perf.fit.serving_runs import KV_DTYPES, SCHEMES, SYSTEMS, replayable_rows
from recommender.perf.scheme import Scheme, SchemeLookup
from recommender.perf.sim.engine_profiles import EngineProfile

__all__ = ["DSTACK_RUNS", "MOE_RUNS", "MOE_RUNS_SOURCE", "MoeRun", "Pool", "read_moe_runs"]

#: The runs shipped in the package (their source in ``measured_runs/SOURCE.md``).
MOE_RUNS = Path(str(resources.files("recommender.perf.fit") / "measured_runs" / "moe_disagg_runs.csv"))
MOE_RUNS_SOURCE = (
    "recommender/perf/fit/measured_runs/moe_disagg_runs.csv: NVIDIA AIConfigurator silicon sample "
    "(github.com/ai-dynamo/aiconfigurator@095f58a5, Apache-2.0), gpt-oss-120b, Qwen3-235B-A22B-FP8, DeepSeek-V3, "
    "aggregated and disaggregated"
)
#: dstack's DeepSeek-R1 runs (8 x H200, 8 x MI300X; ``benchmarks/import_dstack_runs.py``): judged, never fitted.
DSTACK_RUNS = MOE_RUNS.with_name("dstack_deepseek_r1_runs.csv")
#: The MoE files' systems beyond the dense file's: B300 (HGX), MI300X (datasheet, uncalibrated: no AMD run is fitted).
#: GB300 is not in the GPU catalog: its rows are skipped.
_SYSTEMS = SYSTEMS | {"b300_sxm": "b300", "b300": "b300", "mi300x": "mi300x"}
#: GPUs one NVLink domain joins (the all-to-all's node tier): a GB200 NVL72 rack; HGX servers are 8.
NVLINK_DOMAIN = {"gb200": 72}
_CONCURRENCY = re.compile(r"silicon_concurrency=(\d+)")


@dataclass(frozen=True, slots=True)
class Pool:
    """One pool of identical workers: each worker `tp` x `attention_dp` GPUs, its MoE layers split `moe_tp` x
    `moe_ep` over them (an aggregated run is one pool of one worker). `batch`: the per-rank batch cap (None: the
    engine's default)."""

    workers: int
    tp: int
    attention_dp: int
    moe_tp: int
    moe_ep: int
    batch: int | None = None

    @property
    def gpus_per_worker(self) -> int:
        return self.tp * self.attention_dp

    @property
    def ranks(self) -> int:
        """Attention ranks over all workers (each rank serves its own sequences)."""
        return self.workers * self.attention_dp

    @property
    def expert_parallel(self) -> bool:
        """Whether the step is priced as an expert-parallel replica (experts split beyond tensor parallelism, or
        attention ranks over shared experts): else a tensor-parallel replica."""
        return self.moe_ep > 1 or self.attention_dp > 1


@dataclass(frozen=True, slots=True)
class MoeRun:
    """One measured run (times in ms). `prefill` is None for an aggregated run (`decode` is then its one pool)."""

    run_id: str
    model: str
    engine: str
    engine_version: str
    scheme: str
    hardware: str
    concurrency: int
    prompt_tokens: int
    output_tokens: int
    ttft_ms: float
    tpot_ms: float
    decode: Pool
    prefill: Pool | None = None
    kv_cache_dtype: str = "fp8"
    #: Requests the client sent in all (None: not recorded; the replay then sends a fixed number of rounds).
    requests: int | None = None
    numerics: Scheme = field(compare=False, repr=False, default=None)  # type: ignore[assignment]
    profile: EngineProfile = field(compare=False, repr=False, default=None)  # type: ignore[assignment]

    @property
    def layout(self) -> str:
        return "agg" if self.prefill is None else "disagg"

    @property
    def group(self) -> str:
        return f"{self.model}/{self.layout}"


def _int(row: Mapping[str, str], column: str) -> int:
    """A positive whole number from `column` (ValueError otherwise: the row is skipped by reason)."""
    text = (row.get(column) or "").strip()
    if not text:
        raise ValueError(f"{column} is empty")
    value = float(text)
    if not math.isfinite(value) or value < 1 or value != int(value):
        raise ValueError(f"{column} {text!r} is not a positive whole number")
    return int(value)


def _pool(row: Mapping[str, str], prefix: str, *, workers: bool) -> Pool:
    batch = (row.get(f"{prefix}batch_size") or "").strip()
    dp = (row.get(f"{prefix}attention_dp_size") or "").strip()
    return Pool(
        workers=_int(row, f"{prefix}num_workers") if workers else 1,
        tp=_int(row, f"{prefix}tp_size"),
        attention_dp=_int(row, f"{prefix}attention_dp_size") if dp else 1,
        moe_tp=_int(row, f"{prefix}moe_tp_size"),
        moe_ep=_int(row, f"{prefix}moe_ep_size"),
        batch=int(float(batch)) if batch and prefix else None,
    )


def _concurrency(row: Mapping[str, str]) -> int:
    """The client's concurrency: the source's ``silicon_concurrency`` (the whole system's), else ``batch_size``."""
    found = _CONCURRENCY.search(row.get("silicon_data_source") or "")
    return int(found.group(1)) if found else _int(row, "batch_size")


def _why_not(row: Mapping[str, str], profiles: Mapping[str, EngineProfile]) -> str | None:
    from recommender.perf.catalog.architectures import shipped_for_hub_id

    if row.get("backend") not in profiles:
        return f"engine {row.get('backend')!r} has no batching profile"
    if row.get("system") not in _SYSTEMS:
        return f"system {row.get('system')!r} is not in the GPU catalog"
    if (row.get("gemm_quant_mode") or "").strip().lower() not in SCHEMES:
        return f"scheme {row.get('gemm_quant_mode')!r} has no serving scheme here"
    if shipped_for_hub_id(str(row.get("model_path", ""))) is None:
        return f"model {row.get('model_path')!r} has no shipped architecture"
    if row.get("mode") == "disagg" and not (row.get("prefill_num_workers") or "").strip():
        return "disaggregated run without worker counts (prefill_num_workers / decode_num_workers empty)"
    if "kv_cache_dtype" in row and (row["kv_cache_dtype"] or "").strip().lower() not in KV_DTYPES:
        return "a KV-cache dtype other than 16-bit or fp8"
    if float((row.get("shared_prefix_tokens") or "0").strip() or 0) > 0:
        return "prompts share a cached prefix (the closed-loop replay has no prefix cache)"
    return None


def _run(row: Mapping[str, str], schemes: SchemeLookup, profiles: Mapping[str, EngineProfile]) -> MoeRun:
    from recommender.perf.catalog.architectures import shipped_for_hub_id

    scheme = SCHEMES[(row.get("gemm_quant_mode") or "").strip().lower()]
    disagg = row.get("mode") == "disagg"
    run = MoeRun(
        run_id=row["id"],
        model=shipped_for_hub_id(row["model_path"]) or "",
        engine=row["backend"],
        engine_version=row.get("backend_version", ""),
        scheme=scheme,
        hardware=_SYSTEMS[row["system"]],
        concurrency=_concurrency(row),
        prompt_tokens=_int(row, "isl"),
        output_tokens=_int(row, "osl"),
        ttft_ms=float(row["silicon_ttft_ms"]),
        tpot_ms=float(row["silicon_tpot_ms"]),
        decode=_pool(row, "decode_" if disagg else "", workers=disagg),
        prefill=_pool(row, "prefill_", workers=True) if disagg else None,
        kv_cache_dtype=KV_DTYPES[(row.get("kv_cache_dtype") or "fp8").strip().lower()],
        requests=_int(row, "num_requests") if (row.get("num_requests") or "").strip() else None,
        numerics=schemes(scheme),
        profile=profiles[row["backend"]],
    )
    if not (math.isfinite(run.ttft_ms) and run.ttft_ms > 0 and math.isfinite(run.tpot_ms) and run.tpot_ms > 0):
        raise ValueError("silicon_ttft_ms / silicon_tpot_ms not positive")
    return run


def read_moe_runs(
    path: Path = MOE_RUNS, *, schemes: SchemeLookup, profiles: Mapping[str, EngineProfile]
) -> tuple[list[MoeRun], dict[str, int]]:
    """Every row of `path` the model can replay, and how many it skipped for each reason.

    The KV cache is the ``kv_cache_dtype`` column's where the file has one (dstack's runs: "auto", the model's
    16-bit dtype), else fp8: the AIConfigurator file's fp8 and NVFP4 checkpoints carry FP8 KV scales (it has no KV
    column), as the dense file's fp8 runs showed (``serving_runs.MeasuredRun``)."""
    return replayable_rows(path, lambda row: _why_not(row, profiles), lambda row: _run(row, schemes, profiles))
