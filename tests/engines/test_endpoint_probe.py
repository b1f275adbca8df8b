"""`probe --endpoint` against real servers: refusals before any load, and the parsing of what the tools answer.

The refused servers are real ones on 127.0.0.1 (a closed port; an `http.server` answering junk; one listing another
model), run through the real command line: one line naming the problem, exit 2, and no MLflow store written.
"""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from recommender.engines.endpoint import check_endpoint, parse_metrics, served_model_matches, summarise
from recommender.engines.load_run import METRICS, PERCENTILES, LoadShape, bench_args, parse_result
from recommender.engines.local_server import free_port
from recommender.errors import BadInputError
from tests.conftest import run_cli_in_process


def _server(body: bytes, content_type: str = "application/json") -> Iterator[str]:
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            self.send_response(200)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def garbage() -> Iterator[str]:
    yield from _server(b"<html>It works!</html>", "text/html")


@pytest.fixture
def other_model() -> Iterator[str]:
    yield from _server(json.dumps({"object": "list", "data": [{"id": "meta-llama/Llama-3.1-8B"}]}).encode())


@pytest.fixture
def demo_model() -> Iterator[str]:
    yield from _server(json.dumps({"data": [{"id": "demo/served"}]}).encode())


def _refused(tmp_path: Path, endpoint: str, *needles: str) -> None:
    store = tmp_path / "mlruns"
    result = run_cli_in_process(
        "probe", "--model", "demo/served", "--endpoint", endpoint, "--tracking-uri", f"sqlite:///{store}/mlflow.db"
    )
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: --endpoint:"), result.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]
    assert result.stdout == ""
    assert not store.exists()


def test_a_closed_port_is_refused(tmp_path: Path) -> None:
    _refused(tmp_path, f"http://127.0.0.1:{free_port()}", "no server answers", "start the server")


def test_garbage_is_refused(tmp_path: Path, garbage: str) -> None:
    _refused(tmp_path, garbage, "did not answer an OpenAI model list", "It works")


def test_another_model_is_refused(tmp_path: Path, other_model: str) -> None:
    _refused(tmp_path, other_model, "serves meta-llama/Llama-3.1-8B, not demo/served")


def test_the_asked_model_passes_the_check(demo_model: str) -> None:
    assert check_endpoint(demo_model, "demo/served") == "demo/served"
    with pytest.raises(BadInputError, match="not demo/other"):
        check_endpoint(demo_model, "demo/other")


def test_a_served_directory_matches_its_path(tmp_path: Path) -> None:
    assert served_model_matches(str(tmp_path), str(tmp_path / "." / ""))
    assert not served_model_matches("model", "other-model")


def test_endpoint_and_serve_together_are_refused() -> None:
    result = run_cli_in_process("probe", "--model", "m", "--endpoint", "http://x", "--serve", "vllm")
    assert result.returncode == 2 and "given with --serve" in result.stderr


def test_the_local_probe_still_needs_a_method() -> None:
    result = run_cli_in_process("probe", "--model", "recommender/demo/model")
    assert result.returncode == 2 and "--method: missing" in result.stderr


_METRICS_TEXT = """\
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 7.0
vllm:num_requests_waiting{engine="0",model_name="m"} 2.0
vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.25
vllm:prefix_cache_queries_total{engine="0",model_name="m"} 1024.0
vllm:prefix_cache_hits_total{engine="0",model_name="m"} 256.0
vllm:generation_tokens_total{engine="0",model_name="m"} 99.0
python_gc_objects_collected_total{generation="0"} 1.0
"""


def test_vllm_metrics_are_read_and_summarised() -> None:
    sample = parse_metrics(_METRICS_TEXT)
    assert sample == {
        "running": 7.0,
        "waiting": 2.0,
        "kv_cache_usage": 0.25,
        "prefix_queries": 1024.0,
        "prefix_hits": 256.0,
    }
    later = sample | {"running": 3.0, "prefix_queries": 2048.0, "prefix_hits": 768.0}
    flat = summarise([sample, later]).flat()
    assert flat["engine_running_peak"] == 7.0 and flat["engine_running_mean"] == 5.0
    assert flat["engine_prefix_queries"] == 1024.0 and flat["engine_prefix_hit_rate"] == 0.5
    assert parse_metrics("<html>not prometheus</html>") == {}


def _bench_json() -> dict[str, object]:
    data: dict[str, object] = {
        "duration": 10.2,
        "completed": 50,
        "failed": 0,
        "request_throughput": 4.9,
        "output_throughput": 156.8,
    }
    for i, metric in enumerate(METRICS):
        data |= {f"mean_{metric}_ms": 10.0 + i, f"median_{metric}_ms": 9.0 + i, f"std_{metric}_ms": 1.0}
        data |= {f"p{p}_{metric}_ms": p / 10 + i for p in PERCENTILES}
    return data


def test_bench_serve_json_is_read() -> None:
    shape = LoadShape(rate=5.0, prompts=50)
    point = parse_result(_bench_json(), shape)
    flat = point.flat()
    assert flat["ttft_p99_ms"] == 9.9 and flat["tpot_p50_ms"] == 6.0 and flat["itl_mean_ms"] == 12.0
    assert point.completed == 50 and point.request_throughput == 4.9 and shape.label == "5 req/s"


def test_a_bench_json_without_a_percentile_is_refused() -> None:
    data = _bench_json()
    del data["p99_tpot_ms"]
    with pytest.raises(BadInputError, match="p99_tpot_ms is None"):
        parse_result(data, LoadShape(rate=1.0))


def test_bench_args_name_the_rate_and_the_cap(tmp_path: Path) -> None:
    poisson = bench_args(
        base_url="http://h:1/", model="m", tokenizer="t", shape=LoadShape(rate=5), result=tmp_path / "r.json"
    )
    assert poisson[poisson.index("--request-rate") + 1] == "5" and "--max-concurrency" not in poisson
    assert poisson[poisson.index("--base-url") + 1] == "http://h:1" and "--ignore-eos" in poisson
    closed = bench_args(
        base_url="http://h:1", model="m", tokenizer="t", shape=LoadShape(concurrency=8), result=tmp_path / "r.json"
    )
    assert closed[closed.index("--request-rate") + 1] == "inf" and closed[closed.index("--max-concurrency") + 1] == "8"
    assert LoadShape(concurrency=8).label == "conc 8"
    assert closed[closed.index("--num-warmups") + 1] == "2"  # left out of the figures
