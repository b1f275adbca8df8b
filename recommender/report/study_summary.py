"""What a search and a worker print when they finish: the answer, how to launch it, where the evidence is."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from recommender.releases.tracking import ui_hint
from recommender.report.table import render

if TYPE_CHECKING:
    from rich.console import Console

    from recommender.engines import EngineLaunch
    from recommender.study import SearchOutcome, WorkerOutcome


def render_search(outcome: SearchOutcome, console: Console) -> None:
    """The recommendation's tables, the winner's launch commands, and where the study and its report live."""
    render(outcome.recommendation, console)
    render_launch(outcome.recommendation.launch, console)
    console.print(
        f"\nrecommendation: {outcome.recommendation_path}\n"
        f"report: {outcome.output_dir / 'report.html'} (and report.md)\n"
        f"study: {outcome.study_name} in {outcome.storage} ({outcome.new_trials} new candidates evaluated, "
        f"{outcome.quality_evaluations} quality evaluations, {outcome.probes} probes)\n"
        f"MLflow run {outcome.parent_run_id}: {ui_hint(outcome.tracking_uri, outcome.parent_run_id)}"
    )


def render_launch(launch: Sequence[EngineLaunch], console: Console) -> None:
    """Each engine's launch command for the winner, or its plain refusal."""
    if not launch:
        return
    console.print("\n[bold]launch the recommendation[/bold]")
    for item in launch:
        if item.supported:
            console.print(f"  {item.engine}: ", end="")
            console.print(item.command, markup=False, highlight=False, soft_wrap=True)
        else:
            console.print(f"  {item.engine}: not supported — {item.notes[0]}", markup=False, highlight=False)


def worker_summary(outcome: WorkerOutcome) -> str:
    """One line: what this worker did and how far the whole study is."""
    return (
        f"worker {outcome.worker_id}: {outcome.candidates_evaluated} candidates evaluated here, "
        f"{outcome.quality_computed} quality evaluations computed here; the study holds "
        f"{outcome.candidates_in_study}/{outcome.budget} candidates (the rest, if any, run on other workers). "
        "The recommendation is written by the `recommender search` that started the study."
    )
