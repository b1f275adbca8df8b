"""`recommender gate`: a CI step that fails when a release regresses against the one it replaces."""

from __future__ import annotations

from typing import Annotated

import typer

from recommender.cli.common import TRACKING_URI_HELP, read_store
from recommender.errors import BadInputError

__all__ = ["EPILOG", "gate_command"]

EPILOG = (
    "Exit codes: 0 pass, 1 regression (each broken limit on its own line), 2 bad input. "
    "Use it as a CI step after the candidate release's search."
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
        ),
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
        raise BadInputError(
            "--against", f"release {against!r} is the candidate itself", "name the release the candidate replaces"
        )
    check_required_methods(require_pass or [])
    new, old = load_releases(
        read_store(tracking_uri),
        model,
        releases=[candidate, against],
        use_case=use_case,
        flags=["--candidate", "--against"],
    )
    limits = GateLimits(max_cost_increase, max_quality_drop, list(require_pass or []))
    broken = gate(new, old, limits)
    print("\n".join(gate_lines(model=model, candidate=candidate, against=against, new=new, broken=broken)))
    raise typer.Exit(1 if broken else 0)
