"""A study remembers which performance model its latencies came from, and is never continued by another."""

from __future__ import annotations

from pathlib import Path

import optuna
import pytest

from recommender.errors import BadInputError
from recommender.perf.step.calibrated import FIT_PATH, fit_digest
from recommender.study.storage import PERF_MODEL_ATTR, SPEC_FINGERPRINT_ATTR, check_perf_model


def _study(tmp_path: Path, **attrs: str) -> optuna.Study:
    study = optuna.create_study(study_name="s", storage=f"sqlite:///{tmp_path}/optuna.db")
    for key, value in attrs.items():
        study.set_user_attr(key, value)
    return study


def test_a_study_of_this_performance_model_continues(tmp_path: Path) -> None:
    check_perf_model(_study(tmp_path), "s", field="search.study_name")  # new: nothing stored yet
    (tmp_path / "b").mkdir()
    same = _study(tmp_path / "b", **{SPEC_FINGERPRINT_ATTR: "abc", PERF_MODEL_ATTR: fit_digest()})
    check_perf_model(same, "s", field="search.study_name")


@pytest.mark.parametrize("stored", ["0badf1t0", None])
def test_a_study_of_another_performance_model_is_refused_with_the_fix(tmp_path: Path, stored: str | None) -> None:
    attrs = {SPEC_FINGERPRINT_ATTR: "abc"} | ({PERF_MODEL_ATTR: stored} if stored else {})
    with pytest.raises(BadInputError) as caught:
        check_perf_model(_study(tmp_path, **attrs), "s", field="search.study_name")
    text = str(caught.value)
    assert "search.study_name" in text and fit_digest() in text and "start a new study" in text
    assert (stored or "before fits were recorded") in text


def test_the_default_study_name_changes_with_the_fit(tmp_path: Path) -> None:
    from recommender.config.spec import load_spec
    from tests.conftest import DEMO_SPEC

    spec = load_spec(DEMO_SPEC)
    assert spec.study_name.endswith(f"-{fit_digest()[:6]}") and spec.fingerprint() in spec.study_name
    other = tmp_path / "fit.json"
    other.write_bytes(FIT_PATH.read_bytes() + b" ")
    assert fit_digest(other) != fit_digest()
