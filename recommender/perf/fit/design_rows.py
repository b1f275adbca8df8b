"""Design rows: each measured run's mean TTFT and TPOT as linear functions of the step-cost coefficients.

The half of the calibration that replays (``step_fit.py`` is the half that solves). Every measured run is replayed
once per feature through the closed-loop benchmark (``closed_loop.py``) with a step cost that is that feature
alone: because arrivals sit on step boundaries, the run's mean TTFT and mean TPOT are then exact linear functions
of the coefficients. The client a run was measured with (its protocol) and the scheduler it ran under (its
engine's defaults, the KV cache its GPU leaves) are modelled here too, as the replays need them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from recommender.perf.catalog.gpus import Catalog
from recommender.perf.fit.serving_runs import MeasuredRun
from recommender.perf.model.memory import kv_cache_tokens
from recommender.perf.model.shape import ModelShape
from recommender.perf.sim.closed_loop import ClosedLoopBenchmark, InterTokenStepCost, replay
from recommender.perf.sim.engine_profiles import EngineProfile
from recommender.perf.sim.scheduler_config import SchedulerConfig
from recommender.perf.step.cost import PrefillChunks, StepCostModel
from recommender.perf.step.features import FEATURES, N_FEATURES, FeatureStepCost, StepFeatures, StepFeatureSource
from recommender.perf.step.kernel_features import KernelStepFeatures
from recommender.perf.step.kernel_tables import KernelTables
from recommender.provenance import Provenance

__all__ = [
    "CAMPAIGN_PROTOCOLS",
    "CLIENT_PROTOCOLS",
    "COEFFICIENTS",
    "N_COEFFICIENTS",
    "BenchmarkProtocol",
    "DesignRow",
    "client_benchmark",
    "design_rows",
    "replay_config",
    "run_setup",
    "static_row",
    "step_features",
]

#: The fitted coefficients: the step features, then a fixed time added to every TTFT (the request's way
#: in and out of the engine: HTTP, tokenization, the first token's detokenization and streaming), s.
COEFFICIENTS = (*FEATURES, "request")
N_COEFFICIENTS = len(COEFFICIENTS)

_UNIT = Provenance("modeled", "one feature of the step cost, for the calibration's design rows")
#: A step's floor while one feature is isolated: keeps steps positive, removed exactly afterwards.
_EPS = 1e-9


@dataclass(frozen=True, slots=True)
class BenchmarkProtocol:
    """How the measured client ran: requests per concurrency slot, the warm-up it dropped, and what its TPOT
    averages: "mean_tpot" (each request's (end - first token) / (tokens - 1), then the mean over requests: prefill
    stalls included) or "decode_itl" (the gaps between tokens in decode steps, as a median inter-token latency
    reads them when steps carrying prompts are a minority: ``closed_loop.InterTokenStepCost``)."""

    rounds: int = 8
    warmup_rounds: int = 0
    tpot_metric: Literal["mean_tpot", "decode_itl"] = "mean_tpot"


#: The client protocols a closed-loop benchmark plausibly ran, named: "burst" counts the opening burst (C prompts
#: queued at t = 0, as ``vllm bench serve --max-concurrency`` counts it), "steady" drops the first half of the
#: requests as warm-up; each with a TPOT that is each request's mean (stalls included) or the gap between tokens in
#: decode steps ("decode ITL", what a median inter-token latency reads). Every run is predicted under all of them
#: (``validation.py``): they bracket what a client could have reported from the same steps, so no protocol hides
#: in a coefficient.
CLIENT_PROTOCOLS = {
    "burst": BenchmarkProtocol(8, 0),
    "steady": BenchmarkProtocol(8, 4),
    "burst, decode ITL": BenchmarkProtocol(8, 0, "decode_itl"),
    "steady, decode ITL": BenchmarkProtocol(8, 4, "decode_itl"),
}
#: The protocol each campaign's client is modelled with when fitting (``MeasuredRun.campaign``): the sweep's
#: TTFTs grow with concurrency as an opening burst does; the steady campaign's are far below any burst's.
CAMPAIGN_PROTOCOLS = {"sweep": "burst", "steady": "steady"}


@dataclass(frozen=True)
class DesignRow:
    """A measured run and its mean TTFT and TPOT (ms) as linear functions of the coefficients."""

    run: MeasuredRun
    ttft: np.ndarray
    tpot: np.ndarray


def replay_config(
    shape: ModelShape,
    features: StepFeatureSource,
    profile: EngineProfile,
    *,
    concurrency: int,
    kv_cache_dtype: str = "auto",
) -> SchedulerConfig:
    """The engine's scheduler at its defaults (`profile`), with the KV cache the GPU leaves and room for
    `concurrency`."""
    seqs = max(profile.max_num_seqs, concurrency)
    tokens = kv_cache_tokens(
        shape,
        features.method,
        features.accel,
        tensor_parallel=features.tensor_parallel,
        max_num_batched_tokens=profile.max_num_batched_tokens,
        max_num_seqs=seqs,
        kv_cache_dtype=kv_cache_dtype,
    )
    return profile.batching(
        SchedulerConfig(
            kv_cache_tokens=max(tokens, 16),
            max_num_seqs=seqs,
            max_num_batched_tokens=profile.max_num_batched_tokens,
        )
    )


def client_benchmark(run: MeasuredRun, protocol: BenchmarkProtocol, *, as_run: bool = True) -> ClosedLoopBenchmark:
    """The client of `run` under `protocol`; with `as_run`, the "steady" campaign's client drops half its requests
    as warm-up whatever `protocol` says (``CAMPAIGN_PROTOCOLS``), as the fit models it."""
    steady = as_run and CAMPAIGN_PROTOCOLS.get(run.campaign, "burst") == "steady"
    warmup = protocol.rounds // 2 if steady else protocol.warmup_rounds
    return ClosedLoopBenchmark(
        concurrency=run.concurrency,
        prompt_tokens=run.prompt_tokens,
        output_tokens=run.output_tokens,
        rounds=protocol.rounds,
        warmup_rounds=warmup,
    )


def step_features(
    run: MeasuredRun, shape: ModelShape, catalog: Catalog, *, kernels: KernelTables | None = None
) -> StepFeatureSource:
    """The step features of `run`'s configuration (its engine release's KV read width included): datasheet
    features, or with `kernels` its measured kernels (``KernelTablesUnavailable`` where they have none)."""
    topology = StepFeatures(
        shape,
        run.numerics,
        catalog.get(run.hardware),
        run.tensor_parallel,
        run.kv_cache_dtype,
        run.profile.reads_kv_at_cache_width(run.engine_version),
    )
    if kernels is None:
        return topology
    table = kernels.get(shape, run.numerics, run.hardware, run.engine, run.tensor_parallel, run.kv_cache_dtype)
    return KernelStepFeatures(topology, table)


def run_setup(
    run: MeasuredRun, shape: ModelShape, catalog: Catalog, kernels: KernelTables | None
) -> tuple[StepFeatureSource, SchedulerConfig]:
    """`run`'s step features and the scheduler it is replayed under."""
    features = step_features(run, shape, catalog, kernels=kernels)
    config = replay_config(shape, features, run.profile, concurrency=run.concurrency, kv_cache_dtype=run.kv_cache_dtype)
    return features, config


