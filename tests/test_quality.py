"""A real lm-eval run on the real quantized demo model, with fidelity and verdicts."""

from __future__ import annotations

from pathlib import Path

from recommender.model_cache import ModelCache
from recommender.model_source import ModelSource
from recommender.quality.evaluate import QualityEvaluator
from recommender.quality.suite import load_use_case
from recommender.quantize import DeviceInfo, get_method
from tests.conftest import write_suite


def test_quantized_model_scored_against_baseline(demo_model_dir: Path, tmp_path: Path) -> None:
    use_case = load_use_case(write_suite(tmp_path / "suite.yaml", limit=8))
    models = ModelCache(ModelSource.resolve(str(demo_model_dir), base_dir=demo_model_dir), DeviceInfo("cpu"))
    evaluator = QualityEvaluator(use_case, models)

    base = evaluator.evaluate(get_method("baseline"))
    assert base.verdict == "pass"
    assert base.fidelity is not None and base.fidelity.mean_kl < 1e-6 and base.fidelity.top1_agreement == 1.0
    assert base.scores["demo_code_next_line"].n_docs == 8
    assert 0.0 <= base.scores["demo_code_next_line"].value <= 1.0
    assert len(base.scores["demo_code_next_line"].per_doc) == 8

    nf4 = evaluator.evaluate(get_method("bnb-nf4"))
    assert nf4.fidelity is not None and nf4.fidelity.mean_kl > 1e-4
    assert nf4.scores["demo_code_ppl"].value != base.scores["demo_code_ppl"].value
    assert {c.name for c in nf4.checks} == {"demo_code_ppl", "demo_code_next_line", "fidelity"}
    assert nf4.verdict in ("pass", "fail")

    # Cached: a second call evaluates nothing.
    assert evaluator.evaluate(get_method("bnb-nf4")) is nf4
    assert evaluator.evaluations == 2

    # A method with no CPU kernels is unverified with its reason, never "pass".
    f8 = evaluator.evaluate(get_method("torchao-float8-dynamic"))
    assert f8.verdict == "unverified" and "cpu" in f8.reason
