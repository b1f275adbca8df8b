"""The bad-input corpus (tests/cli/bad_inputs/cases.yaml) through the real CLI entry point, in process.

Each case must end in one `error:` line naming the field and the fix, exit code 2, and no
traceback — before any model is loaded (the cases run in seconds together) and before anything is
written: the case's directory (the working directory, where the default stores would go) holds
exactly the files the case wrote, and stdout stays empty (no progress line).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from recommender.cli import main as cli
from tests.conftest import REPO, write_spec

#: A suite naming an unknown task makes the search index lm-eval's built-in tasks: once in this process
#: (tests/conftest.py), shared with the other modules that need them.
pytestmark = pytest.mark.usefixtures("shared_task_index")

CASES = yaml.safe_load((Path(__file__).parent / "bad_inputs" / "cases.yaml").read_text(encoding="utf-8"))


def _fill(text: str, tmp: Path) -> str:
    return text.format(
        tmp=tmp,
        repo=REPO,
        spec=tmp / "spec.yaml",
        model=REPO / "recommender" / "demo" / "model",
        suite=REPO / "recommender" / "demo" / "use_case.yaml",
        arch=REPO / "recommender" / "perf" / "catalog" / "architectures" / "llama-3.1-8b.json",
    )


def _write_spec(tmp: Path, changes: dict[str, Any]) -> None:
    write_spec(tmp / "spec.yaml", {k: _fill(v, tmp) if isinstance(v, str) else v for k, v in changes.items()})


def test_corpus_is_large_and_ids_are_unique() -> None:
    ids = [case["id"] for case in CASES]
    assert len(ids) >= 90 and len(set(ids)) == len(ids)


def _write_files(case: dict[str, Any], tmp: Path) -> None:
    """`files` as UTF-8 text, `utf16_files` as UTF-16 (with its byte-order mark), `raw_files` as the bytes
    their code points 0-255 spell (YAML "\\xNN" escapes), `repeat_files` as [text, times] pieces joined."""
    contents: dict[str, bytes] = {}
    for name, text in (case.get("files") or {}).items():
        contents[name] = text.encode("utf-8")
    for name, text in (case.get("utf16_files") or {}).items():
        contents[name] = text.encode("utf-16")
    for name, text in (case.get("raw_files") or {}).items():
        contents[name] = text.encode("latin-1")
    for name, pieces in (case.get("repeat_files") or {}).items():
        contents[name] = "".join(text * times for text, times in pieces).encode("utf-8")
    for name, data in contents.items():
        (tmp / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp / name).write_bytes(data)


def _tree(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


@pytest.mark.parametrize("case", CASES, ids=[case["id"] for case in CASES])
def test_bad_input_is_one_line_exit_2(
    case: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _write_files(case, tmp_path)
    _write_spec(tmp_path, case.get("set") or {})
    if "append" in case:  # raw YAML after the spec (a key written twice cannot come from a dump)
        with (tmp_path / "spec.yaml").open("a", encoding="utf-8") as spec_file:
            spec_file.write(case["append"])
    for name, value in (case.get("env") or {}).items():
        monkeypatch.setenv(name, _fill(value, tmp_path))
    before = _tree(tmp_path)
    monkeypatch.chdir(tmp_path)  # stores a search might create stay in the case's own directory
    monkeypatch.setattr(sys, "argv", ["recommender", *(_fill(str(a), tmp_path) for a in case["args"])])
    with pytest.raises(SystemExit) as exit_info:
        cli.main()
    out, err = capsys.readouterr()
    assert exit_info.value.code == 2, err
    assert _tree(tmp_path) == before, f"written before the refusal: {sorted(_tree(tmp_path) - before)}"
    assert out == "", f"printed before the refusal: {out!r}"
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, err
    for needle in case["expect"]:
        assert needle in lines[0], lines[0]
