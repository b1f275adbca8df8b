"""The speed half of a candidate's evaluation: can it run, does it fit, how fast, what it costs.

One pipeline for `recommender search` and `recommender plan`: the runnable check, the memory
plan, the step-cost model (calibrated per engine on a catalog entry, every launching engine tried;
probes measured here for the local device), the continuous-batching simulation and the price.
`plan` is this without quality, so the two commands cannot drift apart.

Runnable means servable as measured: an evaluation-only scheme, or one none of the spec's engines launches on
the device (each engine's `kernels`: compute capability, vendor, kernel), is pruned before anything loads,
with the engines checked and the fix; those that launch it travel with the result (ties prefer more of them),
and the least load peak among them sizes the memory check. A check that fails raises `Refused` (``refusal.py``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import TYPE_CHECKING

from recommender.config.candidate import Candidate
from recommender.config.spec import LOCAL_DEVICE, LatencySLA, Traffic
from recommender.config.traffic import traffic_load
from recommender.device import DeviceInfo, local_memory_gb
from recommender.engines import DEFAULT_ENGINES, PROFILES, evaluation_only
from recommender.engines.eligibility import Eligibility, eligibility
from recommender.errors import SchemeUnavailableError
from recommender.evaluation.batch_caps import engines_for, unheld_cap
from recommender.evaluation.candidate import CandidateResult
from recommender.evaluation.fitted import FittedCandidate
from recommender.evaluation.local_device import LocalMeasurement, Probes, local_eligibility, measured_step_cost
from recommender.evaluation.refusal import Refused
from recommender.evaluation.speculation import SpeculationSource, speculation_for
from recommender.evaluation.speed import Performance, Setup, speed_result
from recommender.paths import cache_root
from recommender.perf.catalog.architecture_check import tensor_parallel_refusal
from recommender.perf.catalog.gpus import Accelerator, Catalog
from recommender.perf.model.memory import DEFAULT_GPU_MEMORY_UTILIZATION, MemoryFit, plan_memory
from recommender.perf.model.shape import ModelShape
from recommender.perf.pricing import estimate_cost
from recommender.perf.sim.physics_capacity import physics_capacity
from recommender.perf.sim.scheduler import SchedulerConfig
from recommender.perf.sim.serving import (
    ServingEstimate,
    TrafficLoad,
    simulate_serving,
    simulate_serving_interval,
)
from recommender.perf.sim.settle import AT_LOAD_MAX_REQUESTS, MAX_REQUESTS
from recommender.perf.step.calibrated import CalibratedModel, shipped_model
from recommender.perf.step.cost import StepCostModel
from recommender.perf.step.features import FeatureStepCost
from recommender.quantize import QuantScheme

if TYPE_CHECKING:
    pass

#: Fraction of accelerator memory the serving engine may use (vLLM's default gpu_memory_utilization).
GPU_MEMORY_UTILIZATION = DEFAULT_GPU_MEMORY_UTILIZATION


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
    calibrated: CalibratedModel = field(default_factory=lambda: shipped_model(cache_root() / "kernel_tables"))
    #: The release predicted per engine (a spec's ``engine_releases``, `--engine-release`); absent: the current one.
    engine_releases: Mapping[str, str] = field(default_factory=dict)
    #: The most requests every candidate's P99s at its load may take to settle (``perf/sim/settle.py``): the search
    #: ranks on P99s settled within ``MAX_REQUESTS`` and settles what it shows further (``settled``); 0: one first
    #: run's, for a caller that ranks by capacity alone and settles what it shows (`plan`).
    settle_within: int = MAX_REQUESTS
    _probes: Probes = field(default_factory=dict)
    #: Each candidate's performance, or its refusal (raised again when asked again).
    _performances: dict[Candidate, Performance | Refused] = field(default_factory=dict, init=False, repr=False)

    @cached_property
    def load(self) -> TrafficLoad:
        """The spec's traffic as the simulator draws it."""
        return replace(traffic_load(self.traffic), cache_prefixes=self.cache_prefixes)

    @property
    def probes_run(self) -> int:
        return len(self._probes)

    def evaluate(self, c: Candidate) -> CandidateResult:
        """The candidate judged on speed, memory and cost (its quality still unknown), or pruned (`Refused`)."""
        try:
            performance = self.performance(c)
        except Refused as refused:
            return refused.result(c)
        return speed_result(c, performance, self.sla)

    def settled(self, c: Candidate, within: int = AT_LOAD_MAX_REQUESTS) -> CandidateResult:
        """`c` evaluated with its P99s at the load settled within `within` requests, as a configuration shown is
        (`plan`'s rows, the search's winner and current deployment): only the engine its evaluation picked is
        simulated again (the capacity search's runs do not depend on `within`: the same requests are replayed; its
        answer is lowered, and the price raised, only where the P99s at it do not settle within `within`, whatever the
        target rate: ``serving._settled_capacity``)."""
        if self.settle_within >= within:
            return self.evaluate(c)
        try:
            perf = self.performance(c)
        except Refused as refused:
            return refused.result(c)
        if self.settle_within and perf.serving.p99s_settled is not False and perf.serving.capacity_settled is not False:
            # Settled within the smaller cap, at the load and at the capacity (or no load simulated): a larger one
            # makes the same runs to the same end. Whether the capacity is lowered must not hang on the load alone.
            return self.evaluate(c)
        # The setup the evaluation built, step costs included: a probed device's steps are not timed again.
        settling = replace(self, settle_within=within, _probes=self._probes)
        if perf.setup.probe is not None or c.hardware == LOCAL_DEVICE:
            serving = settling._measured_serving(perf.setup)
        else:
            serving = settling._calibrated_serving(perf.setup, perf.setup.engine)
        serving = replace(serving, physics_rps_per_replica=perf.serving.physics_rps_per_replica)
        # Priced again: a shown configuration whose capacity was lowered (P99s settled only lower) takes more replicas.
        return speed_result(c, self._priced(c, perf.setup, serving), self.sla)

    def performance(self, c: Candidate) -> Performance:
        """The candidate's serving estimate and price, computed once per candidate (the search, its GPU mix and the
        load curve all ask; each answer simulates every launching engine); `Refused` where it cannot run or fit."""
        if c not in self._performances:
            try:
                self._performances[c] = self._performance(c)
            except Refused as refused:
                self._performances[c] = refused
        if isinstance(found := self._performances[c], Refused):
            raise found.with_traceback(None)  # a fresh traceback each time: the stored one would grow
        return found

    def _performance(self, c: Candidate) -> Performance:
        setup, serving = self._fastest_engine(c, self.setup(c))
        if c.hardware != LOCAL_DEVICE:  # the datasheet's throughput ceiling beside the calibrated capacity
            t, accel = self.traffic, self.catalog.get(c.hardware)
            ceiling = physics_capacity(
                self.shape,
                setup.method,
                accel,
                tensor_parallel=c.tensor_parallel,
                prompt_tokens=t.prompt_tokens,
                output_tokens=t.output_tokens,
                max_num_seqs=c.batch_size,
                kv_cache_dtype=c.kv_cache_dtype,
                max_num_batched_tokens=c.max_num_batched_tokens,
            )
            serving = replace(serving, physics_rps_per_replica=ceiling.requests_per_s)
        return self._priced(c, setup, serving)

    def _priced(self, c: Candidate, setup: Setup, serving: ServingEstimate) -> Performance:
        """`serving` priced per month at the spec's traffic (no cost: no capacity, or no price)."""
        cost = None
        if serving.requests_per_s > 0 and setup.price_per_hour_usd is not None:  # else no capacity or no price
            cost = estimate_cost(
                price_per_hour_usd=setup.price_per_hour_usd,
                price_source=setup.price_source,
                price_set=setup.price_set,
                tensor_parallel=c.tensor_parallel,
                replica_tokens_per_s=serving.tokens_per_s,
                replica_requests_per_s=serving.requests_per_s,
                target_requests_per_s=self.traffic.requests_per_second,
            )
        return Performance(setup, serving, cost)

    def _fastest_engine(self, c: Candidate, setup: Setup) -> tuple[Setup, ServingEstimate]:
        """The engine among those that launch `c` whose calibrated replica carries the most within the SLA.

        The engine is a search dimension evaluated exhaustively: it leaves quality alone and a simulation costs
        milliseconds, so every launching engine is simulated. The local device keeps its measured step times.
        """
        if setup.probe is not None or c.hardware == LOCAL_DEVICE:
            return setup, self._measured_serving(setup)
        accel = self.catalog.get(c.hardware)
        best: tuple[Setup, ServingEstimate] | None = None
        for engine in setup.engines or self.engines[:1]:
            for_engine = setup if engine == setup.engine else self._for_engine(c, setup, accel, engine)
            serving = self._calibrated_serving(for_engine, engine)
            if best is None or serving.requests_per_s > best[1].requests_per_s:
                best = (for_engine, serving)
        assert best is not None
        return best

    def _measured_serving(self, setup: Setup) -> ServingEstimate:
        """The user's traffic simulated on the step times measured on the hardware at hand (a probe, the local
        device), checked against the SLA itself."""
        return simulate_serving(
            setup.step_cost,
            setup.scheduler,
            traffic=self.load,
            sla=self.sla,
            speculation=setup.speculation,
            settle_within=self.settle_within,
        )

    def _for_engine(self, c: Candidate, setup: Setup, accel: Accelerator, engine: str) -> Setup:
        """`setup` served by `engine`: its calibrated step cost on `accel` and its batching."""
        # From the launched budget: the first engine's batching may have capped `setup.scheduler`'s.
        launched = replace(setup.scheduler, max_num_batched_tokens=max(c.max_num_batched_tokens, c.batch_size))
        return replace(
            setup,
            step_cost=self._engine_cost(c, setup.method, accel, engine),
            scheduler=PROFILES[engine].batching(launched),
            engine=engine,
        )

    def _engine_cost(self, c: Candidate, method: QuantScheme, accel: Accelerator, engine: str) -> StepCostModel:
        release = self.engine_releases.get(engine)
        return self.calibrated.step_cost(
            self.shape,
            method,
            accel,
            engine,
            tensor_parallel=c.tensor_parallel,
            kv_cache_dtype=c.kv_cache_dtype,
            kv_read_at_cache_width=PROFILES[engine].reads_kv_at_cache_width(release),
            release=release,
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
        return self.calibrated.request_overhead_ms(engine, point, self.engine_releases.get(engine))

    def checked_step_cost(self, cost: StepCostModel, engine: str) -> StepCostModel:
        """The step cost the SLA check simulates the user's traffic with: on a calibrated GPU, every step at the
        upper end of its one-sided interval at the SLA's confidence (prefill and decode apart,
        ``CalibratedModel.step_factors``); the local device's measured steps as they are."""
        if not engine or not isinstance(cost, FeatureStepCost):
            return cost
        return self.calibrated.upper_step_cost(cost, engine, self.sla.confidence)

    def chosen_setup(self, c: Candidate) -> Setup:
        """`c`'s setup with the engine the evaluation picked (its calibrated step cost and batching); `Refused`
        where it cannot run or fit."""
        return self.performance(c).setup

    def _calibrated_serving(self, setup: Setup, engine: str) -> ServingEstimate:
        """Capacity and the P99s' upper ends with the steps at their intervals' upper ends; point P99s beside."""
        return simulate_serving_interval(
            setup.step_cost,
            self.checked_step_cost(setup.step_cost, engine),
            setup.scheduler,
            traffic=self.load,
            sla=self.simulated_sla(engine, setup.step_cost),
            engine=engine,
            confidence=self.sla.confidence,
            ttft_offset_ms=self.request_overhead_ms(engine, setup.step_cost),
            speculation=setup.speculation,
            settle_within=self.settle_within,
        )

    def setup(self, c: Candidate) -> Setup:
        """What evaluating `c` needs: its step-cost model, scheduler, price, memory; `Refused` (with the constraint
        it breaks) where it cannot run or fit."""
        method = c.base_scheme
        accel = None if c.hardware == LOCAL_DEVICE else self.catalog.get(c.hardware)
        served, speculation = speculation_for(c, self._served(c, method, accel), self.speculation)
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
            pool_context=self.traffic.mean_prompt_tokens,
        )
        # A catalog GPU needs room for one request; the scheduler caps concurrency at the KV
        # cache. The local probe really runs the whole batch, so there all of it must fit.
        context = self.traffic.max_model_len
        must_fit = c.batch_size if accel is None else 1
        fit = MemoryFit(memory.needed_gb(must_fit, context), memory.usable_gb)
        shortfall = memory.shortfall(must_fit, context)
        if shortfall is not None:
            raise Refused("memory", shortfall, fit)
        scheduler = SchedulerConfig(
            kv_cache_tokens=memory.kv_cache_tokens,
            max_num_seqs=c.batch_size,
            max_num_batched_tokens=max(c.max_num_batched_tokens, c.batch_size),
        )
        fitted = FittedCandidate(method, served, fit, scheduler, speculation)
        return self._local_setup(c, fitted) if accel is None else self._catalog_setup(c, accel, fitted)

    def _catalog_setup(self, c: Candidate, accel: Accelerator, fitted: FittedCandidate) -> Setup:
        """`c` on a catalog GPU: the engines that run its cap and KV dtype (a cap its KV cache never fills is
        pruned), the first launching engine's calibrated cost and batching (`performance` tries every one)."""
        kept, why = engines_for(c, fitted.served.engines, accel.device)
        if not kept:
            raise Refused("runnable", f"no engine runs it on {accel.key}: {why}")
        kv_cache_tokens = fitted.scheduler.kv_cache_tokens
        if not self.load.shares_prompts and (
            unheld := unheld_cap(c.batch_size, kv_cache_tokens, self.traffic.prompt_tokens)
        ):
            raise Refused("memory", unheld, fitted.fit)
        hourly = accel.price_per_hour_usd  # None only when `require_price` is off (_served refuses it otherwise)
        engine = kept[0]
        cost = self._engine_cost(c, fitted.method, accel, engine)
        return Setup(
            fitted.method,
            cost,
            PROFILES[engine].batching(fitted.scheduler),
            hourly,
            accel.price_note,
            fitted.fit,
            None,
            kept,
            price_set=accel.price_set,
            engine=engine,
            speculation=fitted.speculation,
        )

    def _local_setup(self, c: Candidate, fitted: FittedCandidate) -> Setup:
        """`c` on this machine: its step times measured here (probes cached per scheme and batch size)."""
        assert self.local is not None  # _served refuses local candidates without a local measurement
        try:
            table, own = measured_step_cost(c, self.local, self._probes, prompt_tokens=self.traffic.prompt_tokens)
        except SchemeUnavailableError as exc:
            raise Refused("runnable", str(exc)) from exc
        local = self.local.price
        return Setup(
            fitted.method,
            table,
            fitted.scheduler,
            local.price_per_hour_usd,
            local.price_source,
            fitted.fit,
            own,
            fitted.served.engines,
            price_set="local_device",
            speculation=fitted.speculation,
        )

    def device_of(self, c: Candidate) -> DeviceInfo | None:
        """The device `c` would be served on: its catalog GPU, or this machine's device (None if not measured)."""
        if c.hardware != LOCAL_DEVICE:
            return self.catalog.get(c.hardware).device
        return None if self.local is None else self.local.models.device

    def _served(self, c: Candidate, method: QuantScheme, accel: Accelerator | None) -> Eligibility:
        """Who serves `c`; `Refused` ("runnable") where it cannot run at all (serving engines, device, KV dtype,
        tensor-parallel degree, an unpriced GPU the search could never recommend)."""
        if evaluation_only(method):
            raise Refused(
                "runnable",
                f"{method.name} is evaluation only: no serving engine launches it as it was evaluated "
                "(`recommender eval` scores it; pick a scheme an engine serves to get a recommendation)",
            )
        if accel is None:
            return local_eligibility(
                c,
                method,
                self.local,
                engines=self.engines,
                head_dim=self.shape.head_dim,
                architectures=self.shape.architectures,
            )
        served = eligibility(method, accel.device, self.engines, self.shape.head_dim, self.shape.architectures)
        if not served.launchable:
            raise Refused("runnable", served.reason(accel.key))
        if c.tensor_parallel > accel.max_tensor_parallel:
            raise Refused(
                "runnable", f"tensor_parallel {c.tensor_parallel} > {accel.max_tensor_parallel} devices per node"
            )
        if (split := tensor_parallel_refusal(self.shape, c.tensor_parallel)) is not None:
            raise Refused("runnable", f"tensor_parallel {c.tensor_parallel}: {split}")
        if self.require_price and (unpriced := self.catalog.price_refusal(accel.key)):
            raise Refused("runnable", unpriced)
        return served
