"""Calibration documents never overlap the documents quality is scored on."""

from __future__ import annotations

from pathlib import Path

import pytest

from recommender.errors import BadInputError
from recommender.quality.calibration_docs import calibration_set, document_id, unscored_docs
from recommender.quality.lm_eval_runner import task_manager
from recommender.quality.suite import load_use_case
from tests.conftest import REPO


def test_demo_calibration_is_disjoint_from_scored_documents(demo_model_dir: Path) -> None:
    from lm_eval.tasks import get_task_dict
    from transformers import AutoTokenizer

    suite = load_use_case(REPO / "recommender" / "demo" / "use_case.yaml")
    manager = task_manager(suite)
    calibration = calibration_set(suite, manager, AutoTokenizer.from_pretrained(str(demo_model_dir)))
    assert len(calibration.rows) == suite.calibration.samples
    assert all(len(r) == suite.calibration.tokens for r in calibration.rows)
    assert "training split" in calibration.source
    task = get_task_dict(["demo_code_ppl"], manager)["demo_code_ppl"]
    scored = list(task.eval_docs)
    assert scored and set(calibration.document_ids).isdisjoint(document_id(d) for d in scored)
    calibration_files = {d["source"] for d in unscored_docs(task, "demo_code_ppl")[0]}
    assert calibration_files.isdisjoint(d["source"] for d in scored)  # not even the same files


def test_a_task_with_only_its_scored_split_cannot_calibrate() -> None:
    suite = load_use_case(REPO / "recommender" / "demo" / "use_case.yaml")
    manager = task_manager(suite)
    from lm_eval.tasks import get_task_dict

    task = get_task_dict(["demo_code_next_line"], manager)["demo_code_next_line"]  # a test split only
    with pytest.raises(BadInputError, match="calibration.task"):
        unscored_docs(task, "demo_code_next_line")