def _design_row(
    run: MeasuredRun,
    shape: ModelShape,
    catalog: Catalog,
    protocol: BenchmarkProtocol,
    as_run: bool,
    same_client: DesignRow | None,
    kernels: KernelTables | None,
) -> DesignRow:
    features, config = run_setup(run, shape, catalog, kernels)
    if run.static_batch:  # no client protocol to bracket: every protocol's row is the same
        return same_client or static_row(run, features)
    bench = client_benchmark(run, protocol, as_run=as_run)
    if same_client is not None and protocol.tpot_metric == "decode_itl":  # its TTFT is that client's: no replay
        ttft = same_client.ttft
    else:
        ttft, tpot = _linear_means(features, config, bench, inter_token=False)
        ttft[N_FEATURES] = 1e3  # the request overhead, s -> ms, on TTFT only
    if protocol.tpot_metric == "decode_itl":
        _, tpot = _linear_means(features, config, bench, inter_token=True)
    return DesignRow(run, ttft, tpot)


def static_row(run: MeasuredRun, features: StepFeatureSource) -> DesignRow:
    """A static batch's TTFT and TPOT (ms) as linear functions of the coefficients: the context phase is one step
    of `concurrency` whole prompts; each of the `output_tokens` - 1 decode steps reads every sequence's KV so far.
    No request overhead (an in-process benchmark, no HTTP)."""
    batch, prompt = run.concurrency, run.prompt_tokens
    ttft, tpot = np.zeros(N_COEFFICIENTS), np.zeros(N_COEFFICIENTS)
    ttft[:N_FEATURES] = features.of_step(PrefillChunks.of([(prompt, 0)] * batch), 0, 0) * 1e3
    contexts = batch * (prompt + np.arange(1, max(run.output_tokens, 2), dtype=float))
    tpot[:N_FEATURES] = features.of_decode_steps(batch, contexts).mean(axis=0) * 1e3
    return DesignRow(run, ttft, tpot)


def _linear_means(
    features: StepFeatureSource, config: SchedulerConfig, bench: ClosedLoopBenchmark, *, inter_token: bool
) -> tuple[np.ndarray, np.ndarray]:
    """Mean TTFT and TPOT (ms) of `bench` per unit of each feature's coefficient: one replay per feature, and one
    counting steps (each 1 s) to take out the negligible floor that keeps isolated steps positive."""

    def cost(coefficients: np.ndarray, floor_s: float) -> StepCostModel:
        one = FeatureStepCost(features, coefficients, _UNIT, floor_s=floor_s)
        return InterTokenStepCost(one) if inter_token else one

    steps = replay(cost(np.zeros(N_FEATURES), 1.0), config, bench)
    ttft, tpot = np.zeros(N_COEFFICIENTS), np.zeros(N_COEFFICIENTS)
    for j in range(N_FEATURES):
        if j in features.always_zero:  # a feature this source never fills (kernel rows): its replay is all zeros
            continue
        alone = replay(cost(np.eye(N_FEATURES)[j], _EPS), config, bench)
        ttft[j] = alone.ttft_ms.mean - _EPS * steps.ttft_ms.mean
        tpot[j] = alone.tpot_ms.mean - _EPS * steps.tpot_ms.mean
    return ttft, tpot


def design_rows(
    runs: Sequence[MeasuredRun],
    shapes: dict[str, ModelShape],
    catalog: Catalog,
    protocol: BenchmarkProtocol,
    *,
    as_run: bool = True,
    same_client: Sequence[DesignRow] | None = None,
    kernels: KernelTables | None = None,
) -> list[DesignRow]:
    """One design row per run (a few closed-loop replays each); `as_run` as in :func:`client_benchmark`.
    `same_client`: the runs' rows under a protocol with the same requests and warm-up, whose TTFT a "decode_itl"
    protocol shares (only its TPOT is replayed)."""
    known: Sequence[DesignRow | None] = [None] * len(runs) if same_client is None else same_client
    pairs = zip(runs, known, strict=True)
    return [_design_row(run, shapes[run.model], catalog, protocol, as_run, row, kernels) for run, row in pairs]
