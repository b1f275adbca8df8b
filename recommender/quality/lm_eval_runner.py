"""Run a use case's lm-eval tasks on an already-loaded (quantized) model.

HFLM wraps the loaded model, so the scores are those of the real quantized weights,
not of a re-load from a hub id. Every variant is evaluated with the same batch size
(lm-eval scores move by a point or two with batch size alone) and with lm-eval's
request cache off (its cache keys on the request, not the model, and would mix variants).
"""

from __future__ import annotations

import difflib
import logging
import math
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from recommender.errors import BadInputError
from recommender.quality.suite import UseCase

if TYPE_CHECKING:
    from lm_eval.tasks import TaskManager
    from torch import nn
    from transformers import PreTrainedTokenizerBase


@dataclass(frozen=True, slots=True)
class TaskScore:
    """One task's headline metric, its lm-eval stderr when it has one, and the per-doc values."""

    task: str
    metric: str
    value: float
    stderr: float | None
    n_docs: int
    per_doc: list[float] = field(default_factory=list, repr=False)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def task_manager(use_case: UseCase) -> TaskManager:
    """lm-eval's TaskManager with the suite's local task folder registered.

    Indexing lm-eval's thousands of built-in task YAMLs takes seconds, so a suite whose
    tasks all live in its own folder gets a manager of that folder alone.
    """
    from lm_eval.tasks import TaskManager

    include = use_case.resolved_include_path()
    if include is not None:
        local = TaskManager(include_path=str(include), include_defaults=False, verbosity="ERROR")
        if set(use_case.task_names) <= set(local.all_tasks):
            return local
    return TaskManager(include_path=str(include) if include else None, verbosity="ERROR")


def check_tasks_known(use_case: UseCase, manager: TaskManager) -> None:
    """Refuse unknown task names before any model is loaded, with the closest known names."""
    known = set(manager.all_tasks)
    for i, task in enumerate(use_case.task_names):
        if task not in known:
            close = difflib.get_close_matches(task, known, n=3)
            hint = f"did you mean {', '.join(close)}?" if close else "run `lm-eval ls tasks` for the known names"
            where = f"{use_case.suite_path or 'use_case'}: tasks[{i}].task"
            raise BadInputError(where, f"lm-eval does not know task {task!r}", hint)


def _per_doc_values(samples: list[dict[str, Any]], metric: str) -> list[float]:
    values: list[float] = []
    for sample in sorted(samples, key=lambda s: s.get("doc_id", 0)):
        raw = sample.get(metric)
        if isinstance(raw, (int, float)):
            values.append(float(raw))
        elif isinstance(raw, (list, tuple)) and raw and isinstance(raw[0], (int, float)):
            values.append(float(raw[0]))
    return values


def run_use_case(
    model: nn.Module,
    tokenizer: PreTrainedTokenizerBase,
    use_case: UseCase,
    *,
    manager: TaskManager | None = None,
    limit: int | None = None,
) -> dict[str, TaskScore]:
    """Evaluate every task of the use case on `model`; returns the headline metric per task."""
    import lm_eval
    from lm_eval.models.huggingface import HFLM

    logging.getLogger("lm-eval").setLevel(logging.ERROR)
    logging.getLogger("lm_eval").setLevel(logging.ERROR)
    manager = manager or task_manager(use_case)
    check_tasks_known(use_case, manager)
    lm = HFLM(pretrained=model, tokenizer=tokenizer, batch_size=use_case.batch_size)
    # lm-eval takes one limit per call: tasks with different limits run in separate calls.
    by_limit: dict[int | None, list[str]] = {}
    for spec in use_case.tasks:
        task_limit = limit if limit is not None else (spec.limit or use_case.limit)
        by_limit.setdefault(task_limit, []).append(spec.task)
    results_all: dict[str, Any] = {}
    samples_all: dict[str, Any] = {}
    for task_limit, names in by_limit.items():
        out = lm_eval.simple_evaluate(
            model=lm,
            tasks=names,
            task_manager=manager,
            limit=task_limit,
            bootstrap_iters=0,
            log_samples=True,
            cache_requests=False,
            random_seed=0,
            numpy_random_seed=0,
            torch_random_seed=0,
            fewshot_random_seed=0,
        )
        if out is None:  # lm-eval returns None on non-zero ranks only
            raise RuntimeError("lm-eval returned no results")
        results_all.update(out["results"])
        samples_all.update(out.get("samples", {}))
    scores: dict[str, TaskScore] = {}
    for spec in use_case.tasks:
        results = results_all.get(spec.task, {})
        key = f"{spec.metric},{spec.filter}"
        if key not in results:
            available = sorted(k.split(",")[0] for k in results if "_stderr" not in k and k != "alias")
            raise BadInputError(
                f"{use_case.suite_path or 'use_case'}: task {spec.task} metric",
                f"lm-eval reported no {spec.metric!r}",
                f"use one of {', '.join(available)}",
            )
        stderr = results.get(f"{spec.metric}_stderr,{spec.filter}")
        samples = samples_all.get(spec.task, [])
        scores[spec.task] = TaskScore(
            task=spec.task,
            metric=spec.metric,
            value=float(results[key]),
            stderr=float(stderr) if isinstance(stderr, (int, float)) and math.isfinite(stderr) else None,
            n_docs=len(samples),
            per_doc=_per_doc_values(samples, spec.metric),
        )
    return scores


def lm_eval_version() -> str:
    from importlib.metadata import version

    return version("lm_eval")


__all__ = ["TaskScore", "check_tasks_known", "lm_eval_version", "run_use_case", "task_manager"]
