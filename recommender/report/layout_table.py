"""The printed answers of `recommender plan --layout disaggregated` (aggregated against disaggregated) and
`--expert-parallel` (tensor against expert parallelism) per GPU and precision: the winner and the reason it wins."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from rich.table import Table

from recommender.money import usd

if TYPE_CHECKING:
    from rich.console import Console

    from recommender.config.spec import LatencySLA, Traffic
    from recommender.fleet.layouts.layout_compare import LayoutComparison
    from recommender.fleet.layouts.parallelism import ParallelismComparison

_COLUMNS = (
    "GPU",
    "precision",
    "winner",
    "agg GPUs",
    "agg $/month",
    "agg P99 TTFT/TPOT ms",
    "prefill pool",
    "decode pool",
    "KV move ms",
    "P+D GPUs",
    "P+D $/month",
    "P+D P99 TTFT/TPOT ms",
)


def _p99s(ttft: float | None, tpot: float | None) -> str:
    return "-" if ttft is None or tpot is None else f"{ttft:.0f} / {tpot:.1f}"


def _cells(c: LayoutComparison) -> tuple[str, ...]:
    a, d = c.aggregated, c.disaggregated
    agg_gpus = "-" if a.replicas is None or a.tensor_parallel is None else f"{a.replicas * a.tensor_parallel}"
    pools = [
        "-"
        if p is None
        else f"{p.estimate.workers} x {p.layout}, batch {p.batch_size}" + (f" on {gpu}" if d.mixed else "")
        for p, gpu in ((d.prefill, d.prefill_hardware), (d.decode, d.decode_hardware))
    ]
    return (
        c.hardware,
        c.precision,
        c.winner or "-",
        agg_gpus,
        usd(a.usd_per_month),
        _p99s(a.ttft_p99_high_ms or a.ttft_p99_ms, a.tpot_p99_high_ms or a.tpot_p99_ms),
        pools[0],
        pools[1],
        "-" if d.transfer_ms is None else f"{d.transfer_ms:.2f} ({d.link})",
        str(d.gpus or "-"),
        usd(d.usd_per_month),
        _p99s(d.ttft_p99_high_ms, d.tpot_p99_high_ms),
    )


def render_layouts(
    found: Sequence[LayoutComparison], *, name: str, traffic: Traffic, sla: LatencySLA, console: Console
) -> None:
    """The side-by-side table, then one line per GPU and precision saying why its winner wins."""
    table = Table(
        title=f"{name}: aggregated vs disaggregated at {traffic.requests_per_second:g} req/s, "
        f"{traffic.prompt_tokens} + {traffic.output_tokens} tokens, P99 TTFT <= {sla.ttft_p99_ms:g} ms, "
        f"P99 TPOT <= {sla.tpot_p99_ms:g} ms (P99s at the upper ends of their intervals)"
    )
    for column in _COLUMNS:
        table.add_column(column)
    for c in found:
        table.add_row(*_cells(c))
    console.print(table)
    for c in found:
        console.print(f"{c.hardware}/{c.precision}: {c.reason}", soft_wrap=True, highlight=False)
    _render_cheapest_launch(found, console)


def _render_cheapest_launch(found: Sequence[LayoutComparison], console: Console) -> None:
    """The pools' commands of the cheapest disaggregated row that wins (nothing when none does)."""
    wins = [c for c in found if c.winner == "disaggregated" and c.disaggregated.launch is not None]
    if not wins:
        return
    best = min(wins, key=lambda c: c.disaggregated.usd_per_month or float("inf"))
    launch = best.disaggregated.launch
    assert launch is not None
    console.print(f"\nLaunch ({best.hardware}/{best.precision}, {launch.engine}):", highlight=False)
    d = best.disaggregated
    for label, command in (
        (f"prefill x {launch.prefill_workers} on {d.prefill_hardware}", launch.prefill),
        (f"decode x {launch.decode_workers} on {d.decode_hardware}", launch.decode),
        ("router", launch.router),
    ):
        console.print(f"  {label}: {command}", soft_wrap=True, highlight=False, markup=False)
    for note in launch.notes:
        console.print(f"  note: {note}", soft_wrap=True, highlight=False, markup=False)
    if launch.dynamo:
        console.print("\nDynamo deployment (kubectl apply -f):", highlight=False)
        console.print(launch.dynamo, soft_wrap=True, highlight=False, markup=False)


