"""`recommender plan`: cost and latency of an architecture without its weights, across GPUs and precisions.

Parse, call, print: the flags become one `PlanRequest` and the comparison they ask for (``fleet/plan_views.py``
decides which, for these flags and for `plan --spec`); the fleet planners answer; the rows or the comparison are
printed as tables or JSON. The options are declared in ``plan_options``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import TYPE_CHECKING

import typer

from recommender.cli.plan_options import (
    BatchSizes,
    DecodeHardware,
    Degrees,
    EngineReleases,
    Engines,
    ExpertParallel,
    ExpertSkew,
    Hardware,
    JsonOutput,
    KVDtypes,
    Layouts,
    LinkName,
    Model,
    OutputTokens,
    Precisions,
    PriceSetName,
    PromptTokens,
    RedundantExperts,
    Routings,
    Rps,
    Schemes,
    SpecPath,
    TpotMs,
    TtftMs,
)
from recommender.report.console import make_console, step_progress

if TYPE_CHECKING:
    from pathlib import Path

    from recommender.cli.plan_inputs import PlanTarget
    from recommender.fleet.plan_request import PlanRequest
    from recommender.fleet.plan_views import PlanViews
    from recommender.perf.sim.routing import RoutingPolicy

EPILOG = (
    "Latencies and capacities are calibrated (step costs fitted on measured serving runs, their uncertainty from "
    "held-out step residuals, simulated through the traffic); quality is a labelled prior, verdict 'unverified'. "
    "Rows are planned side by side, one process per usable CPU core (RECOMMENDER_PLAN_PROCESSES=N caps them)."
)


def plan_command(
    ctx: typer.Context,
    model: Model = None,
    spec: SpecPath = None,
    prompt_tokens: PromptTokens = 512,
    output_tokens: OutputTokens = 256,
    rps: Rps = 10.0,
    ttft_ms: TtftMs = 1000.0,
    tpot_ms: TpotMs = 50.0,
    hardware: Hardware = None,
    batch_size: BatchSizes = None,
    engine: Engines = None,
    precision: Precisions = None,
    scheme: Schemes = None,
    tensor_parallel: Degrees = None,
    kv_cache_dtype: KVDtypes = None,
    engine_release: EngineReleases = None,
    price_set: PriceSetName = None,
    layout: Layouts = None,
    link: LinkName = "infiniband-ndr",
    decode_hardware: DecodeHardware = None,
    expert_parallel: ExpertParallel = False,
    expert_skew: ExpertSkew = 0.0,
    redundant_experts: RedundantExperts = 0,
    routing: Routings = None,
    json_output: JsonOutput = False,
) -> None:
    """Project cost and latency for an architecture without its weights, across GPUs and precisions."""
    from recommender.cli.plan_inputs import layouts, plan_target, pointed_plan, routings, traffic_and_sla
    from recommender.config.dependencies import PlanFlags, check_flags

    laid_out, routed = layouts(layout), routings(routing)
    check_flags(PlanFlags(_typed(ctx), tuple(laid_out), expert_parallel))
    if spec is not None:
        _plan_from_spec(spec, model, json_output)
        return
    traffic, sla = traffic_and_sla(
        prompt_tokens=prompt_tokens, output_tokens=output_tokens, rps=rps, ttft_ms=ttft_ms, tpot_ms=tpot_ms
    )
    pointed = pointed_plan(
        hardware=hardware,
        engines=engine,
        precisions=precision,
        schemes=scheme,
        tensor_parallel=tensor_parallel,
        kv_cache_dtypes=kv_cache_dtype,
        batch_sizes=batch_size,
        engine_releases=engine_release,
    )
    views = _views(laid_out, routed, expert_parallel, expert_skew, redundant_experts, decode_hardware)
    target = plan_target(model, pointed, price_set, prompt_tokens, output_tokens)
    _answer(target.request(traffic, sla, pointed, link=link), views, target, json_output=json_output)


def _views(
    laid_out: list[str],
    routed: tuple[RoutingPolicy, ...],
    expert_parallel: bool,
    skew: float,
    redundant_experts: int,
    decode_hardware: list[str] | None,
) -> PlanViews:
    """The comparison the flags ask for (``fleet/plan_views.py``), --decode-hardware's GPUs each named once."""
    from recommender.cli.plan_inputs import distinct
    from recommender.fleet.plan_views import views_of_flags

    distinct(decode_hardware or [], flag="--decode-hardware")
    return views_of_flags(
        laid_out,
        expert_parallel=expert_parallel,
        skew=skew,
        redundant_experts=redundant_experts,
        decode_hardware=decode_hardware,
        routing=routed,
    )


def _typed(ctx: typer.Context) -> frozenset[str]:
    """The options given on the command line or in the environment, by their flag spelling (not their defaults)."""
    given = {"COMMANDLINE", "ENVIRONMENT"}  # by name: typer vendors its own click, whose enum is not click's

    def source(name: str) -> str:
        found = ctx.get_parameter_source(name)
        return "" if found is None else found.name

    return frozenset(p.opts[0] for p in ctx.command.params if p.name and p.opts and source(p.name) in given)


def _plan_from_spec(spec: Path, model: str | None, json_output: bool) -> None:
    from recommender.cli.plan_spec import plan_spec

    plan_spec(spec, model, json_output)


@contextmanager
def _progress(request: PlanRequest) -> Iterator[PlanRequest]:
    """The request with a progress bar on a terminal hearing each planned GPU x precision pair."""
    with step_progress(make_console(stderr=True), total=request.pairs, description="planning") as done:
        yield replace(request, on_row=done)


def _answer(request: PlanRequest, views: PlanViews, target: PlanTarget, *, json_output: bool) -> None:
    """The comparison `views` asks for, else the plain rows; refused where nothing serves the traffic
    (``fleet.empty_plan``), else printed as JSON or as tables."""
    from recommender.fleet.empty_plan import FLAG_FIELDS, refuse_empty_plan
    from recommender.fleet.plan import plan, rows_to_json
    from recommender.fleet.plan_views import compare
    from recommender.report.layout_table import render_comparisons
    from recommender.report.plan_table import render_cheapest_launch, render_plan
    from recommender.report.routing_table import render_routing
    from recommender.serialization import dumps, list_to_data

    traffic, sla = request.traffic, request.sla
    if views.any:
        with _progress(request) as planned:
            compared = compare(planned, views)
        refuse_empty_plan(compared.rows, fields=FLAG_FIELDS, comparisons=compared.comparisons)
        if json_output:
            print(dumps(list_to_data(compared.comparisons)))
            return
        console = make_console(stderr=False)
        render_comparisons(
            compared.layouts, compared.parallelism, name=target.name, traffic=traffic, sla=sla, console=console
        )
        render_routing(compared.routing, name=target.name, traffic=traffic, sla=sla, console=console)
        return
    with _progress(request) as planned:
        rows = plan(planned)
    refuse_empty_plan(rows, fields=FLAG_FIELDS)
    if json_output:
        print(rows_to_json(rows))
        return
    console = make_console(stderr=False)
    render_plan(rows, name=target.name, traffic=traffic, sla=sla, console=console)
    render_cheapest_launch(rows, target.served, console)
