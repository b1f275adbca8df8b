"""The `recommender` command line: parse, call the library, print. Nothing else lives here.

Exit codes: 0 a recommendation was found; 1 the search ran but no candidate met every
threshold; 2 bad input (one line on stderr naming the field and the fix).
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from recommender.cli import estimate as cli_estimate
from recommender.cli import eval as cli_eval
from recommender.cli import plan as cli_plan
from recommender.cli import quantize as cli_quantize
from recommender.cli.eval import _models_here
from recommender.cli.interrupt import ctrl_c_event
from recommender.errors import BadInputError
from recommender.quiet import VERBOSE_ENV, quiet_libraries
from recommender.report.console import make_console, trial_progress, usage_error

if TYPE_CHECKING:
    from rich.console import Console

    from recommender.study import Prepared, SearchOutcome

DRY_RUN_HELP = ("Check everything and print what the search would do (candidates, pruned and why, schemes to "
                "quantize and score, documents, a time estimate); load no weights, write nothing.")
TRACKING_URI_HELP = "MLflow tracking URI (default: $MLFLOW_TRACKING_URI, else sqlite:///mlruns/mlflow.db)."

DEMO_SPEC = Path(str(resources.files("recommender.demo") / "search_space.yaml"))

app = typer.Typer(
    name="recommender",
    help=(
        "Find the cheapest way to serve a model that keeps its quality and latency.\n\n"
        "Searches serving scheme x GPU x engine x tensor parallelism x batch size with Optuna; quality from "
        "real lm-eval runs on the checkpoint an engine loads, speed measured here or from a step cost "
        "calibrated per engine on measured GPU serving runs (with intervals), everything logged to MLflow.\n\n"
        "Start with: recommender search   (runs the embedded demo offline)"
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@app.callback()
def _options(
    verbose: Annotated[
        bool,
        typer.Option("--verbose", "-v", envvar=VERBOSE_ENV, show_envvar=True,
                     help="Also show the libraries' own logs, warnings and progress bars (transformers, lm-eval, "
                     "Optuna, MLflow, llm-compressor); without it the terminal shows only this tool's output."),
    ] = False,
) -> None:
    """Options for every command; before any library is imported, so their switches take effect."""
    quiet_libraries(verbose=verbose)


@app.command(
    epilog=(
        "Exit codes: 0 recommendation found, 1 no candidate met every threshold, 2 bad input.\n\n"
        "See the study in MLflow: mlflow ui --backend-store-uri sqlite:///mlruns/mlflow.db\n\n"
        "Several machines: run this with --storage postgresql://... (and an MLflow server as --tracking-uri), "
        "then `recommender worker --study NAME --storage postgresql://...` on the others."
    )
)
def search(
    spec: Annotated[
        Path | None,
        typer.Argument(help="Search-space YAML; default: the demo shipped in the package "
                            "(recommender/demo/search_space.yaml)."),
    ] = None,
    n_trials: Annotated[
        int | None,
        typer.Option(
            min=1,
            max=100_000,
            help="Distinct candidates to evaluate in total (default: the spec's search.n_trials); a proposal "
            "the study already answered is free, and a resumed study evaluates only the missing ones.",
        ),
    ] = None,
    storage: Annotated[
        str, typer.Option(help="Optuna storage URL; the study resumes from it when it exists.")
    ] = "sqlite:///mlruns/optuna.db",
    tracking_uri: Annotated[str | None, typer.Option(help=TRACKING_URI_HELP)] = None,
    output_dir: Annotated[Path, typer.Option(help="recommendation.json goes to OUTPUT_DIR/<study name>/.")] = Path(
        "mlruns/studies"
    ),
    json_output: Annotated[
        bool, typer.Option("--json", help="Print recommendation.json to stdout instead of tables.")
    ] = False,
    resume: Annotated[
        bool,
        typer.Option(
            help="Continue the spec's existing study and refuse to start a new one (a plain run "
            "continues an existing study too)."
        ),  # fmt: skip
    ] = False,
    timeout_s: Annotated[
        float | None, typer.Option(min=1, help="Stop sampling after this many seconds (default: the spec's).")
    ] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help=DRY_RUN_HELP)] = False,
) -> None:
    """Run (or resume) a search and print the cheapest configuration that meets every threshold."""
    from recommender.config.model_limits import check_local_lengths
    from recommender.config.spec import load_spec
    from recommender.releases.tracking import resolve_tracking_uri

    console = make_console(stderr=json_output)
    loaded = load_spec(spec or DEMO_SPEC, timeout_s=timeout_s)
    check_local_lengths(loaded)  # before the search's libraries load: a spec too long for its model goes in a second
    uri = resolve_tracking_uri(tracking_uri)
    from recommender.study import check_search

    # The same checks with --dry-run or without, every refusal before the progress display.
    prepared = check_search(loaded, storage=storage, tracking_uri=uri, output_root=output_dir, resume=resume)
    if dry_run:
        _dry_run(prepared, json_output, console)
        return
    outcome = _run_with_progress(prepared, storage, uri, output_dir, n_trials, resume, console)
    _print_outcome(outcome, json_output, console)
    raise typer.Exit(0 if outcome.recommendation.winner else 1)


def _print_outcome(outcome: SearchOutcome, json_output: bool, console: Console) -> None:
    if json_output:
        print(outcome.recommendation_path.read_text(encoding="utf-8"), end="")
        return
    from recommender.cli.plan_spec import render_daily
    from recommender.report.study_summary import render_search

    render_search(outcome, console)
    render_daily(outcome.recommendation, console)



def _dry_run(prepared: Prepared, json_output: bool, console: Console) -> None:
    from recommender.report.dry_run import render_dry_run
    from recommender.serialization import dumps, to_data
    from recommender.study.dry_run import dry_run

    answer = dry_run(prepared)
    if json_output:
        print(dumps(to_data(answer)), end="")
    else:
        render_dry_run(answer, console)


@app.command(
    epilog=(
        "Exit codes: 0 the study's budget is met, 2 bad input (unknown study or storage).\n\n"
        "Several machines: start the study once with `recommender search SPEC --storage postgresql://USER@HOST/DB "
        "--tracking-uri http://MLFLOW:5000`, then on every other machine `recommender worker --study NAME "
        "--storage postgresql://USER@HOST/DB`. The search writes the recommendation when every worker's trials are in."
    )
)
def worker(
    study: Annotated[str, typer.Option(help="The study to join (`recommender search` prints its name).")],
    storage: Annotated[
        str, typer.Option(help="The Optuna storage URL the study was started with (PostgreSQL for several machines).")
    ],
    tracking_uri: Annotated[
        str | None,
        typer.Option(help="MLflow tracking URI (default: the one the study was started with, e.g. a server)."),
    ] = None,
    json_output: Annotated[bool, typer.Option("--json", help="Print this worker's summary as JSON.")] = False,
) -> None:
    """Join a running study and evaluate its trials until its budget of candidates is met.

    The spec comes from the study itself; its model and suite paths must exist on this machine
    (a shared filesystem or the same checkout). A method's quality is evaluated by one worker
    only; the others wait for it. A worker killed mid-trial loses nothing: its trial is retried.
    """
    from recommender.report.study_summary import worker_summary
    from recommender.study import join_study, run_worker

    joined = join_study(study, storage=storage, tracking_uri=tracking_uri)  # every refusal before the progress bar
    console = make_console(stderr=json_output)
    with trial_progress(console, total=None) as (on_trial, on_status):
        outcome = run_worker(study, storage=storage, tracking_uri=tracking_uri, on_trial=on_trial,
                             on_status=on_status, interrupted=ctrl_c_event(), joined=joined)  # fmt: skip
    if json_output:
        print(json.dumps(asdict(outcome), indent=2))
    else:
        console.print(worker_summary(outcome))


@app.command("report", epilog="Exit codes: 0 written, 2 bad input (unknown run id, unreachable tracking store).")
def report_command(
    run_id: Annotated[str, typer.Argument(help="The study's MLflow run id (printed by `recommender search`).")],
    tracking_uri: Annotated[str | None, typer.Option(help=TRACKING_URI_HELP)] = None,
    output_dir: Annotated[Path | None, typer.Option(help="Where to write (default: mlruns/reports/<run id>).")] = None,
) -> None:
    """Regenerate a study's report (report.md, report.html, plots) from its MLflow run alone."""
    from recommender.config.destinations import check_name, check_output_dir
    from recommender.report.artifacts import regenerate_from_run

    check_name(run_id, field="run_id", what="run id")  # it names the default folder: no traversal
    target = output_dir or Path("mlruns/reports") / run_id
    check_output_dir(target, field="--output-dir" if output_dir else "run_id")
    from recommender.study.deferred_tracking import catch_up_from_run

    uri = _read_store(tracking_uri)
    catch_up_from_run(uri, run_id)  # a search whose store stopped answering left runs to write: written first
    written = regenerate_from_run(uri, run_id, target)
    console = make_console(stderr=False)
    for path in written:
        console.print(str(path), markup=False, highlight=False)


