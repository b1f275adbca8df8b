"""Quality through a serving engine: the use case's tasks scored by lm-eval over OpenAI-compatible completions.

Why: the checkpoint a team deploys is scored as the engine runs it (its kernels, its numerics, its batching), and
the unquantized reference through the same engine, so the paired comparison shares everything but the scheme.
lm-eval's ``local-completions`` model asks ``/v1/completions`` with ``echo`` and ``logprobs`` for log-likelihoods
(vLLM's and SGLang's OpenAI servers answer it) and plain completions for generation tasks; it tokenizes with the
model's Hugging Face tokenizer, as the engine does.

What differs from ``QualityEvaluator`` (the in-process path): no per-document cache (the model behind a URL can
change between runs), one look at the whole budget (no adaptive stopping), and no KL: an engine returns at most its
top-k log-probs (vLLM's ``max_logprobs``, 20 by default), not the whole distributions KL needs, so a suite's KL check
says "unverified" with that reason, and so does the verdict.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from recommender.quality.evaluate import document_order, task_budget
from recommender.quality.lm_eval_runner import describe_task, run_docs_on
from recommender.quality.result import AS_SERVED, QualityResult
from recommender.quality.statistics import paired_bootstrap
from recommender.quality.verdict import fidelity_check, overall, task_check

if TYPE_CHECKING:
    from lm_eval.tasks import TaskManager

    from recommender.quality.suite import UseCase

__all__ = ["AS_SERVED", "NO_KL", "ServedModel", "SuiteScores", "compare_served", "score_docs", "score_served"]

#: Why a KL check through an engine is unverified.
NO_KL = "KL needs whole next-token distributions; an engine's API returns its top-k log-probs only"
#: Requests lm-eval keeps in flight to the engine (its continuous batching serves them together).
CONCURRENT = 4


@dataclass(frozen=True, kw_only=True)
class ServedModel:
    """A model as an engine serves it.

    Args:
        base_url: the server, e.g. ``http://127.0.0.1:8000``.
        model: the id the server lists for it (``GET /v1/models``).
        tokenizer: the Hugging Face tokenizer lm-eval tokenizes requests with (a hub id or a local directory).
        max_length: the context the engine serves (lm-eval's rolling windows for perplexity fit in it).
        label: where it was measured, for the result (engine release and URL).
    """

    base_url: str
    model: str
    tokenizer: str
    max_length: int
    label: str


@dataclass(frozen=True, kw_only=True)
class SuiteScores:
    """Each task's per-document (numerator, denominator) pairs, in the suite's seeded document order."""

    served: ServedModel
    pairs: dict[str, np.ndarray]
    seconds: float

    @property
    def docs(self) -> int:
        return sum(len(p) for p in self.pairs.values())


def _completions_model(served: ServedModel) -> Any:
    from lm_eval.models.openai_completions import LocalCompletionsAPI

    return LocalCompletionsAPI(
        base_url=served.base_url.rstrip("/") + "/v1/completions",
        model=served.model,
        tokenizer=served.tokenizer,
        tokenizer_backend="huggingface",
        max_length=served.max_length,
        num_concurrent=CONCURRENT,
        max_retries=3,
    )


def score_docs(
    served: ServedModel, manager: TaskManager, *, task: str, metric: str, doc_ids: list[int]
) -> dict[int, tuple[float, float]]:
    """`doc_ids` of `task` scored on `served` (a search's quality through the engine: ``served_scorer.py``)."""
    return run_docs_on(_completions_model(served), manager, task=task, metric=metric, doc_ids=doc_ids)


def score_served(
    served: ServedModel, use_case: UseCase, manager: TaskManager, *, limit: int | None = None
) -> SuiteScores:
    """Every task of `use_case` scored on `served`, each over its budget of the seeded document order."""
    started = time.perf_counter()
    lm = _completions_model(served)
    pairs: dict[str, np.ndarray] = {}
    for spec in use_case.tasks:
        n_docs = describe_task(manager, spec.task).n_docs
        ids = document_order(n_docs)[: task_budget(use_case, spec, n_docs, limit)]
        found = run_docs_on(lm, manager, task=spec.task, metric=spec.metric, doc_ids=ids)
        pairs[spec.task] = np.asarray([found[i] for i in ids], dtype=np.float64)
    return SuiteScores(served=served, pairs=pairs, seconds=time.perf_counter() - started)


def compare_served(
    use_case: UseCase, *, method: str, precision: str, baseline: SuiteScores, candidate: SuiteScores
) -> QualityResult:
    """The paired verdict of `candidate` against `baseline`, as ``eval`` reports it (KL unverified: ``NO_KL``)."""
    same = baseline is candidate
    checks = [
        task_check(
            spec,
            paired_bootstrap(
                spec,
                baseline.pairs[spec.task],
                candidate.pairs[spec.task],
                policy=use_case.verdict_policy,
                confidence=use_case.confidence,
                same_model=same,
            ),
        )
        for spec in use_case.tasks
    ]
    kl = fidelity_check(use_case, None)
    checks += [kl] if kl else []
    return QualityResult(
        method,
        precision,
        overall(checks),
        checks,
        None,
        candidate.served.label,
        baseline.seconds + (0.0 if same else candidate.seconds),
        baseline.docs + (0 if same else candidate.docs),
        NO_KL if kl else "",
        AS_SERVED,
    )
