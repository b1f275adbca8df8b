"""`recommender eval`: is this scheme good enough for this use case? (and the model loading it shares with `probe`)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer

from recommender.cli.eval_engine import EngineEval
from recommender.errors import BadInputError
from recommender.report.console import make_console

if TYPE_CHECKING:
    from rich.console import Console

    from recommender.quality.result import QualityResult
    from recommender.quantize import QuantScheme
    from recommender.quantize.model_cache import ModelCache

EPILOG = (
    "Exit codes: 0 pass, 1 fail, 3 inconclusive (more documents needed: raise the suite's limit), 2 bad input "
    "(also: a method that cannot run on this device), 4 unverified (a check this way cannot measure: KL through an "
    "engine).\n\n"
    "Verdict policy: the suite's verdict_policy; 'confidence' passes a task only when the whole 95 % paired "
    "bootstrap interval of its margin is within the threshold.\n\n"
    "With --checkpoint DIR the scheme's saved checkpoint is scored as it is on disk (the files an engine loads).\n\n"
    "Through an engine: --endpoint URL --baseline-endpoint URL scores the candidate and the unquantized model on "
    "your OpenAI-compatible servers (vLLM, SGLang); --serve vllm starts vLLM's CPU build on --model, then on "
    "--checkpoint (make engine-env first). No per-document cache, one look at the whole budget, KL unverified."
)
Endpoint = Annotated[
    str | None, typer.Option(help="Score through this OpenAI-compatible server of the candidate (base URL).")
]
BaselineEndpoint = Annotated[
    str | None, typer.Option(help="The same engine serving --model (the reference), with --endpoint.")
]
Serve = Annotated[str | None, typer.Option(help="Start this engine here on --model, then --checkpoint: vllm.")]


Checkpoint = Annotated[
    Path | None, typer.Option(help="Score this saved checkpoint of --scheme (from `recommender quantize`).")
]
Limit = Annotated[int | None, typer.Option(min=1, max=10_000_000, help="Documents per task (default: the suite's).")]


def _scheme(method: str, checkpoint: Path | None, precision: str | None) -> QuantScheme:
    """The scheme to score from --scheme, its saved --checkpoint if given, and --precision as a check."""
    from recommender.input_files import expand_user
    from recommender.quantize import get_scheme
    from recommender.quantize.saved import saved_checkpoint

    quant = get_scheme(method, field="--scheme")
    if checkpoint is not None:
        quant = saved_checkpoint(quant, expand_user(checkpoint, field="--checkpoint").resolve())
    if precision is not None and precision != quant.precision:
        raise BadInputError(
            "--precision",
            f"{method} is a {quant.precision} method, not {precision}",
            f"pass --precision {quant.precision} or a {precision} method",
        )
    return quant


def eval_command(
    model: Annotated[str, typer.Option(help="Local model directory or hub id (org/name).")],
    method: Annotated[str, typer.Option("--scheme", "--method", help="Scheme, e.g. fp8-dynamic, w4a16-gptq-g128.")],
    use_case: Annotated[Path, typer.Option(help="Use-case suite YAML, e.g. recommender/demo/use_case.yaml.")],
    checkpoint: Checkpoint = None,
    precision: Annotated[str | None, typer.Option(help="Precision the method must belong to (a check).")] = None,
    limit: Limit = None,
    adaptive: Annotated[bool, typer.Option(help="Stop early once every verdict is clear.")] = True,
    revision: Annotated[str | None, typer.Option(help="Hub revision for hub ids.")] = None,
    allow_pickle: Annotated[bool, typer.Option(help="Allow pickle (.bin) weights.")] = False,
    trust_remote_code: Annotated[bool, typer.Option(help="Run code shipped with the model.")] = False,
    json_output: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
    endpoint: Endpoint = None,
    baseline_endpoint: BaselineEndpoint = None,
    serve: Serve = None,
) -> None:
    """Is this quantization good enough for this use case? Paired lm-eval deltas with intervals, KL, a verdict."""
    from recommender.config.destinations import check_cache_root
    from recommender.quality.cache import QualityCache
    from recommender.quality.calibration_docs import quantize_context
    from recommender.quality.evaluate import QualityEvaluator
    from recommender.quality.lm_eval_runner import check_tasks_known, task_manager
    from recommender.quality.suite import load_use_case

    if endpoint is not None or serve is not None or baseline_endpoint is not None:
        _eval_through_engine(
            EngineEval(
                model=model,
                method=method,
                precision=precision or "",
                checkpoint=checkpoint,
                endpoint=endpoint,
                baseline_endpoint=baseline_endpoint,
                serve=serve,
                limit=limit,
            ),
            use_case,
            json_output=json_output,
        )
    check_cache_root()  # where per-document results go: refused up front, not at the first cached document
    quant = _scheme(method, checkpoint, precision)
    suite = load_use_case(use_case, field="--use-case")
    models = _models_here(
        model,
        quant,
        fix="pick a method that runs here, or run on a device that has its kernels",
        revision=revision,
        allow_pickle=allow_pickle,
        trust_remote_code=trust_remote_code,
    )
    manager = task_manager(suite)
    check_tasks_known(suite, manager)
    models.context = quantize_context(suite, manager, models.source)
    evaluator = QualityEvaluator(
        suite, models, cache=QualityCache.default(), limit=limit, manager=manager, adaptive=adaptive
    )
    console = make_console(stderr=json_output)
    with console.status(f"evaluating {quant.precision}/{quant.name} and the bf16 baseline with lm-eval"):
        result = evaluator.evaluate(quant)
    _answer(result, model=models.source.name, use_case=suite.name, console=console, json_output=json_output)


def _answer(result: QualityResult, *, model: str, use_case: str, console: Console, json_output: bool) -> NoReturn:
    """Print the result (a table, or JSON for machines) and exit with its verdict's code."""
    from recommender.report.eval_table import render_eval
    from recommender.serialization import dumps, to_data

    if json_output:
        print(dumps(to_data(result)), end="")
    else:
        render_eval(result, model=model, use_case=use_case, console=console)
    raise typer.Exit(EXIT_CODES.get(result.verdict, 2))


