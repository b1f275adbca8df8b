"""Hostile input, property-based (Hypothesis), through the real CLI entry point, in process.

Three generators: specs drawn from the spec's own JSON Schema (`recommender schema`), whole or one
section grafted onto a valid spec; valid specs mutated field by field (types, infinities, NaN, zero,
negatives, huge numbers, unicode, traversal, nesting) and as files (a key written twice, deep
nesting, UTF-16, Latin-1, NUL bytes); command lines mutated flag by flag. Every run must end in exit
2 with exactly one `error:` line, or reach the command's work — a search, a plan, a model load,
replaced here by a sentinel, since the property is about everything before it. Either way nothing
was written first: the working directory, where the default stores go, is unchanged, and stdout is
empty. Where the mutation is never valid (a key twice, NaN in a number) the run must be refused.

`make test` draws 330 cases, 260 of them specs (9 s of CPU alone; 660 before 2026-12-06, when the suite had to
fit in 5 minutes on two cores); the `slow` copies draw twenty times as many (6,600, as before).
"""

from __future__ import annotations

import contextlib
import copy
import io
import os
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
import yaml
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from recommender.cli import main as cli
from recommender.config.spec import spec_json_schema
from tests.conftest import DEMO_MODEL, DEMO_SPEC, REPO, with_value
from tests.schema_strategy import from_schema

DAILY_SPEC = REPO / "search_spaces" / "daily-mix.yaml"
SUITE = REPO / "recommender" / "demo" / "use_case.yaml"
#: Where each command's work starts; reaching one means every check before it passed.
WORK = (
    "recommender.cli.search.run_with_progress",
    "recommender.fleet.spec_plan.plan_fleet",
    "recommender.fleet.plan.plan",
    "recommender.quality.evaluate.QualityEvaluator.evaluate",
    "recommender.quantize.model_cache.ModelCache.get",
)
FAST = 0.5  # the multiplier of `make test` (half the budgets below); the slow copies use SLOW
SLOW = 10


class Reached(Exception):
    """The command passed its checks and started its work."""


@dataclass
class Outcome:
    code: object
    out: str
    err: str
    written: set[str]


def _tree(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


def run_cli(args: list[str], cwd: Path, *, work: tuple[str, ...] = WORK) -> Outcome:
    """`recommender ARGS` in `cwd` with the `work` replaced by `Reached` (`()`: run it); stdout and stderr captured."""
    before, out, err, home = _tree(cwd), io.StringIO(), io.StringIO(), os.getcwd()
    code: object = "returned"
    with contextlib.ExitStack() as stack:
        for target in work:
            stack.enter_context(mock.patch(target, side_effect=Reached))
        stack.enter_context(mock.patch.object(sys, "argv", ["recommender", *args]))
        stack.enter_context(contextlib.redirect_stdout(out))
        stack.enter_context(contextlib.redirect_stderr(err))
        os.chdir(cwd)
        try:
            cli.main()
        except Reached:
            code = "reached"
        except SystemExit as exc:
            code = exc.code
        finally:
            os.chdir(home)
    return Outcome(code, out.getvalue(), err.getvalue(), _tree(cwd) - before)


def assert_clean(outcome: Outcome, *, refused: bool = False) -> None:
    """Exit 2 with one `error:` line, or the work reached; no traceback, nothing written or printed first."""
    event(f"exit {outcome.code}")  # pytest --hypothesis-show-statistics: how many were refused, how many ran
    assert "Traceback" not in outcome.err, outcome.err
    assert outcome.code in (2, "reached"), (outcome.code, outcome.err)
    assert not outcome.written, f"written before the work or the refusal: {sorted(outcome.written)}"
    assert outcome.out == "", f"printed before the work or the refusal: {outcome.out[:300]!r}"
    if outcome.code == 2:
        lines = [line for line in outcome.err.splitlines() if line.startswith("error:")]
        assert len(lines) == 1, outcome.err
    if refused:
        assert outcome.code == 2, "accepted a mutation that is never valid"


def _raw(path: Path) -> dict[str, Any]:
    """A shipped spec with its relative paths made absolute (it is written elsewhere)."""
    raw: dict[str, Any] = yaml.safe_load(path.read_text(encoding="utf-8"))
    raw["use_case"] = str((path.parent / raw["use_case"]).resolve())
    beside = path.parent / raw["model"]["source"]
    if beside.is_dir():  # a folder beside the spec ("model", "../..."), not a hub id
        raw["model"]["source"] = str(beside.resolve())
    return raw


#: A spec and the command that checks it: search (the demo model, local) and plan --spec (architecture only).
BASES = {"search": (_raw(DEMO_SPEC), ["search"]), "plan": (_raw(DAILY_SPEC), ["plan", "--spec"])}


def _run_spec_text(text: bytes, base: str) -> Outcome:
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "spec.yaml").write_bytes(text)
        return run_cli([*BASES[base][1], str(Path(tmp) / "spec.yaml")], Path(tmp))


