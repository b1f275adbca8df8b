"""How a scheme's linear layers run: the tensor-core dtype that bounds them and the bytes they move.

The roofline (``roofline.py``), the step cost (``cost.py``) and any calibrated model price
a linear layer by its weight traffic and its FLOPs; this module says what those are per scheme,
from the kernels the libraries really run, not from the weights' bit width alone:

- W8A8 schemes (fp8, int8) multiply on their precision's tensor cores where the GPU has them;
  weight-only schemes (w4a16-*, *-wo, bnb 4-bit) dequantize and multiply in 16-bit.
- bitsandbytes 4-bit (NF4, FP4): ``matmul_4bit`` runs the fused ``gemv_4bit`` kernel only when
  the input is one token (``A.numel() == A.shape[-1]``); any larger input goes through
  ``MatMul4Bit``, which writes the whole weight out at 16 bits (``dequantize_4bit(B).to(A.dtype)``)
  and multiplies that (bitsandbytes-foundation/bitsandbytes, ``bitsandbytes/autograd/_functions.py``,
  ``matmul_4bit``; vLLM's bitsandbytes method calls the same function). Above one token per step a
  weight therefore costs its 4-bit read, a 16-bit write and a 16-bit read.
- LLM.int8() (``bnb-llm-int8``): outlier columns are multiplied in 16-bit and the rest in int8,
  with activation quantization and output dequantization around each matmul
  (https://huggingface.co/docs/bitsandbytes/reference/nn/linear8bit; Dettmers et al.,
  arXiv 2208.07339). It does not reach int8 tensor-core peak; measured, it is *slower* than the
  16-bit model at every batch size: BLOOM-176B on 8 x A100 80 GB, accelerate int8 vs bf16,
  286.56 vs 230.38 ms/token at batch 1, 40.92 vs 31.78 at 8, 13.27 vs 10.89 at 32 (1.22-1.29 x;
  HF blog "bloom-inference-pytorch-scripts", as reposted at
  https://dailyglimpse.online/article/achieving-blazing-fast-bloom-inference-with-deepspeed-and-accelerate-Co46ca,
  read 2026-11-23); a 0.5 B decoder on a T4 2.5 x (https://earino.github.io/applied-deep-learning/site/blog/11_int8_is_slower.html).
  So its time is modeled as the 16-bit model's (16-bit compute rate, 16-bit weight traffic) times
  ``LLM_INT8_SLOWDOWN``, the low end of the large-model measurements; its memory stays 8-bit.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from recommender.perf.catalog.gpus import Accelerator
    from recommender.perf.scheme import Scheme

#: Kernel families (``Scheme.kernel_family``) of bitsandbytes 4-bit: dequantize to 16-bit above one token.
BNB_4BIT_FAMILIES = frozenset({"bnb-nf4", "bnb-fp4"})
#: Kernel family of LLM.int8().
BNB_INT8_FAMILY = "bnb-int8"
#: LLM.int8() step time over the 16-bit model's (measured 1.22-1.29 x on BLOOM-176B; see module docstring).
LLM_INT8_SLOWDOWN = 1.22
#: Bytes of one 16-bit weight.
_BF16_BYTES = 2.0


def _family(method: Scheme) -> str:
    return method.kernel_family


def compute_dtype(method: Scheme, accel: Accelerator) -> str:
    """The precision whose tensor-core peak bounds `method`'s compute on `accel`.

    W8A8 methods use their precision's tensor cores where native; weight-only ones and LLM.int8()
    (mixed int8/16-bit decomposition, see the module docstring) compute at the 16-bit rate.
    """
    int8_mixed = _family(method) == BNB_INT8_FAMILY
    if not method.weight_only and not int8_mixed and method.precision in accel.native_precisions:
        return method.precision
    return "bf16" if "bf16" in accel.peak_tflops else "fp16"


def dequantizes_to_16bit(method: Scheme, tokens: int) -> bool:
    """Whether a step of `tokens` tokens writes and reads `method`'s weights again at 16 bits (bnb 4-bit, > 1 token)."""
    return _family(method) in BNB_4BIT_FAMILIES and tokens > 1


def weight_traffic_bytes_per_param(method: Scheme, tokens: int) -> float:
    """Bytes of memory traffic per quantized linear weight in a step of `tokens` tokens.

    The stored bits, plus a 16-bit write and read where bitsandbytes 4-bit dequantizes; LLM.int8()
    is timed at the 16-bit model's traffic (it is measured no faster than it).
    """
    if _family(method) == BNB_INT8_FAMILY:
        return _BF16_BYTES
    stored = method.bits_per_weight / 8.0
    return stored + 2 * _BF16_BYTES if dequantizes_to_16bit(method, tokens) else stored


def linear_time_factor(method: Scheme) -> float:
    """Multiplier on the roofline time of a step for kernels measured slower than their roofline (LLM.int8())."""
    return LLM_INT8_SLOWDOWN if _family(method) == BNB_INT8_FAMILY else 1.0


def kernel_note(method: Scheme) -> str:
    """What the roofline assumed of `method`'s kernels beyond its bits, for a provenance line ('' if nothing)."""
    family = _family(method)
    if family in BNB_4BIT_FAMILIES:
        return "bnb 4-bit dequantizes to 16-bit above one token per step (4-bit read + 16-bit write and read)"
    if family == BNB_INT8_FAMILY:
        return f"LLM.int8() timed as the 16-bit model x {LLM_INT8_SLOWDOWN} (measured slowdown)"
    return ""
