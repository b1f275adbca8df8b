"""`recommender quantize`: write the checkpoint a serving engine loads, calibrated on a use case's documents."""

from __future__ import annotations

import time
from importlib import resources
from pathlib import Path
from typing import Annotated

import typer

EPILOG = (
    "Exit codes: 0 written, 2 bad input (unknown scheme, a scheme with nothing to write, an output that exists).\n\n"
    "llm-compressor schemes write safetensors, config.json whose quantization_config names compressed-tensors and "
    "its config groups, the tokenizer and recipe.yaml (`vllm serve DIR` loads it); ModelOpt schemes (modelopt-*) "
    "write ModelOpt's HF export with hf_quant_config.json and modelopt_recipe.json (`trtllm-serve DIR` loads it). "
    "Append +kv-fp8 to a ModelOpt scheme for calibrated FP8 KV-cache scales."
)


def scheme_help() -> str:
    """Every scheme in the registry that writes a checkpoint, by format (the registry is the one list)."""
    from recommender.quantize import all_schemes

    by_format: dict[str, list[str]] = {}
    for method in all_schemes().values():
        if method.checkpoint_format is not None:
            by_format.setdefault(method.checkpoint_format, []).append(method.name)
    return "; ".join(f"{fmt}: {', '.join(names)}" for fmt, names in by_format.items()) + "."


#: The demo use case, shipped in the package.
DEFAULT_SUITE = Path(str(resources.files("recommender.demo") / "use_case.yaml"))


def quantize_command(
    model: Annotated[str, typer.Option(help="Local model directory or hub id (org/name).")],
    scheme: Annotated[str, typer.Option(help=scheme_help())],
    out: Annotated[Path, typer.Option(help="New directory to write the checkpoint to.")],
    use_case: Annotated[Path, typer.Option(help="Suite whose unscored documents calibrate.")] = DEFAULT_SUITE,
    calibration_docs: Annotated[
        int | None, typer.Option(min=1, max=4096, help="Calibration samples (default: the suite's).")
    ] = None,
    revision: Annotated[str | None, typer.Option(help="Hub revision for hub ids.")] = None,
    trust_remote_code: Annotated[bool, typer.Option(help="Run code shipped with the model.")] = False,
) -> None:
    """Quantize a model (llm-compressor or ModelOpt) and save the checkpoint a serving engine loads."""
    from recommender.cli.checkpoint_export import check_output_dir, checkpoint_scheme, export_checkpoint
    from recommender.config.destinations import check_cache_root
    from recommender.input_files import expand_user
    from recommender.models.source import ModelSource
    from recommender.quality.calibration_docs import quantize_context
    from recommender.quality.lm_eval_runner import task_manager
    from recommender.quality.suite import Calibration, load_use_case
    from recommender.quantize import get_scheme

    method = checkpoint_scheme(get_scheme(scheme, field="--scheme"))
    out = expand_user(out, field="--out").resolve()
    check_output_dir(out)
    check_cache_root()  # calibration documents are cached: refused up front, not after the model loads
    source = ModelSource.resolve(
        model, base_dir=Path.cwd(), field="--model", revision=revision, trust_remote_code=trust_remote_code
    )
    source.load_config(field="--model")
    suite = load_use_case(use_case, field="--use-case")
    if calibration_docs is not None:
        calibration = Calibration.model_validate(suite.calibration.model_dump() | {"samples": calibration_docs})
        suite = suite.model_copy(update={"calibration": calibration})
    context = quantize_context(suite, task_manager(suite), source)
    started = time.perf_counter()
    export_checkpoint(method, source, context, out)
    calibration_note = f", calibrated on {context.calibration_set().source}" if method.calibrates else ""  # type: ignore[union-attr]
    typer.echo(
        f"wrote {method.name} checkpoint of {source.name} to {out} in {time.perf_counter() - started:.1f} s"
        f"{calibration_note}"
    )
    typer.echo(f"serve it with: {method.serve_hint(out)}")
