"""The printed answer of `recommender plan --routing` (and a spec's ``space.routing``): per GPU and precision, the
replicas one replica's capacity asks for against each router's fleet, the hit rates, the winner and why, and the
winner's router settings."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from rich.table import Table

from recommender.money import usd

if TYPE_CHECKING:
    from rich.console import Console

    from recommender.config.spec import LatencySLA, Traffic
    from recommender.fleet.layouts.routing_compare import RoutedFleet, RoutingComparison

__all__ = ["render_routing"]


def _fleet(f: RoutedFleet) -> str:
    replicas = f"{f.replicas}" if f.met else f"> {f.replicas}"
    p99s = f"{f.ttft_p99_ms:.0f} / {f.tpot_p99_ms:.1f} ms"
    return f"{replicas}, {f.prefix_hit_rate:.0%} hits, {p99s}, {usd(f.usd_per_month)}"


def render_routing(
    found: Sequence[RoutingComparison], *, name: str, traffic: Traffic, sla: LatencySLA, console: Console
) -> None:
    """The side-by-side table (nothing where no routing was asked), one line per GPU and precision saying why its
    winner wins, then the winner's router settings for the cheapest row."""
    if not found:
        return
    policies = [f.policy for f in found[0].fleets]
    table = Table(
        title=f"{name}: routers at {traffic.requests_per_second:g} req/s, P99 TTFT <= {sla.ttft_p99_ms:g} ms, "
        f"P99 TPOT <= {sla.tpot_p99_ms:g} ms (each cell: replicas, prefix-cache hit rate, fleet P99 TTFT / TPOT at "
        "the steps' upper ends, $/month)"
    )
    for column in ("GPU", "precision", "one replica x N", *policies, "winner"):
        table.add_column(column)
    for c in found:
        row = c.row
        one = f"{row.replicas}, {usd(row.usd_per_month)}"
        table.add_row(c.hardware, c.precision, one, *(_fleet(f) for f in c.fleets), c.winner or "-")
    console.print(table)
    for c in found:
        console.print(f"{c.hardware}/{c.precision}: {c.reason}", soft_wrap=True, highlight=False)
    first = found[0]
    if first.launch:
        _launch(first, console)
    elif first.router is not None:
        r = first.router
        console.print(f"\n{first.hardware}/{first.precision}'s router ({r.policy}):", highlight=False)
        if r.llm_d_values:
            console.print("llm-d InferencePool values:\n" + r.llm_d_values, soft_wrap=True, highlight=False)
        if r.dynamo_frontend_args:
            console.print("Dynamo Frontend: python3 " + " ".join(r.dynamo_frontend_args), highlight=False)
        for note in r.notes:
            console.print(f"- {note}", soft_wrap=True, highlight=False)


def _launch(c: RoutingComparison, console: Console) -> None:
    """The winner's fleet as it deploys: the engine command, then llm-d's and Dynamo's files carrying its router."""
    console.print(f"\n{c.hardware}/{c.precision}'s fleet behind its {c.winner} router:", highlight=False)
    for entry in c.launch:
        body = entry.command or entry.config_yaml or ""
        console.print(f"{entry.engine}:" + (f"\n{body}" if body else ""), soft_wrap=True, highlight=False)
        for note in entry.notes:
            console.print(f"- {note}", soft_wrap=True, highlight=False)
