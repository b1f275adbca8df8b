"""`recommender plan`'s flags turned into the spec's own typed traffic, SLA and plan scope, every refusal naming
its flag.

The command line's number parsing accepts ``inf`` and ``nan`` and has no upper bounds; the
spec's models refuse both and bound every size, so the flags go through those models and
a refusal names the flag the user typed, not the model's field. The same holds for the
layouts asked for and the architecture and GPUs planned (``plan_target``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, get_args

from pydantic import ValidationError

from recommender.config.candidate import MAX_BATCH, MAX_TENSOR_PARALLEL, KVCacheDtype
from recommender.config.spec import LatencySLA, Traffic
from recommender.engines.engine_release import engine_releases as engine_releases_of
from recommender.errors import BadInputError, pydantic_message
from recommender.fleet.plan_scope import PlanScope

if TYPE_CHECKING:
    from recommender.fleet.plan_request import PlanRequest
    from recommender.perf.catalog.gpus import Accelerator, Catalog
    from recommender.perf.model.shape import ModelShape
    from recommender.perf.sim.routing import RoutingPolicy

#: The KV cache dtypes a plan tries, in the order it shows them.
KV_CACHE_DTYPES: tuple[KVCacheDtype, ...] = get_args(KVCacheDtype)

FLAG_OF = {
    "prompt_tokens": "--prompt-tokens",
    "output_tokens": "--output-tokens",
    "requests_per_second": "--rps",
    "ttft_p99_ms": "--ttft-ms",
    "tpot_p99_ms": "--tpot-ms",
}


def traffic_and_sla(
    *, prompt_tokens: int, output_tokens: int, rps: float, ttft_ms: float, tpot_ms: float
) -> tuple[Traffic, LatencySLA]:
    """The flags as the spec's Traffic and LatencySLA (finite, positive, bounded)."""
    try:
        traffic = Traffic(prompt_tokens=prompt_tokens, output_tokens=output_tokens, requests_per_second=rps)
        sla = LatencySLA(ttft_p99_ms=ttft_ms, tpot_p99_ms=tpot_ms)
    except ValidationError as exc:
        first = exc.errors()[0]
        flag = FLAG_OF.get(str(first["loc"][0]), str(first["loc"][0]))
        raise BadInputError(
            flag, f"{first['input']!r}: {pydantic_message(dict(first))}", "give a finite positive number in range"
        ) from None
    return traffic, sla


def distinct(values: list[str] | list[int], *, flag: str) -> None:
    """A repeated flag value is refused (as in a spec: a repeat is usually a typo for another value)."""
    for i, value in enumerate(values):
        if value in values[:i]:
            raise BadInputError(flag, f"{value} given twice", "give each value once")


def check_batch_sizes(values: list[int], *, flag: str = "--batch-size") -> None:
    distinct(values, flag=flag)
    for value in values:
        if value > MAX_BATCH:
            raise BadInputError(flag, f"{value} is over {MAX_BATCH} concurrent sequences", "give a realistic batch")


@dataclass(frozen=True, slots=True)
class Pointed:
    """What `plan --engine/--precision/--scheme/--tensor-parallel/--kv-cache-dtype/--batch-size` narrow it to."""

    engines: tuple[str, ...]
    precisions: list[str]
    scope: PlanScope
    given_hardware: list[str] | None = None

    def hardware(self, catalog: Catalog, shape: ModelShape, *, priced_only: bool) -> list[str]:
        """--hardware (each degree checked on it); without it, with --price-set, the GPUs that set prices; else every
        catalog GPU (one the default set does not price still gets its fit, latencies and capacity, its dollar
        columns empty and the reason below the table). A model whose architecture none of the engines registers, or
        whose head size none of them runs, is refused first (``engines/architecture_support.py``, ``head_sizes.py``)."""
        from recommender.engines.architecture_support import check_served
        from recommender.engines.head_sizes import check_runnable

        check_served(shape.architectures, self.engines, field="--model")
        check_runnable(shape.head_dim, self.engines, field="--model")
        if self.given_hardware is not None:
            for accel in [catalog.get(h, field="--hardware") for h in self.given_hardware]:
                self.check_degrees(shape, accel)
            return self.given_hardware
        return [k for k in catalog.accelerators if not priced_only or catalog.price_refusal(k) is None]

    def check_degrees(self, shape: ModelShape, accel: Accelerator) -> None:
        """Each --tensor-parallel degree fits a node of `accel` and splits the model's heads (as `estimate` checks)."""
        from recommender.perf.catalog.architecture_check import check_tensor_parallel

        for tp in self.scope.tensor_parallel:
            check_tensor_parallel(shape, accel, tp)


