"""Quality on a CPU without native bfloat16: float32 arithmetic around the same stored weights, said everywhere.

`RECOMMENDER_CPU_COMPUTE_DTYPE=float32` stands in for such a CPU (this one may have bfloat16): the reference
and the candidate both compute in float32, their values are the bfloat16 ones widened exactly, the result
and its cache keys say so. `benchmarks/cpu_compute_dtype.py` compares the demo's verdicts across the two.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from recommender.device import CPU_COMPUTE_DTYPE_ENV, DeviceInfo, quality_compute_dtype
from recommender.errors import BadInputError
from recommender.models.source import ModelSource
from recommender.quality.cache import QualityCache
from recommender.quality.evaluate import QualityEvaluator
from recommender.quality.suite import load_use_case
from recommender.quantize import get_scheme
from recommender.quantize.model_cache import ModelCache
from tests.conftest import write_suite

CPU = DeviceInfo("cpu")


def _models(demo_model_dir: Path) -> ModelCache:
    return ModelCache(ModelSource.resolve(str(demo_model_dir), base_dir=demo_model_dir), CPU)


def test_float32_compute_widens_the_bf16_weights_exactly(demo_model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CPU_COMPUTE_DTYPE_ENV, "bfloat16")
    bf16 = dict(_models(demo_model_dir).get(get_scheme("baseline")).named_parameters())
    monkeypatch.setenv(CPU_COMPUTE_DTYPE_ENV, "float32")
    models = _models(demo_model_dir)
    assert models.compute_dtype == "float32"
    fp32 = dict(models.get(get_scheme("baseline")).named_parameters())
    assert {p.dtype for p in fp32.values()} == {torch.float32}
    assert all(torch.equal(fp32[name], bf16[name].float()) for name in bf16)
    nf4 = models.get(get_scheme("bnb-nf4"))
    four_bit = [m for m in nf4.modules() if type(m).__name__ == "Linear4bit"]
    assert four_bit and all(m.compute_dtype == torch.float32 for m in four_bit)
    assert {p.dtype for p in nf4.parameters()} <= {torch.float32, torch.uint8}  # packed 4-bit storage stays


def test_a_float32_result_says_so_and_never_shares_a_bf16_cache_entry(
    demo_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(CPU_COMPUTE_DTYPE_ENV, "float32")
    suite = load_use_case(write_suite(tmp_path / "suite.yaml", limit=8))
    cache = QualityCache(tmp_path / "cache")
    evaluator = QualityEvaluator(suite, _models(demo_model_dir), cache=cache, adaptive=False)
    result = evaluator.evaluate(get_scheme("bnb-nf4"))
    assert result.compute_dtype == "float32" and result.device == "cpu, float32 compute"
    assert result.fidelity is not None and result.fidelity.mean_kl > 1e-4 and result.verdict != "unverified"
    monkeypatch.setenv(CPU_COMPUTE_DTYPE_ENV, "bfloat16")
    bf16 = QualityEvaluator(suite, _models(demo_model_dir), cache=cache, adaptive=False)
    spec = suite.tasks[0]
    assert evaluator._key(get_scheme("bnb-nf4"), spec) != bf16._key(get_scheme("bnb-nf4"), spec)


def test_the_override_is_checked_and_gpus_keep_bfloat16(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CPU_COMPUTE_DTYPE_ENV, "fp32")
    with pytest.raises(BadInputError, match="RECOMMENDER_CPU_COMPUTE_DTYPE"):
        quality_compute_dtype(CPU)
    assert quality_compute_dtype(DeviceInfo("cuda", (9, 0))) == "bfloat16"
    monkeypatch.delenv(CPU_COMPUTE_DTYPE_ENV)
    assert quality_compute_dtype(CPU) in ("bfloat16", "float32")
