"""The report's first screen: what to buy, at what traffic and price, how busy, what it saves; then what it assumed.

A monthly price is only actionable with the traffic it serves, the hourly price behind it (with
a link to where it was read) and how much of the fleet that traffic uses. Both per-token prices are
shown and named: the capacity figure (a replica running flat out) and the figure for the tokens the
target traffic actually sends, because at low traffic the two differ by orders of magnitude and
only $/month ranks. Reads `recommendation.assumptions`; a recommendation written before it has none,
and then the report falls back to the one-line answer of `content.answer`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from recommender.money import usd
from recommender.report.blocks import Block, Cell, Heading, Span, Table, bold, code, link, para

if TYPE_CHECKING:
    from recommender.decision.assumptions import Assumptions, Fleet, PriceAssumption
    from recommender.decision.recommendation import Recommendation
    from recommender.evaluation.candidate import CandidateResult


def _fleet(a: Assumptions, role: str) -> Fleet | None:
    return next((f for f in a.fleets if f.role == role), None)


def _price(a: Assumptions, hardware: str) -> PriceAssumption | None:
    return next((p for p in a.prices if p.hardware == hardware), None)


def price_cell(price: PriceAssumption | None) -> Cell:
    """'$1.09 per GPU-hour (RunPod pricing, 2026-09-25)' with the source as a link when it has one."""
    if price is None:
        return "not priced"
    if price.usd_per_hour is None:
        return f"not priced: {price.source}"
    dated = f", {price.date}" if price.date else ""
    source: Span = link(price.url.split("://", 1)[1], price.url) if price.url else Span(price.source)
    return (Span(f"{usd(price.usd_per_hour)} per GPU-hour ("), source, Span(f"{dated})"))


def traffic_text(a: Assumptions) -> str:
    mean = a.mean_requests_per_second
    daily = f"; daily mean {mean:,.4g} req/s" if mean and abs(mean - a.requests_per_second) > 1e-9 else ""
    return (
        f"{a.requests_per_second:,.4g} req/s ({a.traffic}{daily}) of {a.prompt_tokens:,} prompt + "
        f"{a.output_tokens:,} output tokens"
    )


def _gpus(result: CandidateResult, fleet: Fleet, price: PriceAssumption | None) -> str:
    name = price.name if price is not None else result.candidate.hardware
    tp = result.candidate.tensor_parallel
    per = f" ({tp} per replica)" if tp > 1 else ""
    return f"{fleet.accelerators} x {name}{per}"


def _cells(*cells: Cell) -> list[Span]:
    return [span for cell in cells for span in ([Span(cell)] if isinstance(cell, str) else list(cell))]


def _two_gpu_pools(a: Assumptions, winner: CandidateResult) -> list[Span]:
    """'3 x H100 SXM (prefill) at $.. per GPU-hour (..) + 2 x H200 (decode) at ..': each pool at its own price."""
    c, pools = winner.candidate, winner.pools
    assert pools is not None
    spans: list[Span] = []
    for role, hardware, pool in (("prefill", c.hardware, pools.prefill), ("decode", c.decode_gpu, pools.decode)):
        price = _price(a, hardware)
        name = price.name if price is not None else hardware
        spans += [
            Span(f"{' + ' if spans else ''}{pool.estimate.gpus} x {name} ({role}) at "),
            *_cells(price_cell(price)),
        ]
    return spans


def _buy(a: Assumptions, winner: CandidateResult, fleet: Fleet) -> list[Block]:
    price = _price(a, winner.candidate.hardware)
    engine = winner.serving.engine if winner.serving is not None else ""
    served = f" served by {engine}" if engine else ""
    spans: list[Span] = [bold("Buy: "), code(winner.key), Span(f"{served} — ")]
    if winner.candidate.decode_hardware and winner.pools is not None:
        spans += _two_gpu_pools(a, winner)
    else:
        spans += [Span(f"{_gpus(winner, fleet, price)} at "), *_cells(price_cell(price))]
    spans += [
        Span(": "),
        bold(f"{usd(fleet.usd_per_month)}/month"),
        Span(f" for {traffic_text(a)}, each replica {fleet.utilisation:.0%} busy "),
        Span(f"({fleet.load_rps_per_replica:,.4g} of the {fleet.capacity_rps_per_replica:,.4g} req/s it serves "),
        Span(f"within the SLA of P99 TTFT <= {a.ttft_p99_ms:g} ms and P99 TPOT <= {a.tpot_p99_ms:g} ms)."),
    ]
    return [para(*spans)]


def _saving(rec: Recommendation, a: Assumptions, fleet: Fleet) -> list[Block]:
    current, now = rec.current, _fleet(a, "current")
    if current is None or now is None:
        return [para("No priced current deployment to compare with.")]
    if current.key == fleet.key:
        return [para("The current deployment ", code(current.key), " already is the cheapest that meets every limit.")]
    per_month = now.usd_per_month - fleet.usd_per_month
    share = per_month / now.usd_per_month if now.usd_per_month else 0.0
    word = "Saves" if per_month >= 0 else "Costs"
    head = bold(f"{word} {usd(abs(per_month))}/month")
    return [
        para(
            head,
            f" ({abs(share):.1%} of the bill) against the current ",
            code(current.key),
            f" at {usd(now.usd_per_month)}/month ({now.accelerators} GPU(s), each replica {now.utilisation:.0%} busy). "
            f"Per 1M tokens actually served (at the mean rate): {usd(fleet.usd_per_1m_tokens_served)} against "
            f"{usd(now.usd_per_1m_tokens_served)}; per 1M tokens at capacity (a replica running flat out): "
            f"{usd(fleet.usd_per_1m_tokens_at_capacity)} against {usd(now.usd_per_1m_tokens_at_capacity)}. "
            f"Ranking: {a.ranking}.",
        )
    ]


def headline(rec: Recommendation) -> list[Block]:
    """What to buy and what it saves per month, or nothing when the assumptions or the winner's fleet are missing."""
    a, winner = rec.assumptions, rec.winner
    fleet = None if a is None else _fleet(a, "recommended")
    if a is None or winner is None or fleet is None:
        return []
    return _buy(a, winner, fleet) + _saving(rec, a, fleet)


