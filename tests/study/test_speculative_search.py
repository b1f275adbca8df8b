"""Speculative decoding in a real study: the acceptance measured on the demo model's own documents, the search
deciding whether it pays, and the launch carrying what was assumed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from recommender.config.spec import load_spec
from recommender.quantize import get_scheme
from recommender.study import prepare, run_search
from tests.conftest import write_contract_prices, write_spec, write_suite


def _spec(tmp_path: Path, demo_model_dir: Path, rps: float) -> Path:
    suite = write_suite(tmp_path / "suite.yaml", limit=6)
    return write_spec(
        tmp_path / f"spec-{rps:g}.yaml",
        {
            "name": "speculative",
            "model": {"source": str(demo_model_dir), "release": "test"},
            "use_case": str(suite),
            "traffic": {"prompt_tokens": 256, "output_tokens": 256, "requests_per_second": rps},
            "sla": {"ttft_p99_ms": 5000, "tpot_p99_ms": 1000},
            "space": {
                "methods": {"bf16": ["baseline"]},
                "hardware": ["l4"],
                "batch_sizes": [8],
                "speculative": ["none", "ngram"],
            },
            "current": {"precision": "bf16", "method": "baseline", "hardware": "l4", "batch_size": 8},
            "hardware_catalog": str(write_contract_prices(tmp_path / "contract.yaml")),
            "speculation": {"documents": 4, "prompt_tokens": 256, "new_tokens": 32},
            "search": {"n_trials": 4, "seed": 0},
            "engines": None,
        },
    )


def test_acceptance_is_measured_once_per_scheme_and_read_back_from_the_cache(
    tmp_path: Path, demo_model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RECOMMENDER_CACHE_DIR", str(tmp_path / "cache"))
    prepared = prepare(load_spec(_spec(tmp_path, demo_model_dir, 1.0)))
    first = prepared.evaluator().performance.speculation
    assert first is not None
    rate = first.rate(get_scheme("baseline"), "ngram")
    assert rate.documents == 4 and 1.0 <= rate.tokens_per_step <= 5.0
    assert rate.tokens_per_step_low <= rate.tokens_per_step <= rate.tokens_per_step_high
    assert first.models.loads == 1
    again = prepared.evaluator().performance.speculation  # a new process's evaluator: the disk cache answers
    assert again is not None and again.rate(get_scheme("baseline"), "ngram") == rate and again.models.loads == 0


def test_the_search_says_whether_speculation_pays_and_launches_what_it_assumed(
    tmp_path: Path, demo_model_dir: Path
) -> None:
    """A trickle of long answers: decode binds, speculation lowers TPOT and never raises $/month."""
    spec = load_spec(_spec(tmp_path, demo_model_dir, 0.5))
    outcome = run_search(
        spec,
        storage=f"sqlite:///{tmp_path}/o.db",
        tracking_uri=f"sqlite:///{tmp_path}/m.db",
        output_root=tmp_path / "out",
    )
    rec = outcome.recommendation
    assert rec.winner is not None
    keys = {r.key for r in outcome.results}
    assert "bf16/baseline@l4x1/bs8/spec-ngram" in keys and "bf16/baseline@l4x1/bs8" in keys
    (lever,) = rec.levers
    assert lever.lever == "speculative ngram" and " 4 " in lever.measured and "measured on cpu" in lever.measured
    assert "(both on vllm)" in lever.verdict  # like for like: the engine that launches it, with and without
    assert lever.with_tpot_p99_ms is not None and lever.without_tpot_p99_ms is not None
    assert lever.with_tpot_p99_ms < lever.without_tpot_p99_ms
    assert lever.verdict.split(":", 1)[0] in ("pays", "does not pay") or lever.verdict.startswith("same")
    saved = json.loads((outcome.output_dir / "recommendation.json").read_text())
    assert saved["levers"][0]["lever"] == "speculative ngram"
    if rec.winner.candidate.speculative == "ngram":  # the launch carries the measured proposer; SGLang refuses
        launch = {e.engine: e for e in rec.launch}
        assert '"method":"ngram","num_speculative_tokens":4' in (launch["vllm"].command or "")
        assert not launch["sglang"].supported and "NGRAM" in launch["sglang"].notes[0]
