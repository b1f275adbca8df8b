"""Each measured MoE run's mean TTFT and TPOT as linear functions of the step coefficients, per layout.

The MoE half of ``design_rows.py``: a run is replayed once per column (``COLUMNS``: the step features, the
modeled all-to-all, the request's fixed time) with a step cost that is that column alone; in a closed loop which
requests share a step does not depend on step times, so the means are exact linear functions of the
coefficients. The layouts, with the tool's own step model for each:

- **aggregated**: one attention rank of the replica (``perf/step/expert_parallel.py`` where experts are split by
  EP or attention runs in data-parallel ranks, ``StepFeatures`` at the tensor-parallel degree otherwise) in the
  closed loop of ``closed_loop.py`` at the rank's share of the client's concurrency, its KV cache what its GPUs
  leave (``ep_memory`` / ``kv_cache_tokens``), the engine's default scheduler;
- **disaggregated**: the decode pool's rank decodes its share of the concurrency (at most its batch cap) at the
  mean context of a staggered closed loop (prompt + half the output): TPOT; the prefill pool's rank runs a closed
  loop of one-token requests at the concurrency Little's law gives it (its share of the client's concurrency times
  the fraction of a request's life spent in prefill, from the prior coefficients), and the KV transfer
  (``perf/model/kv_transfer.py``, over NVLink inside a GB200 rack, InfiniBand NDR between servers) is added to its
  TTFT as a fixed, modeled term.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from recommender.perf.catalog.gpus import Accelerator, Catalog
from recommender.perf.catalog.links import resolve_link
from recommender.perf.fit.moe_runs import NVLINK_DOMAIN, MoeRun, Pool
from recommender.perf.model.expert_parallel import ExpertParallelLayout, ep_memory
from recommender.perf.model.kv_transfer import kv_transfer
from recommender.perf.model.memory import kv_cache_tokens
from recommender.perf.model.shape import ModelShape
from recommender.perf.sim.closed_loop import ClosedLoopBenchmark, replay
from recommender.perf.sim.scheduler_config import SchedulerConfig
from recommender.perf.step.cost import PrefillChunks
from recommender.perf.step.expert_parallel import AllToAllLinks, ExpertParallelStepCost, ExpertParallelStepFeatures
from recommender.perf.step.features import FEATURES, N_FEATURES, FeatureStepCost, StepFeatures, StepFeatureSource
from recommender.provenance import Provenance

__all__ = ["COLUMNS", "MoeRow", "moe_row", "pool_source"]

#: The design columns: the step features, the all-to-all's modeled seconds, the request's fixed time (TTFT only).
COLUMNS = (*FEATURES, "all_to_all", "request")
_A2A, _REQUEST = N_FEATURES, N_FEATURES + 1
_N = len(COLUMNS)
_EPS = 1e-9
_UNIT = Provenance("modeled", "one column of the MoE step cost, for the validation's design rows")
#: Requests a replayed closed loop sends at most (rounds x concurrency): the means settle well before.
_MAX_REQUESTS = 2048


@dataclass(frozen=True, slots=True)
class MoeRow:
    """A run's mean TTFT and TPOT (ms) as linear functions of ``COLUMNS``' coefficients, plus the TTFT's fixed
    modeled part (the KV transfer of a disaggregated run, ms)."""

    run: MoeRun
    ttft: np.ndarray
    tpot: np.ndarray
    ttft_fixed_ms: float = 0.0

    def predict(self, coef: np.ndarray) -> tuple[float, float]:
        return float(self.ttft @ coef) + self.ttft_fixed_ms, float(self.tpot @ coef)


@dataclass(frozen=True)
class PoolSource:
    """One attention rank of a pool: its step features with the all-to-all appended, and its KV cache in tokens."""

    features: StepFeatureSource
    a2a: ExpertParallelStepCost | None
    kv_tokens: int

    def of_step(self, chunks: PrefillChunks, decode_seqs: int, context_tokens: int) -> np.ndarray:
        row = self.features.of_step(chunks, decode_seqs, context_tokens)
        tokens = chunks.tokens + decode_seqs
        return np.append(row, self.a2a.all_to_all_seconds(tokens) if self.a2a is not None else 0.0)

    def of_decode_steps(self, decode_seqs: int, context_tokens: np.ndarray) -> np.ndarray:
        rows = self.features.of_decode_steps(decode_seqs, context_tokens)
        a2a = self.a2a.all_to_all_seconds(decode_seqs) if self.a2a is not None else 0.0
        return np.hstack([rows, np.full((len(rows), 1), a2a)])


@dataclass(frozen=True)
class _Column:
    """A step cost that is one column of `source` alone (plus a negligible floor): a design replay's probe."""

    source: PoolSource
    index: int
    floor_s: float
    provenance: Provenance = _UNIT

    def step_seconds(self, prefill_tokens: int, decode_seqs: int, context_tokens: int) -> float:
        return self.prefill_step_seconds(PrefillChunks.single(prefill_tokens), decode_seqs, context_tokens)

    def prefill_step_seconds(self, chunks: PrefillChunks, decode_seqs: int, context_tokens: int) -> float:
        row = self.source.of_step(chunks, decode_seqs, context_tokens)
        return float(row[self.index]) + self.floor_s if self.index >= 0 else self.floor_s

    def decode_steps_seconds(self, decode_seqs: int, context_tokens: np.ndarray) -> np.ndarray:
        if self.index < 0:
            return np.full(len(context_tokens), self.floor_s)
        return np.asarray(self.source.of_decode_steps(decode_seqs, context_tokens)[:, self.index] + self.floor_s)


