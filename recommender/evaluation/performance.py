"""The speed half of a candidate's evaluation: can it run, does it fit, how fast, what it costs.

One pipeline for `recommender search` and `recommender plan`: the runnable check, the memory
plan, the step-cost model (calibrated per engine on a catalog entry, every launching engine tried;
probes measured here for the local device), the continuous-batching simulation and the price.
`plan` is this without quality, so the two commands cannot drift apart.

Runnable means servable as measured: an evaluation-only scheme, or one none of the spec's engines launches on
the device (each engine's `kernels`: compute capability, vendor, kernel), is pruned before anything loads,
with the engines checked and the fix; those that launch it travel with the result (ties prefer more of them),
and the least load peak among them sizes the memory check.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import TYPE_CHECKING

from recommender.config.candidate import Candidate
from recommender.config.spec import LOCAL_DEVICE, LatencySLA, LocalDevice, Traffic
from recommender.config.traffic import traffic_load
from recommender.decision.cost import CostEstimate, estimate_cost
from recommender.device import DeviceInfo, local_memory_gb
from recommender.engines import DEFAULT_ENGINES, PROFILES, evaluation_only
from recommender.engines.eligibility import Eligibility, eligibility
from recommender.errors import MethodUnavailableError
from recommender.evaluation.batch_caps import engines_for, unheld_cap
from recommender.evaluation.candidate import CONSTRAINT_KEYS, CandidateResult
from recommender.evaluation.speculation import SpeculationSource, speculation_for
from recommender.paths import cache_root
from recommender.perf.catalog.architecture_check import tensor_parallel_refusal
from recommender.perf.catalog.gpus import Accelerator, Catalog
from recommender.perf.model.memory import DEFAULT_GPU_MEMORY_UTILIZATION, MemoryFit, plan_memory
from recommender.perf.model.shape import ModelShape
from recommender.perf.probe import ProbeResult, probe
from recommender.perf.sim.physics_capacity import physics_capacity
from recommender.perf.sim.scheduler import SchedulerConfig
from recommender.perf.sim.serving import (
    ServingEstimate,
    TrafficLoad,
    simulate_serving,
    simulate_serving_interval,
)
from recommender.perf.step.calibrated import CalibratedModel, shipped_model
from recommender.perf.step.cost import StepCostModel, TableStepCost
from recommender.perf.step.features import FeatureStepCost
from recommender.provenance import Provenance
from recommender.quantize import QuantMethod, get_method

if TYPE_CHECKING:
    from recommender.models.cache import ModelCache
    from recommender.perf.sim.speculative import SpeculativeDecoding

#: Fraction of accelerator memory the serving engine may use (vLLM's default gpu_memory_utilization).
GPU_MEMORY_UTILIZATION = DEFAULT_GPU_MEMORY_UTILIZATION


def pruned(c: Candidate, key: str, why: str, memory: MemoryFit | None = None) -> CandidateResult:
    """A candidate refused before anything ran: `key` is the constraint it breaks."""
    constraints = {k: 0.0 for k in CONSTRAINT_KEYS} | {key: 1.0}
    return CandidateResult(c, "pruned", constraints, [f"{key}: {why}"], memory=memory)


@dataclass(frozen=True)
class LocalMeasurement:
    """What measuring the local device needs: its models, the batch sizes probed, its price."""

    models: ModelCache
    batch_sizes: list[int]
    price: LocalDevice


@dataclass(frozen=True)
class Setup:
    """A candidate that passed the runnable and memory checks, ready to simulate."""

    method: QuantMethod
    step_cost: StepCostModel
    scheduler: SchedulerConfig
    price_per_hour_usd: float | None  # None: a GPU the price set does not price (`require_price` off: `plan`)
    price_source: str
    memory: MemoryFit
    probe: ProbeResult | None
    engines: tuple[str, ...] = ()
    #: The named price set the hourly price comes from ("hardware_catalog": a contract price; "local_device").
    price_set: str = ""
    #: The engine whose calibrated step cost `step_cost` is ('' for the local device's measured steps).
    engine: str = ""
    #: Speculative decoding at its measured acceptance (None: none).
    speculation: SpeculativeDecoding | None = None


@dataclass(frozen=True)
class Performance:
    """The serving estimate and the price of a candidate that runs and fits (no price: `cost` None)."""

    setup: Setup
    serving: ServingEstimate
    cost: CostEstimate | None


def speed_result(c: Candidate, perf: Performance, sla: LatencySLA) -> CandidateResult:
    """The candidate judged on speed, memory and cost alone; its quality still unknown (constraint 1)."""
    serving = perf.serving
    constraints = {
        "runnable": 0.0,
        "memory": perf.setup.memory.constraint,
        "quality": 1.0,
        "ttft": serving.ttft_p99_checked_ms / sla.ttft_p99_ms - 1.0,
        "tpot": serving.tpot_p99_checked_ms / sla.tpot_p99_ms - 1.0,
    }
    at = "" if serving.confidence is None else f" (upper end at {serving.confidence:.0%} confidence)"
    broken = []
    if constraints["ttft"] > 0:
        broken.append(f"ttft: P99 {serving.ttft_p99_checked_ms:.1f} ms{at} > SLA {sla.ttft_p99_ms:g} ms")
    if constraints["tpot"] > 0:
        broken.append(f"tpot: P99 {serving.tpot_p99_checked_ms:.2f} ms{at} > SLA {sla.tpot_p99_ms:g} ms")
    return CandidateResult(
        candidate=c,
        status="evaluated",
        constraints=constraints,
        broken=broken,
        serving=serving,
        cost=perf.cost,
        memory=perf.setup.memory,
        probe=perf.setup.probe,
        # The engine the figures are for comes first: the recommendation names it.
        engines=tuple(sorted(perf.setup.engines, key=lambda e: e != perf.setup.engine)),
    )


@dataclass
class PerformanceEvaluator:
    """Speed and cost of candidates for one traffic profile and SLA; probes cached per (method, batch).

    `engines`: the serving engines the spec would run (a candidate counts where one launches it).
    `require_price`: prune a GPU the price set does not price (the search can never recommend it); `plan` turns
    it off to show such a GPU's fit, latency and capacity, with no cost (`Performance.cost` None).
    """

    catalog: Catalog
    shape: ModelShape
    traffic: Traffic
    sla: LatencySLA
    local: LocalMeasurement | None = None
    engines: tuple[str, ...] = DEFAULT_ENGINES
    require_price: bool = True
    #: Measures speculative methods' acceptance (the search; None: a command without the model prunes them).
    speculation: SpeculationSource | None = None
    #: Whether replicas keep computed prefixes (every engine's default; False: the lever off, for comparison).
    cache_prefixes: bool = True
    #: Whether every candidate's P99s at its load settle (``perf/sim/settle.py``); False: one first run's, for a
    #: caller that ranks by capacity alone and settles what it shows (``settled``: `plan`).
    settle_at_load: bool = True
    calibrated: CalibratedModel = field(default_factory=lambda: shipped_model(cache_root() / "kernel_tables"))
    _probes: dict[tuple[str, int], ProbeResult] = field(default_factory=dict)
    _performances: dict[Candidate, CandidateResult | Performance] = field(default_factory=dict, init=False, repr=False)

    @cached_property
    def load(self) -> TrafficLoad:
        """The spec's traffic as the simulator draws it."""
        return replace(traffic_load(self.traffic), cache_prefixes=self.cache_prefixes)

    @property
    def probes_run(self) -> int:
        return len(self._probes)

    def evaluate(self, c: Candidate) -> CandidateResult:
        """The pruned result, or the candidate judged on speed, memory and cost (its quality still unknown)."""
        performance = self.performance(c)
        return performance if isinstance(performance, CandidateResult) else speed_result(c, performance, self.sla)

    def settled(self, c: Candidate) -> CandidateResult:
        """`c` evaluated with its P99s at the load settled, whatever `settle_at_load` says (the same capacity: the
        search replays the same requests)."""
        if self.settle_at_load:
            return self.evaluate(c)
        return replace(self, settle_at_load=True, _probes=self._probes).evaluate(c)

    def performance(self, c: Candidate) -> CandidateResult | Performance:
        """The pruned result, or the candidate's serving estimate and price: computed once per candidate (the
        search, its GPU mix and the load curve all ask; each answer simulates every launching engine)."""
        if c not in self._performances:
            self._performances[c] = self._performance(c)
        return self._performances[c]

    def _performance(self, c: Candidate) -> CandidateResult | Performance:
        setup = self.setup(c)
        if isinstance(setup, CandidateResult):
            return setup
        setup, serving = self._fastest_engine(c, setup)
        if c.hardware != LOCAL_DEVICE:  # the datasheet's throughput ceiling beside the calibrated capacity
            t, accel = self.traffic, self.catalog.get(c.hardware)
            ceiling = physics_capacity(self.shape, setup.method, accel, tensor_parallel=c.tensor_parallel,
                                       prompt_tokens=t.prompt_tokens, output_tokens=t.output_tokens,
                                       max_num_seqs=c.batch_size, kv_cache_dtype=c.kv_cache_dtype,
                                       max_num_batched_tokens=c.max_num_batched_tokens)  # fmt: skip
            serving = replace(serving, physics_rps_per_replica=ceiling.requests_per_s)
        cost = None
        if serving.requests_per_s > 0 and setup.price_per_hour_usd is not None:  # else no capacity or no price
            cost = estimate_cost(
                price_per_hour_usd=setup.price_per_hour_usd, price_source=setup.price_source, price_set=setup.price_set,
                tensor_parallel=c.tensor_parallel, replica_tokens_per_s=serving.tokens_per_s,
                replica_requests_per_s=serving.requests_per_s, target_requests_per_s=self.traffic.requests_per_second,
            )  # fmt: skip
        return Performance(setup, serving, cost)

    def _fastest_engine(self, c: Candidate, setup: Setup) -> tuple[Setup, ServingEstimate]:
        """The engine among those that launch `c` whose calibrated replica carries the most within the SLA.

        The engine is a search dimension evaluated exhaustively: it leaves quality alone and a simulation costs
        milliseconds, so every launching engine is simulated. The local device keeps its measured step times.
        """
        if setup.probe is not None or c.hardware == LOCAL_DEVICE:
            return setup, simulate_serving(setup.step_cost, setup.scheduler, traffic=self.load, sla=self.sla,
                                           speculation=setup.speculation, settle_at_load=self.settle_at_load)
        accel = self.catalog.get(c.hardware)
        best: tuple[Setup, ServingEstimate] | None = None
        for engine in setup.engines or self.engines[:1]:
            for_engine = setup if engine == setup.engine else self._for_engine(c, setup, accel, engine)
            serving = self._calibrated_serving(for_engine, engine)
            if best is None or serving.requests_per_s > best[1].requests_per_s:
                best = (for_engine, serving)
        assert best is not None
        return best

    def _for_engine(self, c: Candidate, setup: Setup, accel: Accelerator, engine: str) -> Setup:
        """`setup` served by `engine`: its calibrated step cost on `accel` and its batching."""
        # From the launched budget: the first engine's batching may have capped `setup.scheduler`'s.
        launched = replace(setup.scheduler, max_num_batched_tokens=max(c.max_num_batched_tokens, c.batch_size))
        return replace(setup, step_cost=self._engine_cost(c, setup.method, accel, engine),
                       scheduler=PROFILES[engine].batching(launched), engine=engine)  # fmt: skip

    def _engine_cost(self, c: Candidate, method: QuantMethod, accel: Accelerator, engine: str) -> StepCostModel:
        return self.calibrated.step_cost(
            self.shape, method, accel, engine, tensor_parallel=c.tensor_parallel, kv_cache_dtype=c.kv_cache_dtype
        )

    def simulated_sla(self, engine: str, cost: StepCostModel | None = None) -> LatencySLA:
        """The P99s a simulation of `engine`'s steps must meet for the spec's SLA to hold: the SLA less the TTFT's
        fixed request overhead (the steps' uncertainty is in ``checked_step_cost``, not here). The local device
        (no engine) is checked against the SLA itself."""
        if not engine:
            return self.sla
        ttft_budget = self.sla.ttft_p99_ms - self.request_overhead_ms(engine, cost)
        return self.sla.model_copy(update={"ttft_p99_ms": max(ttft_budget, 1e-3)})

    def request_overhead_ms(self, engine: str, cost: StepCostModel | None) -> float:
        """The TTFT's fixed request overhead of the fit `cost` stands on (kernel tables or datasheet)."""
        point = cost if isinstance(cost, FeatureStepCost) else None
        return self.calibrated.request_overhead_ms(engine, point)

    def checked_step_cost(self, cost: StepCostModel, engine: str) -> StepCostModel:
        """The step cost the SLA check simulates the user's traffic with: on a calibrated GPU, every step at the
        upper end of its one-sided interval at the SLA's confidence (prefill and decode apart,
        ``CalibratedModel.step_factors``); the local device's measured steps as they are."""
        if not engine or not isinstance(cost, FeatureStepCost):
            return cost
        return self.calibrated.upper_step_cost(cost, engine, self.sla.confidence)

    def chosen_setup(self, c: Candidate) -> CandidateResult | Setup:
        """`c`'s setup with the engine the evaluation picked (its calibrated step cost and batching)."""
        performance = self.performance(c)
        return performance if isinstance(performance, CandidateResult) else performance.setup

    def _calibrated_serving(self, setup: Setup, engine: str) -> ServingEstimate:
        """Capacity and the P99s' upper ends with the steps at their intervals' upper ends; point P99s beside."""
        return simulate_serving_interval(
            setup.step_cost, self.checked_step_cost(setup.step_cost, engine), setup.scheduler, traffic=self.load,
            sla=self.simulated_sla(engine, setup.step_cost), engine=engine, confidence=self.sla.confidence,
            ttft_offset_ms=self.request_overhead_ms(engine, setup.step_cost), speculation=setup.speculation,
            settle_at_load=self.settle_at_load,
        )  # fmt: skip

    def setup(self, c: Candidate) -> CandidateResult | Setup:
        """The pruned result, or what evaluating `c` needs: its step-cost model, scheduler, price, memory."""
        method = get_method(c.method)
        accel = None if c.hardware == LOCAL_DEVICE else self.catalog.get(c.hardware)
        refused = self._refusal(c, method, accel)
        speculating = refused if isinstance(refused, str) else speculation_for(c, method, refused, self.speculation)
        if isinstance(speculating, str):
            return pruned(c, "runnable", speculating)
        served, speculation = speculating
        memory = plan_memory(
            self.shape,
            method,
            device_gb=local_memory_gb() if accel is None else accel.device_memory_gb,
            memory_utilization=GPU_MEMORY_UTILIZATION,
            tensor_parallel=c.tensor_parallel,
            max_num_batched_tokens=c.max_num_batched_tokens,
            max_num_seqs=c.batch_size,
            kv_cache_dtype=c.kv_cache_dtype,
            load_bits_per_weight=served.load_bits_per_weight,
        )
        # A catalog GPU needs room for one request; the scheduler caps concurrency at the KV
        # cache. The local probe really runs the whole batch, so there all of it must fit.
        context = self.traffic.longest_prompt_tokens + self.traffic.output_tokens
        must_fit = c.batch_size if accel is None else 1
        fit = MemoryFit(memory.needed_gb(must_fit, context), memory.usable_gb)
        shortfall = memory.shortfall(must_fit, context)
        if shortfall is not None:
            return pruned(c, "memory", shortfall, fit)
        if accel is not None:  # the engines that run this cap and KV dtype; a cap the KV cache never fills
            kept, why = engines_for(c, served.engines, accel.device)
            if not kept:
                return pruned(c, "runnable", f"no engine runs it on {accel.key}: {why}")
            served = replace(served, engines=kept)
            if not self.load.shares_prompts and (unheld := unheld_cap(c.batch_size, memory.kv_cache_tokens,
                                                                      self.traffic.prompt_tokens)):  # fmt: skip
                return pruned(c, "memory", unheld, fit)
        scheduler = SchedulerConfig(
            kv_cache_tokens=memory.kv_cache_tokens,
            max_num_seqs=c.batch_size,
            max_num_batched_tokens=max(c.max_num_batched_tokens, c.batch_size),
        )
        if accel is not None:
            hourly = accel.price_per_hour_usd  # None only when `require_price` is off (_refusal prunes it otherwise)
            # The first launching engine's calibrated cost and batching; `performance` tries every launching engine.
            engine = (served.engines or self.engines)[0]
            cost, batching = self._engine_cost(c, method, accel, engine), PROFILES[engine].batching(scheduler)
            return Setup(method, cost, batching, hourly, accel.price_note, fit, None, served.engines,
                         price_set=accel.price_set, engine=engine, speculation=speculation)  # fmt: skip
        assert self.local is not None  # _refusal prunes local candidates without a local measurement
        try:
            table, own = self._measured_step_cost(c, self.local)
        except MethodUnavailableError as exc:
            return pruned(c, "runnable", str(exc))
        local = self.local.price
        return Setup(method, table, scheduler, local.price_per_hour_usd, local.price_source, fit, own, served.engines,
                     price_set="local_device", speculation=speculation)  # fmt: skip

    def device_of(self, c: Candidate) -> DeviceInfo | None:
        """The device `c` would be served on: its catalog GPU, or this machine's device (None if not measured)."""
        if c.hardware != LOCAL_DEVICE:
            return self.catalog.get(c.hardware).device
        return None if self.local is None else self.local.models.device

    def _refusal(self, c: Candidate, method: QuantMethod, accel: Accelerator | None) -> str | Eligibility:
        """Why `c` cannot run at all (serving engines, device, KV dtype, tensor-parallel degree), or who serves it."""
        if evaluation_only(method):
            return (
                f"{method.name} is evaluation only: no serving engine launches it as it was evaluated "
                "(`recommender eval` scores it; pick a scheme an engine serves to get a recommendation)"
            )
        if accel is None:
            return self._local_refusal(c, method)
        served = eligibility(method, accel.device, self.engines, self.shape.head_dim)
        if not served.launchable:
            return served.reason(accel.key)
        if c.tensor_parallel > accel.max_tensor_parallel:
            return f"tensor_parallel {c.tensor_parallel} > {accel.max_tensor_parallel} devices per node"
        if (split := tensor_parallel_refusal(self.shape, c.tensor_parallel)) is not None:
            return f"tensor_parallel {c.tensor_parallel}: {split}"
        return (self.catalog.price_refusal(accel.key) if self.require_price else None) or served

    def _local_refusal(self, c: Candidate, method: QuantMethod) -> str | Eligibility:
        """Why `c` cannot be measured and served on this machine, or who serves it here."""
        if self.local is None:
            return "the local device is not measured in this command (architecture-only projection)"
        device = self.local.models.device
        reason = method.unavailable_reason(device)
        if reason is not None:
            return reason
        served = eligibility(method, device, self.engines, self.shape.head_dim)
        if not served.launchable:
            return served.reason(f"{LOCAL_DEVICE} ({device.label})")
        if c.kv_cache_dtype != "auto":
            return (
                f"kv_cache_dtype {c.kv_cache_dtype}: the local probe (transformers) has no fp8 KV "
                "storage to time; its quality is measured, its speed only modeled on catalog GPUs"
            )
        if c.tensor_parallel > 1:
            return f"tensor_parallel {c.tensor_parallel} > 1 devices per node"
        return served

    def _probe(self, local: LocalMeasurement, method: str, batch_size: int) -> ProbeResult:
        key = (method, batch_size)
        if key not in self._probes:
            model = local.models.get(get_method(method))
            self._probes[key] = probe(model, prompt_tokens=self.traffic.prompt_tokens, batch_size=batch_size)
        return self._probes[key]

    def _measured_step_cost(self, c: Candidate, local: LocalMeasurement) -> tuple[TableStepCost, ProbeResult]:
        """Step times measured here at batch 1, every searched batch size up to the candidate's, and its own: the
        simulator's decode steps run at every batch size up to ``max_num_seqs``, interpolated between them."""
        sizes = sorted({1, c.batch_size} | {b for b in local.batch_sizes if b <= c.batch_size})
        probes = [self._probe(local, c.method, b) for b in sizes]
        own = probes[-1]
        table = TableStepCost(
            prefill={self.traffic.prompt_tokens: statistics.median(p.prefill_s for p in probes)},
            decode={p.batch_size: p.decode_step_s for p in probes},
            provenance=Provenance(
                "calibrated",
                f"step times measured on {own.provenance.detail}; decode measured at batch sizes {sizes}, "
                "interpolated between them; latency simulated",
            ),
        )
        return table, own
