"""`recommender report`: regenerate a study's report from its MLflow run alone."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from recommender.cli.common import TRACKING_URI_HELP, read_store
from recommender.report.console import make_console

__all__ = ["EPILOG", "report_command"]

EPILOG = "Exit codes: 0 written, 2 bad input (unknown run id, unreachable tracking store)."


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

    uri = read_store(tracking_uri)
    catch_up_from_run(uri, run_id)  # a search whose store stopped answering left runs to write: written first
    written = regenerate_from_run(uri, run_id, target)
    console = make_console(stderr=False)
    for path in written:
        console.print(str(path), markup=False, highlight=False)
