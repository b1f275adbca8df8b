"""The printed answer of `recommender plan`: one row per GPU and precision, every figure modeled."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from rich.table import Table

from recommender.money import usd
from recommender.perf.sim.physics_capacity import ALARM_FACTOR

if TYPE_CHECKING:
    from rich.console import Console

    from recommender.config.spec import LatencySLA, Traffic
    from recommender.fleet.plan_row import PlanRow

_COLUMNS = (
    "GPU",
    "precision/method",
    "engine",
    "tp",
    "batch",
    "$/1M tok",
    "replicas",
    "$/month",
    "P99 TTFT ms",
    "P99 TPOT ms",
    "P99s over",
    "req/s per replica",
    "physics req/s",
    "quality",
)
#: After a capacity far below the physics ceiling (`PlanRow.physics_alarm`).
ALARM_MARK = "(!)"


def _p99_basis(r: PlanRow) -> str:
    """How many simulated requests the row's P99s rest on, and whether they settled ("2,400 settled")."""
    if r.p99_requests is None:
        return "-"
    return f"{r.p99_requests:,} " + ("settled" if r.p99s_settled else "not settled")


def _latency(value: float | None, high: float | None, digits: int) -> str:
    """A P99 and, where the model gives one, the upper end of its interval ("120 (≤190)")."""
    if value is None:
        return "-"
    return f"{value:.{digits}f}" + ("" if high is None else f" (≤{high:.{digits}f})")


def _rate(value: float | None) -> str:
    return "-" if value is None else f"{value:.3g}"


def _or_dash(value: object) -> str:
    """A count, or "-" where the row has none (0 counts as none: no configuration)."""
    return str(value or "-")


def _cells(r: PlanRow) -> tuple[str, ...]:
    return (
        r.hardware,
        f"{r.precision}/{r.method}",
        r.engine or "-",
        _or_dash(r.tensor_parallel),
        _or_dash(r.batch_size) + (" kv fp8" if r.kv_cache_dtype == "fp8" and r.batch_size else ""),
        usd(r.usd_per_1m_tokens),
        _or_dash(r.replicas),
        usd(r.usd_per_month),
        _latency(r.ttft_p99_ms, r.ttft_p99_high_ms, 0),
        _latency(r.tpot_p99_ms, r.tpot_p99_high_ms, 1),
        _p99_basis(r),
        _rate(r.max_rps_per_replica) + (f" {ALARM_MARK}" if r.physics_alarm else ""),
        _rate(r.physics_rps_per_replica),
        r.note or f"{r.quality} [{r.quality_verdict}]",
    )


def _physics_footnote(rows: Sequence[PlanRow]) -> str:
    """What the physics column is, and each flagged row's reason."""
    flagged = "".join(
        f"\n{ALARM_MARK} {r.hardware} {r.precision}/{r.method} tp {r.tensor_parallel}: {r.physics_alarm}"
        for r in rows
        if r.physics_alarm
    )
    return (
        "; physics req/s: a throughput ceiling from the datasheet (bandwidth-bound decode of the KV-limited batch, "
        f"compute-bound prefill, no SLA; recommender/perf/sim/physics_capacity.py); {ALARM_MARK}: capacity under "
        f"1/{ALARM_FACTOR:g} of it{flagged}"
    )


def _unpriced_footnote(rows: Sequence[PlanRow]) -> str:
    """Once per GPU the price set does not price: why its rows have figures but no dollars, and the fix."""
    reasons = dict.fromkeys(r.unpriced for r in rows if r.unpriced)
    return "".join(f"\nno $ figures: {reason}" for reason in reasons)


def render_plan(rows: Sequence[PlanRow], *, name: str, traffic: Traffic, sla: LatencySLA, console: Console) -> None:
    """The rows under a title naming the traffic and SLA they were planned for, and where the figures come from."""
    table = Table(
        title=f"{name}: {traffic.prompt_tokens}+{traffic.output_tokens} tokens at {traffic.requests_per_second:g} "
        f"req/s, P99 TTFT <= {sla.ttft_p99_ms:g} ms, TPOT <= {sla.tpot_p99_ms:g} ms (no quality measured)"
    )
    for column in _COLUMNS:
        table.add_column(column)
    for row in rows:
        table.add_row(*_cells(row))
    console.print(table)
    sets = sorted({row.price_set for row in rows if row.price_set}) or ["none priced"]
    console.print(
        "[dim]calibrated: step costs fitted per engine on measured H100 serving runs (benchmarks/gpu_fidelity.py), "
        "moved to other GPUs through their datasheets, + continuous-batching simulation; (≤x): the P99 with every "
        f"step at its one-sided {sla.confidence:.0%} upper bound (held-out step residuals), which the SLA check uses; "
        f"prices: {', '.join(sets)} (sources and dates in recommender/perf/catalog/price_sets.yaml); "
        f"P99s over: the simulated requests the P99s rest on (warm-up and drain left out), settled when doubling "
        f"the requests moved them under 5% (recommender/perf/sim/settle.py); "
        f"req/s per replica: the highest arrival rate one replica carries within the SLA at steady state"
        f"{_physics_footnote(rows)}{_unpriced_footnote(rows)}[/]"
    )


def render_cheapest_launch(rows: Sequence[PlanRow], model: str, console: Console) -> None:
    """The cheapest priced row's launch command, under the table (rows come cheapest first; `--json` has every
    row's)."""
    cheapest = next((r for r in rows if r.launch and r.usd_per_month is not None), None)
    if cheapest is None:
        return
    console.print(
        f"launch the cheapest ({cheapest.hardware}, {cheapest.method}, {cheapest.engine}; --json gives "
        f"every row's; a checkpoint scheme serves the directory `recommender quantize --model {model} "
        f"--scheme {cheapest.method} --out DIR` writes): {cheapest.launch}",
        soft_wrap=True,
        markup=False,
    )