#: The command's exit code by verdict.
EXIT_CODES = {"pass": 0, "fail": 1, "inconclusive": 3, "unverified": 4}


def _eval_through_engine(ask: EngineEval, use_case: Path, *, json_output: bool) -> NoReturn:
    """`eval --endpoint | --serve`: the suite through an engine (``cli/eval_engine.py``); exits with the verdict."""
    from dataclasses import replace

    from recommender.cli.eval_engine import check_engine_eval, run_engine_eval
    from recommender.quality.lm_eval_runner import check_tasks_known, task_manager
    from recommender.quality.suite import load_use_case
    from recommender.quantize import get_scheme

    quant = get_scheme(ask.method, field="--scheme")
    if ask.precision and ask.precision != quant.precision:
        raise BadInputError("--precision", f"{ask.method} is a {quant.precision} method", "fix --precision")
    ask = replace(ask, precision=quant.precision)
    check_engine_eval(ask)
    suite = load_use_case(use_case, field="--use-case")
    manager = task_manager(suite)
    check_tasks_known(suite, manager)
    result = run_engine_eval(ask, suite, manager)
    _answer(
        result,
        model=Path(ask.model).name,
        use_case=suite.name,
        console=make_console(stderr=json_output),
        json_output=json_output,
    )


def _models_here(
    model: str,
    quant: QuantScheme,
    *,
    fix: str,
    revision: str | None = None,
    allow_pickle: bool = False,
    trust_remote_code: bool = False,
) -> ModelCache:
    """What `eval` and `probe` check before loading anything (--model readable, the method runnable here)."""
    from recommender.device import local_device
    from recommender.models.source import ModelSource
    from recommender.quantize.model_cache import ModelCache

    source = ModelSource.resolve(
        model,
        base_dir=Path.cwd(),
        field="--model",
        revision=revision,
        allow_pickle=allow_pickle,
        trust_remote_code=trust_remote_code,
    )
    source.load_config(field="--model")
    device = local_device()
    if (reason := quant.unavailable_reason(device)) is not None:
        raise BadInputError("--method", reason, fix)
    return ModelCache(source, device)
