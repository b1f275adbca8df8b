"""The use case's tasks scored through the serving engine (a spec's ``probe: {engine: vllm}``): quality's ServedScorer.

A scheme the engine serves on this device has its documents scored through the engine started on its checkpoint (the
one its step times are calibrated on, ``engine_steps.py``), by lm-eval's ``local-completions`` model (echo +
log-probs, as ``recommender eval --serve vllm`` does); the bf16 reference through the same engine, so a comparison
shares the engine's numerics. KL stays in process on the same checkpoint: an engine's API returns its top-k
log-probs only. A scheme the engine does not serve here is scored in process, its reference too.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING

from recommender.engines.cpu_engine_env import ENGINE_PIN

if TYPE_CHECKING:
    from lm_eval.tasks import TaskManager

    from recommender.evaluation.engine_steps import EngineSteps
    from recommender.quantize import QuantScheme

__all__ = ["EngineQuality"]


@dataclass
class EngineQuality:
    """Scores each scheme's documents through the engine, one start per scheme (``quality/served_scorer.py``)."""

    steps: EngineSteps
    manager: TaskManager
    #: The context the engine serves: lm-eval's rolling windows for perplexity fit in it.
    max_length: int
    engine: str = ENGINE_PIN

    def serves(self, method: QuantScheme) -> bool:
        return self.steps.refusal(method) is None

    def score(self, method: QuantScheme, docs: dict[str, tuple[str, list[int]]]) -> dict[str, dict[int, list[float]]]:
        from recommender.engines.cpu_engine_env import ensure_engine_env
        from recommender.engines.endpoint import check_endpoint, engine_release
        from recommender.engines.local_server import serve
        from recommender.quality.endpoint_eval import ServedModel, score_docs

        env, model = ensure_engine_env(), self.steps.checkpoint(method)
        print(f"scoring {method.name} through {env.release} ...", file=sys.stderr)
        with serve(env, model=model) as server:
            served = ServedModel(
                base_url=server.base_url,
                model=check_endpoint(server.base_url, model),
                tokenizer=self.steps.source.location,
                max_length=self.max_length,
                label=f"{engine_release(server.base_url)} ({env.release}, started by the search)",
            )
            return {
                task: {
                    i: list(v) for i, v in score_docs(served, self.manager, task=task, metric=m, doc_ids=ids).items()
                }
                for task, (m, ids) in docs.items()
            }
