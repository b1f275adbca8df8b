"""Real lm-eval runs on the real quantized demo model: paired verdicts, fidelity, the cache, the adaptive stop."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from recommender.device import DeviceInfo
from recommender.models.source import ModelSource
from recommender.quality.cache import QualityCache
from recommender.quality.evaluate import QualityEvaluator
from recommender.quality.statistics import MIN_CONTINUOUS_DOCS
from recommender.quality.suite import load_use_case
from recommender.quantize import get_scheme
from recommender.quantize.model_cache import ModelCache
from tests.conftest import write_suite


def _evaluator(demo_model_dir: Path, suite: Path, cache: QualityCache | None, **kwargs: object) -> QualityEvaluator:
    models = ModelCache(ModelSource.resolve(str(demo_model_dir), base_dir=demo_model_dir), DeviceInfo("cpu"))
    return QualityEvaluator(load_use_case(suite), models, cache=cache, **kwargs)  # type: ignore[arg-type]


def test_quantized_model_scored_against_baseline_and_cached(demo_model_dir: Path, tmp_path: Path) -> None:
    suite = write_suite(tmp_path / "suite.yaml", limit=8)
    cache = QualityCache(tmp_path / "cache")
    evaluator = _evaluator(demo_model_dir, suite, cache)

    base = evaluator.evaluate(get_scheme("baseline"))
    assert base.verdict == "pass"
    assert base.fidelity is not None and base.fidelity.mean_kl < 1e-6 and base.fidelity.top1_agreement == 1.0
    acc = next(c for c in base.checks if c.name == "demo_code_next_line")
    assert acc.n_docs == 8 and 0.0 <= acc.value <= 1.0 and acc.delta == 0.0 and acc.delta_ci == (0.0, 0.0)

    nf4 = evaluator.evaluate(get_scheme("bnb-nf4"))
    assert nf4.fidelity is not None and nf4.fidelity.mean_kl > 1e-4
    ppl = next(c for c in nf4.checks if c.name == "demo_code_ppl")
    assert ppl.delta != 0.0 and ppl.delta_ci[0] <= ppl.delta <= ppl.delta_ci[1]
    assert {c.name for c in nf4.checks} == {"demo_code_ppl", "demo_code_next_line", "fidelity"}
    assert nf4.verdict in ("pass", "fail", "inconclusive")
    first_docs = evaluator.docs_evaluated
    assert first_docs > 0

    # A second evaluator (a new study, or a resumed one) with the same cache evaluates nothing.
    again = _evaluator(demo_model_dir, suite, cache)
    nf4_again = again.evaluate(get_scheme("bnb-nf4"))
    assert again.docs_evaluated == 0 and again.models.loads == 0
    assert nf4_again.checks == nf4.checks

    # A method with no CPU kernels is unverified with its reason, never "pass".
    f8 = evaluator.evaluate(get_scheme("torchao-float8-dynamic"))
    assert f8.verdict == "unverified" and "cpu" in f8.reason


def test_adaptive_evaluation_stops_early_when_the_verdict_is_clear(demo_model_dir: Path, tmp_path: Path) -> None:
    # Thresholds so loose that a quarter of the documents already decides: the variant stops there.
    # bits_per_byte has no exact bound, so it decides nothing on fewer than MIN_CONTINUOUS_DOCS documents.
    suite = write_suite(tmp_path / "suite.yaml", limit=40, max_mean_kl=1.0)
    text = suite.read_text().replace("max_absolute_drop: 0.03", "max_absolute_drop: 0.5")
    text = text.replace("limit: 4\n", f"limit: {MIN_CONTINUOUS_DOCS}\n")
    suite.write_text(text.replace("max_relative_drop: 0.02", "max_relative_drop: 0.5"))
    evaluator = _evaluator(demo_model_dir, suite, QualityCache(tmp_path / "cache"))
    evaluator.evaluate(get_scheme("baseline"))
    baseline_docs = evaluator.docs_evaluated
    assert baseline_docs == MIN_CONTINUOUS_DOCS + 40  # the reference: the whole budget of both tasks
    result = evaluator.evaluate(get_scheme("torchao-int8-wo"))
    acc = next(c for c in result.checks if c.name == "demo_code_next_line")
    assert result.verdict == "pass"
    assert acc.n_docs == 10  # stopped at the first chunk of 40 / 4
    assert result.docs_evaluated == MIN_CONTINUOUS_DOCS + 10
    # Three planned looks (10, 20, 40) share the 5 % error rate; the interval's own confidence is recorded.
    assert acc.looks == 3 and acc.confidence == pytest.approx(1 - 0.05 / 3)
    ppl = next(c for c in result.checks if c.name == "demo_code_ppl")
    assert ppl.looks == 1 and ppl.confidence == pytest.approx(0.95)  # 20 documents: one look, at 95 %
    # The per-document cache holds exactly what was evaluated.
    pairs = evaluator.doc_pairs(get_scheme("torchao-int8-wo"), load_use_case(suite).tasks[1], 10)
    assert pairs.shape == (10, 2) and np.isin(pairs[:, 0], [0.0, 1.0]).all()