def _sla_row(a: Assumptions) -> tuple[Cell, ...]:
    level = "no interval" if a.sla_confidence is None else f"{a.sla_confidence:.0%}"
    return (
        "SLA",
        f"P99 TTFT <= {a.ttft_p99_ms:g} ms, P99 TPOT <= {a.tpot_p99_ms:g} ms; checked on {a.sla_check}"
        f" (confidence: {level})",
    )


def assumptions(rec: Recommendation) -> list[Block]:
    """Traffic, SLA, prices with their sources, and each fleet's utilisation and both per-token prices."""
    a = rec.assumptions
    if a is None:
        return []
    facts: tuple[tuple[Cell, ...], ...] = (
        ("traffic", traffic_text(a)),
        _sla_row(a),
        ("price set", a.price_set),
        ("month", f"{a.hours_per_month:g} hours; tokens counted: {a.tokens_counted}"),
        ("ranking", a.ranking),
    )
    prices = tuple((p.hardware, p.name, price_cell(p), p.price_set or "-") for p in a.prices)
    fleets = tuple(
        (
            f.role,
            (code(f.key),),
            f"{f.replicas} ({f.accelerators} GPUs)",
            f"{f.capacity_rps_per_replica:,.4g} req/s",
            f"{f.load_rps_per_replica:,.4g} req/s",
            f"{f.utilisation:.1%}",
            usd(f.usd_per_month),
            usd(f.usd_per_1m_tokens_served),
            usd(f.usd_per_1m_tokens_at_capacity),
        )
        for f in a.fleets
    )
    header = (
        "",
        "config",
        "replicas",
        "capacity per replica (within SLA)",
        "load per replica",
        "utilisation",
        "$/month (ranks)",
        "$/1M tokens served",
        "$/1M tokens at capacity",
    )
    return [
        Heading("Assumptions"),
        Table(("assumption", "value"), facts),
        Heading("Prices per GPU-hour", 3),
        Table(("GPU", "product", "price (source, date read)", "price set"), prices),
        Heading("Fleets at the target traffic", 3),
        Table(header, fleets),
    ]
