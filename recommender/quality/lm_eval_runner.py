"""Run lm-eval tasks on an already-loaded (quantized) model, document by document.

HFLM wraps the loaded model, so the scores are those of the real quantized weights,
not of a re-load from a hub id. Every variant is evaluated with the same batch size
(lm-eval scores move by a point or two with batch size alone) and with lm-eval's
request cache off (its cache keys on the request, not the model, and would mix
variants). Documents are chosen with lm-eval's ``samples`` selection, and each
document's metric comes back from ``log_samples`` for the paired statistics.
"""

from __future__ import annotations

import difflib
import hashlib
import json
from dataclasses import dataclass
from importlib.metadata import version
from typing import TYPE_CHECKING, Any

from recommender.errors import BadInputError
from recommender.quality.suite import UseCase
from recommender.quiet import quiet_lm_eval

if TYPE_CHECKING:
    from lm_eval.tasks import TaskManager
    from torch import nn
    from transformers import PreTrainedTokenizerBase


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


@dataclass(frozen=True, slots=True)
class TaskData:
    """What identifies a task's data: a fingerprint of its config and documents, and its size."""

    name: str
    fingerprint: str
    n_docs: int


def describe_task(manager: TaskManager, name: str) -> TaskData:
    """Load the task's documents once to fingerprint them (config + every document)."""
    from lm_eval.tasks import get_task_dict

    task = get_task_dict([name], manager)[name]
    digest = hashlib.sha256(json.dumps(task.dump_config(), sort_keys=True, default=str).encode())
    n = 0
    for doc in task.eval_docs:
        digest.update(json.dumps(doc, sort_keys=True, default=str).encode())
        n += 1
    return TaskData(name=name, fingerprint=digest.hexdigest(), n_docs=n)


def _pair(raw: Any) -> tuple[float, float] | None:
    """A per-document metric as (numerator, denominator): (value, 1) or lm-eval's (loglik, count)."""
    if isinstance(raw, bool | int | float):
        return float(raw), 1.0
    if isinstance(raw, list | tuple) and len(raw) == 2 and all(isinstance(x, int | float) for x in raw):
        return float(raw[0]), float(raw[1])
    return None


def run_docs(
    model: nn.Module,
    tokenizer: PreTrainedTokenizerBase,
    manager: TaskManager,
    *,
    task: str,
    metric: str,
    doc_ids: list[int],
    batch_size: int,
) -> dict[int, tuple[float, float]]:
    """Evaluate `doc_ids` of `task` on `model`; returns each document's metric as a pair."""
    from lm_eval.models.huggingface import HFLM

    quiet_lm_eval()
    # softmax_dtype float32: by default HFLM log-softmaxes and sums a continuation's log-probs in
    # the logits' dtype; for bf16 models a 1024-token window's sum is rounded to a multiple of 32
    # (-4590.2 -> -4576.0), which hides the quantized model's difference (NF4 and bf16 both -5372.0).
    lm = HFLM(pretrained=model, tokenizer=tokenizer, batch_size=batch_size, softmax_dtype="float32")
    return run_docs_on(lm, manager, task=task, metric=metric, doc_ids=doc_ids)


def run_docs_on(
    lm: Any, manager: TaskManager, *, task: str, metric: str, doc_ids: list[int]
) -> dict[int, tuple[float, float]]:
    """Evaluate `doc_ids` of `task` on lm-eval model `lm` (a loaded model's HFLM, or an engine's API model)."""
    import lm_eval

    quiet_lm_eval()
    out = lm_eval.simple_evaluate(
        model=lm,
        tasks=[task],
        task_manager=manager,
        samples={task: sorted(doc_ids)},
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
    values: dict[int, tuple[float, float]] = {}
    for sample in out.get("samples", {}).get(task, []):
        pair = _pair(sample.get(metric))
        if pair is not None:
            values[int(sample["doc_id"])] = pair
    if not values:
        results = out["results"].get(task, {})
        available = sorted({k.split(",")[0] for k in results if "_stderr" not in k and k != "alias"})
        raise BadInputError(
            f"task {task} metric", f"lm-eval reported no per-document {metric!r}", f"use one of {', '.join(available)}"
        )
    return values


#: How run_docs scores, beyond lm-eval's version: "fp32-logsoftmax" since log-probs are summed in float32
#: (before, bf16 sums hid quantization differences). Part of every cached score's key, so older scores are
#: recomputed rather than mixed with these.
SCORING = "fp32-logsoftmax"


def lm_eval_version() -> str:
    """lm-eval's version and how run_docs scores with it: what a cached per-document score depends on."""
    return f"{version('lm_eval')}+{SCORING}"
