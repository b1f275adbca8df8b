"""The simulator judged against a real engine: step times read from its closed-loop runs, its Poisson runs predicted.

A probe's concurrency levels (``vllm bench serve --max-concurrency C``, fixed lengths) calibrate the step times the
simulation uses on this engine; its Poisson levels are held out and predicted, the simulation's P50 and P99 beside
the measured ones. How the step times are read: one prefill step for the probe's prompt length and one decode step
per concurrency level (a ``TableStepCost``, ``perf/step/cost.py``), started from what the client saw (the median
TTFT at the lowest concurrency, the median TPOT at each) and corrected by a few rounds of the closed-loop replay
(``perf/sim/closed_loop.py``) until the replay's medians equal the measured ones: a closed loop mixes the next
requests' prefills into every request's decode steps, so the raw TPOT overstates the decode step at high C.

What the judgement says and does not: the step times are the engine's as its client sees them (HTTP, tokenizing
and streaming included, as in every figure ``probe`` measures), at the probe's one prompt length; the scheduler is
vLLM's defaults (``SchedulerConfig``) with the KV cache the server was given. On a 2-core machine the load
generator shares the cores with the engine, so the measured P99s themselves vary 30-50 % between runs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from recommender.engines.load_run import LoadShape, MeasuredLoad
from recommender.perf.sim.closed_loop import ClosedLoopBenchmark, replay
from recommender.perf.sim.results import Percentiles
from recommender.perf.sim.scheduler_config import SchedulerConfig
from recommender.perf.sim.simulate import simulate
from recommender.perf.sim.workload import make_workload
from recommender.perf.step.cost import TableStepCost
from recommender.provenance import Provenance

__all__ = [
    "CAPACITY_FACTORS",
    "CapacityCheck",
    "next_capacity_factor",
    "EngineJudgement",
    "PredictedLoad",
    "calibrate_steps",
    "host_tail",
    "check_capacity",
    "judge_engine",
    "predicted_capacity",
]

#: Closed-loop replays that correct the step times (each moves the medians to within a few % of the last).
ROUNDS = 5
#: KV tokens the simulated replica holds: the server's fixed 1 GiB cache holds far more than a probe keeps in flight.
KV_TOKENS = 1 << 20


@dataclass(frozen=True, kw_only=True)
class PredictedLoad:
    """One held-out Poisson level: measured and simulated P50/P99 TTFT and TPOT (ms)."""

    shape: LoadShape
    measured: dict[str, float]
    predicted: dict[str, float]

    def ratio(self, name: str) -> float:
        """Measured over predicted (``ttft_p99`` ...): above 1 the simulator was optimistic."""
        p = self.predicted[name]
        return self.measured[name] / p if p > 0 else math.nan


@dataclass(frozen=True, kw_only=True)
class EngineJudgement:
    """The calibrated step times, the closed-loop fit they make, and the held-out predictions."""

    prefill_s: dict[int, float]
    decode_s: dict[int, float]
    provenance: Provenance
    fitted: list[PredictedLoad]
    held_out: list[PredictedLoad]
    #: The host's own tail (``host_tail``), added to every simulated P99: ms of TTFT and of TPOT.
    tail_ms: dict[str, float]

    def worst(self, name: str) -> float:
        """The held-out level furthest from the measurement, as a factor >= 1 (NaN: none held out)."""
        ratios = [r.ratio(name) for r in self.held_out]
        return max((max(r, 1 / r) for r in ratios if r > 0), default=math.nan)


def _measured(point: MeasuredLoad) -> dict[str, float]:
    flat = point.flat()
    return {f"{m}_{p}": flat[f"{m}_{p}_ms"] for m in ("ttft", "tpot") for p in ("p50", "p99")}


def _summary(ttft_s: np.ndarray, tpot_s: np.ndarray) -> dict[str, float]:
    ttft, tpot = Percentiles.of(ttft_s), Percentiles.of(tpot_s)
    return {"ttft_p50": ttft.p50, "ttft_p99": ttft.p99, "tpot_p50": tpot.p50, "tpot_p99": tpot.p99}


def _closed(cost: TableStepCost, config: SchedulerConfig, shape: LoadShape) -> dict[str, float]:
    assert shape.concurrency is not None
    rounds = max(1, math.ceil(shape.prompts / shape.concurrency))
    bench = ClosedLoopBenchmark(
        concurrency=shape.concurrency, prompt_tokens=shape.input_len, output_tokens=shape.output_len, rounds=rounds
    )
    run = replay(cost, config, bench)
    return {
        "ttft_p50": run.ttft_ms.p50,
        "ttft_p99": run.ttft_ms.p99,
        "tpot_p50": run.tpot_ms.p50,
        "tpot_p99": run.tpot_ms.p99,
    }


def _poisson(cost: TableStepCost, config: SchedulerConfig, shape: LoadShape) -> dict[str, float]:
    assert shape.rate is not None
    workload = make_workload(
        prompt=shape.input_len, output=shape.output_len, n_requests=shape.prompts, rate=shape.rate, seed=0
    )
    run = simulate(cost, workload, config)
    return _summary(run.ttft_s, run.tpot_s)  # every request, as `vllm bench serve` counts them (no warm-up cut)


def host_tail(closed: list[MeasuredLoad]) -> dict[str, float]:
    """The tail the steps do not carry: the smallest P99 less P50 of TTFT and TPOT over the closed-loop levels (ms).

    At one request in flight nothing queues, so a P99 above the median there is the host's noise (other processes on
    the cores, the client, the HTTP stack): tens of ms on a busy 2-core machine, about nothing on a quiet GPU box. A
    60-request P99 is nearly the slowest request, so one stall would make it; the smallest over the levels is the
    noise every level saw. The simulation's P99s are its queueing alone; this tail is added to them.
    """
    return {m: min(max(0.0, p.latency_ms[m]["p99"] - p.latency_ms[m]["p50"]) for p in closed) for m in ("ttft", "tpot")}


def _with_tail(predicted: dict[str, float], tail_ms: dict[str, float]) -> dict[str, float]:
    return predicted | {f"{m}_p99": predicted[f"{m}_p99"] + tail_ms[m] for m in ("ttft", "tpot")}


def calibrate_steps(closed: list[MeasuredLoad], *, provenance: Provenance) -> TableStepCost:
    """Step times that make the closed-loop replay's median TTFT and TPOT those measured (module docstring)."""
    config = SchedulerConfig(kv_cache_tokens=KV_TOKENS)
    by_level = {p.shape.concurrency or 1: p for p in closed}
    measured = {c: (p.latency_ms["ttft"]["p50"], p.latency_ms["tpot"]["p50"]) for c, p in by_level.items()}  # ms
    prompt = next(iter(by_level.values())).shape.input_len
    # C prompts sent together open each closed loop: one step of C x prompt tokens, the median TTFT's start.
    prefill = {c * prompt: ttft / 1e3 for c, (ttft, _) in measured.items()}
    decode = {c: tpot / 1e3 for c, (_, tpot) in measured.items()}
    for _ in range(ROUNDS):
        cost = TableStepCost(prefill, decode, provenance)
        replayed = {c: _closed(cost, config, p.shape) for c, p in by_level.items()}
        prefill = {c * prompt: prefill[c * prompt] * t / replayed[c]["ttft_p50"] for c, (t, _) in measured.items()}
        decode = {c: decode[c] * tpot / replayed[c]["tpot_p50"] for c, (_, tpot) in measured.items()}
    return TableStepCost(prefill, decode, provenance)


