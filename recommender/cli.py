"""The `recommender` command line: parse, call the library, print. Nothing else lives here.

Exit codes: 0 a recommendation was found; 1 the search ran but no candidate met every
threshold; 2 bad input (one line on stderr naming the field and the fix).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from recommender.errors import BadInputError

DEMO_SPEC = Path(__file__).resolve().parent.parent / "search_spaces" / "demo.yaml"

app = typer.Typer(
    name="recommender",
    help=(
        "Find the cheapest way to serve a model that keeps its quality and latency.\n\n"
        "Searches precision x quantization method x GPU x tensor parallelism x batch size with Optuna; "
        "quality from real lm-eval runs on the really quantized model, speed measured here or modeled "
        "for catalog GPUs, everything logged to MLflow.\n\n"
        "Start with: recommender search   (runs the embedded demo offline)"
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@app.callback()
def _root() -> None:
    """Subcommands below; each has --help."""


@app.command(
    epilog=(
        "Exit codes: 0 recommendation found, 1 no candidate met every threshold, 2 bad input.\n\n"
        "See the study in MLflow: mlflow ui --backend-store-uri sqlite:///mlruns/mlflow.db"
    )
)
def search(
    spec: Annotated[
        Path | None, typer.Argument(help="Search-space YAML; default: the embedded demo (search_spaces/demo.yaml).")
    ] = None,
    n_trials: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="Trials in total for the study (default: the spec's search.n_trials); "
            "a resumed study runs only the missing ones.",
        ),
    ] = None,
    storage: Annotated[
        str, typer.Option(help="Optuna storage URL; the study resumes from it when it exists.")
    ] = "sqlite:///mlruns/optuna.db",
    tracking_uri: Annotated[
        str | None,
        typer.Option(help="MLflow tracking URI (default: $MLFLOW_TRACKING_URI, else sqlite:///mlruns/mlflow.db)."),
    ] = None,
    output_dir: Annotated[Path, typer.Option(help="recommendation.json goes to OUTPUT_DIR/<study name>/.")] = Path(
        "mlruns/studies"
    ),
    json_output: Annotated[
        bool, typer.Option("--json", help="Print recommendation.json to stdout instead of tables.")
    ] = False,
) -> None:
    """Run (or resume) a search and print the cheapest configuration that meets every threshold."""
    from recommender.spec import load_spec
    from recommender.tracking import resolve_tracking_uri

    console = Console(stderr=json_output)
    if not console.is_terminal:  # logs and CI: wide enough that config keys do not wrap
        console = Console(stderr=json_output, width=140)
    spec_path = spec or DEMO_SPEC
    loaded = load_spec(spec_path)
    uri = resolve_tracking_uri(tracking_uri)
    outcome = _run_with_progress(loaded, storage, uri, output_dir, n_trials, console)
    if json_output:
        print(outcome.recommendation_path.read_text(encoding="utf-8"), end="")
    else:
        from recommender.report.table import render

        render(outcome.recommendation, console)
        console.print(
            f"\nrecommendation: {outcome.recommendation_path}\n"
            f"study: {outcome.study_name} in {outcome.storage} ({outcome.new_trials} new trials, "
            f"{outcome.quality_evaluations} quality evaluations, {outcome.probes} probes)\n"
            f"MLflow run {outcome.parent_run_id}: mlflow ui --backend-store-uri {outcome.tracking_uri}"
        )
    raise typer.Exit(0 if outcome.recommendation.winner else 1)


def _run_with_progress(spec, storage, uri, output_dir, n_trials, console):  # type: ignore[no-untyped-def]
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    from recommender.search import run_search

    columns = (
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=console, transient=False) as progress:
        task = progress.add_task("trials", total=n_trials or spec.search.n_trials)

        def on_status(message: str) -> None:
            progress.update(task, description=f"trials · {message}")

        def on_trial(done: int, planned: int, result, cached: bool) -> None:  # type: ignore[no-untyped-def]
            progress.update(task, completed=done, total=planned)
            price = "-" if result.usd_per_1m_tokens is None else f"${result.usd_per_1m_tokens:.4f}/1M"
            verdict = "feasible" if result.feasible else ("; ".join(result.broken)[:90] or result.quality_verdict)
            progress.console.print(
                f"  {done:3d} {result.candidate.key:<44} {price:>14}  {'(seen) ' if cached else ''}{verdict}"
            )

        return run_search(
            spec,
            storage=storage,
            tracking_uri=uri,
            output_root=output_dir,
            n_trials=n_trials,
            on_trial=on_trial,
            on_status=on_status,
        )


def main() -> None:
    """Entry point: turns BadInputError into one line and exit code 2."""
    os.environ.setdefault("TQDM_DISABLE", "1")  # lm-eval's per-request bars; our progress shows trials
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    try:
        app(standalone_mode=True)
    except BadInputError as exc:
        sys.stderr.write(f"error: {exc}\n")
        sys.exit(2)


if __name__ == "__main__":
    main()
