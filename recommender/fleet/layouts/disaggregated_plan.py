"""`plan --layout disaggregated`: a prefill pool and a decode pool, sized for the user's traffic.

Each pool's worker is a configuration the aggregated plan would also try (tensor-parallel degree, KV cache dtype,
batch cap, engine; the same memory plan and calibrated step costs from ``PerformanceEvaluator``), simulated on
the pool's own job (``perf/sim/disaggregated.py``). Given how the TTFT is split between the legs, the pools do
not depend on each other, so each takes its cheapest worker on its own: the prefill pool the fewest GPUs whose
P99 TTFT meets the prefill share, the decode pool the fewest whose P99 TPOT meets the limit. The TTFT split:
the KV transfer of the longest prompt first (over the named link, at one rank per side: the most bytes per
link; less the shared prefix the decode side holds where the engine credits it, ``perf/sim/transfer_credit.py``),
then ``DECODE_TTFT_SHARE`` of the rest to the decode side's wait for room and its first step, the rest to
prefill. Both pools run one engine and one KV cache dtype (the KV moves as it is cached). The pools' GPUs,
prefill plus decode, are what the layout costs.

The pools may run different GPU types (``mixed_row``): each GPU's pool choices (``pool_options``) are computed
once and paired, the prefill pool's from one GPU with the decode pool's from another, each pool priced at its own
GPU's hourly price. Two GPU types never share a node, so a mixed pair's KV crosses a network link (``MIXED_LINK``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from recommender.config.candidate import DEFAULT_MAX_BATCHED_TOKENS, KVCacheDtype
from recommender.deploy.disaggregated import DisaggregatedLaunch, equal_pool_tp_reason
from recommender.engines.batch_limits import batch_ladder
from recommender.evaluation.two_pools import PoolChoice
from recommender.fleet.layouts.pool_workers import PoolWorker, TensorParallelWorker, WorkerContext
from recommender.fleet.plan_scope import LADDER_GAIN, PlanScope
from recommender.perf.pricing import HOURS_PER_MONTH
from recommender.perf.sim.disaggregated import decode_pool, prefill_pool
from recommender.perf.sim.transfer_credit import credited_transfer
from recommender.provenance import Provenance  # at run time: the rows' types are resolved when serialized

if TYPE_CHECKING:
    from recommender.evaluation.performance import PerformanceEvaluator
    from recommender.fleet.layouts.pool_workers import ExpertParallelPools
    from recommender.perf.catalog.gpus import Accelerator
    from recommender.perf.model.link import Link
    from recommender.quantize import QuantScheme

__all__ = [
    "DECODE_TTFT_SHARE",
    "DisaggregatedRow",
    "PoolChoice",
    "PoolOptions",
    "pool_cost",
    "pooled_row",
    "plan_disaggregated",
    "pool_options",
    "same_gpu_row",
]

#: Share of the TTFT left after the KV transfer given to the decode side (its wait for KV room, then one step).
DECODE_TTFT_SHARE = 0.2


@dataclass(frozen=True, slots=True)
class DisaggregatedRow:
    """The cheapest prefill + decode pools at one precision, or why there are none (`note`).

    `hardware` is the prefill pool's GPU (for a same-GPU row, the one GPU of both pools, as it always was);
    `prefill_hardware` and `decode_hardware` name each pool's GPU (filled from `hardware` when not given)."""

    hardware: str
    precision: str
    method: str
    link: str
    engine: str = ""
    kv_cache_dtype: str = "auto"
    prefill: PoolChoice | None = None
    decode: PoolChoice | None = None
    transfer_ms: float | None = None
    gpus: int | None = None
    usd_per_month: float | None = None
    ttft_p99_ms: float | None = None
    ttft_p99_high_ms: float | None = None
    tpot_p99_ms: float | None = None
    tpot_p99_high_ms: float | None = None
    note: str = ""
    provenance: Provenance | None = None
    #: Each pool's worker command with its role, and the router ("" engine: not emitted; None: nothing to launch).
    launch: DisaggregatedLaunch | None = None
    prefill_hardware: str = ""
    decode_hardware: str = ""

    def __post_init__(self) -> None:
        for name in ("prefill_hardware", "decode_hardware"):
            if not getattr(self, name):
                object.__setattr__(self, name, self.hardware)

    @property
    def mixed(self) -> bool:
        """The pools run different GPU types."""
        return self.prefill_hardware != self.decode_hardware


