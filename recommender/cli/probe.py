"""`recommender probe`: measure the really quantized model on this machine."""

from __future__ import annotations

from typing import Annotated

import typer

from recommender.cli.common import TRACKING_URI_HELP
from recommender.cli.eval import _models_here
from recommender.errors import BadInputError
from recommender.report.console import make_console

__all__ = ["EPILOG", "probe_command"]

EPILOG = (
    "Every figure is measured on this machine (warm-up 1, median of --repeats, min-max spread). With --endpoint URL "
    "or --serve vllm: measured through a serving engine by `vllm bench serve` (Poisson --rate, closed-loop "
    "--concurrency), logged to MLflow; docs/measure-on-your-engine.md."
)


#: The SLA flags' help (the engine probe's capacity check).
SLA_HELP = (
    "With --endpoint/--serve, closed-loop and Poisson levels: the P99 {} limit (ms) the engine's capacity is "
    "simulated for, then bracketed by Poisson levels at 0.75, 1 and 1.3 x it (give both limits)."
)
SlaTtft = Annotated[float | None, typer.Option(min=0.001, max=3_600_000, help=SLA_HELP.format("TTFT"))]
SlaTpot = Annotated[float | None, typer.Option(min=0.001, max=3_600_000, help=SLA_HELP.format("TPOT"))]


def probe_command(
    model: Annotated[str, typer.Option(help="Local model directory or hub id (with --endpoint: the served model).")],
    method: Annotated[
        str | None, typer.Option(help="Quantization method, e.g. baseline, bnb-nf4, torchao-int8-wo.")
    ] = None,
    prompt_tokens: Annotated[
        list[int] | None, typer.Option(min=1, max=10_000_000, help="Prompt lengths (repeat the flag).")
    ] = None,
    batch_size: Annotated[
        list[int] | None, typer.Option(min=1, max=65_536, help="Decode batch sizes (repeat the flag).")
    ] = None,
    repeats: Annotated[int, typer.Option(min=1, max=1000)] = 3,
    json_output: Annotated[bool, typer.Option("--json", help="Print the measurements as JSON.")] = False,
    endpoint: Annotated[str | None, typer.Option(help="An OpenAI-compatible server's base URL to load.")] = None,
    serve: Annotated[str | None, typer.Option(help="Start this engine on --model and load it: vllm.")] = None,
    rate: Annotated[
        list[float] | None, typer.Option(min=0.01, max=100_000, help="Poisson request rates (repeat; default 2, 8).")
    ] = None,
    concurrency: Annotated[
        list[int] | None, typer.Option(min=1, max=100_000, help="Closed-loop levels: requests in flight (repeat).")
    ] = None,
    num_prompts: Annotated[int, typer.Option(min=1, max=1_000_000, help="Requests per load level.")] = 100,
    input_len: Annotated[int, typer.Option(min=1, max=1_000_000, help="Random prompt tokens per request.")] = 256,
    output_len: Annotated[int, typer.Option(min=1, max=1_000_000, help="Tokens generated per request.")] = 32,
    tokenizer: Annotated[str | None, typer.Option(help="The load generator's tokenizer (default: --model).")] = None,
    tracking_uri: Annotated[str | None, typer.Option(help=TRACKING_URI_HELP)] = None,
    sla_ttft_p99_ms: SlaTtft = None,
    sla_tpot_p99_ms: SlaTpot = None,
) -> None:
    """Measure the really quantized model here: prefill time, decode step time, memory."""
    from recommender.perf.catalog.architecture_check import check_positions
    from recommender.perf.probe import probe as run_probe
    from recommender.quantize import get_scheme
    from recommender.report.probe_table import render_probe
    from recommender.serialization import dumps, list_to_data

    if endpoint is not None or serve is not None:
        _engine_probe(
            model, endpoint, serve, tokenizer, tuple(rate or ()), tuple(concurrency or ()), (num_prompts, input_len,
            output_len), tracking_uri, json_output=json_output, sla=_sla(sla_ttft_p99_ms, sla_tpot_p99_ms),
        )  # fmt: skip
        return
    if method is None:
        raise BadInputError("--method", "missing", "name the quantization method to probe, e.g. baseline")
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


def _engine_probe(
    model: str,
    endpoint: str | None,
    serve: str | None,
    tokenizer: str | None,
    rates: tuple[float, ...],
    concurrencies: tuple[int, ...],
    size: tuple[int, int, int],
    tracking_uri: str | None,
    *,
    json_output: bool,
    sla: tuple[float, float] | None = None,
) -> None:
    from recommender.cli.probe_engine import EngineProbe, run_engine_probe

    if endpoint is not None and serve is not None:
        raise BadInputError(
            "--endpoint", "given with --serve", "load a running server (--endpoint) or start one (--serve)"
        )
    run_engine_probe(
        EngineProbe(
            model=model,
            endpoint=endpoint,
            serve=serve,
            tokenizer=tokenizer,
            rates=rates or (() if concurrencies else (2.0, 8.0)),
            concurrencies=concurrencies,
            prompts=size[0],
            input_len=size[1],
            output_len=size[2],
            tracking_uri=tracking_uri,
            json_output=json_output,
            sla=sla,
        )
    )


def _sla(ttft: float | None, tpot: float | None) -> tuple[float, float] | None:
    """Both P99 limits or neither (one alone is refused naming the other)."""
    if (ttft is None) != (tpot is None):
        missing = "--sla-tpot-p99-ms" if tpot is None else "--sla-ttft-p99-ms"
        raise BadInputError(missing, "missing: the capacity check needs both P99 limits", f"pass {missing} too")
    return None if ttft is None or tpot is None else (ttft, tpot)
