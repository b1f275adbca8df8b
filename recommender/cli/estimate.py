"""`recommender estimate`: a closed-loop serving benchmark predicted, with intervals."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated

import typer

from recommender.cli.registry_help import gpu_names, precision_names
from recommender.engines import ENGINE_NAMES, PROFILES
from recommender.errors import BadInputError
from recommender.perf.catalog.architectures import read_architecture
from recommender.report.console import make_console

if TYPE_CHECKING:
    from types import SimpleNamespace

    from recommender.perf.catalog.gpus import Accelerator, Catalog
    from recommender.perf.model.shape import ModelShape
    from recommender.perf.sim.estimate import BenchmarkEstimate, EstimateRequest
    from recommender.perf.step.calibrated import StepCostFit
    from recommender.quantize import QuantScheme

EPILOG = (
    "Replays `vllm bench serve --max-concurrency C`-style traffic (C requests in flight, fixed lengths) through "
    "the step cost calibrated for the engine and the scheduler simulation the search uses. Exit codes: 0 "
    "estimated, 2 bad input."
)

#: The engines `estimate` models: every registered engine (vllm, sglang, trtllm calibrated; tgi engine-agnostic).
ENGINES = ENGINE_NAMES


def _scheme(precision: str | None, scheme: str | None, engine: str, accel: Accelerator) -> str:
    """The scheme to estimate: `--scheme` as given, or for `--precision` the first of `plan`'s schemes `engine`
    launches on `accel` (fp8 on a B200 under TensorRT-LLM: the FP8 it runs there; fp16: the cast)."""
    from recommender.fleet.plan import PLAN_METHODS, method_for

    if (precision is None) == (scheme is None):
        raise BadInputError("--precision/--scheme", "give exactly one", "e.g. --precision fp8 or --scheme int8-w8a8")
    if scheme is not None:
        return scheme
    if precision == "fp16":
        return "fp16"
    if precision not in PLAN_METHODS:
        known = ", ".join([*PLAN_METHODS, "fp16"])
        raise BadInputError("--precision", f"unknown precision {precision!r}", f"one of {known}")
    return method_for(str(precision), accel.device, (engine,)).name


def _check_kv_cache_dtype(kv_cache_dtype: str) -> None:
    from recommender.perf.model.memory import KV_DTYPE_BYTES

    if kv_cache_dtype not in KV_DTYPE_BYTES:
        raise BadInputError(
            "--kv-cache-dtype", f"unknown KV cache dtype {kv_cache_dtype!r}", f"one of {', '.join(KV_DTYPE_BYTES)}"
        )


def _check_launch(
    engine: str, method: QuantScheme, accel: Accelerator, tensor_parallel: int, shape: ModelShape
) -> None:
    """The engine registers the model's architecture and runs its heads, the degree fits the GPU's node and splits
    the model's heads, and the engine launches the scheme there."""
    from recommender.engines.architecture_support import architecture_refusal
    from recommender.engines.eligibility import refusal
    from recommender.engines.head_sizes import engine_backends, head_size_refusal
    from recommender.perf.catalog.architecture_check import check_tensor_parallel

    if (unregistered := architecture_refusal(engine, shape.architectures)) is not None:
        others = [e for e in ENGINES if e != engine and architecture_refusal(e, shape.architectures) is None]
        fix = f"estimate it with --engine {' or '.join(others)}" if others else "serve a model its registry lists"
        raise BadInputError("--model", f"{engine} does not serve it: {unregistered}", fix)
    if (heads := head_size_refusal(engine, shape.head_dim, accel.device)) is not None:
        others = [
            e
            for e in ENGINES
            if e != engine and engine_backends(e) and head_size_refusal(e, shape.head_dim, accel.device) is None
        ]
        fix = f"estimate it with --engine {' or '.join(others)}" if others else "serve a model with head_dim 64 or 128"
        raise BadInputError("--model", f"{engine} does not run it on {accel.key}: {heads}", fix)
    check_tensor_parallel(shape, accel, tensor_parallel)
    if (why := refusal(engine, method, accel.device)) is not None:
        raise BadInputError(
            "--scheme",
            f"{engine} does not launch {method.name} on {accel.key}: {why}",
            "pick another scheme, engine or GPU",
        )


def _warmup_rounds(warmup_rounds: int, rounds: int) -> int:
    if warmup_rounds >= rounds:
        raise BadInputError(
            "--warmup-rounds",
            f"{warmup_rounds} >= --rounds {rounds}: nothing would be measured",
            "leave out fewer rounds than are sent",
        )
    return warmup_rounds


