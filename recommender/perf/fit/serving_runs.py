"""Measured closed-loop serving runs: the data the step-cost model is fitted and cross-validated on.

Each run is one benchmark of one engine serving one model on H100s: concurrency, fixed prompt
and output lengths, tensor-parallel degree, and the measured mean TTFT and TPOT. The file ships
inside the package (``measured_runs/``, read with importlib.resources) beside ``SOURCE.md``, which
names its source (NVIDIA AIConfigurator's silicon sample, commit 095f58a5, Apache-2.0): a clone or a
wheel refits and cross-validates without the hand-off folder. The loader keeps each row's id so every
residual can be traced to its row.
"""

from __future__ import annotations

import csv
import hashlib
import math
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import TypeVar

from recommender.perf.scheme import Scheme, SchemeLookup
from recommender.perf.sim.engine_profiles import EngineProfile

__all__ = [
    "DEFAULT_RUNS",
    "DLI_STATIC_RUNS",
    "FILE_CAMPAIGNS",
    "H200_RUNS",
    "HANDED_OVER_RUNS",
    "KERNEL_RUNS",
    "KERNEL_RUNS_SOURCE",
    "NIM_RUNS",
    "LoadedRuns",
    "MeasuredRun",
    "RUNS_SOURCE",
    "SYSTEMS",
    "load_runs",
    "read_runs",
    "release_line",
    "runs_digest",
]

#: The measured runs shipped in the package (their source, commit and licence in ``measured_runs/SOURCE.md``).
DEFAULT_RUNS = Path(str(resources.files("recommender.perf.fit") / "measured_runs" / "serving_runs_h100.csv"))
#: NVIDIA DLI's NIM GenAI-Perf sweep (A100 SXM and H100 SXM, Llama-3 8B and 70B), converted by
#: ``benchmarks/import_nim_runs.py`` (source in ``measured_runs/SOURCE.md``): the kernel fit's second campaign.
NIM_RUNS = Path(str(resources.files("recommender.perf.fit") / "measured_runs" / "nim_genaiperf_a100_h100.csv"))
#: NVIDIA DLI's TensorRT-LLM 0.9 static-batch sweep (Llama-2 on L40S, H100 SXM, H200, A100 SXM), converted by
#: ``benchmarks/import_dli_static_runs.py``: the kernel fit's third campaign, and its PCIe GPU.
DLI_STATIC_RUNS = Path(str(resources.files("recommender.perf.fit") / "measured_runs" / "dli_trtllm090_static.csv"))
#: AIConfigurator's H200 rows of today's releases (TensorRT-LLM and vLLM on Llama-3.1-70B FP8, SGLang 0.5.6 and
#: vLLM 0.12 on Llama-3.1-8B FP8), handed over for fitting and for leaving a GPU out (``measured_runs/SOURCE.md``).
H200_RUNS = Path(str(resources.files("recommender.perf.fit") / "measured_runs" / "serving_runs_h200.csv"))
#: The files the kernel-table step cost is fitted and validated on.
KERNEL_RUNS = (DEFAULT_RUNS, DLI_STATIC_RUNS)
#: Every closed-loop file of dense models handed over: what ``gpu_fidelity.py --paths`` leaves GPUs out of.
HANDED_OVER_RUNS = (DEFAULT_RUNS, DLI_STATIC_RUNS, H200_RUNS)
#: The campaign of a file without a ``campaign`` column whose ids do not tell it (``MeasuredRun.campaign``).
FILE_CAMPAIGNS = {H200_RUNS.name: "aic-h200"}
_DESCRIBED = {
    DEFAULT_RUNS.name: "AIConfigurator silicon-sample rows handed over (H100 SXM)",
    NIM_RUNS.name: "NVIDIA DLI's NIM GenAI-Perf sweep (A100 SXM, H100 SXM)",
    DLI_STATIC_RUNS.name: "NVIDIA DLI's TensorRT-LLM 0.9 static-batch sweep (L40S, H100 SXM, H200, A100 SXM)",
    H200_RUNS.name: "AIConfigurator silicon-sample H200 rows handed over (today's releases)",
}
KERNEL_RUNS_SOURCE = (
    f"recommender/perf/fit/measured_runs/{{{','.join(p.stem for p in KERNEL_RUNS)}}}.csv: "
    + "; ".join(_DESCRIBED[p.name] for p in KERNEL_RUNS)
)
RUNS_SOURCE = (
    "recommender/perf/fit/measured_runs/serving_runs_h100.csv: NVIDIA AIConfigurator silicon sample "
    "(github.com/ai-dynamo/aiconfigurator@095f58a5, Apache-2.0), H100 SXM, dense models"
)