@dataclass(frozen=True, slots=True)
class _Budgets:
    transfer_ms: float
    prefill_ttft_ms: float
    decode_ttft_ms: float
    credited: bool = True


def _budgets(performance: PerformanceEvaluator, link: Link, kv: str, engine: str, credit: bool = True) -> _Budgets:
    """The TTFT split: the longest prompt's KV transfer (less the prefix `engine`'s decode side holds, at the most,
    where `credit`: ``transfer_credit.py``), then the decode side's share, the rest to prefill."""
    longest = performance.traffic.longest_prompt_tokens
    moved = credited_transfer(
        performance.shape,
        performance.load,
        engine=engine,
        longest_prompt=longest,
        link=link,
        kv_cache_dtype=kv,
        allow_credit=credit,
    ).transfer
    left = performance.sla.ttft_p99_ms - moved.seconds * 1e3
    return _Budgets(moved.seconds * 1e3, left * (1 - DECODE_TTFT_SHARE), left * DECODE_TTFT_SHARE, credit)


def _cheaper(a: PoolChoice | None, b: PoolChoice) -> PoolChoice:
    """The pool with fewer GPUs at the target traffic (then more capacity per GPU)."""
    if a is None:
        return b
    key = lambda p: (p.estimate.gpus, -p.estimate.requests_per_s / p.gpus_per_worker)  # noqa: E731
    return min(a, b, key=key)


@dataclass(frozen=True, slots=True)
class _Pools:
    """What each pool tries: the workers' shared context (engine, KV dtype...), the budgets, and the
    expert-parallel workers offered beside the tensor-parallel degrees (``pool_workers.py``; none without
    ``--expert-parallel``)."""

    performance: PerformanceEvaluator
    accel: Accelerator
    method: QuantScheme
    precision: str
    engine: str
    kv: KVCacheDtype
    budgets: _Budgets
    expert_parallel: tuple[PoolWorker, ...] = ()

    @property
    def context(self) -> WorkerContext:
        return WorkerContext(self.performance, self.accel, self.method, self.precision, self.engine, self.kv)

    def workers(self, degrees: list[int]) -> list[PoolWorker]:
        """The tensor-parallel workers of `degrees`, then the expert-parallel ones offered."""
        return [*(TensorParallelWorker(d) for d in degrees), *self.expert_parallel]

    def prefill(self, degrees: list[int], caps: list[int]) -> PoolChoice | None:
        best, ctx = None, self.context
        for worker in self.workers(degrees):
            pool = worker.setup(ctx, caps[0])
            if pool is not None:
                got = prefill_pool(pool, self.performance.load, ttft_budget_ms=self.budgets.prefill_ttft_ms)
                best = _cheaper(best, worker.choice(ctx, caps[0], got)) if got.serves else best
        return best

    def decode(self, degrees: list[int], caps: list[int]) -> PoolChoice | None:
        best = None
        for worker in self.workers(degrees):
            best = self._decode_ladder(worker, caps, best)
        return best

    def _decode_ladder(self, worker: PoolWorker, caps: list[int], best: PoolChoice | None) -> PoolChoice | None:
        """`worker`'s batch caps in order, stopped once a doubled cap carries under LADDER_GAIN more."""
        rate, sla, ctx = 0.0, self.performance.sla, self.context
        for cap in caps:
            pool = worker.setup(ctx, cap)
            if pool is None:
                break
            got = decode_pool(
                pool,
                self.performance.load,
                ttft_budget_ms=self.budgets.decode_ttft_ms,
                tpot_limit_ms=sla.tpot_p99_ms,
                longest_prompt=self.performance.traffic.longest_prompt_tokens,
            )
            if got.serves:
                best = _cheaper(best, worker.choice(ctx, cap, got))
            if rate > 0 and got.requests_per_s < rate * LADDER_GAIN:
                break
            rate = max(rate, got.requests_per_s)
        return best


