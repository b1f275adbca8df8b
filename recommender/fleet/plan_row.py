"""One row of `recommender plan`: the evaluated configuration of one GPU at one precision, and what the plan adds.

The row holds the search's own `CandidateResult` (candidate, serving estimate, cost, provenance) rather than
copies of its figures, so a row's $/month *is* its result's and code that needs the configuration reads
``row.result.candidate``. On top of the result the plan adds only what the search does not know: the quality prior
and its verdict text, the note, the weights per GPU, why a GPU has no price, the physics alarm worded against the
SLA, the launch command and the batch caps the KV cache pruned. The flat names (``row.usd_per_month``, ...) are
read-only views of the result for the table, the comparisons and the JSON.

`plan --json`, `plan --spec --json` and the layout comparisons write a row as the flat object of `PlanRowJson`
(``plan_row_json``, the one place), the keys and their order unchanged since rows held copies.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from pydantic import GetCoreSchemaHandler
from pydantic_core import CoreSchema, core_schema
from typing_extensions import TypedDict  # pydantic reads a TypedDict's annotations from typing_extensions on 3.11

from recommender.evaluation.candidate import CandidateResult
from recommender.perf.sim.capacity import replicas_needed

# Imported at run time, not under TYPE_CHECKING: pydantic reads PlanRowJson's annotations.
from recommender.provenance import Provenance

if TYPE_CHECKING:
    from recommender.perf.sim.serving import ServingEstimate

__all__ = ["EmptyReason", "PlanRow", "PlanRowJson", "plan_row_json"]

#: Why a row serves nothing ("": it serves the traffic, or is not a plan's own row): no engine launches its scheme on
#: the GPU, no degree tried holds one request, no degree tried fits a node, or not even a lone request meets the SLA.
EmptyReason = Literal["", "engine", "memory", "degree", "sla"]


@dataclass(frozen=True, slots=True)
class PlanRow:
    """The cheapest modeled configuration of one GPU at one precision, or why there is none."""

    hardware: str
    precision: str
    #: The scheme planned (or refused, the reason in `note`).
    method: str
    #: The configuration shown, evaluated by the search's `PerformanceEvaluator` (its capacity 0 when not even a
    #: lone request meets the SLA); None where the scheme is refused or nothing fits.
    result: CandidateResult | None
    #: The traffic's request rate the replicas are counted at (priced or not).
    target_rps: float
    weights_gb_per_gpu: float | None
    #: The precision's labelled prior (quality is not measured by `plan`) and its verdict.
    quality: str
    quality_verdict: str
    note: str
    #: Why a row with a fit and latencies has no dollar figures: its GPU has no price in the price set (and the fix).
    unpriced: str = ""
    #: Why the row's capacity is flagged below the physics ceiling by more than ALARM_FACTOR ("" when it is not).
    physics_alarm: str = ""
    #: The command that launches the row's configuration on its engine ("" where nothing is served); for a
    #: checkpoint scheme it serves ``<model name>-<scheme>``, the directory `recommender quantize --out` writes.
    launch: str = ""
    #: The batch caps the KV cache cannot hold, pruned with the reason ("" when none was).
    batch_caps_pruned: str = ""
    #: Why the row serves nothing, as a kind (`note` says it in words); not written to JSON (``plan_row_json``).
    empty: EmptyReason = ""

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        """Written as its flat `PlanRowJson` wherever a row is serialised; never read back (a row without its
        result cannot be rebuilt, and nothing reads plan output)."""
        flat = handler.generate_schema(PlanRowJson)
        return core_schema.no_info_plain_validator_function(
            _only_rows,
            json_schema_input_schema=flat,
            serialization=core_schema.plain_serializer_function_ser_schema(plan_row_json, return_schema=flat),
        )

    @property
    def _serving(self) -> ServingEstimate | None:
        return None if self.result is None else self.result.serving

    @property
    def capacity(self) -> float:
        """Requests per second one replica carries within the SLA (0: none, or not even a lone request)."""
        return 0.0 if self._serving is None else self._serving.requests_per_s

    @property
    def tensor_parallel(self) -> int | None:
        return None if self.result is None else self.result.candidate.tensor_parallel

    @property
    def batch_size(self) -> int | None:
        """The batch cap of a configuration that meets the SLA (None where none does)."""
        return self.result.candidate.batch_size if self.result is not None and self.capacity > 0 else None

    @property
    def kv_cache_dtype(self) -> str:
        """The KV cache dtype of the row's configuration ("auto": the model's 16-bit dtype; "fp8")."""
        return "auto" if self.result is None else self.result.candidate.kv_cache_dtype

    @property
    def replicas(self) -> int | None:
        """Replicas at the target traffic (``cost.replicas`` where priced; counted for an unpriced GPU too)."""
        return replicas_needed(self.target_rps, self.capacity) if self.capacity > 0 else None

    @property
    def usd_per_1m_tokens(self) -> float | None:
        return None if self.result is None else self.result.usd_per_1m_tokens

    @property
    def usd_per_month(self) -> float | None:
        return None if self.result is None else self.result.usd_per_month

    @property
    def price_set(self) -> str:
        """The named price set (or "hardware_catalog" contract price) the dollars come from; "" when unpriced."""
        cost = None if self.result is None else self.result.cost
        return "" if cost is None else cost.price_set

    @property
    def max_rps_per_replica(self) -> float | None:
        return None if self._serving is None else self.capacity

    @property
    def ttft_p99_ms(self) -> float | None:
        return None if self._serving is None else self._serving.ttft_ms.p99

    @property
    def tpot_p99_ms(self) -> float | None:
        return None if self._serving is None else self._serving.tpot_ms.p99

    @property
    def ttft_p99_high_ms(self) -> float | None:
        """The upper end of the P99 TTFT's interval (the SLA check's figure)."""
        return None if self._serving is None else self._serving.ttft_p99_high_ms

    @property
    def tpot_p99_high_ms(self) -> float | None:
        return None if self._serving is None else self._serving.tpot_p99_high_ms

    @property
    def engine(self) -> str:
        """The engine the latencies are calibrated for ("" where nothing is served)."""
        return "" if self._serving is None else self._serving.engine

    @property
    def provenance(self) -> Provenance | None:
        return None if self._serving is None else self._serving.provenance

    @property
    def physics_rps_per_replica(self) -> float | None:
        """The datasheet's throughput ceiling on one replica, no SLA (`perf.sim.physics_capacity`)."""
        return None if self._serving is None else self._serving.physics_rps_per_replica

    @property
    def p99_requests(self) -> int | None:
        """How many simulated requests the P99s rest on after the warm-up (None where nothing ran at a load)."""
        return None if self._serving is None else self._serving.requests_measured

    @property
    def p99s_settled(self) -> bool | None:
        """Whether the P99s moved under 5 % when the simulated requests doubled (``perf/sim/settle.py``)."""
        return None if self._serving is None else self._serving.p99s_settled


