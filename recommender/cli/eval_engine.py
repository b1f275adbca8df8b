"""`recommender eval --endpoint URL --baseline-endpoint URL | --serve vllm`: the use case scored through an engine.

The reference goes through the same engine as the candidate, so the comparison shares the engine's numerics. With
``--endpoint`` the user's servers are checked first (``GET /v1/models``: down, garbage or another model is one line
and exit 2, before anything is scored); with ``--serve vllm`` the tool starts vLLM's CPU build on ``--model`` (the
reference), scores it, stops it, then does the same on ``--checkpoint`` (the files ``recommender quantize`` wrote).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from recommender.errors import BadInputError

if TYPE_CHECKING:
    from lm_eval.tasks import TaskManager

    from recommender.quality.endpoint_eval import ServedModel, SuiteScores
    from recommender.quality.result import QualityResult
    from recommender.quality.suite import UseCase

__all__ = ["EngineEval", "run_engine_eval"]

REFERENCE = "baseline"


@dataclass(frozen=True, kw_only=True)
class EngineEval:
    """What the command line asked for.

    Args:
        model: the unquantized model (hub id or directory): the reference, and the tokenizer of both.
        method, precision: the scheme the candidate was made with, as results name it.
        checkpoint: the candidate's checkpoint directory (``--serve``; with ``--endpoint`` the id it must serve).
        endpoint, baseline_endpoint: the user's servers of the candidate and of the reference.
        serve: the engine the tool starts instead (``vllm``).
    """

    model: str
    method: str
    precision: str
    checkpoint: Path | None
    endpoint: str | None
    baseline_endpoint: str | None
    serve: str | None
    limit: int | None


def check_engine_eval(ask: EngineEval) -> None:
    """Refuse, before anything runs, what cannot be asked together (one line naming the flag)."""
    if ask.endpoint is not None and ask.serve is not None:
        raise BadInputError("--serve", "given with --endpoint", "score through your server or one the tool starts")
    if ask.serve is not None and ask.serve != "vllm":
        raise BadInputError("--serve", f"{ask.serve!r} is not an engine the tool starts", "pass --serve vllm")
    if ask.baseline_endpoint is not None and ask.endpoint is None:
        raise BadInputError("--baseline-endpoint", "given without --endpoint", "pass the candidate's --endpoint too")
    if ask.serve is not None:
        for flag, folder in (("--model", Path(ask.model)), ("--checkpoint", ask.checkpoint)):
            if folder is not None and not (folder.expanduser() / "config.json").is_file():
                raise BadInputError(flag, f"{folder} is not a checkpoint directory (no config.json)", "pass one")
    if ask.method == REFERENCE:
        return
    if ask.endpoint is not None and ask.baseline_endpoint is None:
        raise BadInputError(
            "--baseline-endpoint",
            "missing: the candidate is compared with the unquantized model served by the same engine",
            "serve --model on that engine too and pass its URL",
        )
    if ask.serve is not None and ask.checkpoint is None:
        raise BadInputError(
            "--checkpoint", "missing: the engine loads a checkpoint", "pass the directory `recommender quantize` wrote"
        )


def _max_length(model: str) -> int:
    from recommender.models.source import ModelSource

    source = ModelSource.resolve(model, base_dir=Path.cwd(), field="--model")
    return int(getattr(source.load_config(field="--model"), "max_position_embeddings", 2048) or 2048)


def _served(url: str, expect: str | None, *, field: str, tokenizer: str, max_length: int) -> ServedModel:
    """The model `url` serves (`expect` when given, else the one it lists), checked before anything is scored."""
    from recommender.engines.endpoint import check_endpoint, engine_release, models_served
    from recommender.quality.endpoint_eval import ServedModel

    if expect is not None:
        served = check_endpoint(url, expect, field=field)
    else:
        ids = models_served(url, field=field)
        if len(ids) != 1:
            raise BadInputError(field, f"the server lists {len(ids)} models", "serve the candidate alone")
        served = ids[0]
    label = f"{engine_release(url)} at {url}"
    return ServedModel(base_url=url, model=served, tokenizer=tokenizer, max_length=max_length, label=label)


def _score_started(
    model_dir: str, use_case: UseCase, manager: TaskManager, *, ask: EngineEval, max_length: int
) -> SuiteScores:
    from recommender.engines.cpu_engine_env import ensure_engine_env
    from recommender.engines.endpoint import check_endpoint, engine_release
    from recommender.engines.local_server import serve
    from recommender.quality.endpoint_eval import ServedModel, score_served

    env = ensure_engine_env()
    print(f"starting {env.release} on {model_dir} ...", file=sys.stderr)
    with serve(env, model=model_dir) as server:
        print(f"healthy after {server.start_s:.0f} s; scoring {use_case.name} through it ...", file=sys.stderr)
        served = ServedModel(
            base_url=server.base_url,
            model=check_endpoint(server.base_url, model_dir),
            tokenizer=ask.model,
            max_length=max_length,
            label=f"{engine_release(server.base_url)} ({env.release}, started by the tool)",
        )
        return score_served(served, use_case, manager, limit=ask.limit)


def run_engine_eval(ask: EngineEval, use_case: UseCase, manager: TaskManager) -> QualityResult:
    """Score the reference and the candidate through the engine and compare them (``endpoint_eval.compare_served``);
    `ask` was checked by ``check_engine_eval`` (the command line does it before the suite loads)."""
    from recommender.quality.endpoint_eval import compare_served, score_served

    max_length = _max_length(ask.model)
    reference = ask.method == REFERENCE
    if ask.endpoint is not None:
        candidate_url = ask.endpoint
        expect = str(ask.checkpoint.resolve()) if ask.checkpoint is not None else None
        candidate = _served(candidate_url, expect, field="--endpoint", tokenizer=ask.model, max_length=max_length)
        base_served = (
            candidate
            if reference or ask.baseline_endpoint is None
            else _served(
                ask.baseline_endpoint,
                ask.model,
                field="--baseline-endpoint",
                tokenizer=ask.model,
                max_length=max_length,
            )
        )
        baseline = score_served(base_served, use_case, manager, limit=ask.limit)
        scored = baseline if reference else score_served(candidate, use_case, manager, limit=ask.limit)
    else:
        model_dir = str(Path(ask.model).expanduser().resolve())
        baseline = _score_started(model_dir, use_case, manager, ask=ask, max_length=max_length)
        if reference or ask.checkpoint is None:
            scored = baseline
        else:
            checkpoint = str(ask.checkpoint.expanduser().resolve())
            scored = _score_started(checkpoint, use_case, manager, ask=ask, max_length=max_length)
    return compare_served(use_case, method=ask.method, precision=ask.precision, baseline=baseline, candidate=scored)