def judge_engine(points: list[MeasuredLoad], *, engine: str) -> EngineJudgement | None:
    """Calibrate on the closed-loop levels and predict the Poisson ones; None without both kinds of level."""
    closed = [p for p in points if p.shape.concurrency is not None and p.shape.rate is None and p.completed]
    poisson = [p for p in points if p.shape.rate is not None and p.completed]
    if not closed or not poisson:
        return None
    levels = ", ".join(str(p.shape.concurrency) for p in closed)
    provenance = Provenance(
        "calibrated",
        f"step times measured through {engine} by `probe` (closed loop at concurrency {levels}); latency simulated",
    )
    cost = calibrate_steps(closed, provenance=provenance)
    config, tail = SchedulerConfig(kv_cache_tokens=KV_TOKENS), host_tail(closed)
    return EngineJudgement(
        prefill_s=dict(cost.prefill),
        decode_s=dict(cost.decode),
        provenance=provenance,
        fitted=[
            PredictedLoad(
                shape=p.shape, measured=_measured(p), predicted=_with_tail(_closed(cost, config, p.shape), tail)
            )
            for p in closed
        ],
        held_out=[
            PredictedLoad(
                shape=p.shape, measured=_measured(p), predicted=_with_tail(_poisson(cost, config, p.shape), tail)
            )
            for p in poisson
        ],
        tail_ms=tail,
    )


