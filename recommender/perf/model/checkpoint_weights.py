"""Bytes of a model's weights as its publisher ships them, from config.json's ``quantization_config``.

Some models are released quantized, and only in part: gpt-oss keeps attention, the router, the embeddings
and the lm_head in BF16 (``modules_to_not_convert``) and stores the routed experts in MXFP4, 4-bit E2M1
values with one 8-bit power-of-two (E8M0) scale per block of 32 (OCP Microscaling Formats v1.0): 4.25 bits
per weight. DeepSeek-V3 ships its linear layers in FP8 (e4m3) with one fp32 scale per 128 x 128 block
(``weight_block_size``), embeddings and lm_head in BF16. A scheme's single ``bits_per_weight`` cannot say
this; the bytes here are what the engine loads when it serves the checkpoint as published, and the test
checks them against the gpt-oss model card's checkpoint sizes (arXiv 2508.10925, Table 1).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from recommender.errors import BadInputError
from recommender.perf.model.shape import ModelShape

#: MXFP4: 4-bit values + an 8-bit shared scale per 32.
MXFP4_BITS = 4.0 + 8.0 / 32
#: Block-scaled FP8: 8-bit values + an fp32 scale per 128 x 128 block.
FP8_BLOCK_BITS = 8.0 + 32.0 / (128 * 128)


def _routed_params(shape: ModelShape) -> int:
    return 0 if shape.moe is None else shape.moe.n_moe_layers * shape.moe.n_experts * shape.expert_params


def checkpoint_weight_bytes(shape: ModelShape, quantization: Mapping[str, Any] | None) -> float:
    """Bytes of `shape`'s weights in the published format (`quantization`: config.json's ``quantization_config``;
    None: BF16 throughout). Norms and biases are left out, as in the shape's parameter counts."""
    sixteen_bit = shape.lm_head_params + shape.embedding_params
    method = (quantization or {}).get("quant_method")
    if method is None:
        return (shape.body_params + sixteen_bit) * 2.0
    if method == "mxfp4":  # routed experts only (gpt-oss's modules_to_not_convert: attention, router, embeddings)
        routed = _routed_params(shape)
        return routed * MXFP4_BITS / 8 + (shape.body_params - routed + sixteen_bit) * 2.0
    if method == "fp8":
        block = (quantization or {}).get("weight_block_size")
        bits = 8.0 + 32.0 / (block[0] * block[1]) if block else 8.0
        return shape.body_params * bits / 8 + sixteen_bit * 2.0
    raise BadInputError(
        "quantization_config.quant_method",
        f"{method!r} is not a published format this tool sizes",
        "give the model's BF16 config (drop quantization_config) or one of mxfp4, fp8",
    )
