"""Calibration samples for GPTQ, AWQ and SmoothQuant, cut from the use case's own documents.

A calibrating scheme fits its rounding to the activations it sees, so it should see the use
case's kind of text — and never the documents it is then scored on, or its quality would be
measured on its own calibration data. lm-eval scores a task's test split (its validation
split when it has no test split); calibration takes the training split, else the validation
split when the test split is the scored one, and refuses a task that has neither.
"""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING, Any

from recommender.errors import BadInputError
from recommender.quantize.checkpoint import CalibrationSet, QuantizeContext, default_store

if TYPE_CHECKING:
    from lm_eval.tasks import TaskManager
    from transformers import PreTrainedTokenizerBase

    from recommender.models.source import ModelSource
    from recommender.quality.suite import UseCase

FIELD = "use_case.calibration.task"


def calibration_task(use_case: UseCase) -> str:
    """The task whose documents calibrate: the suite's choice, else the fidelity text task, else the first."""
    return use_case.calibration.task or use_case.fidelity.text_task or use_case.task_names[0]


def document_id(doc: Any) -> str:
    """A document's identity: the hash of its content (the same document in two splits has the same id)."""
    return hashlib.sha256(json.dumps(doc, sort_keys=True, default=str).encode()).hexdigest()[:16]


def unscored_docs(task: Any, name: str) -> tuple[list[Any], str]:
    """The documents of a split lm-eval does not score, and the split's name."""
    if task.has_training_docs():
        return list(task.training_docs()), "training"
    if task.has_test_docs() and task.has_validation_docs():
        return list(task.validation_docs()), "validation"
    raise BadInputError(
        FIELD,
        f"task {name} has no split besides the one it is scored on, so it cannot calibrate GPTQ/AWQ/SmoothQuant",
        "set use_case.calibration.task to a task with a training or validation split",
    )


def document_text(task: Any, doc: Any) -> str:
    parts = [task.doc_to_text(doc), task.doc_to_target(doc)]
    return "".join(p for p in parts if isinstance(p, str))


def calibration_set(use_case: UseCase, manager: TaskManager, tokenizer: PreTrainedTokenizerBase) -> CalibrationSet:
    """`samples` rows of `tokens` tokens from the calibration task's unscored documents, in document order."""
    from lm_eval.tasks import get_task_dict

    name = calibration_task(use_case)
    task = get_task_dict([name], manager)[name]
    docs, split = unscored_docs(task, name)
    samples, size = use_case.calibration.samples, use_case.calibration.tokens
    ids: list[int] = []
    used: list[str] = []
    for doc in docs:
        if len(ids) >= samples * size:
            break
        ids.extend(tokenizer(document_text(task, doc), add_special_tokens=False)["input_ids"])
        used.append(document_id(doc))
    n = min(samples, len(ids) // size)
    if n == 0:
        raise BadInputError(
            FIELD, f"the {split} split of {name} has fewer than {size} tokens", "lower use_case.calibration.tokens"
        )
    rows = tuple(tuple(ids[i * size : (i + 1) * size]) for i in range(n))
    return CalibrationSet(rows, f"{name} {split} split, {n} x {size} tokens", tuple(used))


def quantize_context(use_case: UseCase, manager: TaskManager, source: ModelSource) -> QuantizeContext:
    """The default checkpoint store, calibrated (when a scheme asks) on this use case's unscored documents."""
    return QuantizeContext(default_store(), lambda: calibration_set(use_case, manager, source.load_tokenizer()))
