"""`recommender worker`: join a running study from another machine and evaluate its trials."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Annotated

import typer

from recommender.cli.interrupt import ctrl_c_event
from recommender.report.console import make_console, trial_progress

__all__ = ["EPILOG", "worker_command"]

EPILOG = (
    "Exit codes: 0 the study's budget is met, 2 bad input (unknown study or storage).\n\n"
    "Several machines: start the study once with `recommender search SPEC --storage postgresql://USER@HOST/DB "
    "--tracking-uri http://MLFLOW:5000`, then on every other machine `recommender worker --study NAME "
    "--storage postgresql://USER@HOST/DB`. The search writes the recommendation when every worker's trials are in."
)


def worker_command(
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
        outcome = run_worker(
            study,
            storage=storage,
            tracking_uri=tracking_uri,
            on_trial=on_trial,
            on_status=on_status,
            interrupted=ctrl_c_event(),
            joined=joined,
        )
    if json_output:
        print(json.dumps(asdict(outcome), indent=2))
    else:
        console.print(worker_summary(outcome))