def _only_rows(value: object) -> PlanRow:
    if isinstance(value, PlanRow):
        return value
    raise ValueError("a plan row is written, not read back: its figures live in the result it no longer has")


class PlanRowJson(TypedDict):
    """A plan row as `plan --json` writes it (the keys in this order)."""

    hardware: str
    precision: str
    method: str
    tensor_parallel: int | None
    batch_size: int | None
    usd_per_1m_tokens: float | None
    replicas: int | None
    usd_per_month: float | None
    ttft_p99_ms: float | None
    tpot_p99_ms: float | None
    max_rps_per_replica: float | None
    weights_gb_per_gpu: float | None
    quality: str
    quality_verdict: str
    note: str
    provenance: Provenance | None
    price_set: str
    engine: str
    ttft_p99_high_ms: float | None
    tpot_p99_high_ms: float | None
    unpriced: str
    physics_rps_per_replica: float | None
    physics_alarm: str
    launch: str
    kv_cache_dtype: str
    batch_caps_pruned: str
    p99_requests: int | None
    p99s_settled: bool | None


def plan_row_json(row: PlanRow) -> PlanRowJson:
    """The flat object a row is written as: the result's figures by their plan names, then what the plan adds."""
    return PlanRowJson(
        hardware=row.hardware,
        precision=row.precision,
        method=row.method,
        tensor_parallel=row.tensor_parallel,
        batch_size=row.batch_size,
        usd_per_1m_tokens=row.usd_per_1m_tokens,
        replicas=row.replicas,
        usd_per_month=row.usd_per_month,
        ttft_p99_ms=row.ttft_p99_ms,
        tpot_p99_ms=row.tpot_p99_ms,
        max_rps_per_replica=row.max_rps_per_replica,
        weights_gb_per_gpu=row.weights_gb_per_gpu,
        quality=row.quality,
        quality_verdict=row.quality_verdict,
        note=row.note,
        provenance=row.provenance,
        price_set=row.price_set,
        engine=row.engine,
        ttft_p99_high_ms=row.ttft_p99_high_ms,
        tpot_p99_high_ms=row.tpot_p99_high_ms,
        unpriced=row.unpriced,
        physics_rps_per_replica=row.physics_rps_per_replica,
        physics_alarm=row.physics_alarm,
        launch=row.launch,
        kv_cache_dtype=row.kv_cache_dtype,
        batch_caps_pruned=row.batch_caps_pruned,
        p99_requests=row.p99_requests,
        p99s_settled=row.p99s_settled,
    )
