"""One candidate configuration and everything the search learns about it.

A candidate is precision+method x hardware x tensor-parallel degree x batch size. Its
evaluation runs cheapest-first: can the method run on that hardware, does it fit in
memory (both answered without loading a model), then quality (cached per method),
then speed (measured here for the local device, modeled for catalog accelerators),
then latency and cost. Every figure keeps its provenance.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from recommender.cost import CostEstimate, estimate_cost
from recommender.errors import MethodUnavailableError
from recommender.model_cache import ModelCache
from recommender.perf.catalog import Catalog
from recommender.perf.probe import ProbeResult, probe
from recommender.perf.roofline import StepTimes, memory_needed_gb
from recommender.perf.serving import DEFAULT_MAX_BATCHED_TOKENS, ServingEstimate, simulate_serving, steady_state
from recommender.perf.shape import ModelShape
from recommender.perf.simulator import RooflineStepCost, SchedulerConfig, kv_cache_tokens
from recommender.quality.evaluate import QualityEvaluator, QualityResult
from recommender.quality.verdict import Check
from recommender.quantize import get_method
from recommender.spec import LOCAL_DEVICE, Deployment, SearchSpec

#: Fraction of accelerator memory the serving engine may use (vLLM's default gpu_memory_utilization).
GPU_MEMORY_UTILIZATION = 0.9

Status = Literal["evaluated", "pruned"]


@dataclass(frozen=True, slots=True)
class Candidate:
    precision: str
    method: str
    hardware: str
    batch_size: int
    tensor_parallel: int = 1

    @classmethod
    def from_deployment(cls, d: Deployment) -> Candidate:
        return cls(d.precision, d.method, d.hardware, d.batch_size, d.tensor_parallel)

    @property
    def key(self) -> str:
        return f"{self.precision}/{self.method}@{self.hardware}x{self.tensor_parallel}/bs{self.batch_size}"


@dataclass
class CandidateResult:
    """What the search knows about a candidate; `constraints` > 0 means that limit is broken."""

    candidate: Candidate
    status: Status
    constraints: dict[str, float]
    broken: list[str]
    quality_verdict: str = "unverified"
    quality: dict[str, Any] | None = None
    ttft_ms: float | None = None
    tpot_ms: float | None = None
    tokens_per_s: float | None = None
    perf_provenance: str = ""
    memory_gb: float | None = None
    memory_available_gb: float | None = None
    cost: dict[str, Any] | None = None
    probe: dict[str, Any] | None = None

    @property
    def feasible(self) -> bool:
        return self.status == "evaluated" and not self.broken and self.quality_verdict == "pass"

    @property
    def usd_per_1m_tokens(self) -> float | None:
        return None if self.cost is None else float(self.cost["usd_per_1m_tokens"])

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["key"] = self.candidate.key
        data["feasible"] = self.feasible
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CandidateResult:
        fields = {k: v for k, v in data.items() if k not in ("key", "feasible")}
        fields["candidate"] = Candidate(**fields["candidate"])
        return cls(**fields)


CONSTRAINT_KEYS = ("runnable", "memory", "quality", "ttft", "tpot")


def _describe_broken_check(check: Check) -> str:
    if check.value is None:
        return f"quality: {check.name} {check.metric} unverified"
    base = "" if check.baseline is None else f" (bf16 {check.baseline:.4g})"
    verb = "is inconclusive against" if check.verdict == "inconclusive" else "breaks"
    return f"quality: {check.name} {check.metric} {check.value:.4g}{base} {verb} {check.threshold}"


def _local_memory_gb() -> float:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 1e9
    except (ValueError, OSError):
        return 0.0


@dataclass
class CandidateEvaluator:
    """Evaluates candidates of one spec, caching quality per method and probes per (method, batch)."""

    spec: SearchSpec
    catalog: Catalog
    shape: ModelShape
    models: ModelCache
    quality: QualityEvaluator
    _probes: dict[tuple[str, int], ProbeResult] = field(default_factory=dict)

    @property
    def probes_run(self) -> int:
        return len(self._probes)

    def _pruned(self, c: Candidate, key: str, why: str, **extra: Any) -> CandidateResult:
        constraints = {k: 0.0 for k in CONSTRAINT_KEYS} | {key: 1.0}
        return CandidateResult(c, "pruned", constraints, [f"{key}: {why}"], **extra)

    def evaluate(self, c: Candidate) -> CandidateResult:
        method = get_method(c.method)
        traffic = self.spec.traffic
        is_local = c.hardware == LOCAL_DEVICE
        accel = None if is_local else self.catalog.get(c.hardware)
        device = self.models.device if accel is None else accel.device
        reason = method.unavailable_reason(device)
        if reason is not None:
            return self._pruned(c, "runnable", reason)
        max_tp = 1 if accel is None else accel.max_tensor_parallel
        if c.tensor_parallel > max_tp:
            return self._pruned(c, "runnable", f"tensor_parallel {c.tensor_parallel} > {max_tp} devices per node")

        context = traffic.prompt_tokens + traffic.output_tokens
        need = memory_needed_gb(
            self.shape, method, batch_size=c.batch_size, context_tokens=context, tensor_parallel=c.tensor_parallel
        )
        available = _local_memory_gb() if accel is None else accel.memory_gb * GPU_MEMORY_UTILIZATION
        if need > available:
            return self._pruned(
                c,
                "memory",
                f"needs {need:.2f} GB per device, {available:.1f} GB usable",
                memory_gb=need,
                memory_available_gb=available,
            )

        quality = self.quality.evaluate(method)
        probe_result: ProbeResult | None = None
        if accel is None:
            try:
                probe_result = self._probe(c)
            except MethodUnavailableError as exc:
                return self._pruned(c, "runnable", str(exc))
            steps = StepTimes(probe_result.prefill_s, probe_result.decode_step_s, probe_result.provenance)
            price, price_source = self.spec.local_device.price_per_hour_usd, self.spec.local_device.price_source  # type: ignore[union-attr]
            serving = steady_state(
                prefill_s=steps.prefill_s,
                decode_step_s=steps.decode_step_s,
                batch_size=c.batch_size,
                traffic=traffic,
                provenance=steps.provenance,
            )
        else:
            kv_tokens = kv_cache_tokens(
                self.shape, method, accel, tensor_parallel=c.tensor_parallel, memory_utilization=GPU_MEMORY_UTILIZATION
            )
            one_request = traffic.prompt_tokens + traffic.output_tokens
            if kv_tokens < one_request:
                return self._pruned(
                    c,
                    "memory",
                    f"KV cache holds {kv_tokens} tokens beside the weights, one request needs {one_request}",
                    memory_gb=need,
                    memory_available_gb=available,
                )
            scheduler = SchedulerConfig(
                kv_cache_tokens=kv_tokens,
                max_num_seqs=c.batch_size,
                max_num_batched_tokens=max(DEFAULT_MAX_BATCHED_TOKENS, c.batch_size),
            )
            step_cost = RooflineStepCost(self.shape, method, accel, tensor_parallel=c.tensor_parallel)
            serving = simulate_serving(step_cost, scheduler, traffic=traffic, sla=self.spec.sla)
            price, price_source = accel.price_per_hour_usd, f"{accel.price_source} ({accel.price_date})"
        if serving.requests_per_s <= 0:  # not even a lone request meets the SLA: nothing to price
            return self._assemble(c, quality, serving, None, need, available, probe_result)
        cost = estimate_cost(
            price_per_hour_usd=price,
            price_source=price_source,
            tensor_parallel=c.tensor_parallel,
            replica_tokens_per_s=serving.tokens_per_s,
            replica_requests_per_s=serving.requests_per_s,
            target_requests_per_s=traffic.requests_per_second,
        )
        return self._assemble(c, quality, serving, cost, need, available, probe_result)

    def _probe(self, c: Candidate) -> ProbeResult:
        key = (c.method, c.batch_size)
        if key not in self._probes:
            model = self.models.get(get_method(c.method))
            self._probes[key] = probe(model, prompt_tokens=self.spec.traffic.prompt_tokens, batch_size=c.batch_size)
        return self._probes[key]

    def _assemble(
        self,
        c: Candidate,
        quality: QualityResult,
        serving: ServingEstimate,
        cost: CostEstimate | None,
        need: float,
        available: float,
        probe_result: ProbeResult | None,
    ) -> CandidateResult:
        sla = self.spec.sla
        margins = [ch.margin for ch in quality.checks if ch.margin is not None]
        quality_margin = 1.0 if quality.verdict == "unverified" else max(margins, default=0.0)
        constraints = {
            "runnable": 0.0,
            "memory": need / available - 1.0,
            "quality": quality_margin,
            "ttft": serving.ttft_ms / sla.ttft_p99_ms - 1.0,
            "tpot": serving.tpot_ms / sla.tpot_p99_ms - 1.0,
        }
        broken = [_describe_broken_check(ch) for ch in quality.checks if ch.verdict != "pass"]
        if quality.reason:
            broken.append(f"quality: unverified ({quality.reason})")
        if constraints["ttft"] > 0:
            broken.append(f"ttft: P99 {serving.ttft_ms:.1f} ms > SLA {sla.ttft_p99_ms:g} ms")
        if constraints["tpot"] > 0:
            broken.append(f"tpot: P99 {serving.tpot_ms:.2f} ms > SLA {sla.tpot_p99_ms:g} ms")
        return CandidateResult(
            candidate=c,
            status="evaluated",
            constraints=constraints,
            broken=broken,
            quality_verdict=quality.verdict,
            quality=quality.to_dict(),
            ttft_ms=serving.ttft_ms,
            tpot_ms=serving.tpot_ms,
            tokens_per_s=serving.tokens_per_s,
            perf_provenance=serving.provenance,
            memory_gb=need,
            memory_available_gb=available,
            cost=asdict(cost) if cost else None,
            probe=probe_result.to_dict() if probe_result else None,
        )
