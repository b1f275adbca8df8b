"""`recommender search --dry-run` on a terminal: what the search would do, in a few lines and one table."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.table import Table

if TYPE_CHECKING:
    from rich.console import Console

    from recommender.study.dry_run import DryRun

#: Pruned candidates listed one per line; the rest are counted.
SHOWN_PRUNED = 12


def render_dry_run(answer: DryRun, console: Console) -> None:
    """The candidates, the pruned ones with their reasons, the schemes to quantize and score, the time."""
    kept = answer.candidates - len(answer.pruned) - len(answer.measured_here) - len(answer.speculative)
    console.print(f"[bold]dry run of study {answer.study_name}[/] (nothing loaded, nothing written)")
    console.print(
        f"{answer.candidates} candidates in the space; the search evaluates up to {answer.n_trials}: "
        f"{len(answer.pruned)} pruned before anything loads, {kept} priced and simulated, "
        f"{len(answer.measured_here)} on this machine (measured through {answer.local_measured_by} when the search "
        "runs), "
        f"{len(answer.speculative)} speculative (simulated when the search runs)"
    )
    if answer.speculative:
        console.print(f"  speculative: {answer.speculation_basis}", soft_wrap=True, markup=False)
    for key, why in answer.pruned[:SHOWN_PRUNED]:
        console.print(f"  pruned {key}: {why}", soft_wrap=True, markup=False)
    if len(answer.pruned) > SHOWN_PRUNED:
        console.print(f"  ... and {len(answer.pruned) - SHOWN_PRUNED} more (--json lists them all)")
    table = Table(title="quality the search would measure (at most: its cost bound skips what cannot win)")
    for column in ("scheme", "checkpoint made", "documents per task", "KL tokens"):
        table.add_column(column)
    documents = ", ".join(f"{task}: {n}" for task, n in answer.documents_per_scheme.items())
    for name in answer.schemes_scored:
        made = "yes" if name in answer.checkpoints_made else "-"
        table.add_row(name, made, documents, str(answer.kl_tokens_per_scheme))
    console.print(table)
    total = answer.seconds_per_scheme * len(answer.schemes_scored)
    console.print(
        f"time: about {answer.seconds_per_scheme:.0f} s per scheme, {total / 60:.1f} min for all "
        f"{len(answer.schemes_scored)} ({answer.estimate_basis})",
        soft_wrap=True,
        markup=False,
    )
