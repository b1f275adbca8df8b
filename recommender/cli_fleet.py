"""`recommender plan --spec` and the daily-profile answers `search` prints: kept out of cli.py to keep it thin."""

from __future__ import annotations

from typing import TYPE_CHECKING

from recommender.report.console import make_console

if TYPE_CHECKING:
    from pathlib import Path

    from rich.console import Console

    from recommender.recommendation import Recommendation


def plan_spec(path: Path, model: str | None, json_output: bool) -> None:
    """The space's plan rows at the peak hour, then the replica schedule and the GPU mix of its profile.

    Args:
        path: the search space YAML.
        model: a shipped architecture, config.json or model directory; default: the spec's model.name.
        json_output: print the whole plan (`fleet.FleetPlan`) as JSON instead of tables.
    """
    from recommender.fleet import plan_fleet
    from recommender.perf.catalog import load_catalog
    from recommender.plan import load_architecture
    from recommender.report.fleet_table import render_fleet
    from recommender.report.plan_table import render_plan
    from recommender.serialization import dumps, to_data
    from recommender.spec import load_spec

    loaded = load_spec(path)
    name, shape = load_architecture(model or loaded.model.name or loaded.model.source)
    fleet = plan_fleet(loaded, shape, load_catalog(loaded.hardware_catalog))
    if json_output:
        print(dumps(to_data(fleet)), end="")
        return
    console = make_console(stderr=False)
    render_plan(fleet.rows, name=name, traffic=loaded.traffic, sla=loaded.sla, console=console)
    render_fleet(fleet.autoscale, fleet.mix, console)


def render_daily(recommendation: Recommendation, console: Console) -> None:
    """A search's schedule and GPU mix, when its spec has a daily profile (nothing otherwise)."""
    if recommendation.autoscale is None and recommendation.gpu_mix is None:
        return
    from recommender.report.fleet_table import render_fleet

    render_fleet(recommendation.autoscale, recommendation.gpu_mix, console)
