"""`recommender plan`: cost and latency of an architecture without its weights, across GPUs and precisions."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from recommender.errors import BadInputError
from recommender.perf.catalog.architectures import read_architecture
from recommender.quantize.precisions import PLANNED_PRECISIONS
from recommender.report.console import make_console, step_progress

if TYPE_CHECKING:
    from recommender.config.spec import LatencySLA, Traffic
    from recommender.fleet.plan import PlanRow
    from recommender.perf.catalog.gpus import Catalog
    from recommender.perf.model.shape import ModelShape

EPILOG = ("Latencies and capacities are calibrated (step costs fitted on measured serving runs, their uncertainty from "
          "held-out step residuals, simulated through the traffic); quality is a labelled prior, verdict 'unverified'.")



HARDWARE_HELP = ("Catalog GPUs (repeat the flag); default: every catalog GPU (an unpriced one with the price set "
                 "that lacks it named).")


def _plan_with_progress(
    shape: ModelShape, catalog: Catalog, hardware: list[str], traffic: Traffic, sla: LatencySLA, batch_sizes: list[int],
    model: str,
) -> list[PlanRow]:
    """Every GPU x precision row, with a progress bar on a terminal (each pair simulates up to four TP degrees)."""
    from recommender.fleet.plan import plan

    precisions = list(PLANNED_PRECISIONS)
    pairs = len(hardware) * len(precisions)
    with step_progress(make_console(stderr=True), total=pairs, description="planning") as done:
        return plan(shape, catalog, hardware=hardware, precisions=precisions, traffic=traffic, sla=sla,
                    batch_sizes=batch_sizes, on_row=done, model=model)  # fmt: skip


def plan_command(
    model: Annotated[
        str | None,
        typer.Option(help="Shipped architecture (e.g. llama-3.1-8b), a config.json, or a model directory "
                     "(default with --spec: the architecture of the spec's model.source)."),
    ] = None,
    spec: Annotated[
        Path | None,
        typer.Option(help="A search space: plan its GPUs, precisions, batch sizes, traffic and SLA; with a daily "
                     "profile, also autoscaled vs static $/month and the GPU mix (the flags below are ignored)."),
    ] = None,
    prompt_tokens: Annotated[int, typer.Option(min=1, max=10_000_000)] = 512,
    output_tokens: Annotated[int, typer.Option(min=1)] = 256,
    rps: Annotated[float, typer.Option(min=0.001, help="Target requests per second.")] = 10.0,
    ttft_ms: Annotated[float, typer.Option(min=0.001, help="P99 TTFT SLA, ms.")] = 1000.0,
    tpot_ms: Annotated[float, typer.Option(min=0.001, help="P99 TPOT SLA, ms.")] = 50.0,
    hardware: Annotated[list[str] | None, typer.Option(help=HARDWARE_HELP)] = None,
    batch_size: Annotated[list[int] | None, typer.Option(min=1, help="max_num_seqs values to try (repeat).")] = None,
    price_set: Annotated[
        str | None, typer.Option(help="Named, dated prices of one provider (recommender/perf/catalog/price_sets.yaml).")
    ] = None,
    json_output: Annotated[bool, typer.Option("--json", help="Print the rows as JSON.")] = False,
) -> None:
    """Project cost and latency for an architecture without its weights, across GPUs and precisions."""
    from recommender.cli.plan_inputs import check_batch_sizes, distinct, traffic_and_sla
    from recommender.fleet.plan import rows_to_json
    from recommender.perf.catalog.architecture_check import check_request_fits
    from recommender.perf.catalog.gpus import load_catalog
    from recommender.perf.catalog.prices import get_price_set
    from recommender.perf.model.shape import ModelShape
    from recommender.report.plan_table import render_cheapest_launch, render_plan

    if spec is not None:
        from recommender.cli.plan_spec import plan_spec

        plan_spec(spec, model, json_output)
        return
    if model is None:
        raise BadInputError("--model", "no architecture to plan", "pass --model llama-3.1-8b (or --spec SPACE.yaml)")
    traffic, sla = traffic_and_sla(prompt_tokens=prompt_tokens, output_tokens=output_tokens, rps=rps, ttft_ms=ttft_ms,
                                   tpot_ms=tpot_ms)  # fmt: skip
    distinct(hardware or [], flag="--hardware")
    check_batch_sizes(batch_size or [])
    name, config = read_architecture(model)
    shape = ModelShape.from_config(config)
    catalog = load_catalog(price_set=get_price_set(price_set, field="--price-set").name)
    check_request_fits(config, shape, catalog, prompt_tokens=prompt_tokens, output_tokens=output_tokens,
                       field="--prompt-tokens")  # fmt: skip
    # Without --hardware, every catalog GPU: one the price set does not price still gets its fit, latencies and
    # capacity (its dollar columns empty, the reason under the table).
    hardware = hardware if hardware is not None else list(catalog.accelerators)
    served = next(iter(getattr(config, "_hub_ids", None) or []), model)  # a shipped name launches its hub id
    rows = _plan_with_progress(shape, catalog, hardware, traffic, sla, batch_size or [64, 256], str(served))
    if json_output:
        print(rows_to_json(rows))
        return
    console = make_console(stderr=False)
    render_plan(rows, name=name, traffic=traffic, sla=sla, console=console)
    render_cheapest_launch(rows, str(served), console)
