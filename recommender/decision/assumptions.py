"""What the recommendation assumed: the traffic, the SLA, each GPU's price, and how busy the fleet is.

A price per month means nothing without the traffic it serves, the hourly price behind it and
how much of the fleet that traffic uses. The search ranks by $/month at the target traffic, while
$/1M tokens is quoted at capacity (a replica running flat out); at low traffic a replica is mostly
idle and the tokens actually served cost far more per million than the capacity figure says. This
block states all of it, so report.html and recommendation.json say which number ranks and what
each rests on. Built once at the end of a search from the spec, the catalog and the recommendation.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from recommender.config.traffic import hourly_rates
from recommender.perf.pricing import HOURS_PER_MONTH

if TYPE_CHECKING:
    from recommender.config.spec import SearchSpec
    from recommender.evaluation.candidate import CandidateResult
    from recommender.perf.catalog.gpus import Catalog

#: What ranks candidates (`decision.TIE_POLICY` in the buyer's words).
RANKING = (
    "$/month at the target traffic ranks the candidates; $/1M tokens at capacity only breaks ties "
    "(within the tie tolerance the least quantized scheme wins first)"
)
_URL = re.compile(r"https?://[^\s,;)]+")


@dataclass(frozen=True, slots=True)
class PriceAssumption:
    """One GPU's hourly price as the search used it, with the link and date of its source.

    The recommendation's record of a price, not the catalog's (`perf.catalog.prices.GpuPrice`, one entry of a
    price set): it names the GPU and the set it came from, and a GPU the spec searched but nothing prices
    (`usd_per_hour` None: the local device without a price, a GPU outside the price set) is listed all the same.
    """

    hardware: str
    name: str
    usd_per_hour: float | None
    price_set: str
    source: str
    url: str
    date: str


@dataclass(frozen=True, slots=True)
class Fleet:
    """A configuration's fleet at the target traffic: replicas, how busy they are, and both per-token prices.

    ``utilisation`` is the load each replica carries over the most it carries within the SLA;
    ``usd_per_1m_tokens_served`` divides the monthly bill by the tokens the target traffic sends in a
    month, ``usd_per_1m_tokens_at_capacity`` the hourly price by what a saturated replica processes.
    """

    role: str
    key: str
    replicas: int
    accelerators: int
    capacity_rps_per_replica: float
    load_rps_per_replica: float
    utilisation: float
    usd_per_month: float
    usd_per_1m_tokens_at_capacity: float
    usd_per_1m_tokens_served: float


@dataclass(frozen=True, slots=True)
class Assumptions:
    """The figures every price and verdict of the recommendation rests on (recommendation.json "assumptions")."""

    requests_per_second: float
    prompt_tokens: int
    output_tokens: int
    traffic: str
    ttft_p99_ms: float
    tpot_p99_ms: float
    #: Confidence at which a P99 is checked against its limit; None: the simulated P99 itself (no interval).
    sla_confidence: float | None
    sla_check: str
    price_set: str
    prices: tuple[PriceAssumption, ...]
    fleets: tuple[Fleet, ...]
    #: The day's mean rate (the constant rate without a profile): what the tokens served per month count.
    mean_requests_per_second: float = 0.0
    ranking: str = RANKING
    tokens_counted: str = "prompt + output tokens"
    hours_per_month: float = HOURS_PER_MONTH


def first_url(text: str) -> str:
    """The first http(s) address in a source line ("" when it has none)."""
    found = _URL.search(text)
    return found.group(0).rstrip(".") if found else ""


def tokens_per_month(requests_per_second: float, prompt_tokens: int, output_tokens: int) -> float:
    return requests_per_second * (prompt_tokens + output_tokens) * 3600.0 * HOURS_PER_MONTH


def fleet_of(role: str, result: CandidateResult, spec: SearchSpec) -> Fleet | None:
    """The fleet of a priced result at the spec's traffic; None when it was not priced."""
    cost, serving, traffic = result.cost, result.serving, spec.traffic
    if cost is None or serving is None or serving.requests_per_s <= 0:
        return None
    rates = hourly_rates(traffic.profile, traffic.requests_per_second)
    monthly_tokens = tokens_per_month(sum(rates) / len(rates), traffic.mean_prompt_tokens, traffic.output_tokens)
    return Fleet(
        role=role,
        key=result.key,
        replicas=cost.replicas,
        accelerators=cost.accelerators,
        capacity_rps_per_replica=serving.requests_per_s,
        load_rps_per_replica=serving.load_per_replica_rps,
        utilisation=serving.load_per_replica_rps / serving.requests_per_s,
        usd_per_month=cost.usd_per_month,
        usd_per_1m_tokens_at_capacity=cost.usd_per_1m_tokens,
        usd_per_1m_tokens_served=cost.usd_per_month / monthly_tokens * 1e6,
    )


def _prices(spec: SearchSpec, catalog: Catalog) -> tuple[PriceAssumption, ...]:
    """The price of every GPU the space searched (decode pools' GPUs too) and the current deployment runs on, in the
    space's order."""
    decoders = [*(spec.space.decode_hardware or []), spec.current.decode_gpu]  # decode pools on other GPUs
    keys = list(dict.fromkeys([*spec.space.hardware, spec.current.hardware, *decoders]))
    prices: list[PriceAssumption] = []
    for key in keys:
        if key == "local":
            local = spec.local_device
            source = local.price_source if local is not None else "not priced (no local_device in the spec)"
            usd = local.price_per_hour_usd if local is not None else None
            prices.append(PriceAssumption("local", "this machine", usd, "local_device", source, first_url(source), ""))
            continue
        accel = catalog.accelerators.get(key)
        if accel is None:
            continue
        source = accel.price_source or (catalog.price_refusal(key) or "not recorded")
        prices.append(
            PriceAssumption(
                key, accel.name, accel.price_per_hour_usd, accel.price_set, source, first_url(source), accel.price_date
            )
        )
    return tuple(prices)


def _interval_confidence(result: CandidateResult | None) -> float | None:
    """The confidence of the serving estimate's prediction interval (None: a point estimate, the local device)."""
    return None if result is None or result.serving is None else result.serving.confidence


def assumptions_of(
    spec: SearchSpec, catalog: Catalog, *, winner: CandidateResult | None, current: CandidateResult | None
) -> Assumptions:
    """The assumptions block of a finished search, for its winner and current deployment."""
    traffic, sla = spec.traffic, spec.sla
    rates = hourly_rates(traffic.profile, traffic.requests_per_second)
    shape = "peak hour of the spec's daily profile" if traffic.profile is not None else "constant rate"
    confidence = _interval_confidence(winner)
    check = (
        "the simulated P99 (a point estimate: the performance model gives no interval)"
        if confidence is None
        else f"the P99 of the traffic simulated with every step at its one-sided {confidence:.0%} upper bound"
    )
    fleets = [fleet_of(role, r, spec) for role, r in (("recommended", winner), ("current", current)) if r]
    named = catalog.prices.label if catalog.prices is not None else "none (catalog prices)"
    return Assumptions(
        requests_per_second=traffic.requests_per_second,
        prompt_tokens=traffic.prompt_tokens,
        output_tokens=traffic.output_tokens,
        traffic=shape,
        ttft_p99_ms=sla.ttft_p99_ms,
        tpot_p99_ms=sla.tpot_p99_ms,
        sla_confidence=confidence,
        sla_check=check,
        price_set=named,
        prices=_prices(spec, catalog),
        fleets=tuple(f for f in fleets if f is not None),
        mean_requests_per_second=sum(rates) / len(rates),
    )