#: AIConfigurator's system names -> catalog keys (an a100_sxm is the 80 GB SXM4 part).
SYSTEMS = {
    "h100_sxm": "h100-sxm",
    "h200_sxm": "h200",
    "b200_sxm": "b200",
    "gb200_sxm": "gb200",
    "gb200": "gb200",
    "a100_sxm": "a100-80gb",
    "l40s": "l40s",
}
#: The file's precision (or GEMM quantization mode) -> the serving scheme with the same step physics: 1-byte
#: weights and FP8 GEMMs for fp8 (per-tensor or block scales alike); an empty precision is the engine's
#: 16-bit default; weight-only INT4/INT8 compute in 16-bit like the Marlin/AWQ kernels.
SCHEMES = {
    "": "baseline",
    "bf16": "baseline",
    "bfloat16": "baseline",
    "float16": "fp16",
    "fp16": "fp16",
    "fp8": "fp8-dynamic",
    "fp8_block": "fp8-dynamic",
    "fp8_ootb": "fp8-dynamic",
    "sq": "int8-w8a8",
    "int8_wo": "torchao-int8-wo",
    "int4_wo": "w4a16-awq-g128",
    "fp4": "nvfp4",
    "nvfp4": "nvfp4",
}
#: KV-cache dtypes the file may name -> ``memory.KV_DTYPE_BYTES`` keys.
KV_DTYPES = {
    "": "auto",
    "auto": "auto",
    "float16": "auto",
    "bfloat16": "auto",
    "fp16": "auto",
    "bf16": "auto",
    "fp8": "fp8",
}

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class MeasuredRun:
    """One measured benchmark (times in ms)."""

    run_id: str
    model: str
    engine: str
    engine_version: str
    scheme: str
    #: The scheme's numerics (resolved from `scheme` when the file is read: perf imports no registry).
    numerics: Scheme = field(compare=False, repr=False)
    #: How its engine batches (resolved from `engine` when the file is read, like `numerics`).
    profile: EngineProfile = field(compare=False, repr=False)
    hardware: str
    tensor_parallel: int
    concurrency: int
    prompt_tokens: int
    output_tokens: int
    ttft_ms: float
    tpot_ms: float
    #: The collection campaign: a ``campaign`` column where the file has one (another campaign's file), else from
    #: the row's id: "sweep" (the 1024-4096 x 128-1024 grid) or "steady"
    #: (the 4000 x 1000 runs, ids "..._c_tp...", whose TTFTs are far below what any client counting its
    #: opening burst could see: C x 4000 prompt tokens queued at once; that client drops its warm-up).
    campaign: str = "sweep"
    #: The KV cache's dtype as served: fp8 in the fp8 runs. The file has no column for it; the runs show it.
    #: TensorRT-LLM FP8 at TP1, C=64, 4096+512 tokens measured TPOT 62 ms and TTFT 1.6-3.8 s: with a 16-bit
    #: cache only ~29 of the 64 requests fit beside the 33 GB of weights (replayed TTFT 11-22 s, TPOT 66 ms
    #: at any C), with an fp8 one ~59 do (3.4 s, 140 ms for the 4096+128 run measured at 176). vLLM FP8 at
    #: TP2, C=48, 4000+1000 measured TPOT 11.6 ms, below the 13.3 ms a 16-bit cache takes to read at full
    #: bandwidth. NVIDIA's FP8 checkpoints carry FP8 KV scales, which both engines use by default.
    kv_cache_dtype: str = "auto"
    #: True for a static batch (a ``client`` column "static"): `concurrency` identical requests present at t = 0,
    #: prefilled in one step and decoded together, no arrivals (TensorRT-LLM's session benchmark); its TTFT is the
    #: batch's context phase and its TPOT the mean decode step (``design_rows.static_row``).
    static_batch: bool = False

    @property
    def release(self) -> str:
        """The engine's release line this run measured (``release_line``), e.g. "vllm 0.12"."""
        return release_line(self.engine, self.engine_version)

    @property
    def group(self) -> str:
        """The (model, engine, precision) group the cross-validation leaves out as a whole."""
        return f"{self.model}/{self.engine}/{self.scheme}"


