"""`recommender probe --endpoint URL | --serve vllm`: load a real serving engine and read its latencies.

The server is checked first (``GET /v1/models``: down, garbage or another model is one line and exit 2, before
anything is installed, measured or written); then ``vllm bench serve`` (from the engine environment) sends each load
level, the engine's /metrics sampled meanwhile; the table is printed and the run logged to MLflow with the engine's
release and the commands.
"""

from __future__ import annotations

import math
import shlex
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from recommender.engines.endpoint import engine_release
from recommender.errors import BadInputError

if TYPE_CHECKING:
    from recommender.engines.engine_prediction import CapacityCheck, EngineJudgement
    from recommender.engines.load_run import LoadShape, MeasuredLoad

__all__ = ["EngineProbe", "run_engine_probe"]


@dataclass(frozen=True, kw_only=True)
class EngineProbe:
    """What the command line asked for.

    Args:
        model: the model the server must serve (its id, or the checkpoint directory for ``--serve``).
        endpoint: the server's base URL; None with ``serve``.
        serve: the engine to start (``vllm``); None with ``endpoint``.
        tokenizer: what the load generator tokenizes prompts with (default: ``model``).
        rates: Poisson rates, one load level each; concurrencies: closed-loop levels (no rate, a cap).
    """

    model: str
    endpoint: str | None
    serve: str | None
    tokenizer: str | None
    rates: tuple[float, ...]
    concurrencies: tuple[int, ...]
    prompts: int
    input_len: int
    output_len: int
    tracking_uri: str | None
    json_output: bool
    #: P99 TTFT and TPOT limits (ms): the capacity within them predicted, then bracketed on the engine.
    sla: tuple[float, float] | None = None


def _shapes(ask: EngineProbe) -> list[LoadShape]:
    from recommender.engines.load_run import LoadShape

    size = {"prompts": ask.prompts, "input_len": ask.input_len, "output_len": ask.output_len}
    return [LoadShape(rate=r, **size) for r in ask.rates] + [
        LoadShape(concurrency=c, **size) for c in ask.concurrencies
    ]


def _measure(ask: EngineProbe, *, base_url: str, served: str, params: dict[str, str]) -> None:
    from recommender.engines.cpu_engine_env import bench_command, ensure_engine_env
    from recommender.engines.engine_prediction import judge_engine
    from recommender.engines.load_run import bench_args, run_load
    from recommender.releases.probe_tracking import log_endpoint_probe
    from recommender.releases.tracking import resolve_tracking_uri
    from recommender.report.console import make_console
    from recommender.report.endpoint_table import render_capacity, render_load, render_prediction
    from recommender.serialization import dumps

    env = ensure_engine_env()
    bench = bench_command(env)
    tokenizer = ask.tokenizer or ask.model
    params |= {"load_generator": f"vllm bench serve ({env.release})", "tokenizer": tokenizer}
    points = []
    for step, shape in enumerate(_shapes(ask)):
        args = bench_args(base_url=base_url, model=served, tokenizer=tokenizer, shape=shape, result=Path("result.json"))
        params[f"load_command_{step}"] = shlex.join(["vllm", "bench", "serve", *args])
        print(f"load: {shape.label}, {shape.prompts} requests ...", file=sys.stderr)
        points.append(run_load(bench, base_url=base_url, model=served, tokenizer=tokenizer, shape=shape))
    judgement = judge_engine(points, engine=params["engine_release"])
    predicted = {} if judgement is None else _predicted_by_step(points, judgement)
    capacity = None
    if judgement is not None and ask.sla is not None:
        capacity = _capacity(ask, judgement, base_url=base_url, served=served, tokenizer=tokenizer, bench=bench)
        points += capacity[1]
    run_id = log_endpoint_probe(
        resolve_tracking_uri(ask.tracking_uri), points=points, params=params, predicted=predicted
    )
    if ask.json_output:
        answer: dict[str, object] = {"params": params, "mlflow_run": run_id, "points": [p.flat() for p in points]}
        if judgement is not None:
            answer["prediction"] = {
                "provenance": str(judgement.provenance),
                "prefill_s": judgement.prefill_s,
                "decode_s": judgement.decode_s,
                "host_tail_ms": judgement.tail_ms,
                "predicted_by_point": {str(step): figures for step, figures in predicted.items()},
                "held_out_worst": {m: _finite(judgement.worst(m)) for m in ("ttft_p99", "tpot_p99")},
            }
        if capacity is not None:
            answer["capacity"] = {**asdict(capacity[0]), "within": _finite(capacity[0].within)}
        print(dumps(answer), end="")
        return
    title = f"{served} on {params['engine_release']} ({params['endpoint']})"
    console = make_console(stderr=False)
    render_load(points, title=title, console=console)
    if judgement is not None:
        render_prediction(judgement, console=console)
    if capacity is not None:
        render_capacity(capacity[0], console=console)
    print(f"logged to MLflow: run {run_id} (experiment recommender-probe)")