def _engines(engines: list[str] | None) -> tuple[str, ...]:
    from recommender.engines import DEFAULT_ENGINES, get_engine

    distinct(engines or [], flag="--engine")
    return tuple(get_engine(e, field="--engine").name for e in engines) if engines else DEFAULT_ENGINES


def _schemes(schemes: list[str]) -> dict[str, str]:
    """Each --scheme by its precision family (one per family: `plan` shows one row per GPU and precision)."""
    from recommender.engines import evaluation_only
    from recommender.quantize import get_scheme

    distinct(schemes, flag="--scheme")
    by_family: dict[str, str] = {}
    for name in schemes:
        method = get_scheme(name, field="--scheme")
        if evaluation_only(method):
            raise BadInputError(
                "--scheme",
                f"{name} is evaluation only: no serving engine launches it",
                "pick a scheme an engine serves",
            )
        if method.precision in by_family:
            raise BadInputError(
                "--scheme",
                f"{by_family[method.precision]} and {name} are both {method.precision}",
                "give one scheme per precision (plan one, then the other)",
            )
        by_family[method.precision] = name
    return by_family


def pointed_plan(
    *,
    hardware: list[str] | None,
    engines: list[str] | None,
    precisions: list[str] | None,
    schemes: list[str] | None,
    tensor_parallel: list[int] | None,
    kv_cache_dtypes: list[str] | None,
    batch_sizes: list[int] | None,
    engine_releases: list[str] | None = None,
) -> Pointed:
    """The flags validated like the spec's fields: one refusal line naming the flag, the value and the fix."""
    from recommender.quantize.precisions import PLANNED_PRECISIONS

    distinct(hardware or [], flag="--hardware")
    check_batch_sizes(batch_sizes or [])
    if precisions and schemes:
        raise BadInputError(
            "--precision/--scheme",
            "both given",
            "give --precision (plan's scheme for each) or --scheme (that scheme), not both",
        )
    distinct(precisions or [], flag="--precision")
    for p in precisions or []:
        if p not in PLANNED_PRECISIONS:
            raise BadInputError("--precision", f"unknown precision {p!r}", f"one of {', '.join(PLANNED_PRECISIONS)}")
    distinct(tensor_parallel or [], flag="--tensor-parallel")
    for tp in tensor_parallel or []:
        if not 1 <= tp <= MAX_TENSOR_PARALLEL:
            raise BadInputError("--tensor-parallel", f"{tp} is outside 1..{MAX_TENSOR_PARALLEL}", "give a GPU count")
    distinct(kv_cache_dtypes or [], flag="--kv-cache-dtype")
    for kv in kv_cache_dtypes or []:
        if kv not in KV_CACHE_DTYPES:
            raise BadInputError(
                "--kv-cache-dtype", f"unknown KV cache dtype {kv!r}", f"one of {', '.join(KV_CACHE_DTYPES)}"
            )
    by_family = _schemes(schemes or [])
    planned = _engines(engines)
    releases = engine_releases_of(engine_releases or [])
    if unplanned := sorted(set(releases) - set(planned)):
        raise BadInputError("--engine-release", f"{unplanned[0]} is not planned", f"add --engine {unplanned[0]}")
    scope = PlanScope(
        batch_sizes=tuple(batch_sizes or ()),
        tensor_parallel=tuple(tensor_parallel or ()),
        kv_cache_dtypes=tuple(kv for kv in KV_CACHE_DTYPES if kv in (kv_cache_dtypes or KV_CACHE_DTYPES)),
        schemes=by_family,
        engine_releases=releases,
    )
    return Pointed(planned, list(by_family) or list(precisions or PLANNED_PRECISIONS), scope, hardware)