@app.command("compare", epilog="Exit codes: 0 shown, 2 bad input (unknown model or release, not comparable).")
def compare_command(
    model: Annotated[str, typer.Option(help="The model name the studies were tagged with (spec model.name).")],
    releases: Annotated[
        list[str] | None, typer.Option("--releases", help="Releases in the order to show (default: all, by time).")
    ] = None,
    use_case: Annotated[str | None, typer.Option(help="Only studies under this use case.")] = None,
    tracking_uri: Annotated[str | None, typer.Option(help=TRACKING_URI_HELP)] = None,
    output_format: Annotated[str, typer.Option("--format", help="table or json.")] = "table",
    plot: Annotated[Path | None, typer.Option(help="Also write the comparison plot (PNG) here.")] = None,
) -> None:
    """How quality and cost moved across a model's releases, read from MLflow alone."""
    from recommender.config.destinations import check_parent
    from recommender.releases.history import load_releases
    from recommender.report.compare import compare_data, render_compare, write_compare_png
    from recommender.serialization import dumps, to_data

    if output_format not in ("table", "json"):
        raise BadInputError("--format", f"unknown format {output_format!r}", "use table or json")
    repeated = sorted({r for r in releases or [] if (releases or []).count(r) > 1})
    if repeated:
        raise BadInputError("--releases", f"release {', '.join(map(repr, repeated))} given more than once",
                            "name each release once")  # fmt: skip
    if plot is not None:
        check_parent(plot, field="--plot", what="file")
    studies = load_releases(_read_store(tracking_uri), model, releases=releases, use_case=use_case)
    data = compare_data(model, studies)
    if plot is not None:
        write_compare_png(data, plot)
    if output_format == "json":
        print(dumps(to_data(data)), end="")
    else:
        render_compare(data, make_console(stderr=False))