#: Where the engine is loaded around the predicted capacity, as factors of it: below, at and above.
CAPACITY_FACTORS = (0.75, 1.0, 1.3)
#: Each further level's factor over the last (up where every level met the SLA, down where none did), within these
#: bounds: a bracket [met, missed] of the engine's own capacity, so the prediction's distance from it is a number.
CAPACITY_STEP = 1.3
CAPACITY_BOUNDS = (0.25, 4.0)


def next_capacity_factor(judged: dict[float, bool]) -> float | None:
    """The next factor of the predicted capacity to load the engine at, or None once [met, missed] brackets it.

    ``judged``: each factor run so far -> whether its P99s met the SLA. Up while every level met it, down while none
    did, one `CAPACITY_STEP` at a time, never past `CAPACITY_BOUNDS`.
    """
    pending = [f for f in CAPACITY_FACTORS if f not in judged]
    if pending:
        return pending[0]
    if all(judged.values()):
        up = max(judged) * CAPACITY_STEP
        return up if up <= CAPACITY_BOUNDS[1] else None
    if not any(judged.values()):
        down = min(judged) / CAPACITY_STEP
        return down if down >= CAPACITY_BOUNDS[0] else None
    return None


@dataclass(frozen=True, kw_only=True)
class CapacityCheck:
    """The predicted capacity within a P99 SLA beside the engine's, bracketed by Poisson levels run around it.

    ``met``: the highest measured rate whose P99 TTFT and TPOT were within the SLA (0.0: none was);
    ``missed``: the lowest one above it that was not (None: every rate above met it too).
    """

    ttft_p99_ms: float
    tpot_p99_ms: float
    predicted: float
    met: float
    missed: float | None

    @property
    def within(self) -> float:
        """How far the prediction is from the bracket, as a factor >= 1 (1.0: inside it; inf: nothing met)."""
        if self.met <= 0 or self.predicted <= 0:
            return math.inf
        if self.predicted < self.met:
            return self.met / self.predicted
        if self.missed is not None and self.predicted > self.missed:
            return self.predicted / self.missed
        return 1.0


def predicted_capacity(
    judgement: EngineJudgement, shape: LoadShape, *, ttft_p99_ms: float, tpot_p99_ms: float
) -> float:
    """The highest Poisson rate whose simulated P99s, the host's tail added, meet the SLA on the calibrated step times
    (req/s; 0.0 where the tail alone breaks it)."""
    from recommender.perf.sim.capacity import max_rate_within_sla

    ttft, tpot = ttft_p99_ms - judgement.tail_ms["ttft"], tpot_p99_ms - judgement.tail_ms["tpot"]
    if ttft <= 0 or tpot <= 0:
        return 0.0
    cost = TableStepCost(judgement.prefill_s, judgement.decode_s, judgement.provenance)
    search = max_rate_within_sla(
        cost,
        SchedulerConfig(kv_cache_tokens=KV_TOKENS),
        prompt=shape.input_len,
        output=shape.output_len,
        ttft_p99_ms=ttft,
        tpot_p99_ms=tpot,
    )
    return search.rate_per_s


def check_capacity(
    points: list[MeasuredLoad], *, predicted: float, ttft_p99_ms: float, tpot_p99_ms: float
) -> CapacityCheck:
    """Bracket the engine's capacity by the Poisson levels measured (each judged on its P99s) around `predicted`."""
    judged = sorted(
        (p.shape.rate, p.latency_ms["ttft"]["p99"] <= ttft_p99_ms and p.latency_ms["tpot"]["p99"] <= tpot_p99_ms)
        for p in points
        if p.shape.rate is not None and p.completed and not p.failed
    )
    met = max((rate for rate, ok in judged if ok), default=0.0)
    missed = min((rate for rate, ok in judged if not ok and rate > met), default=None)
    return CapacityCheck(ttft_p99_ms=ttft_p99_ms, tpot_p99_ms=tpot_p99_ms, predicted=predicted, met=met, missed=missed)
