"""The measured probe on the local CPU, with the real quantized model."""

from __future__ import annotations

from pathlib import Path

from recommender.device import DeviceInfo
from recommender.models.source import ModelSource
from recommender.perf.probe import probe
from recommender.quantize import get_scheme


def test_probe_measures_prefill_decode_and_memory(demo_model_dir: Path) -> None:
    source = ModelSource.resolve(str(demo_model_dir), base_dir=demo_model_dir)
    model = get_scheme("torchao-int8-wo").load(source, DeviceInfo("cpu"))
    small = probe(model, prompt_tokens=32, batch_size=2, decode_steps=4, repeats=3)
    large = probe(model, prompt_tokens=32, batch_size=16, decode_steps=4, repeats=3)
    for result in (small, large):
        assert result.prefill_s > 0 and result.decode_step_s > 0
        assert result.prefill_spread_s[0] <= result.prefill_s <= result.prefill_spread_s[1]
        assert result.provenance.kind == "measured" and result.provenance.detail.startswith("cpu")
        assert result.weights_mb > 0
    # The KV cache grows with the batch: 16 sequences hold 8x the cache of 2.
    assert abs(large.kv_cache_mb / small.kv_cache_mb - 8.0) < 0.5
    # Stored bytes, not the logical bf16 size torchao's tensor subclasses report: int8 body, bf16 embeddings.
    bf16 = probe(get_scheme("baseline").load(source, DeviceInfo("cpu")), prompt_tokens=8, batch_size=1, repeats=1)
    assert small.weights_mb < 0.7 * bf16.weights_mb
