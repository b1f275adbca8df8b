"""The printed answers of `recommender plan --spec` for a daily profile: autoscaled against static, and the GPU mix."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.table import Table

from recommender.money import usd

if TYPE_CHECKING:
    from rich.console import Console

    from recommender.fleet.daily.autoscale import AutoscaleSchedule
    from recommender.fleet.daily.mix_plan import GpuMix


def autoscale_lines(a: AutoscaleSchedule) -> list[str]:
    """The schedule in a few lines: the bill both ways, then rate and replicas hour by hour."""
    lines = [
        f"autoscaled {usd(a.usd_per_month_autoscaled)}/month vs static {usd(a.usd_per_month_static)}/month "
        f"({a.static_replicas} replicas sized for the {a.peak_rps:g} req/s peak): saves {a.saving_percent:.1f} %",
        f"  {a.candidate_key}: {a.capacity_rps:.2f} req/s per replica within the SLA, headroom {a.headroom:g}, "
        f"at least {a.min_replicas} replica(s), {usd(a.usd_per_replica_hour)}/replica-hour",
        "  hour     " + " ".join(f"{h.hour:>3}" for h in a.hours),
        "  req/s    " + " ".join(f"{h.rate_rps:>3.0f}" for h in a.hours),
        "  replicas " + " ".join(f"{h.replicas:>3}" for h in a.hours),
    ]
    return [*lines, f"  [{a.provenance.kind}] {a.provenance.detail}"]


def mix_table(mix: GpuMix) -> Table:
    """Which prompt lengths go to which pool, at the peak hour."""
    table = Table(title=f"GPU mix at the peak: {mix.verdict}")
    for column in ("prompt tokens", "share", "req/s", "routed to"):
        table.add_column(column)
    for route in mix.routes:
        b = route.bucket
        ranked = sorted(route.shares.items(), key=lambda kv: -kv[1])
        shares = ", ".join(f"{share:.0%} {key}" for key, share in ranked if share >= 0.005)  # under 0.5 %: solver dust
        table.add_row(b.label.removeprefix("prompt "), f"{b.share:.0%}", f"{route.rate_rps:.1f}", shares)
    return table


def mix_lines(mix: GpuMix) -> list[str]:
    """Pools, their bill against the best single type, and one launch command per pool."""
    lines = [
        f"mix {usd(mix.usd_per_month)}/month vs best single type {mix.single_key} x{mix.single_replicas} "
        f"{usd(mix.usd_per_month_single)}/month (MILP solved in {mix.solve_seconds * 1e3:.0f} ms)"
    ]
    if mix.usd_per_month_autoscaled is not None and mix.usd_per_month_single_autoscaled is not None:
        lines.append(
            f"  over the day, every pool autoscaled: mix {usd(mix.usd_per_month_autoscaled)}/month vs "
            f"{mix.single_key} alone {usd(mix.usd_per_month_single_autoscaled)}/month"
        )
    for pool in mix.pools:
        lines.append(
            f"  pool {pool.key}: {pool.replicas} replica(s), {usd(pool.usd_per_month)}/month; quality {pool.quality}"
        )
        command = next((e for e in pool.launch if e.supported and e.command), None)
        if pool.prepare is not None:
            lines.append(f"    checkpoint: {pool.prepare}")
        lines.append(f"    {command.engine}: {command.command}" if command else "    no engine launches it")
    return [*lines, f"  [{mix.provenance.kind}] {mix.provenance.detail}"]


def render_fleet(autoscale: AutoscaleSchedule | None, mix: GpuMix | None, console: Console) -> None:
    """Both answers a daily profile asks for; a line saying why where one is missing."""
    for line in autoscale_lines(autoscale) if autoscale else ["autoscaling: no configuration meets the SLA"]:
        console.print(line, markup=False, highlight=False)
    if mix is None:
        console.print("GPU mix: no pool serves every length bucket within the SLA", markup=False, highlight=False)
        return
    console.print(mix_table(mix))
    for line in mix_lines(mix):
        console.print(line, markup=False, highlight=False, soft_wrap=True)