def _dump(data: Any) -> bytes:
    return yaml.safe_dump(data, allow_unicode=True, sort_keys=False).encode("utf-8")


def _budget(n: int, multiplier: float) -> Callable[[Callable[..., None]], Callable[..., None]]:
    return settings(
        max_examples=max(1, round(n * multiplier)),
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
    )


# -- specs from the schema ---------------------------------------------------------------------------
SCHEMA = spec_json_schema()
WHOLE = from_schema(SCHEMA)
SECTIONS = st.sampled_from(sorted(SCHEMA["properties"])).flatmap(
    lambda key: st.tuples(st.just(key), from_schema(SCHEMA["properties"][key], SCHEMA))
)


def _schema_spec(data: st.DataObject) -> None:
    base = data.draw(st.sampled_from(sorted(BASES)), label="base")
    if data.draw(st.booleans(), label="whole spec"):
        spec = data.draw(WHOLE, label="spec")
    else:
        key, value = data.draw(SECTIONS, label="section")
        spec = {**copy.deepcopy(BASES[base][0]), key: value}
    assert_clean(_run_spec_text(_dump(spec), base))


# -- valid specs mutated -----------------------------------------------------------------------------
def _nested(depth: int) -> Any:
    value: Any = []
    for _ in range(depth):
        value = [value]
    return value


HOSTILE = st.one_of(
    st.sampled_from(
        [
            None,
            True,
            0,
            -1,
            0.0,
            -0.0,
            10**12,
            10**30,
            2**63,
            1e308,
            "",
            "../../etc",
            "/abs",
            "a\0b",
            "é\u202e🙂",
            "'; DROP TABLE x; --",
            "x" * 5000,
            [],
            {},
            [1, 1],
            {"a": 1},
        ]
    ),
    st.integers(),
    st.floats(),
    st.text(max_size=30),
    st.lists(st.integers(), max_size=3),
    st.integers(min_value=2, max_value=120).map(_nested),
)
NEVER_VALID_NUMBERS = st.sampled_from([float("inf"), float("-inf"), float("nan")])


