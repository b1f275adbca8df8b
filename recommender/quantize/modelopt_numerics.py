"""The numbers in a ModelOpt checkpoint, turned back into what an engine multiplies: pure torch, float32.

Read from ModelOpt 0.47's export (``modelopt/torch/export/quant_utils.py``: ``to_quantized_weight``,
``pack_int4_in_uint8``; ``modelopt/torch/quantization/qtensor/nvfp4_tensor.py``) and from the engines that
load it (vLLM ``vllm/model_executor/layers/quantization/modelopt.py`` @ 00155cd, SGLang
``python/sglang/srt/layers/quantization/modelopt_quant.py`` @ 003ca3e):

- FP8 (``quant_algo: FP8``): ``weight`` float8 e4m3 and one float32 ``weight_scale`` per layer
  (W = weight x weight_scale); a static float32 ``input_scale`` per layer: the activation is divided by
  it, rounded to e4m3 (saturating at +-448) and multiplied back.
- NVFP4 (``quant_algo: NVFP4``): ``weight`` uint8, two e2m1 codes per byte along the input dimension, the
  even element in the low nibble; ``weight_scale`` float8 e4m3, one per 16 weights; ``weight_scale_2`` one
  float32 global scale (amax / (6 x 448)): W = e2m1 x weight_scale x weight_scale_2. Activations: the
  float32 ``input_scale`` is the global scale (engines multiply by its inverse before quantizing); each
  block of 16 gets the scale amax_block / 6 / input_scale rounded to e4m3, and each value is rounded to the
  nearest e2m1 value (ties to even, as ``NVFP4QTensor._cast_fp4``), computed at run time.
- W4A16 AWQ (``quant_algo: W4A16_AWQ``): ``weight`` uint8 holding two signed int4 values per byte along the
  *output* dimension (row 2j in the low nibble, 2j+1 in the high one); ``weight_scale`` float32, one per
  output row and group of ``group_size`` inputs; ``pre_quant_scale`` (where not folded into the preceding
  norm) multiplies the activation before the 16-bit matmul.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

#: Largest finite float8 e4m3fn value.
FP8_MAX = 448.0
#: Largest e2m1 (fp4) magnitude.
FP4_MAX = 6.0
#: The eight e2m1 magnitudes, by code 0..7 (code 8..15: the same, negative).
E2M1_VALUES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)
#: NVFP4's block of values sharing one e4m3 scale.
NVFP4_BLOCK = 16


def _e2m1_table(device: torch.device) -> torch.Tensor:
    import torch

    magnitudes = torch.tensor(E2M1_VALUES, dtype=torch.float32, device=device)
    return torch.cat([magnitudes, -magnitudes])


def round_fp8(x: torch.Tensor) -> torch.Tensor:
    """`x` (float32) rounded to float8 e4m3, saturating at +-448, back in float32."""
    import torch

    return x.clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn).to(torch.float32)


def round_e2m1(x: torch.Tensor) -> torch.Tensor:
    """`x` (float32, already scaled) rounded to the nearest e2m1 value, ties to the even code, clamped at +-6."""
    import torch

    magnitude = x.abs().clamp(max=FP4_MAX)
    values = torch.tensor(E2M1_VALUES, dtype=torch.float32, device=x.device)
    midpoints = (values[1:] + values[:-1]) / 2
    code = torch.bucketize(magnitude, midpoints)  # a tie lands on the lower code ...
    odd_tie = (magnitude.unsqueeze(-1) == midpoints[1::2]).any(-1)  # ... except above an odd code: round up to even
    return values[code + odd_tie.to(code.dtype)] * torch.sign(x)


def dequantize_fp8(weight: torch.Tensor, weight_scale: torch.Tensor) -> torch.Tensor:
    """FP8 weights times their per-tensor scale, in float32."""
    return weight.float() * weight_scale.float()


def dequantize_nvfp4(weight: torch.Tensor, weight_scale: torch.Tensor, weight_scale_2: torch.Tensor) -> torch.Tensor:
    """Packed e2m1 codes times their e4m3 block scales times the global scale, in float32 ([out, in])."""
    import torch

    table = _e2m1_table(weight.device)
    codes = torch.stack([weight & 0x0F, weight >> 4], dim=-1).reshape(weight.shape[0], -1).long()
    values = table[codes].reshape(weight.shape[0], -1, NVFP4_BLOCK)
    scales = weight_scale.float() * weight_scale_2.float()
    return (values * scales.unsqueeze(-1)).reshape(weight.shape[0], -1)


def dequantize_int4_awq(weight: torch.Tensor, weight_scale: torch.Tensor, group_size: int) -> torch.Tensor:
    """Signed int4 pairs packed along the output dimension, times per-group scales, in float32 ([out, in])."""
    import torch

    low = (weight & 0x0F).to(torch.int8)
    high = (weight >> 4).to(torch.int8)
    pairs = torch.stack([low, high], dim=1).reshape(-1, weight.shape[1])  # rows 2j, 2j+1
    signed = torch.where(pairs > 7, pairs - 16, pairs).float()
    scales = weight_scale.float().repeat_interleave(group_size, dim=1)[:, : weight.shape[1]]
    return signed * scales


def quantize_fp8_static(x: torch.Tensor, input_scale: torch.Tensor) -> torch.Tensor:
    """Static per-tensor FP8 activation quantization, as the engines' FP8 GEMM sees its input (float32)."""
    scale = input_scale.float()
    return round_fp8(x / scale) * scale


def quantize_nvfp4_dynamic(x: torch.Tensor, input_scale: torch.Tensor) -> torch.Tensor:
    """NVFP4 activation quantization at run time: e4m3 scales per 16 values under the static global scale."""
    import torch

    shape = x.shape
    blocks = x.reshape(*shape[:-1], -1, NVFP4_BLOCK)
    global_scale = input_scale.float()
    block_scale = round_fp8(blocks.abs().amax(dim=-1, keepdim=True) / FP4_MAX / global_scale) * global_scale
    safe = torch.where(block_scale == 0, torch.ones_like(block_scale), block_scale)
    return (round_e2m1(blocks / safe) * block_scale).reshape(shape)