@dataclass(frozen=True, slots=True)
class LoadedRuns:
    """The runs of a file the model can replay, and how many rows it left out for each reason."""

    runs: list[MeasuredRun]
    skipped: dict[str, int]


def release_line(engine: str, version: str) -> str:
    """`engine`'s release line of `version` (major.minor: "trtllm 1.0" for 1.0.0rc3, "sglang 0.5" for 0.5.6.post2);
    "<engine> unrecorded" where the run did not record its release (none is guessed)."""
    parts = version.strip().split(".")
    if len(parts) < 2 or not parts[0].isdigit():
        return f"{engine} unrecorded"
    minor = "".join(ch for ch in parts[1] if ch.isdigit())
    return f"{engine} {int(parts[0])}.{int(minor or 0)}"


def _kv_dtype(row: dict[str, str], scheme: str) -> str | None:
    """The row's KV dtype column where it has one; else fp8 for the fp8 runs (``MeasuredRun.kv_cache_dtype``)."""
    for column in ("kv_cache_dtype", "kvcache_quant_mode", "kv_cache_quant_mode"):
        if column in row:
            return KV_DTYPES.get((row[column] or "").strip().lower())
    return "fp8" if scheme == "fp8-dynamic" else "auto"


def _why_not(row: dict[str, str], profiles: Mapping[str, EngineProfile]) -> str | None:
    """Why a row cannot be replayed (None: it can)."""
    from recommender.perf.catalog.architectures import shipped_for_hub_id

    if (row.get("pp_size") or "1") != "1" or (row.get("attention_dp_size") or "").strip() not in ("", "1"):
        return "pipeline or attention data parallelism (not modelled)"
    if row.get("backend") not in profiles:
        return f"engine {row.get('backend')!r} has no batching profile"
    if row.get("system") not in SYSTEMS:
        return f"system {row.get('system')!r} is not in the GPU catalog"
    precision = (row.get("gemm_quant_mode") or row.get("precision") or "").strip().lower()
    if precision not in SCHEMES:
        return f"precision {precision!r} has no serving scheme here"
    if _kv_dtype(row, SCHEMES[precision]) is None:
        return "a KV-cache dtype other than 16-bit or fp8"
    if shipped_for_hub_id(str(row.get("model_path", ""))) is None:
        return f"model {row.get('model_path')!r} has no shipped architecture (recommender/perf/catalog/architectures)"
    return None