def _key_paths(node: Any, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    paths = [prefix] if prefix else []
    if isinstance(node, dict):
        for key, value in node.items():
            paths += _key_paths(value, (*prefix, str(key)))
    return paths


def _numeric_paths(node: Any, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    if isinstance(node, dict):
        return [p for key, value in node.items() for p in _numeric_paths(value, (*prefix, str(key)))]
    return [prefix] if isinstance(node, int | float) and not isinstance(node, bool) else []


def _mutated_field(data: st.DataObject) -> None:
    base = data.draw(st.sampled_from(sorted(BASES)), label="base")
    raw = BASES[base][0]
    if data.draw(st.booleans(), label="a number made non-finite"):
        path = data.draw(st.sampled_from(_numeric_paths(raw)), label="path")
        spec, refused = with_value(raw, path, data.draw(NEVER_VALID_NUMBERS, label="value")), True
    else:
        path = data.draw(st.sampled_from(_key_paths(raw)), label="path")
        spec, refused = with_value(raw, path, data.draw(HOSTILE, label="value")), False
    assert_clean(_run_spec_text(_dump(spec), base), refused=refused)


def _file_mutation(data: st.DataObject) -> tuple[str, bytes, bool]:
    """A valid spec's file spoiled as a file: (its base, the bytes, whether they can never be valid)."""
    base = data.draw(st.sampled_from(sorted(BASES)), label="base")
    text = _dump(BASES[base][0]).decode("utf-8")
    lines = text.splitlines(keepends=True)
    kind = data.draw(st.sampled_from(["duplicate", "nesting", "utf16", "latin1", "nul", "bom", "truncate"]))
    if kind == "duplicate":  # a line holding a key, written again right after itself: the key twice
        keyed = [i for i, line in enumerate(lines) if ":" in line and not line.lstrip().startswith("-")]
        i = data.draw(st.sampled_from(keyed), label="line")
        return base, "".join([*lines[: i + 1], *lines[i:]]).encode("utf-8"), True
    if kind == "nesting":
        depth = data.draw(st.integers(min_value=33, max_value=3000), label="depth")
        return base, (text + "extra: " + "[" * depth + "]" * depth + "\n").encode("utf-8"), True
    if kind in ("nul", "truncate"):
        at = data.draw(st.integers(min_value=0, max_value=len(text) - 1), label="at")
        spoiled = text[:at] + "\0" + text[at:] if kind == "nul" else text[:at]
        return base, spoiled.encode("utf-8"), kind == "nul"
    encoded = {
        "utf16": text.encode("utf-16"),
        "latin1": (text + "# café\n").encode("latin-1"),
        "bom": b"\xef\xbb\xbf" + text.encode("utf-8"),
    }
    return base, encoded[kind], kind != "bom"


def _mutated_file(data: st.DataObject) -> None:
    base, text, refused = _file_mutation(data)
    assert_clean(_run_spec_text(text, base), refused=refused)


# -- command lines mutated ---------------------------------------------------------------------------
#: Commands whose every flag takes a value, then the flags that take numbers (never inf, NaN or words).
COMMANDS: list[list[str]] = [
    [
        "search",
        str(DEMO_SPEC),
        "--n-trials",
        "5",
        "--timeout-s",
        "60",
        "--storage",
        "sqlite:///{tmp}/o.db",
        "--tracking-uri",
        "sqlite:///{tmp}/m.db",
        "--output-dir",
        "{tmp}/out",
    ],
    [
        "plan",
        "--model",
        "llama-3.1-8b",
        "--prompt-tokens",
        "512",
        "--output-tokens",
        "256",
        "--rps",
        "10",
        "--ttft-ms",
        "1000",
        "--tpot-ms",
        "50",
        "--hardware",
        "l40s",
        "--batch-size",
        "64",
    ],
    ["plan", "--spec", str(DAILY_SPEC)],
    ["eval", "--model", str(DEMO_MODEL), "--method", "bnb-nf4", "--use-case", str(SUITE), "--limit", "5"],
    [
        "probe",
        "--model",
        str(DEMO_MODEL),
        "--method",
        "baseline",
        "--prompt-tokens",
        "16",
        "--batch-size",
        "1",
        "--repeats",
        "1",
    ],
    ["compare", "--model", "m", "--format", "json", "--tracking-uri", "sqlite:///{tmp}/none.db"],
    [
        "gate",
        "--model",
        "m",
        "--candidate",
        "v2",
        "--against",
        "v1",
        "--max-cost-increase",
        "5",
        "--max-quality-drop",
        "1",
        "--tracking-uri",
        "sqlite:///{tmp}/none.db",
    ],
    ["report", "0123456789abcdef", "--tracking-uri", "sqlite:///{tmp}/none.db", "--output-dir", "{tmp}/rep"],
    ["worker", "--study", "s", "--storage", "sqlite:///{tmp}/o.db"],
]
NUMERIC_FLAGS = {
    "--n-trials",
    "--timeout-s",
    "--prompt-tokens",
    "--output-tokens",
    "--rps",
    "--ttft-ms",
    "--tpot-ms",
    "--batch-size",
    "--limit",
    "--repeats",
    "--max-cost-increase",
    "--max-quality-drop",
}
NEVER_NUMBERS = ["inf", "-inf", "nan", "NaN", "1e400", "-1e400", "", "abc", "1e", "--"]
TOKENS = st.one_of(
    st.sampled_from(
        [
            *NEVER_NUMBERS,
            "0",
            "-1",
            "1e12",
            "10000000000000",
            "0x10",
            "1_0",
            " 5",
            "../../x",
            "/",
            "é🙂",
            "'; --",
            "a" * 300,
            "sqlite:///../x.db",
            "mongodb://h/db",
            "-",
            "--help-me",
        ]
    ),
    st.text(alphabet=st.characters(blacklist_categories=["Cs"], blacklist_characters="\0"), max_size=20),
)


def _mutated_command(data: st.DataObject) -> None:
    args = list(data.draw(st.sampled_from(COMMANDS), label="command"))
    flags = [i for i, a in enumerate(args) if a.startswith("--")]
    kind = data.draw(st.sampled_from(["value", "never-a-number", "drop", "repeat", "unknown"]), label="kind")
    refused = kind in ("drop", "unknown", "never-a-number")
    numeric = [i for i in flags if args[i] in NUMERIC_FLAGS]
    if kind == "never-a-number" and numeric:
        i = data.draw(st.sampled_from(numeric), label="flag")
        args[i + 1] = data.draw(st.sampled_from(NEVER_NUMBERS), label="token")
    elif kind == "value" or kind == "never-a-number":
        i = data.draw(st.sampled_from(flags), label="flag")
        args[i + 1] = data.draw(TOKENS, label="token")
        refused = False
    elif kind == "drop":  # a flag left without its value at the end of the line
        args = args[: data.draw(st.sampled_from(flags), label="flag") + 1]
    elif kind == "repeat":
        i = data.draw(st.sampled_from(flags), label="flag")
        args += [args[i], data.draw(TOKENS, label="token")]
    else:
        args += [data.draw(st.sampled_from(["--speed", "--rps-max", "-x", "--jsonn"]), label="flag"), "1"]
    with tempfile.TemporaryDirectory() as tmp:
        outcome = run_cli([a.replace("{tmp}", tmp) for a in args], Path(tmp))
    assert_clean(outcome, refused=refused)


def _property(body: Callable[[st.DataObject], None], n: int, multiplier: float) -> Callable[[], None]:
    return _budget(n, multiplier)(given(st.data())(body))


test_specs_from_the_schema = _property(_schema_spec, 200, FAST)
test_spec_fields_mutated = _property(_mutated_field, 220, FAST)
test_spec_files_mutated = _property(_mutated_file, 100, FAST)
test_command_lines_mutated = _property(_mutated_command, 140, FAST)
test_specs_from_the_schema_long = pytest.mark.slow(_property(_schema_spec, 200, SLOW))
test_spec_fields_mutated_long = pytest.mark.slow(_property(_mutated_field, 220, SLOW))
test_spec_files_mutated_long = pytest.mark.slow(_property(_mutated_file, 100, SLOW))
test_command_lines_mutated_long = pytest.mark.slow(_property(_mutated_command, 140, SLOW))


@pytest.mark.parametrize("base", sorted(BASES))
def test_each_base_spec_reaches_its_work_unmutated(base: str) -> None:
    """The properties mutate a spec that passes every check: were the base itself refused (as the search base was
    from 2026-11-25 to 11-27, its model folder not found), every case would be refused and the properties could
    not tell a check that refuses too much from one that is right."""
    outcome = _run_spec_text(_dump(BASES[base][0]), base)
    assert outcome.code == "reached", outcome.err
