"""Nemotron-3-Super: a Mamba2 hybrid whose MLP blocks are a latent mixture of experts, by hand.

Sources of the numbers below:
- the shipped ``nemotron-3-super-120b-a12b.json`` (aiconfigurator-core 0.12 ``model_configs``,
  nvidia--NVIDIA-Nemotron-3-Super-120B-A12B-FP8_config.json, Apache-2.0): 88 blocks
  ``hybrid_override_pattern`` with 40 Mamba2 (``M``), 40 MoE (``E``) and 8 attention (``*``) blocks; hidden 4096;
  Mamba2 128 heads of 64, state 128, 8 groups, conv 4, fp32 state (``mamba_ssm_cache_dtype``); attention 32 heads,
  2 KV heads of 128; 512 routed experts, top-22, width 2688 over a latent of 1024 (``moe_latent_size``), one shared
  expert of 5376 (``moe_shared_expert_intermediate_size``), squared-ReLU (2 matrices per expert); vocab 131072,
  untied embeddings.
- the layer shapes of vLLM ``model_executor/models/nemotron_h.py`` @ 00b08dc4 (``NemotronHMoE``: the router
  hidden x experts, ``fc1_latent_proj`` / ``fc2_latent_proj`` ``ReplicatedLinear`` hidden <-> latent, experts of
  ``hidden_size=moe_latent_size``, the shared expert ``NemotronHMLP(hidden, 5376 x n_shared_experts)``).
- the model card (huggingface.co/nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-FP8, as quoted by
  lambda.ai/inference-models/nvidia/nvidia-nemotron-3-super-120b-a12b): 120.6B total, 12.7B active.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from recommender.errors import BadInputError
from recommender.perf.catalog.architectures import load_architecture, read_architecture
from recommender.perf.catalog.gpus import load_catalog
from recommender.perf.model.memory import plan_memory
from recommender.perf.model.shape import ModelShape
from recommender.perf.step.features import StepFeatures
from recommender.quantize import get_scheme

NAME, SUPER = load_architecture("nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-FP8")
HIDDEN, LATENT = 4096, 1024
MAMBA = HIDDEN * (2 * 8192 + 2 * 8 * 128 + 128) + 8192 * HIDDEN  # in_proj + out_proj
ATTENTION = HIDDEN * 128 * (2 * 32 + 2 * 2)  # q and o of 32 heads, k and v of 2
ROUTER, LATENT_PROJ, SHARED = HIDDEN * 512, 2 * HIDDEN * LATENT, 2 * HIDDEN * 5376
EXPERT = 2 * LATENT * 2688  # up and down over the latent width
EMBEDDINGS = 2 * 131072 * HIDDEN  # embed_tokens and lm_head, untied


def test_the_hub_id_resolves_to_the_shipped_config_with_its_blocks() -> None:
    assert NAME == "nemotron-3-super-120b-a12b"
    assert SUPER.recurrent is not None and SUPER.moe is not None
    assert (SUPER.recurrent.n_recurrent, SUPER.n_kv_layers, SUPER.moe.n_moe_layers) == (40, 8, 40)
    assert SUPER.n_mlp_layers == 40  # the E blocks are its only MLPs: no dense MLP width is priced
    assert (SUPER.moe.latent, SUPER.moe.shared_intermediate, SUPER.mlp_matrices) == (LATENT, 5376, 2)


def test_parameters_match_the_hand_count_and_the_model_card() -> None:
    moe_dense = SHARED + ROUTER + LATENT_PROJ
    total = 40 * MAMBA + 8 * ATTENTION + 40 * (moe_dense + 512 * EXPERT) + EMBEDDINGS
    active = 40 * MAMBA + 8 * ATTENTION + 40 * (moe_dense + 22 * EXPERT) + EMBEDDINGS
    assert SUPER.total_params == total
    assert SUPER.active_params == active
    assert total / 1e9 == pytest.approx(120.6, rel=0.01) and active / 1e9 == pytest.approx(12.7, rel=0.01)
    assert SUPER.tp_replicated_params == 40 * LATENT_PROJ  # the latent projections, whole on every GPU


def test_memory_holds_the_fp32_state_per_seat_and_kv_only_in_8_blocks() -> None:
    state = 40 * (128 * 64 * 128 * 4 + (8192 + 2 * 8 * 128) * 3 * 2)  # fp32 SSM state + 16-bit conv state
    assert SUPER.state_bytes_per_seq() == state == 170_229_760
    assert SUPER.kv_bytes_per_token(1.0) == 8 * 2 * 2 * 128  # K and V of 2 heads, 8 attention blocks, fp8
    fp8 = get_scheme("fp8-dynamic")
    plan = plan_memory(SUPER, fp8, device_gb=141.0, tensor_parallel=8, max_num_seqs=64, kv_cache_dtype="fp8")
    assert plan.state_gb == pytest.approx(64 * state / 8 / 1e9)
    replicated = 40 * LATENT_PROJ
    body = (SUPER.body_params - replicated) / 8 + replicated
    weights = body * fp8.bits_per_weight / 8 + EMBEDDINGS * 2 / 8
    assert plan.weights_gb == pytest.approx(weights / 1e9)
    # 2 KV heads on 8 GPUs: each keeps one replica, 1/2 of the cache per token
    assert plan.kv_bytes_per_token == 8 * 2 * 2 * 128 / 2


def test_step_flops_are_the_active_weights_plus_the_mamba_state_updates() -> None:
    f = StepFeatures(SUPER, get_scheme("fp8-dynamic"), load_catalog().get("h200"), 8, "fp8")
    replicated = 40 * LATENT_PROJ
    per_gpu_active = (SUPER.active_body_params - replicated) / 8 + replicated
    assert f.rates.body_flops_per_token == 2 * per_gpu_active
    assert SUPER.recurrent_flops_per_token == 40 * (5 * 128 * 64 * 128 + 2 * (8192 + 2048) * 4)
    assert f.rates.recurrent_flops_per_token == SUPER.recurrent_flops_per_token / 8


_PATTERN = "hybrid_override_pattern"


def _config() -> dict[str, Any]:
    return {k: v for k, v in vars(read_architecture(NAME)[1]).items() if not k.startswith("_")}


@pytest.mark.parametrize(
    ("change", "field"),
    [
        # E blocks with no experts to route to (and no shared expert, which another rule refuses alone)
        ({"n_routed_experts": None, "n_shared_experts": None, "moe_shared_expert_intermediate_size": None}, _PATTERN),
        ({"hybrid_override_pattern": "M-M-M-M*" + "-M" * 40}, _PATTERN),  # experts, no E block
        ({"num_experts_per_tok": 513}, "num_experts_per_tok"),  # top-k above the experts
        ({"ssm_state_size": 0}, "ssm_state_size"),  # zero state
        ({"hybrid_override_pattern": "MEX" + "E" * 85}, _PATTERN),  # an unknown block
    ],
    ids=["no-experts", "no-E-block", "top-k-above-experts", "zero-state", "unknown-block"],
)
def test_a_bad_latent_moe_hybrid_is_refused_naming_the_field(
    tmp_path: Path, change: dict[str, Any], field: str
) -> None:
    config = {k: v for k, v in {**_config(), **change}.items() if v is not None}
    with pytest.raises(BadInputError) as caught:
        path = tmp_path / "config.json"
        path.write_text(json.dumps(config), encoding="utf-8")
        ModelShape.from_config(read_architecture(str(path))[1])
    assert field in str(caught.value)


def test_no_layers_anywhere_is_one_line_and_exit_2(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    text = {k: v for k, v in _config().items() if k not in ("num_hidden_layers", "hybrid_override_pattern")}
    path.write_text(json.dumps({"architectures": ["X"], "text_config": text}), encoding="utf-8")
    args = ["plan", "--model", str(path), "--hardware", "h200", "--precision", "fp8", "--json"]
    result = subprocess.run([sys.executable, "-m", "recommender", *args], capture_output=True, text=True, check=False)
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert result.returncode == 2 and len(errors) == 1 and "num_hidden_layers" in errors[0], result.stderr