def _run(
    row: dict[str, str], schemes: SchemeLookup, profiles: Mapping[str, EngineProfile], campaign: str | None = None
) -> MeasuredRun:
    from recommender.perf.catalog.architectures import shipped_for_hub_id

    scheme = SCHEMES[(row.get("gemm_quant_mode") or row.get("precision") or "").strip().lower()]
    run = MeasuredRun(
        run_id=row["id"],
        model=shipped_for_hub_id(row["model_path"]) or "",
        engine=row["backend"],
        profile=profiles[row["backend"]],
        engine_version=row.get("backend_version", ""),
        scheme=scheme,
        numerics=schemes(scheme),
        hardware=SYSTEMS[row["system"]],
        tensor_parallel=int(row["tp_size"]),
        concurrency=int(row["batch_size"]),
        prompt_tokens=int(row["isl"]),
        output_tokens=int(row["osl"]),
        ttft_ms=float(row["silicon_ttft_ms"]),
        tpot_ms=float(row["silicon_tpot_ms"]),
        campaign=(row.get("campaign") or "").strip() or campaign or ("steady" if "_c_tp" in row["id"] else "sweep"),
        kv_cache_dtype=_kv_dtype(row, scheme) or "auto",
        static_batch=(row.get("client") or "").strip() == "static",
    )
    _check_positive(run)
    return run


def _check_positive(run: MeasuredRun) -> None:
    """A run whose latencies or sizes are not finite and positive cannot be replayed: ValueError (the row is skipped
    as malformed, counted with the others, never a division by zero or a nan% table)."""
    figures = {
        "silicon_ttft_ms": run.ttft_ms,
        "silicon_tpot_ms": run.tpot_ms,
        "batch_size": run.concurrency,
        "isl": run.prompt_tokens,
        "osl": run.output_tokens,
        "tp_size": run.tensor_parallel,
    }
    for column, value in figures.items():
        if not math.isfinite(value) or value <= 0:
            raise ValueError(f"{column} {value!r} is not a positive number")


def read_runs(path: Path = DEFAULT_RUNS, *, schemes: SchemeLookup, profiles: Mapping[str, EngineProfile]) -> LoadedRuns:
    """Every row of `path` (AIConfigurator's silicon-sample columns) the model can replay, and what it skipped.

    A row is skipped, counted by reason, when its engine, GPU, precision or model is unknown here or it
    uses pipeline or attention data parallelism: a file of other GPUs and models loads without failing.
    """
    campaign = FILE_CAMPAIGNS.get(path.name)
    runs, skipped = replayable_rows(
        path, lambda row: _why_not(row, profiles), lambda row: _run(row, schemes, profiles, campaign)
    )
    return LoadedRuns(runs, skipped)


def replayable_rows(
    path: Path, why_not: Callable[[dict[str, str]], str | None], make: Callable[[dict[str, str]], T]
) -> tuple[list[T], dict[str, int]]:
    """Every row of the CSV at `path` that `why_not` lets through, made into a run, and how many rows were skipped
    for each reason (a row `make` cannot read counts as a missing or malformed column)."""
    with path.open(newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    runs: list[T] = []
    skipped: Counter[str] = Counter()
    for row in rows:
        why = why_not(row)
        if why is None:
            try:
                runs.append(make(row))
            except (KeyError, ValueError, AttributeError) as exc:  # an empty or non-numeric cell, a missing column
                why = f"a missing or malformed column ({type(exc).__name__}: {exc})"
        if why is not None:
            skipped[why] += 1
    return runs, dict(skipped)


def load_runs(
    path: Path = DEFAULT_RUNS, *, schemes: SchemeLookup, profiles: Mapping[str, EngineProfile]
) -> list[MeasuredRun]:
    """The runs of `path` the model can replay (see :func:`read_runs`); `schemes` and `profiles` (the
    registries' ``get_scheme`` and ``PROFILES``: perf imports neither) resolve their scheme and engine names."""
    return read_runs(path, schemes=schemes, profiles=profiles).runs


def runs_digest(*paths: Path) -> str:
    """sha256 of the files' bytes in order (by default the shipped H100 runs), recorded with a fit so a fit is
    never silently paired with other data."""
    digest = hashlib.sha256()
    for path in paths or (DEFAULT_RUNS,):
        digest.update(path.read_bytes())
    return digest.hexdigest()
