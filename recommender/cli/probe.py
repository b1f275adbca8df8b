"""`recommender probe`: measure the really quantized model on this machine."""

from __future__ import annotations

from typing import Annotated

import typer

from recommender.cli.eval import _models_here
from recommender.report.console import make_console

__all__ = ["EPILOG", "probe_command"]

EPILOG = "Every figure is measured on this machine (warm-up 1, median of --repeats, min-max spread)."


def probe_command(
    model: Annotated[str, typer.Option(help="Local model directory or hub id.")],
    method: Annotated[str, typer.Option(help="Quantization method, e.g. baseline, bnb-nf4, torchao-int8-wo.")],
    prompt_tokens: Annotated[
        list[int] | None, typer.Option(min=1, max=10_000_000, help="Prompt lengths (repeat the flag).")
    ] = None,
    batch_size: Annotated[
        list[int] | None, typer.Option(min=1, max=65_536, help="Decode batch sizes (repeat the flag).")
    ] = None,
    repeats: Annotated[int, typer.Option(min=1, max=1000)] = 3,
    json_output: Annotated[bool, typer.Option("--json", help="Print the measurements as JSON.")] = False,
) -> None:
    """Measure the really quantized model here: prefill time, decode step time, memory."""
    from recommender.perf.catalog.architecture_check import check_positions
    from recommender.perf.probe import probe as run_probe
    from recommender.quantize import get_scheme
    from recommender.report.probe_table import render_probe
    from recommender.serialization import dumps, list_to_data

    quant = get_scheme(method, field="--method")
    models = _models_here(model, quant, fix="pick a method that runs here")
    config = models.source.load_config(field="--model")
    for tokens in prompt_tokens or [128]:  # before the model loads: a prompt it has no positions for
        check_positions(config, tokens + 1, field="--prompt-tokens")
    loaded = models.get(quant)
    results = [
        run_probe(loaded, prompt_tokens=p, batch_size=b, repeats=repeats)
        for p in (prompt_tokens or [128])
        for b in (batch_size or [1, 8, 32])
    ]
    if json_output:
        print(dumps(list_to_data(results)), end="")
        return
    render_probe(results, model=models.source.name, method=quant, console=make_console(stderr=False))
