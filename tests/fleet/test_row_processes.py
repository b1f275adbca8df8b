"""Plan rows in processes side by side give the rows one process gives, in the same order; errors come back whole."""

from __future__ import annotations

import pickle

import pytest

from recommender.config.spec import LatencySLA, Traffic
from recommender.errors import BadInputError
from recommender.fleet.plan import plan, rows_to_json
from recommender.fleet.plan_request import PlanRequest
from recommender.fleet.plan_scope import PlanScope
from recommender.fleet.row_processes import WORKERS_ENV, map_rows, row_processes
from recommender.perf.catalog.architectures import load_architecture
from recommender.perf.catalog.gpus import load_catalog

TRAFFIC = Traffic(prompt_tokens=512, output_tokens=128, requests_per_second=5)
SLA = LatencySLA(ttft_p99_ms=2000, tpot_p99_ms=100)
#: One degree: the rows' order and figures across processes are under test, not the ranking of degrees.
CAPS_64 = PlanScope(batch_sizes=(64,), tensor_parallel=(1,), kv_cache_dtypes=("auto",))


def _plan(monkeypatch: pytest.MonkeyPatch, processes: str) -> tuple[str, list[str]]:
    monkeypatch.setenv(WORKERS_ENV, processes)
    heard: list[str] = []
    rows = plan(
        PlanRequest(
            shape=load_architecture("qwen3-8b")[1],
            catalog=load_catalog(),
            hardware=("l4", "a100-80gb"),
            precisions=("bf16", "int8"),
            traffic=TRAFFIC,
            sla=SLA,
            scope=CAPS_64,
            on_row=heard.append,
        )
    )
    return rows_to_json(rows), heard


def test_two_processes_plan_the_rows_one_process_plans(monkeypatch: pytest.MonkeyPatch) -> None:
    one, heard_one = _plan(monkeypatch, "1")
    two, heard_two = _plan(monkeypatch, "2")
    assert two == one
    assert sorted(heard_two) == sorted(heard_one) == ["a100-80gb/bf16", "a100-80gb/int8", "l4/bf16", "l4/int8"]


def test_the_process_count_follows_the_rows_the_cores_and_the_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(WORKERS_ENV, "1")
    assert row_processes(10) == 1
    monkeypatch.setenv(WORKERS_ENV, "64")
    assert 1 <= row_processes(10) <= 10 and row_processes(1) == 1
    monkeypatch.setenv(WORKERS_ENV, "lots")  # not a number: the usable cores
    assert row_processes(3) == min(3, row_processes(10**6))


def _refuse(name: str) -> str:
    raise BadInputError(f"--hardware[{name}]", "not a GPU here", "pick one of the catalog's")


def test_a_rows_bad_input_comes_back_as_the_same_error(monkeypatch: pytest.MonkeyPatch) -> None:
    error = BadInputError("--hardware", "unknown GPU 'h1000'", "pick one of the catalog's")
    again = pickle.loads(pickle.dumps(error))
    assert (again.field, again.problem, again.fix, str(again)) == (error.field, error.problem, error.fix, str(error))
    monkeypatch.setenv(WORKERS_ENV, "2")
    with pytest.raises(BadInputError, match=r"--hardware\[[xy]\]: not a GPU here \(fix: pick one"):
        map_rows(_refuse, ["x", "y"])
