"""DeepSeek sparse attention, Gated DeltaNet and Mamba2 hybrids: memory per sequence and step work, by hand.

Sources of the numbers below:
- DeepSeek-V3.2 (shipped ``deepseek-v3.2.json``, aiconfigurator-core 0.12 ``model_configs``): MLA as DeepSeek-V3
  (61 layers, 128 heads, kv_lora_rank 512, rope 64), index_topk 2048, index_n_heads 64, index_head_dim 128; the
  indexer's FP8 key cache of 128 bytes + one fp32 scale per token and layer (DeepSeek-V3.2-Exp inference/model.py,
  aiconfigurator-core ``sdk/common.py`` indexer_cache_entry_bytes).
- Qwen3.5-35B-A3B (shipped, nested under text_config): 40 layers, full attention every 4th (10), Gated DeltaNet in 30
  (16 key heads, 32 value heads, both 128 wide, conv 4), fp32 recurrent state (mamba_ssm_dtype), 2 KV heads of 256.
  Model card: 35B total, 3B active (the language model here, the vision tower not priced).
- Nemotron-H-56B-Base-8K (nvidia's config.json, as aiconfigurator-core 0.12 ships it): 118 blocks, Mamba2 with 256
  heads of 64, state 256, 8 groups, conv 4; squared-ReLU MLPs of 32768; 8 KV heads of 128. Model card: 56B.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from recommender.errors import BadInputError
from recommender.perf.catalog.architecture_check import check_architecture, tensor_parallel_refusal
from recommender.perf.catalog.architectures import load_architecture, read_architecture
from recommender.perf.catalog.gpus import load_catalog
from recommender.perf.model.memory import plan_memory
from recommender.perf.model.shape import ModelShape
from recommender.perf.step.compiled_cost import compile_step_cost
from recommender.perf.step.cost import PrefillChunks
from recommender.perf.step.features import FEATURES, FeatureStepCost, StepFeatures
from recommender.provenance import Provenance
from recommender.quantize import get_scheme

_, DSV32 = load_architecture("deepseek-v3.2")
_, DSV3 = load_architecture("deepseek-v3")
_, QWEN35 = load_architecture("qwen3.5-35b-a3b")

NEMOTRON_H_56B: dict[str, Any] = {
    "hidden_size": 8192,
    "intermediate_size": 32768,
    "num_hidden_layers": 118,
    "num_attention_heads": 64,
    "num_key_value_heads": 8,
    "attention_head_dim": 128,
    "vocab_size": 131072,
    "hybrid_override_pattern": "M-M-M-M*-" + "M-M-M-M-M*-" * 9 + "M-M-M-M-M-",
    "mamba_num_heads": 256,
    "mamba_head_dim": 64,
    "ssm_state_size": 256,
    "n_groups": 8,
    "conv_kernel": 4,
    "mlp_hidden_act": "relu2",
    "tie_word_embeddings": False,
    "max_position_embeddings": 8192,
    "time_step_limit": [0.0, float("inf")],
}
KV_KINDS = {"auto": 2.0, "fp8": 1.0}


def _shape(config: dict[str, Any]) -> ModelShape:
    check_architecture(SimpleNamespace(**config), field="config")
    return ModelShape.from_config(SimpleNamespace(**config))


def _features(shape: ModelShape, tp: int, kv: str = "fp8") -> StepFeatures:
    return StepFeatures(shape, get_scheme("fp8-dynamic"), load_catalog().get("h200"), tp, kv)


# --- DeepSeek sparse attention --------------------------------------------------------------------------------------


def test_dsa_caches_the_mla_latent_and_the_indexer_key_per_token() -> None:
    # 61 layers x (576 latent + rope elements at 1 byte in fp8 + 128 FP8 indexer bytes + 4 bytes of scale)
    assert DSV32.kv_bytes_per_token(1.0) == 61 * (576 + 132)
    # at 16 bits the latent doubles, the indexer's FP8 key does not
    assert DSV32.kv_bytes_per_token(2.0) == 61 * (576 * 2 + 132)


def test_dsa_parameters_are_deepseek_v3s_plus_the_indexer() -> None:
    # per layer: wq_b 1536 x 64 x 128 + wk 7168 x 128 + weights_proj 7168 x 64 = 13,959,168, x 61 layers
    indexer = 61 * (1536 * 64 * 128 + 7168 * 128 + 7168 * 64)
    assert DSV32.total_params - DSV3.total_params == indexer
    assert DSV32.tp_replicated_params - DSV3.tp_replicated_params == indexer  # every rank holds the indexer whole


def test_dsa_attention_is_topk_per_query_plus_the_indexer_per_pair() -> None:
    per_query = 2 * (576 + 512) * 2048 * 61 * 128  # absorbed sparse MLA over 2048 keys, 128 heads, 61 layers
    per_pair = 2 * 64 * 128 * 61  # the indexer's 64 heads of 128 per (query, key), 61 layers
    assert DSV32.query_attention_flops(1) == per_query
    assert DSV32.pair_attention_flops(1, 1) == per_pair
    # a 32k-token prefill: below dense MLA's 2 x (192 + 128) x 128 heads x 61 per pair, and ever less as it grows
    n = 32_768
    assert DSV32.attention_flops(n, n) == per_pair * n * n + per_query * n
    assert DSV32.attention_flops(n, n) < 0.45 * DSV3.attention_flops(n, n)
    # -> 1/5 as the context grows: the indexer's share of dense MLA's pair work
    assert DSV32.attention_flops(4 * n, 4 * n) < 0.26 * DSV3.attention_flops(4 * n, 4 * n)


def test_dsa_decode_reads_the_indexer_keys_per_context_token_and_topk_latents_per_query() -> None:
    f = _features(DSV32, 8)
    bw = f.rates.bandwidth
    assert f.rates.kv_bytes_per_token == 61 * 132  # the indexer's keys, whole on each of the 8 GPUs
    read = 61 * 2048 * 576 / bw  # 2048 latents at fp8 per query
    # 16 heads per GPU padded to FlashMLA's 64-row tile: 4x
    compute = 2 * (576 + 512) * 2048 * 61 * 128 / 8 * 4 / (f.rates.peak16 * 660 / 990)
    assert f._query_token_s == pytest.approx(max(read, compute), rel=1e-12)
    row = f.of_step(PrefillChunks(), 10, 10 * 100_000)
    kv = FEATURES.index("kv")
    expected = f._kv_token_s * 1_000_000 + f._decode_extra_s * 1_000_000 + 10 * max(read, compute)
    assert row[kv] == pytest.approx(expected, rel=1e-12)


# --- Gated DeltaNet (Qwen3.5) ---------------------------------------------------------------------------------------


def test_qwen35_state_per_sequence_does_not_grow_with_the_context() -> None:
    # 30 GDN layers x (32 value heads x 128 x 128 fp32 state + (2 x 2048 + 4096) conv channels x 3 taps x 2 bytes)
    per_layer = 32 * 128 * 128 * 4 + (2 * 16 * 128 + 32 * 128) * 3 * 2
    assert QWEN35.state_bytes_per_seq() == 30 * per_layer == 64_389_120
    assert QWEN35.state_bytes_per_seq(8) == 30 * per_layer / 8
    # KV only in the 10 full-attention layers: 2 KV heads x 256 x (K and V) x 2 bytes
    assert QWEN35.n_kv_layers == 10 and QWEN35.kv_bytes_per_token(2.0) == 10 * 2 * 256 * 2 * 2


def test_qwen35_parameters_match_the_model_card() -> None:
    assert QWEN35.total_params / 1e9 == pytest.approx(35, rel=0.02)
    assert QWEN35.active_params / 1e9 == pytest.approx(3.45, rel=0.02)
    # per GDN layer: in_proj_qkvz 2048 x (2 x 2048 + 2 x 4096) + in_proj_ba 2048 x 64 + out_proj 4096 x 2048
    gdn = 2048 * (2 * 2048 + 2 * 4096 + 2 * 32) + 4096 * 2048
    # per gated attention layer: q and its gate 2 x 16 x 256, k and v 2 x 2 x 256, o 16 x 256, all x 2048
    attention = 2048 * 256 * (2 * 16 + 2 * 2) + 2048 * 256 * 16
    assert QWEN35.attention_params == 30 * gdn + 10 * attention


def test_qwen35_memory_reserves_the_state_of_every_seat_and_the_step_reads_it_once() -> None:
    plan = plan_memory(QWEN35, get_scheme("fp8-dynamic"), device_gb=141.0, tensor_parallel=8, max_num_seqs=256)
    assert plan.state_gb == pytest.approx(256 * 64_389_120 / 8 / 1e9)
    f = _features(QWEN35, 8)
    state_s = 2 * 64_389_120 / 8 / f.rates.bandwidth  # read and written once per sequence in the step
    recurrent_s = 30 * (7 * 32 * 128 * 128 + 2 * 8192 * 4) / 8 / f.rates.peak16
    assert f._state_seq_s == pytest.approx(state_s) and f._recurrent_token_s == pytest.approx(recurrent_s)
    kv, attention = FEATURES.index("kv"), FEATURES.index("attention")
    row = f.of_step(PrefillChunks(), 4, 4 * 50_000)
    assert row[kv] == pytest.approx(f._kv_token_s * 200_000 + 4 * state_s)
    assert row[attention] == pytest.approx(4 * recurrent_s)


@pytest.mark.parametrize("name", ["qwen3.5-35b-a3b", "deepseek-v3.2"])
def test_the_compiled_step_cost_prices_the_new_designs_as_the_features_do(name: str) -> None:
    _, shape = load_architecture(name)
    cost = FeatureStepCost(_features(shape, 8), np.ones(len(FEATURES)), Provenance("modeled", "test"))
    compiled = compile_step_cost(cost, max_tokens=2048, max_seqs=64)
    assert compiled is not None  # its own check reproduces the features at sample steps
    intercept, slope = cost.decode_line(7) or (0.0, 0.0)
    assert intercept + slope * 70_000 == pytest.approx(cost.step_seconds(0, 7, 70_000), rel=1e-12)


# --- Mamba2 hybrid (Nemotron-H) -------------------------------------------------------------------------------------


def test_nemotron_h_mamba_state_and_parameters() -> None:
    shape = _shape(NEMOTRON_H_56B)
    pattern = str(NEMOTRON_H_56B["hybrid_override_pattern"])
    mamba, attention, mlp = pattern.count("M"), pattern.count("*"), pattern.count("-")
    assert (mamba, attention, mlp) == (54, 10, 54)
    # per Mamba2 layer: 256 heads x 64 x 256 state at bf16 (no ssm dtype given) + (16384 + 2 x 8 x 256) x 3 x 2 conv
    assert shape.state_bytes_per_seq() == 54 * (256 * 64 * 256 * 2 + (16384 + 4096) * 3 * 2)
    assert shape.kv_bytes_per_token(1.0) == 10 * 8 * 128 * 2  # attention blocks only
    # in_proj 8192 x (2 x 16384 + 2 x 8 x 256 + 256) + out_proj 16384 x 8192; squared-ReLU MLP: 2 matrices
    mamba_params = 8192 * (2 * 16384 + 2 * 8 * 256 + 256) + 16384 * 8192
    attention_params = 8192 * 128 * (2 * 64 + 2 * 8)
    body = 54 * mamba_params + 10 * attention_params + 54 * 2 * 8192 * 32768
    assert shape.body_params == body
    assert shape.total_params / 1e9 == pytest.approx(56, rel=0.02)
    assert shape.recurrent_flops_per_token == 54 * (5 * 256 * 64 * 256 + 2 * (16384 + 4096) * 4)


def test_a_config_with_infinity_is_read(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(NEMOTRON_H_56B), encoding="utf-8")  # json writes inf as Infinity, as transformers does
    assert "Infinity" in path.read_text(encoding="utf-8")
    _, config = read_architecture(str(path))
    assert ModelShape.from_config(config).recurrent is not None


def test_tensor_parallelism_must_split_the_recurrent_heads() -> None:
    shape = _shape({**NEMOTRON_H_56B, "n_groups": 3, "mamba_num_heads": 255, "mamba_head_dim": 64})
    assert "Mamba2" in (tensor_parallel_refusal(shape, 2) or "")
    assert tensor_parallel_refusal(QWEN35, 8) is None


# --- refusals -------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"hybrid_override_pattern": "M-X" + "-" * 115}, "hybrid_override_pattern"),
        ({"hybrid_override_pattern": "M-" * 59}, "hybrid_override_pattern"),  # no attention layer
        ({"hybrid_override_pattern": "M*"}, "hybrid_override_pattern"),  # 2 entries for 118 layers
        ({"hybrid_override_pattern": "ME*" + "-" * 115}, "hybrid_override_pattern"),  # MoE blocks
        ({"layers_block_type": ["mamba", "attention", "conv"] + ["mlp"] * 115}, "layers_block_type"),
        ({"ssm_state_size": 0}, "ssm_state_size"),
        ({"mamba_num_heads": None}, "mamba_num_heads"),
        ({"mamba_ssm_cache_dtype": "int3"}, "mamba_ssm_cache_dtype"),
    ],
    ids=["unknown-block", "no-attention", "wrong-length", "moe-blocks", "unknown-word", "zero-state", "no-heads"]
    + ["dtype"],
)
def test_a_hybrid_config_the_model_cannot_price_is_refused_naming_the_field(change: dict[str, Any], field: str) -> None:
    config = {key: value for key, value in {**NEMOTRON_H_56B, **change}.items() if value is not None}
    if "layers_block_type" in change:
        del config["hybrid_override_pattern"]
    with pytest.raises(BadInputError) as caught:
        _shape(config)
    assert field in str(caught.value)


def test_linear_attention_without_its_widths_and_sparse_attention_without_mla_are_refused() -> None:
    base = {"hidden_size": 1024, "intermediate_size": 4096, "num_hidden_layers": 4, "num_attention_heads": 8}
    base |= {"vocab_size": 1000, "num_key_value_heads": 8}
    with pytest.raises(BadInputError, match="linear_num_key_heads"):
        _shape({**base, "full_attention_interval": 2})
    with pytest.raises(BadInputError, match="index_topk"):
        _shape({**base, "index_topk": 2048, "index_n_heads": 64, "index_head_dim": 128})
    with pytest.raises(BadInputError, match="index_topk_freq"):
        ModelShape.from_config(SimpleNamespace(**{**DSV32_CONFIG, "index_topk_freq": 4}))


def test_expert_parallelism_is_refused_for_the_new_designs() -> None:
    from recommender.perf.model.expert_parallel import ExpertParallelLayout

    with pytest.raises(BadInputError, match="expert parallelism"):
        ExpertParallelLayout(8).check(DSV32)


DSV32_CONFIG: dict[str, Any] = {
    key: value for key, value in vars(read_architecture("deepseek-v3.2")[1]).items() if not key.startswith("_")
}


def _plan(model: str) -> subprocess.CompletedProcess[str]:
    args = ["plan", "--model", model, "--hardware", "h200", "--precision", "fp8", "--tensor-parallel", "8", "--json"]
    return subprocess.run(
        [sys.executable, "-m", "recommender", *args], capture_output=True, text=True, timeout=600, check=False
    )


def test_a_bad_hybrid_config_is_one_line_and_exit_2_from_the_cli(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**NEMOTRON_H_56B, "hybrid_override_pattern": "M-" * 59}), encoding="utf-8")
    result = _plan(str(path))
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert result.returncode == 2 and len(errors) == 1 and "hybrid_override_pattern" in errors[0], result.stderr


@pytest.mark.slow
@pytest.mark.parametrize(
    "hub_id",
    [
        "deepseek-ai/DeepSeek-V3.2",
        "zai-org/GLM-5",
        "Qwen/Qwen3.5-397B-A17B",
        "Qwen/Qwen3.5-35B-A3B",
        "moonshotai/Kimi-K2.5",  # MLA + MoE as DeepSeek-V3, under a multimodal wrapper's text_config
        "MiniMaxAI/MiniMax-M2.5",  # grouped-query attention + MoE
        "meta-llama/Llama-4-Scout-17B-16E-Instruct",  # chunked attention + interleaved MoE with a shared expert
        "nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-FP8",  # Mamba2 hybrid with latent-MoE blocks
        "openai/gpt-oss-120b",  # alternating 128-token sliding window and full attention + MoE
        "openai/gpt-oss-20b",
        "google/gemma-4-26B-A4B-it",  # sliding 256-wide and full 512-wide layers + experts beside a dense MLP
        "google/gemma-4-31B-it",
    ],
)
def test_plan_answers_for_every_shipped_new_design_at_tp8_on_h200(hub_id: str) -> None:
    result = _plan(hub_id)
    assert result.returncode == 0, result.stderr
    rows = json.loads(result.stdout)
    assert rows and rows[0]["usd_per_month"] > 0
