"""`recommender compare`: how quality and cost moved across a model's releases."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from recommender.cli.common import TRACKING_URI_HELP, read_store
from recommender.errors import BadInputError
from recommender.report.console import make_console

__all__ = ["EPILOG", "compare_command"]

EPILOG = "Exit codes: 0 shown, 2 bad input (unknown model or release, not comparable)."


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
        raise BadInputError(
            "--releases", f"release {', '.join(map(repr, repeated))} given more than once", "name each release once"
        )
    if plot is not None:
        check_parent(plot, field="--plot", what="file")
    studies = load_releases(read_store(tracking_uri), model, releases=releases, use_case=use_case)
    data = compare_data(model, studies)
    if plot is not None:
        write_compare_png(data, plot)
    if output_format == "json":
        print(dumps(to_data(data)), end="")
    else:
        render_compare(data, make_console(stderr=False))