def _links(accel: Accelerator, hardware: str, gpus: int) -> AllToAllLinks:
    domain = NVLINK_DOMAIN.get(hardware, accel.max_tensor_parallel)
    network = resolve_link("infiniband-ndr", accel) if gpus > domain else None
    return AllToAllLinks(resolve_link("nvlink", accel), network, domain)


def pool_source(run: MoeRun, pool: Pool, shape: ModelShape, accel: Accelerator, *, max_seqs: int) -> PoolSource:
    """The step model of one attention rank of `pool` (module docstring), with its KV cache for `max_seqs`."""
    method, kv = run.numerics, run.kv_cache_dtype
    kv_at_width = run.profile.reads_kv_at_cache_width(run.engine_version)
    budget = run.profile.max_num_batched_tokens
    if not pool.expert_parallel:
        features = StepFeatures(shape, method, accel, pool.tp, kv, kv_at_width)
        tokens = kv_cache_tokens(
            shape,
            method,
            accel,
            tensor_parallel=pool.tp,
            max_num_seqs=max_seqs,
            max_num_batched_tokens=budget,
            kv_cache_dtype=kv,
            pool_context=run.prompt_tokens if shape.window else None,  # window layers bounded, as plan's pool
        )
        return PoolSource(features, None, tokens)
    layout = ExpertParallelLayout(pool.gpus_per_worker, pool.attention_dp)
    ep_features = ExpertParallelStepFeatures(shape, method, accel, layout, 1.0, kv, kv_at_width)
    memory = ep_memory(
        shape,
        layout,
        bits_per_weight=method.bits_per_weight,
        device_gb=accel.device_memory_gb,
        max_num_batched_tokens=budget,
        max_num_seqs=max_seqs,
        kv_cache_dtype=kv,
        pool_context=run.prompt_tokens if shape.window else None,
    )
    unit = FeatureStepCost(ep_features, np.ones(N_FEATURES), _UNIT)
    a2a = ExpertParallelStepCost(unit, ep_features, _links(accel, run.hardware, pool.gpus_per_worker), _UNIT)
    return PoolSource(ep_features, a2a, memory.kv_tokens_per_rank)


def _config(run: MoeRun, source: PoolSource, seqs: int) -> SchedulerConfig:
    budget = run.profile.max_num_batched_tokens
    return run.profile.batching(
        SchedulerConfig(kv_cache_tokens=max(source.kv_tokens, 16), max_num_seqs=seqs, max_num_batched_tokens=budget)
    )


def _replayed(source: PoolSource, config: SchedulerConfig, bench: ClosedLoopBenchmark) -> tuple[np.ndarray, ...]:
    """Mean TTFT and TPOT (ms) of `bench` per unit of each column (one replay per column, one counting steps)."""
    steps = replay(_Column(source, -1, 1.0), config, bench)
    ttft, tpot = np.zeros(_N), np.zeros(_N)
    for j in range(N_FEATURES + 1):
        if j < N_FEATURES and j in source.features.always_zero or (j == _A2A and source.a2a is None):
            continue
        alone = replay(_Column(source, j, _EPS), config, bench)
        ttft[j] = alone.ttft_ms.mean - _EPS * steps.ttft_ms.mean
        tpot[j] = alone.tpot_ms.mean - _EPS * steps.tpot_ms.mean
    ttft[_REQUEST] = 1e3  # the request's fixed time, s -> ms, on TTFT only
    return ttft, tpot