def _capacity(
    ask: EngineProbe, judgement: EngineJudgement, *, base_url: str, served: str, tokenizer: str, bench: list[str]
) -> tuple[CapacityCheck, list[MeasuredLoad]]:
    """The simulated capacity within ``ask.sla``, and the engine loaded below, at and above it to bracket its own."""
    from recommender.engines.engine_prediction import check_capacity, next_capacity_factor, predicted_capacity
    from recommender.engines.load_run import LoadShape, run_load

    assert ask.sla is not None
    ttft, tpot = ask.sla
    size = {"prompts": ask.prompts, "input_len": ask.input_len, "output_len": ask.output_len}
    rate = predicted_capacity(judgement, LoadShape(**size), ttft_p99_ms=ttft, tpot_p99_ms=tpot)
    levels: list[MeasuredLoad] = []
    judged: dict[float, bool] = {}
    while rate > 0 and (factor := next_capacity_factor(judged)) is not None:
        shape = LoadShape(rate=round(rate * factor, 2), **size)
        print(f"capacity: {shape.label} ({factor:.3g} x the simulated {rate:.2f}) ...", file=sys.stderr)
        levels.append(run_load(bench, base_url=base_url, model=served, tokenizer=tokenizer, shape=shape))
        judged[factor] = check_capacity(levels[-1:], predicted=rate, ttft_p99_ms=ttft, tpot_p99_ms=tpot).met > 0
    return check_capacity(levels, predicted=rate, ttft_p99_ms=ttft, tpot_p99_ms=tpot), levels


def _finite(value: float) -> float | None:
    """JSON's number, or null where there is none (NaN: nothing held out; inf: no rate met the SLA)."""
    return value if math.isfinite(value) else None


def _predicted_by_step(points: list[MeasuredLoad], judgement: EngineJudgement) -> dict[int, dict[str, float]]:
    """The simulator's figures keyed by the probe's step (its load level's index in `points`)."""
    by_shape = {id(level.shape): level.predicted for level in [*judgement.fitted, *judgement.held_out]}
    return {step: by_shape[id(p.shape)] for step, p in enumerate(points) if id(p.shape) in by_shape}


def run_engine_probe(ask: EngineProbe) -> None:
    """Check the server (or start one), measure each load level, print and log.

    Raises:
        BadInputError: the server is down, answers garbage or serves another model; the engine would not start.
    """
    from recommender.engines.endpoint import check_endpoint

    if ask.endpoint is not None:
        served = check_endpoint(ask.endpoint, ask.model)
        params = {"endpoint": ask.endpoint, "model": served, "engine_release": engine_release(ask.endpoint)}
        _measure(ask, base_url=ask.endpoint, served=served, params=params)
        return
    if ask.serve != "vllm":
        raise BadInputError("--serve", f"{ask.serve!r} is not an engine the tool starts", "pass --serve vllm")
    from recommender.engines.cpu_engine_env import ensure_engine_env
    from recommender.engines.local_server import serve

    checkpoint = Path(ask.model).expanduser()
    if not (checkpoint / "config.json").is_file():
        raise BadInputError("--model", f"{ask.model} is not a checkpoint directory (no config.json)", "pass one")
    env = ensure_engine_env()
    print(f"starting {env.release} on {checkpoint} ...", file=sys.stderr)
    with serve(env, model=str(checkpoint.resolve())) as server:
        print(f"vllm serving {checkpoint} at {server.base_url}: healthy after {server.start_s:.0f} s", file=sys.stderr)
        served = check_endpoint(server.base_url, str(checkpoint.resolve()))
        params = {
            "endpoint": server.base_url,
            "model": served,
            "engine_release": env.release,
            "engine_command": shlex.join(server.command),
            "engine_start_s": f"{server.start_s:.1f}",
        }
        _measure(ask, base_url=server.base_url, served=served, params=params)
