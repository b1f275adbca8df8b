"""Every number flag with a range refuses NaN and the infinities by name, whichever command has it (issue 57).

The parser checks a ranged flag by comparing it with its bounds, and every comparison with NaN is false, so
``--expert-skew nan`` was refused as "should be less than or equal to 10". The flags are enumerated from the
command line itself, so a flag added later is covered without a new test.
"""

from __future__ import annotations

import pytest
import typer

from recommender.cli.main import app
from recommender.config.spec import MAX_SECONDS
from tests.cli.test_hostile_properties import Outcome, run_cli


def _ranged_float_flags() -> list[tuple[str, str]]:
    """(command, flag) for every option whose value is a float with a lower or an upper bound."""
    found = []
    for name, command in typer.main.get_command(app).commands.items():  # type: ignore[attr-defined]
        for param in command.params:
            bounds = (getattr(param, "min", None), getattr(param, "max", None))
            if any(isinstance(b, float) for b in bounds) or (name, param.name) == ("search", "timeout_s"):
                found.append((name, param.opts[0]))
    return found


FLAGS = _ranged_float_flags()


def test_the_ranged_float_flags_are_found() -> None:
    assert {("plan", "--expert-skew"), ("plan", "--rps"), ("estimate", "--confidence")} <= set(FLAGS)
    assert ("search", "--timeout-s") in FLAGS


def _error(outcome: Outcome) -> str:
    [line] = [line for line in outcome.err.splitlines() if line.startswith("error:")]
    return line


@pytest.mark.parametrize(("command", "flag"), FLAGS)
@pytest.mark.parametrize("value", ["nan", "NaN", "-nan"])
def test_nan_is_named_as_nan_not_as_a_bound_it_broke(command: str, flag: str, value: str, tmp_path: object) -> None:
    outcome = run_cli([command, flag, value], tmp_path)  # type: ignore[arg-type]
    assert outcome.code == 2 and outcome.out == "" and "Traceback" not in outcome.err
    line = _error(outcome)
    assert f"'{flag}': '{value}' is not a finite number" in line, line


@pytest.mark.parametrize(("command", "flag"), FLAGS)
@pytest.mark.parametrize("value", ["inf", "-inf"])
def test_an_infinity_is_refused_naming_the_flag(command: str, flag: str, value: str, tmp_path: object) -> None:
    args = [command, flag, value] + (["--model", "llama-3.1-8b"] if command == "plan" else [])
    outcome = run_cli(args, tmp_path)  # type: ignore[arg-type]
    assert outcome.code == 2 and outcome.out == "" and "Traceback" not in outcome.err
    line = _error(outcome)
    assert flag in line and ("finite" in line or "greater than" in line), line


def test_the_search_timeout_flag_is_bounded_as_the_spec_key_is() -> None:
    [param] = [p for p in typer.main.get_command(app).commands["search"].params if p.name == "timeout_s"]  # type: ignore[attr-defined]
    assert param.max == MAX_SECONDS  # type: ignore[attr-defined]