def _bench(concurrency: int, prompt: int, output: int, requests: int | None = None) -> ClosedLoopBenchmark:
    """The replayed closed loop: `requests` / `concurrency` rounds where the run recorded how many it sent (so its
    opening burst weighs in the mean as much as it did), at most 8 and ``_MAX_REQUESTS`` in all."""
    rounds = max(2, min(8, _MAX_REQUESTS // concurrency))
    if requests is not None:
        rounds = max(1, min(rounds, round(requests / concurrency)))
    return ClosedLoopBenchmark(concurrency=concurrency, prompt_tokens=prompt, output_tokens=output, rounds=rounds)


def _aggregated(run: MoeRun, shape: ModelShape, accel: Accelerator) -> MoeRow:
    pool = run.decode
    concurrency = -(-run.concurrency // pool.ranks)
    seqs = max(run.profile.max_num_seqs, concurrency)
    source = pool_source(run, pool, shape, accel, max_seqs=seqs)
    requests = None if run.requests is None else -(-run.requests // pool.ranks)
    bench = _bench(concurrency, run.prompt_tokens, run.output_tokens, requests)
    ttft, tpot = _replayed(source, _config(run, source, seqs), bench)
    return MoeRow(run, ttft, tpot)


def _decode_tpot(run: MoeRun, source: PoolSource, batch: int) -> np.ndarray:
    """A decode rank's step at `batch` sequences, each on average half-way through its output (ms per column)."""
    context = batch * (run.prompt_tokens + run.output_tokens / 2)
    tpot = np.zeros(_N)
    tpot[:_REQUEST] = source.of_decode_steps(batch, np.array([context]))[0] * 1e3
    return tpot


def queue_factor(clients: int, servers: int, service_ms: float, away_ms: float, *, rounds: int = 8) -> float:
    """Mean TTFT over one prefill's time of a closed loop of `clients` through `servers` prefill ranks (one prompt
    at a time each, `service_ms` per prompt), each client `away_ms` elsewhere (transfer and decode) between
    prompts, `rounds` requests each, the opening burst counted (as the benchmark's client counts it)."""
    ready = [0.0] * clients
    free = [0.0] * servers
    total = 0.0
    for _ in range(rounds):
        order = sorted(range(clients), key=ready.__getitem__)
        for client in order:
            server = min(range(servers), key=free.__getitem__)
            end = max(ready[client], free[server]) + service_ms
            total += end - ready[client]
            free[server] = end
            ready[client] = end + away_ms
    return total / (clients * rounds * service_ms)


def _disaggregated(run: MoeRun, shape: ModelShape, accel: Accelerator, prior: np.ndarray) -> MoeRow:
    """The decode rank's TPOT at its share of the clients; the prefill's TTFT: one prompt's prefill (a replay of one
    one-token request) times the queueing a closed loop of the clients through the prefill ranks adds (prompts one
    at a time per rank, as the runs' prefill batch of 1 says; the prior's times set the queue), plus the KV
    transfer."""
    decode, prefill = run.decode, run.prefill
    assert prefill is not None
    seqs = prefill.batch or run.profile.max_num_seqs
    psource = pool_source(run, prefill, shape, accel, max_seqs=seqs)
    one = _replayed(psource, _config(run, psource, seqs), _bench(1, run.prompt_tokens, 1))[0]
    batch = -(-run.concurrency // decode.ranks)
    batch = min(batch, decode.batch) if decode.batch else batch
    tpot = _decode_tpot(run, pool_source(run, decode, shape, accel, max_seqs=batch), batch)
    link = resolve_link("nvlink" if run.hardware in NVLINK_DOMAIN else "infiniband-ndr", accel)
    transfer = kv_transfer(
        shape,
        prompt_tokens=run.prompt_tokens,
        link=link,
        kv_cache_dtype=run.kv_cache_dtype,
        prefill_tp=prefill.tp,
        decode_tp=decode.tp,
    )
    service = float(one[:_REQUEST] @ prior[:_REQUEST])
    away = float(tpot @ prior) * max(run.output_tokens - 1, 1) + transfer.seconds * 1e3
    factor = queue_factor(min(run.concurrency, 4096), prefill.ranks, max(service, 1e-6), away)
    ttft = one * factor
    ttft[_REQUEST] = 1e3
    return MoeRow(run, ttft, tpot, transfer.seconds * 1e3)


def moe_row(run: MoeRun, shapes: dict[str, ModelShape], catalog: Catalog, prior: np.ndarray) -> MoeRow:
    """`run`'s design row; `prior` (``COLUMNS``' coefficients) only sets a disaggregated prefill rank's concurrency."""
    accel, shape = catalog.get(run.hardware), shapes[run.model]
    if run.prefill is None:
        return _aggregated(run, shape, accel)
    return _disaggregated(run, shape, accel, prior)
