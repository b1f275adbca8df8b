"""Releases' bad input (issue 32): comparing a release with itself, duplicate releases and an unknown scheme in
`--require-pass` are refused in one line naming the option and the fix, exit 2, before any store is read."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.conftest import REPO, run_cli_in_process


def _run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """The entry point in process (`run_cli_in_process`: a refusal needs no second import of the package)."""
    return run_cli_in_process(*args, "--tracking-uri", str(cwd / "none"), cwd=REPO)


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (
            ("gate", "--model", "m", "--candidate", "v1", "--against", "v1"),
            "error: --against: release 'v1' is the candidate itself (fix: name the release the candidate replaces)",
        ),
        (
            ("compare", "--model", "m", "--releases", "v1", "--releases", "v2", "--releases", "v1"),
            "error: --releases: release 'v1' given more than once (fix: name each release once)",
        ),
        (
            ("gate", "--model", "m", "--candidate", "v2", "--against", "v1", "--require-pass", "int8/bnb-llm-int9"),
            "error: --require-pass: unknown quantization scheme 'bnb-llm-int9' (fix: did you mean bnb-llm-int8?)",
        ),
        (
            ("gate", "--model", "m", "--candidate", "v2", "--against", "v1", "--require-pass", "int4/bnb-llm-int8"),
            "error: --require-pass: method 'bnb-llm-int8' is int8, not 'int4' (fix: use int8/bnb-llm-int8)",
        ),
        (
            ("gate", "--model", "m", "--candidate", "v2", "--against", "v1", "--require-pass", "bnb-llm-int8"),
            "error: --require-pass: 'bnb-llm-int8' is not precision/method (fix: e.g. int8/bnb-llm-int8)",
        ),
    ],
)
def test_release_commands_refuse_bad_input_in_one_line(args: tuple[str, ...], expected: str, tmp_path: Path) -> None:
    done = _run(*args, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip() == expected and "Traceback" not in done.stderr
    assert not (tmp_path / "none").exists()  # nothing read or created
