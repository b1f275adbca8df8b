"""`recommender search`: run (or resume) the Optuna search on a spec and print the recommendation."""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from recommender.cli.common import TRACKING_URI_HELP
from recommender.cli.interrupt import ctrl_c_event
from recommender.errors import BadInputError
from recommender.report.console import make_console, trial_progress

if TYPE_CHECKING:
    from rich.console import Console

    from recommender.config.spec import SearchSpec
    from recommender.study import Prepared, SearchOutcome

__all__ = ["DEMO_SPEC", "EPILOG", "run_with_progress", "search_command"]

EPILOG = (
    "Exit codes: 0 recommendation found, 1 no candidate met every threshold, 2 bad input.\n\n"
    "See the study in MLflow: mlflow ui --backend-store-uri sqlite:///mlruns/mlflow.db\n\n"
    "Several machines: run this with --storage postgresql://... (and an MLflow server as --tracking-uri), "
    "then `recommender worker --study NAME --storage postgresql://...` on the others."
)
DRY_RUN_HELP = (
    "Check everything and print what the search would do (candidates, pruned and why, schemes to "
    "quantize and score, documents, a time estimate); load no weights, write nothing."
)
DEMO_SPEC = Path(str(resources.files("recommender.demo") / "search_space.yaml"))


# The command's arguments, declared once with their bounds and help (the signature below names them).
SpecArgument = Annotated[
    Path | None,
    typer.Argument(
        help="Search-space YAML; default: the demo shipped in the package (recommender/demo/search_space.yaml)."
    ),
]
Trials = Annotated[
    int | None,
    typer.Option(
        min=1,
        max=100_000,
        help="Distinct candidates to evaluate in total (default: the spec's search.n_trials); a "
        "proposal the study already answered is free, and a resumed study evaluates only the missing ones.",
    ),
]
Storage = Annotated[str, typer.Option(help="Optuna storage URL; the study resumes from it when it exists.")]
TrackingUri = Annotated[str | None, typer.Option(help=TRACKING_URI_HELP)]
OutputDir = Annotated[Path, typer.Option(help="recommendation.json goes to OUTPUT_DIR/<study name>/.")]
JsonOutput = Annotated[bool, typer.Option("--json", help="Print recommendation.json to stdout instead of tables.")]
Resume = Annotated[
    bool,
    typer.Option(
        help="Continue the spec's existing study and refuse to start a new one (a plain run continues an existing "
        "study too)."
    ),
]
TimeoutS = Annotated[
    float | None,
    # max: the spec's own bound on search.timeout_s (``config.spec.MAX_SECONDS``, 30 days), so ``inf`` is refused
    # naming this flag, not the spec key it would have overridden.
    typer.Option(min=1, max=30 * 86_400, help="Stop sampling after this many seconds (default: the spec's)."),
]
DryRun = Annotated[bool, typer.Option("--dry-run", help=DRY_RUN_HELP)]


def search_command(
    spec: SpecArgument = None,
    n_trials: Trials = None,
    storage: Storage = "sqlite:///mlruns/optuna.db",
    tracking_uri: TrackingUri = None,
    output_dir: OutputDir = Path("mlruns/studies"),
    json_output: JsonOutput = False,
    resume: Resume = False,
    timeout_s: TimeoutS = None,
    dry_run: DryRun = False,
) -> None:
    """Run (or resume) a search and print the cheapest configuration that meets every threshold."""
    from recommender.config.model_limits import check_local_lengths
    from recommender.config.spec import load_spec
    from recommender.releases.tracking import resolve_tracking_uri

    console = make_console(stderr=json_output)
    loaded = load_spec(spec or DEMO_SPEC, timeout_s=timeout_s)
    _refuse_routing(loaded, spec or DEMO_SPEC)
    check_local_lengths(loaded)  # before the search's libraries load: a spec too long for its model goes in a second
    uri = resolve_tracking_uri(tracking_uri)
    from recommender.study import check_search

    # The same checks with --dry-run or without, every refusal before the progress display.
    prepared = check_search(loaded, storage=storage, tracking_uri=uri, output_root=output_dir, resume=resume)
    if dry_run:
        _dry_run(prepared, json_output, console)
        return
    outcome = run_with_progress(prepared, storage, uri, output_dir, n_trials, resume, console)
    _print_outcome(outcome, json_output, console)
    raise typer.Exit(0 if outcome.recommendation.winner else 1)


def _refuse_routing(loaded: SearchSpec, path: Path) -> None:
    """The search ranks one replica's capacity into the traffic; it does not size fleets behind routers (``plan``
    does), so a spec asking for routers is refused rather than searched as if it had not."""
    if loaded.space.routing:
        raise BadInputError(
            f"{path}: space.routing",
            "the search does not size the fleet behind a router",
            f"compare the routers with `recommender plan --spec {path}`, or remove space.routing to search",
        )


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


def run_with_progress(
    prepared: Prepared, storage: str, uri: str, output_dir: Path, n_trials: int | None, resume: bool, console: Console
) -> SearchOutcome:
    """The search behind a progress bar; Ctrl-C stops it between trials."""
    from recommender.report.artifacts import write_documents
    from recommender.study import run_search

    interrupted = ctrl_c_event()
    with trial_progress(console, total=n_trials or prepared.spec.search.n_trials) as (on_trial, on_status):
        try:
            return run_search(
                prepared.spec,
                storage=storage,
                tracking_uri=uri,
                output_root=output_dir,
                n_trials=n_trials,
                resume=resume,
                prepared=prepared,
                on_trial=on_trial,
                on_status=on_status,
                interrupted=interrupted,
                write_documents=write_documents,
            )
        except Exception:
            # Ctrl-C's KeyboardInterrupt can land inside a library's bookkeeping and leave it raising something
            # else on the way out (Optuna's trial post-processing: "Should not reach"): still the user's Ctrl-C.
            if interrupted.is_set():
                raise KeyboardInterrupt from None
            raise