def pool_cost(
    prefill_accel: Accelerator, decode_accel: Accelerator, prefill_gpus: int, decode_gpus: int
) -> float | None:
    """$/month of the two pools, each at its own GPU's hourly price (None: a GPU without a price)."""
    p, d = prefill_accel.price_per_hour_usd, decode_accel.price_per_hour_usd
    if p is None or d is None:
        return None
    if prefill_accel.key == decode_accel.key:  # one GPU type: its price times all the GPUs, as it always was
        return p * (prefill_gpus + decode_gpus) * HOURS_PER_MONTH
    return (p * prefill_gpus + d * decode_gpus) * HOURS_PER_MONTH


def pooled_row(
    pools: _Pools, link: Link, prefill: PoolChoice, decode: PoolChoice, decode_accel: Accelerator | None = None
) -> DisaggregatedRow:
    """The row of `prefill` (on `pools`' GPU) and `decode` (on `decode_accel`, default the same GPU) over `link`."""
    performance, accel = pools.performance, pools.accel
    decode_accel = decode_accel or accel
    credit = credited_transfer(
        performance.shape,
        performance.load,
        engine=pools.engine,
        longest_prompt=performance.traffic.longest_prompt_tokens,
        link=link,
        kv_cache_dtype=pools.kv,
        prefill_tp=prefill.tensor_parallel,
        decode_tp=decode.tensor_parallel,
        decode_hit_rate=decode.estimate.prefix_hit_rate,
        allow_credit=pools.budgets.credited,
    )
    transfer_ms = credit.transfer.seconds * 1e3
    sent = f"; {credit.detail()}" if credit.detail() else ""
    p, d = prefill.estimate, decode.estimate
    where = "" if decode_accel.key == accel.key else f"prefill on {accel.key}, decode on {decode_accel.key}; "
    return DisaggregatedRow(
        hardware=accel.key,
        precision=pools.precision,
        method=pools.method.name,
        link=link.name,
        engine=pools.engine,
        kv_cache_dtype=pools.kv,
        prefill=prefill,
        decode=decode,
        transfer_ms=transfer_ms,
        gpus=p.gpus + d.gpus,
        usd_per_month=pool_cost(accel, decode_accel, p.gpus, d.gpus),
        ttft_p99_ms=p.ttft_p99_ms + transfer_ms + d.ttft_p99_ms,
        ttft_p99_high_ms=p.ttft_p99_high_ms + transfer_ms + d.ttft_p99_high_ms,
        tpot_p99_ms=d.tpot_p99_ms,
        tpot_p99_high_ms=d.tpot_p99_high_ms,
        provenance=d.provenance.extended(
            f"{where}{_layouts(prefill, decode)}with {p.provenance.detail}; KV transfer {transfer_ms:.2f} ms over "
            f"{link.name} ({link.source[:80]}){sent}"
        ),
        prefill_hardware=accel.key,
        decode_hardware=decode_accel.key,
    )


def _layouts(prefill: PoolChoice, decode: PoolChoice) -> str:
    """Each pool's layout, where one is expert-parallel (tensor-parallel pools say nothing new)."""
    if prefill.expert_parallel == 1 and decode.expert_parallel == 1:
        return ""
    return f"prefill workers {prefill.layout}, decode workers {decode.layout}; "


def _degree_groups(engine: str, performance: PerformanceEvaluator, degrees: list[int]) -> list[list[int]]:
    """The degrees the two pools choose from together: all of them, or one at a time where `engine` transfers KV
    only between equal TP sizes (``equal_pool_tp_reason``)."""
    shape = performance.shape
    window = shape.attention is not None and bool(shape.attention.window) and shape.attention.n_window_layers > 0
    if equal_pool_tp_reason(engine, window_layers=window, latent_kv=shape.latent_kv) is None:
        return [degrees]
    return [[d] for d in degrees]


#: One pool pairing's key: engine, KV cache dtype, and the one degree both pools share (() when they need not).
PoolKey = tuple[str, str, tuple[int, ...]]


@dataclass(frozen=True, slots=True)
class PoolOptions:
    """One GPU's cheapest prefill and decode pools at one precision, per engine, KV dtype and degree group: what a
    same-GPU row pairs on this GPU and a mixed row pairs with another GPU's (None: no pool meets its budget)."""

    accel: Accelerator
    precision: str
    method: QuantScheme
    link: Link
    choices: dict[PoolKey, tuple[_Pools, PoolChoice | None, PoolChoice | None]]