# The command's options, declared once with their bounds and help (the signature below names them).
Model = Annotated[str, typer.Option(help="Shipped architecture (e.g. qwen3-32b), a config.json, or a model dir.")]
Hardware = Annotated[str, typer.Option(help=f"Catalog GPU: {gpu_names()}.")]
Concurrency = Annotated[int, typer.Option(min=1, max=4096, help="Requests in flight (the client's C).")]
PromptTokens = Annotated[int, typer.Option(min=1, max=1_000_000, help="Input length of every request.")]
OutputTokens = Annotated[int, typer.Option(min=1, max=1_000_000, help="Output length of every request.")]
Precision = Annotated[str | None, typer.Option(help=f"{precision_names()} (each its usual scheme).")]
Scheme = Annotated[str | None, typer.Option(help="A serving scheme by name (e.g. w4a16-awq-g128).")]
TensorParallel = Annotated[int, typer.Option(min=1, max=64, help="Tensor-parallel degree.")]
Engine = Annotated[str, typer.Option(help=f"Serving engine: {', '.join(ENGINES)}.")]
KvCacheDtype = Annotated[str, typer.Option(help="KV cache dtype (vLLM's names): auto (16-bit) or fp8.")]
EngineRelease = Annotated[
    str | None,
    typer.Option(
        help="The engine release to predict, as the engine prints it (e.g. 0.12.0): its host time where the fit "
        "calibrated that release line (else over all measured releases, said in the provenance) and how it reads "
        "an fp8 KV cache; default: the current release."
    ),
]
Rounds = Annotated[
    int | None,
    typer.Option(min=1, max=1000, help="Requests sent: rounds x concurrency (default: the calibration's, 8)."),
]
WarmupRounds = Annotated[
    int,
    typer.Option(min=0, max=999, help="Leave the first warmup-rounds x concurrency requests out (a client's warm-up)."),
]
Confidence = Annotated[float, typer.Option(min=0.5, max=0.99, help="Level of the intervals.")]
JsonOutput = Annotated[bool, typer.Option("--json", help="Print the estimate as JSON.")]


@dataclass(frozen=True, slots=True)
class _Launch:
    """What is launched where, read and checked: the model, its scheme, the GPU and the engine."""

    name: str
    config: SimpleNamespace
    shape: ModelShape
    method: QuantScheme
    accel: Accelerator
    catalog: Catalog


def _launch(
    model: str,
    hardware: str,
    precision: str | None,
    scheme: str | None,
    engine: str,
    tensor_parallel: int,
    kv_cache_dtype: str,
) -> _Launch:
    """The options that name the launch, each checked: a bad one is refused before anything is simulated."""
    from recommender.perf.catalog.gpus import load_catalog
    from recommender.perf.model.shape import ModelShape
    from recommender.quantize import get_scheme

    _check_kv_cache_dtype(kv_cache_dtype)
    if engine not in ENGINES:
        raise BadInputError("--engine", f"unknown engine {engine!r}", f"one of {', '.join(ENGINES)}")
    catalog = load_catalog()
    accel = catalog.get(hardware, field="--hardware")
    method = get_scheme(_scheme(precision, scheme, engine, accel), field="--scheme")
    name, config = read_architecture(model)
    shape = ModelShape.from_config(config)
    _check_launch(engine, method, accel, tensor_parallel, shape)
    return _Launch(name, config, shape, method, accel, catalog)


def _estimate(request: EstimateRequest, fit: StepCostFit) -> BenchmarkEstimate:
    """The estimate with the shipped fit and any cached kernel tables; a replica whose weights leave too little KV
    cache at this degree is refused as bad input."""
    from recommender.paths import cache_root
    from recommender.perf.sim.estimate import estimate
    from recommender.perf.step.calibrated import CalibratedModel, load_kernel_calibration

    kernel_cache = cache_root() / "kernel_tables"
    try:
        return estimate(request, CalibratedModel(fit, load_kernel_calibration(cache_dir=kernel_cache)))
    except ValueError as exc:  # the weights leave too little KV cache on the GPU at this degree
        raise BadInputError(
            "--tensor-parallel",
            f"{request.model} {request.method.name} on {request.accel.key} x{request.tensor_parallel}: {exc}",
            "a larger degree, a smaller scheme or a bigger GPU",
        ) from None


def estimate_command(
    model: Model,
    hardware: Hardware,
    concurrency: Concurrency,
    prompt_tokens: PromptTokens,
    output_tokens: OutputTokens,
    precision: Precision = None,
    scheme: Scheme = None,
    tensor_parallel: TensorParallel = 1,
    engine: Engine = "vllm",
    kv_cache_dtype: KvCacheDtype = "auto",
    engine_release: EngineRelease = None,
    rounds: Rounds = None,
    warmup_rounds: WarmupRounds = 0,
    confidence: Confidence = 0.9,
    json_output: JsonOutput = False,
) -> None:
    """Predict a closed-loop benchmark's TTFT, TPOT and throughput on a GPU, with prediction intervals."""
    from recommender.engines.engine_release import check_release
    from recommender.perf.catalog.architecture_check import check_request_fits
    from recommender.perf.sim.estimate import EstimateRequest
    from recommender.perf.step.calibrated import load_fit
    from recommender.report.estimate_table import render_estimate
    from recommender.serialization import dumps, to_data

    release = None if engine_release is None else check_release(engine_release, field="--engine-release", engine=engine)
    launch = _launch(model, hardware, precision, scheme, engine, tensor_parallel, kv_cache_dtype)
    check_request_fits(
        launch.config,
        launch.shape,
        launch.catalog,
        prompt_tokens=prompt_tokens,
        output_tokens=output_tokens,
        field="--prompt-tokens/--output-tokens",
    )
    fit = load_fit()
    sent = rounds or fit.protocol_rounds
    request = EstimateRequest(
        model=launch.name,
        shape=launch.shape,
        method=launch.method,
        accel=launch.accel,
        profile=PROFILES[engine],
        tensor_parallel=tensor_parallel,
        concurrency=concurrency,
        prompt_tokens=prompt_tokens,
        output_tokens=output_tokens,
        confidence=confidence,
        kv_cache_dtype=kv_cache_dtype,
        rounds=sent,
        warmup_rounds=_warmup_rounds(warmup_rounds, sent),
        engine_release=release,
    )
    result = _estimate(request, fit)
    if json_output:
        typer.echo(dumps(to_data(result)))
        return
    render_estimate(result, make_console(stderr=False))
