"""`eval --endpoint | --serve`: what is refused before anything is scored, against real servers on 127.0.0.1.

A closed port, a server answering junk and one serving another model are refused in one line naming the flag whose
server it is (the candidate's --endpoint or the reference's --baseline-endpoint), exit 2, nothing on stdout; the
flags that do not go together are refused the same way before any server is asked.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from recommender.engines.local_server import free_port
from tests.conftest import REPO, run_cli_in_process
from tests.engines.test_endpoint_probe import _server

MODEL = str(REPO / "recommender" / "demo" / "model")
USE_CASE = str(REPO / "recommender" / "demo" / "use_case.yaml")


@pytest.fixture
def junk() -> Iterator[str]:
    yield from _server(b"<html>It works!</html>", "text/html")


@pytest.fixture
def serves_the_demo() -> Iterator[str]:
    yield from _server(json.dumps({"data": [{"id": MODEL}]}).encode())


def _eval(*args: str) -> tuple[int, list[str], str]:
    result = run_cli_in_process("eval", "--model", MODEL, "--use-case", USE_CASE, *args)
    return result.returncode, result.stderr.strip().splitlines(), result.stdout


@pytest.mark.parametrize(
    ("args", "flag", "needle"),
    [
        (("--scheme", "int8-w8a8", "--serve", "sglang"), "--serve", "not an engine the tool starts"),
        (("--scheme", "int8-w8a8", "--serve", "vllm"), "--checkpoint", "the engine loads a checkpoint"),
        (("--scheme", "int8-w8a8", "--serve", "vllm", "--checkpoint", "/nonexistent"), "--checkpoint", "no config"),
        (("--scheme", "int8-w8a8", "--endpoint", "http://127.0.0.1:1"), "--baseline-endpoint", "same engine"),
        (("--scheme", "baseline", "--baseline-endpoint", "http://127.0.0.1:1"), "--baseline-endpoint", "without"),
        (("--scheme", "baseline", "--serve", "vllm", "--endpoint", "http://127.0.0.1:1"), "--serve", "with --endpoint"),
        (("--scheme", "int8-w8a8", "--precision", "fp8", "--serve", "vllm"), "--precision", "int8 method"),
    ],
    ids=["engine", "no-checkpoint", "checkpoint-dir", "no-baseline", "baseline-alone", "both-ways", "precision"],
)
def test_flags_that_do_not_go_together_are_refused_by_name(args: tuple[str, ...], flag: str, needle: str) -> None:
    code, lines, stdout = _eval(*args)
    assert code == 2 and len(lines) == 1 and lines[0].startswith(f"error: {flag}:"), lines
    assert needle in lines[0] and stdout == ""


def test_a_closed_candidate_port_is_refused_naming_endpoint() -> None:
    code, lines, _ = _eval("--scheme", "baseline", "--endpoint", f"http://127.0.0.1:{free_port()}")
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error: --endpoint: no server answers"), lines


def test_a_junk_reference_server_is_refused_naming_baseline_endpoint(serves_the_demo: str, junk: str) -> None:
    code, lines, _ = _eval("--scheme", "int8-w8a8", "--endpoint", serves_the_demo, "--baseline-endpoint", junk)
    assert code == 2 and len(lines) == 1, lines
    assert lines[0].startswith("error: --baseline-endpoint:") and "did not answer an OpenAI model list" in lines[0]


def test_a_candidate_server_of_another_checkpoint_is_refused(serves_the_demo: str, tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text("{}")
    code, lines, _ = _eval(
        "--scheme", "int8-w8a8", "--checkpoint", str(tmp_path), "--endpoint", serves_the_demo,
        "--baseline-endpoint", serves_the_demo,
    )  # fmt: skip
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error: --endpoint: the server serves"), lines