@app.command(
    "gate",
    epilog="Exit codes: 0 pass, 1 regression (each broken limit on its own line), 2 bad input. "
    "Use it as a CI step after the candidate release's search.",
)
def gate_command(
    model: Annotated[str, typer.Option(help="The model name the studies were tagged with (spec model.name).")],
    candidate: Annotated[str, typer.Option(help="The new release.")],
    against: Annotated[str, typer.Option(help="The release it replaces.")],
    max_cost_increase: Annotated[
        float, typer.Option(help="Largest allowed increase of the recommended $/1M tokens, in %.")
    ] = 5.0,
    max_quality_drop: Annotated[
        float,
        typer.Option(
            help="Largest allowed loss per task, in % of the bf16 score: of bf16 itself across "
            "releases, and of the recommended precision against its bf16."
        ),  # fmt: skip
    ] = 1.0,
    require_pass: Annotated[
        list[str] | None, typer.Option(help="precision/method that must pass in the candidate, e.g. int8/bnb-llm-int8.")
    ] = None,
    use_case: Annotated[str | None, typer.Option(help="Only studies under this use case.")] = None,
    tracking_uri: Annotated[str | None, typer.Option(help=TRACKING_URI_HELP)] = None,
) -> None:
    """Fail a pipeline when a release regresses in cost or quality against the one it replaces."""
    from recommender.releases.gate import GateLimits, check_required_methods, gate
    from recommender.releases.history import load_releases
    from recommender.report.gate_summary import gate_lines

    for name, value in (("--max-cost-increase", max_cost_increase), ("--max-quality-drop", max_quality_drop)):
        if not 0.0 <= value <= 1000.0:
            raise BadInputError(name, f"{value:g} is out of range", "give a percentage between 0 and 1000")
    if candidate == against:
        raise BadInputError("--against", f"release {against!r} is the candidate itself",
                            "name the release the candidate replaces")  # fmt: skip
    check_required_methods(require_pass or [])
    new, old = load_releases(_read_store(tracking_uri), model, releases=[candidate, against], use_case=use_case,
                             flags=["--candidate", "--against"])  # fmt: skip
    limits = GateLimits(max_cost_increase, max_quality_drop, list(require_pass or []))
    broken = gate(new, old, limits)
    print("\n".join(gate_lines(model=model, candidate=candidate, against=against, new=new, broken=broken)))
    raise typer.Exit(1 if broken else 0)