LAYOUTS = ("aggregated", "disaggregated")


def layouts(given: list[str] | None) -> list[str]:
    """--layout values checked (each known, none twice); default: aggregated."""
    distinct(given or [], flag="--layout")
    for value in given or []:
        if value not in LAYOUTS:
            raise BadInputError("--layout", f"unknown layout {value!r}", f"use {' or '.join(LAYOUTS)}")
    return given or ["aggregated"]


def routings(given: str | None) -> tuple[RoutingPolicy, ...]:
    """--routing's comma-separated policies checked (each known, none twice); none given: ()."""
    from recommender.perf.sim.routing import POLICIES

    names = [] if given is None else [name.strip() for name in given.split(",")]
    distinct(names, flag="--routing")
    known: list[RoutingPolicy] = []
    for name in names:
        policy = next((p for p in POLICIES if p == name), None)
        if policy is None:
            raise BadInputError("--routing", f"unknown routing policy {name!r}", f"use {', '.join(POLICIES)}")
        known.append(policy)
    return tuple(known)


@dataclass(frozen=True, slots=True)
class PlanTarget:
    """The architecture planned and the GPUs it is planned on, read and checked."""

    name: str
    shape: ModelShape
    catalog: Catalog
    hardware: list[str]
    #: What the launch commands serve: a shipped name's hub id, else the model as given.
    served: str

    def request(self, traffic: Traffic, sla: LatencySLA, pointed: Pointed, *, link: str) -> PlanRequest:
        """What the planners are asked: this architecture on these GPUs at the pointed precisions, engines and
        scope, at `traffic` within `sla`, the launch commands serving `served`."""
        from recommender.fleet.plan_request import PlanRequest

        return PlanRequest(
            shape=self.shape,
            catalog=self.catalog,
            hardware=tuple(self.hardware),
            precisions=tuple(pointed.precisions),
            traffic=traffic,
            sla=sla,
            engines=pointed.engines,
            scope=pointed.scope,
            link=link,
            model=self.served,
        )


def plan_target(
    model: str | None, pointed: Pointed, price_set: str | None, prompt_tokens: int, output_tokens: int
) -> PlanTarget:
    """The architecture from --model, the catalog with --price-set's prices, the GPUs planned (priced ones only
    with a price set), and the request checked against the model's positions."""
    from recommender.perf.catalog.architecture_check import check_request_fits
    from recommender.perf.catalog.architectures import read_architecture
    from recommender.perf.catalog.gpus import load_catalog
    from recommender.perf.catalog.prices import get_price_set

    if model is None:
        raise BadInputError("--model", "no architecture to plan", "pass --model llama-3.1-8b (or --spec SPACE.yaml)")
    from recommender.perf.model.shape import ModelShape

    name, config = read_architecture(model)
    shape = ModelShape.from_config(config)
    catalog = load_catalog(price_set=get_price_set(price_set, field="--price-set").name)
    hardware = pointed.hardware(catalog, shape, priced_only=price_set is not None)
    check_request_fits(
        config, shape, catalog, prompt_tokens=prompt_tokens, output_tokens=output_tokens, field="--prompt-tokens"
    )
    served = str(next(iter(getattr(config, "_hub_ids", None) or []), model))  # a shipped name launches its hub id
    return PlanTarget(name, shape, catalog, hardware, served)
