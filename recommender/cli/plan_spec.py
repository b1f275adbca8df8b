"""`recommender plan --spec` and the daily-profile answers `search` prints: kept out of main.py to keep it thin."""

from __future__ import annotations

from typing import TYPE_CHECKING

from recommender.report.console import make_console, step_progress

if TYPE_CHECKING:
    from pathlib import Path
    from types import SimpleNamespace

    from rich.console import Console

    from recommender.config.spec import SearchSpec
    from recommender.decision.recommendation import Recommendation


def plan_spec(path: Path, model: str | None, json_output: bool) -> None:
    """The space's plan rows at the peak hour, then the replica schedule and the GPU mix of its profile.

    Args:
        path: the search space YAML.
        model: a shipped architecture, config.json or model directory; default: the spec's model.name.
        json_output: print the whole plan (`fleet.FleetPlan`) as JSON instead of tables.
    """
    from recommender.config.spec import load_spec
    from recommender.engines.architecture_support import check_served
    from recommender.engines.head_sizes import check_runnable
    from recommender.fleet.empty_plan import refuse_empty_plan, spec_fields
    from recommender.fleet.spec_plan import plan_fleet, plan_hardware, plan_precisions
    from recommender.perf.catalog.architecture_check import check_traffic_fits
    from recommender.perf.catalog.gpus import load_catalog
    from recommender.perf.model.shape import ModelShape
    from recommender.report.fleet_table import render_fleet
    from recommender.report.plan_table import render_plan
    from recommender.serialization import dumps, to_data
    from recommender.study.layout_checks import check_expert_parallel

    loaded = load_spec(path)
    name, config = _architecture(path, model, loaded)
    shape, catalog = ModelShape.from_config(config), load_catalog(loaded.hardware_catalog, price_set=loaded.price_set)
    check_served(shape.architectures, loaded.engines, field=f"{path}: model.source")
    check_runnable(shape.head_dim, loaded.engines, field=f"{path}: model.source")
    check_traffic_fits(config, shape, catalog, loaded.traffic, field_prefix=f"{path}: ")
    check_expert_parallel(loaded, shape, field_prefix=f"{path}: ")  # as the search refuses them
    pairs = len(plan_hardware(loaded)) * len(plan_precisions(loaded))
    with step_progress(make_console(stderr=True), total=pairs, description="planning the peak hour") as done:
        fleet = plan_fleet(loaded, shape, catalog, on_row=done)
    refuse_empty_plan(
        fleet.rows,
        fields=spec_fields(f"{path}: "),
        comparisons=[*fleet.layouts, *fleet.parallelism, *fleet.routing],
    )
    if json_output:
        print(dumps(to_data(fleet)), end="")
        return
    console = make_console(stderr=False)
    render_plan(fleet.rows, name=name, traffic=loaded.traffic, sla=loaded.sla, console=console)
    render_fleet(fleet.autoscale, fleet.mix, console)
    from recommender.report.layout_table import render_comparisons

    render_comparisons(
        fleet.layouts, fleet.parallelism, name=name, traffic=loaded.traffic, sla=loaded.sla, console=console
    )
    from recommender.report.routing_table import render_routing

    render_routing(fleet.routing, name=name, traffic=loaded.traffic, sla=loaded.sla, console=console)


def _architecture(path: Path, model: str | None, spec: SearchSpec) -> tuple[str, SimpleNamespace]:
    """--model, else the architecture of the spec's `model.source` resolved as `--model` resolves it (a model
    directory, a config.json, a hub id of a shipped architecture: no hub is asked), else its `model.name` as a
    shipped architecture's name. `model.name` names the model for tracking first; a refusal names the source."""
    from recommender.errors import BadInputError
    from recommender.perf.catalog.architectures import read_architecture

    if model is not None:
        return read_architecture(model)
    try:
        return read_architecture(spec.model.source, field=f"{path}: model.source")
    except BadInputError as exc:
        if spec.model.name:
            try:
                return read_architecture(spec.model.name)
            except BadInputError:
                pass
        raise BadInputError(exc.field, exc.problem, f"pass --model, or {exc.fix}") from None


def render_daily(recommendation: Recommendation, console: Console) -> None:
    """A search's schedule and GPU mix, when its spec has a daily profile (nothing otherwise)."""
    if recommendation.autoscale is None and recommendation.gpu_mix is None:
        return
    from recommender.report.fleet_table import render_fleet

    render_fleet(recommendation.autoscale, recommendation.gpu_mix, console)
