"""One module per command, and help texts that come from the registries (so they cannot go stale)."""

from __future__ import annotations

from typer.testing import CliRunner

from recommender.cli.main import COMMANDS, app
from recommender.perf.catalog.gpus import load_catalog
from recommender.perf.catalog.prices import load_price_sets
from recommender.quantize.precisions import PLANNED_PRECISIONS


def test_every_command_lives_in_its_own_module_named_after_it() -> None:
    names = [name for name, _, _ in COMMANDS]
    assert len(set(names)) == len(names)
    for name, command, _ in COMMANDS:
        assert command.__module__ == f"recommender.cli.{name}", name
    registered = {c.name for c in app.registered_commands}
    assert registered == set(names)


def _help(*args: str) -> str:
    result = CliRunner().invoke(app, [*args, "--help"], env={"COLUMNS": "400", "TERMINAL_WIDTH": "400"})
    assert result.exit_code == 0, result.output
    return " ".join(result.output.split())


def test_help_lists_every_catalog_gpu_price_set_and_precision() -> None:
    plan, estimate = _help("plan"), _help("estimate")
    for gpu in load_catalog().names:
        assert gpu in plan and gpu in estimate, gpu
    for price_set in load_price_sets().price_sets:
        assert price_set in plan, price_set
    for precision in PLANNED_PRECISIONS:
        assert precision in plan and precision in estimate, precision