def pool_options(
    performance: PerformanceEvaluator,
    accel: Accelerator,
    precision: str,
    method: QuantScheme,
    *,
    link: Link,
    scope: PlanScope | None = None,
    decode_always: bool = False,
    expert_parallel: ExpertParallelPools | None = None,
) -> PoolOptions:
    """Each engine, KV dtype and degree group's cheapest prefill and decode pools on `accel` (the decode pool only
    where a prefill pool serves, unless `decode_always`: a mixed pair decodes here what another GPU prefills); with
    `expert_parallel`, each pool may also take an expert-parallel worker (``pool_workers.py``), whichever needs
    fewer GPUs."""
    scope = scope or PlanScope()
    degrees = scope.degrees(accel.max_tensor_parallel)
    caps = list(scope.batch_sizes) or batch_ladder(performance.engines, DEFAULT_MAX_BATCHED_TOKENS)
    ep = [] if expert_parallel is None else expert_parallel.workers(performance, accel, scope)
    choices: dict[PoolKey, tuple[_Pools, PoolChoice | None, PoolChoice | None]] = {}
    for engine in performance.engines:
        for kv in scope.kv_cache_dtypes:
            budgets = _budgets(performance, link, kv, engine)
            if budgets.prefill_ttft_ms <= 0:
                continue
            pools = _Pools(performance, accel, method, precision, engine, kv, budgets)
            groups = _degree_groups(engine, performance, degrees)
            for together in groups:  # equal degrees where the engine needs it (an EP worker's attention width)
                key = (engine, kv, tuple(together) if len(groups) > 1 else ())
                mine = tuple(w for w in ep if len(groups) == 1 or w.attention_tp in together)
                choices[key] = _group_pools(replace(pools, expert_parallel=mine), link, together, caps, decode_always)
    return PoolOptions(accel, precision, method, link, choices)


def _group_pools(
    pools: _Pools, link: Link, degrees: list[int], caps: list[int], decode_always: bool
) -> tuple[_Pools, PoolChoice | None, PoolChoice | None]:
    """The cheapest prefill and decode pools over `degrees`; chosen again without the decode side's prefix credit
    where the simulated decode pool holds less of the shared prefixes than the TTFT split assumed (its transfer
    would outgrow its budget)."""
    prefill = pools.prefill(degrees, caps)
    decode = pools.decode(degrees, caps) if prefill is not None or decode_always else None
    if prefill is None or decode is None or not pools.budgets.credited:
        return pools, prefill, decode
    row = pooled_row(pools, link, prefill, decode)
    if (row.transfer_ms or 0.0) <= pools.budgets.transfer_ms * (1 + 1e-9):
        return pools, prefill, decode
    whole = _budgets(pools.performance, link, pools.kv, pools.engine, credit=False)
    if whole.prefill_ttft_ms <= 0:
        return pools, None, None
    return _group_pools(replace(pools, budgets=whole), link, degrees, caps, decode_always)


def same_gpu_row(options: PoolOptions) -> DisaggregatedRow:
    """The fewest GPUs of prefill + decode pools on the options' one GPU (ties: the first engine, KV dtype, group)."""
    best: DisaggregatedRow | None = None
    for pools, prefill, decode in options.choices.values():
        if prefill is None or decode is None:
            continue
        row = pooled_row(pools, options.link, prefill, decode)
        if best is None or (row.gpus or math.inf) < (best.gpus or math.inf):
            best = row
    if best is None:
        return DisaggregatedRow(
            options.accel.key,
            options.precision,
            options.method.name,
            options.link.name,
            note="no prefill and decode pools meet the SLA (or fit) on this GPU",
        )
    return best


def plan_disaggregated(
    performance: PerformanceEvaluator,
    accel: Accelerator,
    precision: str,
    method: QuantScheme,
    *,
    link: Link,
    scope: PlanScope | None = None,
    expert_parallel: ExpertParallelPools | None = None,
) -> DisaggregatedRow:
    """The cheapest prefill + decode pools of `accel` at `precision` for the evaluator's traffic and SLA, over
    every engine and KV cache dtype in scope (one of each for both pools), each pool tensor- or (with
    `expert_parallel`) expert-parallel."""
    options = pool_options(
        performance, accel, precision, method, link=link, scope=scope, expert_parallel=expert_parallel
    )
    return same_gpu_row(options)