@app.command(epilog="Every figure is measured on this machine (warm-up 1, median of --repeats, min-max spread).")
def probe(
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
    from recommender.quantize import get_method
    from recommender.report.probe_table import render_probe
    from recommender.serialization import dumps, list_to_data

    quant = get_method(method, field="--method")
    models = _models_here(model, quant, fix="pick a method that runs here")
    config = models.source.load_config(field="--model")
    for tokens in prompt_tokens or [128]:  # before the model loads: a prompt it has no positions for
        check_positions(config, tokens + 1, field="--prompt-tokens")
    loaded = models.get(quant)
    results = [run_probe(loaded, prompt_tokens=p, batch_size=b, repeats=repeats)
               for p in (prompt_tokens or [128]) for b in (batch_size or [1, 8, 32])]  # fmt: skip
    if json_output:
        print(dumps(list_to_data(results)), end="")
        return
    render_probe(results, model=models.source.name, method=quant, console=make_console(stderr=False))


@app.command("schema", epilog="Exit codes: 0 printed.")
def schema_command() -> None:
    """Print the JSON Schema of a search-space file (for an editor's YAML checks; `search` checks the rest)."""
    from recommender.config.spec import spec_json_schema

    print(json.dumps(spec_json_schema(), indent=2))


def _read_store(flag: str | None) -> str:
    """The tracking URI a reading command uses, its scheme checked (it must exist: nothing is created)."""
    from recommender.config.destinations import check_tracking_uri, tracking_uri_field
    from recommender.releases.tracking import resolve_tracking_uri

    uri = resolve_tracking_uri(flag)
    check_tracking_uri(uri, field=tracking_uri_field(uri))
    return uri


def _run_with_progress(
    prepared: Prepared, storage: str, uri: str, output_dir: Path, n_trials: int | None, resume: bool, console: Console
) -> SearchOutcome:
    """The search behind a progress bar; Ctrl-C stops it between trials."""
    from recommender.report.artifacts import write_documents
    from recommender.study import run_search

    with trial_progress(console, total=n_trials or prepared.spec.search.n_trials) as (on_trial, on_status):
        return run_search(prepared.spec, storage=storage, tracking_uri=uri, output_root=output_dir, n_trials=n_trials,
                          resume=resume, prepared=prepared, on_trial=on_trial, on_status=on_status,
                          interrupted=ctrl_c_event(), write_documents=write_documents)  # fmt: skip


app.command("eval", epilog=cli_eval.EPILOG)(cli_eval.eval_command)
app.command("plan", epilog=cli_plan.EPILOG)(cli_plan.plan_command)
app.command("estimate", epilog=cli_estimate.EPILOG)(cli_estimate.estimate_command)
app.command("quantize", epilog=cli_quantize.EPILOG)(cli_quantize.quantize_command)


def main() -> None:
    """Entry point: turns BadInputError into one line and exit code 2."""
    try:
        code = app(standalone_mode=False)
    except BadInputError as exc:
        sys.stderr.write(f"error: {exc}\n")
        sys.exit(2)
    except (typer.Abort, KeyboardInterrupt):
        code = 130
    except typer.TyperException as exc:  # a wrong command, flag or value, found by the command-line parser
        sys.stderr.write(usage_error(exc) + "\n")
        sys.exit(int(getattr(exc, "exit_code", 2)))
    if code == 130:  # Ctrl-C: typer turns the KeyboardInterrupt into exit code 130
        sys.stderr.write("interrupted: finished trials and evaluated documents are saved; rerun to resume\n")
    sys.exit(code if isinstance(code, int) else 0)


if __name__ == "__main__":
    main()