_EP_COLUMNS = (
    "GPU",
    "precision",
    "winner",
    "TP GPUs",
    "TP $/month",
    "TP P99 TTFT/TPOT ms",
    "EP replica",
    "expert load",
    "EP GPUs",
    "EP $/month",
    "EP P99 TTFT/TPOT ms",
)


def _ep_cells(c: ParallelismComparison) -> tuple[str, ...]:
    t, e = c.tensor_parallel, c.expert_parallel
    tp_gpus = "-" if t.replicas is None or t.tensor_parallel is None else f"{t.replicas * t.tensor_parallel}"
    replica = (
        "-"
        if e.ep is None
        else (f"{e.replicas or '-'} x EP{e.ep}, {e.attention_dp} attention rank(s), batch {e.batch_size_per_rank}/rank")
    )
    load = "-" if e.imbalance is None else f"{e.imbalance:.2f}x mean, {e.redundant_experts} redundant"
    return (
        c.hardware,
        c.precision,
        c.winner or "-",
        tp_gpus,
        usd(t.usd_per_month),
        _p99s(t.ttft_p99_high_ms or t.ttft_p99_ms, t.tpot_p99_high_ms or t.tpot_p99_ms),
        replica,
        load,
        str(e.gpus or "-"),
        usd(e.usd_per_month),
        _p99s(e.ttft_p99_high_ms, e.tpot_p99_high_ms),
    )


def render_parallelism(
    found: Sequence[ParallelismComparison], *, name: str, traffic: Traffic, sla: LatencySLA, console: Console
) -> None:
    """Tensor against expert parallelism per GPU and precision, then why each winner wins."""
    table = Table(
        title=f"{name}: tensor vs expert parallelism at {traffic.requests_per_second:g} req/s, "
        f"{traffic.prompt_tokens} + {traffic.output_tokens} tokens, P99 TTFT <= {sla.ttft_p99_ms:g} ms, "
        f"P99 TPOT <= {sla.tpot_p99_ms:g} ms (P99s at the upper ends of their intervals)"
    )
    for column in _EP_COLUMNS:
        table.add_column(column)
    for c in found:
        table.add_row(*_ep_cells(c))
    console.print(table)
    for c in found:
        console.print(f"{c.hardware}/{c.precision}: {c.reason}", soft_wrap=True, highlight=False)
    _render_expert_parallel_launch(found, console)


def _render_expert_parallel_launch(found: Sequence[ParallelismComparison], console: Console) -> None:
    """The expert-parallel command of the cheapest row expert parallelism wins, else of the cheapest expert-parallel
    row (nothing when no row has one): never a tensor-parallel command under an expert-parallel row."""
    rows = [c for c in found if c.expert_parallel.launch]
    if not rows:
        return
    wins = [c for c in rows if c.winner == "expert-parallel"] or rows
    best = min(wins, key=lambda c: c.expert_parallel.usd_per_month or float("inf"))
    e = best.expert_parallel
    verdict = "" if best.winner == "expert-parallel" else f"; {best.winner or 'neither'} wins this row"
    console.print(
        f"\nLaunch, expert parallelism ({best.hardware}/{best.precision}, {e.engine}, EP{e.ep} with {e.attention_dp} "
        f"attention rank(s){verdict}):",
        highlight=False,
        markup=False,
    )
    for line in e.launch.splitlines():
        console.print(f"  {line}", soft_wrap=True, highlight=False, markup=False)
    for d in e.deployments:  # the frameworks' files deploying those replicas, or why a framework has none
        console.print(f"\n{d.engine}:", highlight=False, markup=False)
        for note in d.notes:
            console.print(f"  # {note}", soft_wrap=True, highlight=False, markup=False)
        if d.config_yaml:
            console.print(d.config_yaml, soft_wrap=True, highlight=False, markup=False)


def render_comparisons(
    layouts: Sequence[LayoutComparison],
    parallelism: Sequence[ParallelismComparison],
    *,
    name: str,
    traffic: Traffic,
    sla: LatencySLA,
    console: Console,
) -> None:
    """Each comparison a plan computed (``fleet/plan_views.py`` chose them), layouts first; nothing for one not
    computed. `plan` and `plan --spec` print their comparisons through this one function."""
    if layouts:
        render_layouts(layouts, name=name, traffic=traffic, sla=sla, console=console)
    if parallelism:
        render_parallelism(parallelism, name=name, traffic=traffic, sla=sla, console=console)
