"""Text Generation Inference: ``text-generation-launcher --model-id MODEL ...``.

Verified against (flag names, accepted values, behaviour quoted in the notes):

- launcher/src/main.rs @ 009c4e0 — ``--model-id``, ``--quantize`` (``Quantization``: awq, eetq,
  exl2, gptq, marlin, bitsandbytes, bitsandbytes-nf4, bitsandbytes-fp4, fp8), ``--dtype``
  (float16, bfloat16; "cannot be used with --quantize"), ``--kv-cache-dtype`` (fp8_e4m3fn,
  fp8_e5m2; CUDA only), ``--num-shard``, ``--max-concurrent-requests`` (default 128),
  ``--max-batch-size``, ``--max-batch-prefill-tokens``, ``--max-input-tokens`` (must be below
  ``--max-total-tokens``), ``--max-total-tokens``, ``--cuda-memory-fraction``, ``--port``;
  bitsandbytes 8-bit logs a deprecation in favour of eetq; CUDA graphs are off for bitsandbytes.
- backends/v3/src/main.rs @ 41c2623 — ``--max-batch-prefill-tokens`` may be below
  ``--max-input-tokens`` only when the backend supports chunked prefill.
- backends/v3/src/backend.rs @ 1d0847a — ``max_batch_size`` caps every batch the router forms.
- server/text_generation_server/layers/fp8.py @ 14e8ca5 — online fp8: compute capability 8.x
  runs FP8 Marlin (weight-only); 9.0 with fbgemm-gpu quantizes weights per row and activations
  per token; otherwise per-tensor scales with ``torch._scaled_mm``.
- server/text_generation_server/layers/eetq.py @ fd89d9d — EETQ casts weights to float16 and
  quantizes them to int8 per output channel (``quant_weights``), then runs a w8a16 GEMM.
- server/text_generation_server/layers/bnb.py — 4-bit ``Params4bit(compress_statistics=True)``.
- server/text_generation_server/layers/compressed_tensors/loader.py @ b2dc10a — compressed-tensors
  checkpoints load through their config.json's quantization_config (no ``--quantize`` value names
  them in the launcher's ``Quantization`` enum).

Where it runs each scheme family (``KERNELS``), verified against huggingface/text-generation-inference:
- server/text_generation_server/layers/compressed_tensors/loader.py @ b2dc10a — loaders for FP
  W8A8/W8A16, INT W4A16/W8A16 (pack-quantized) and INT W8A8 compressed-tensors groups.
- .../compressed_tensors/w8a8_int.py @ 05f98ef — CUTLASS int8, dynamic per-token inputs; PR #2745
  (works on capability 7.5).
- .../layers/marlin/gptq.py @ 272e6f9 — GPTQ-Marlin needs CUDA capability 8.0; asymmetric weights
  only for AWQ checkpoints, so an asymmetric compressed-tensors W4A16 is not claimed.
- .../compressed_tensors/w8an_fp.py @ 575af7e and layers/fp8.py @ 14e8ca5 — FP8 picks its kernel by
  GPU: per-token W8A8 only on 9.x with fbgemm-gpu, per-tensor on 8.9, Marlin weight-only on 8.x.
- docs/source/installation_nvidia.md @ bb87333 — H100, A100, A10G and T4.

No row for the compressed-tensors FP8 per-tensor, FP8 block, NVFP4, NVFP4A16 and MXFP4 presets:
- .../compressed_tensors/loader.py @ b2dc10a — loaders exist only for ``float-quantized``/``naive-quantized``
  8-bit float, ``pack-quantized`` integer and ``int-quantized`` 8-bit integer groups; an
  ``nvfp4-pack-quantized`` or ``mxfp4-pack-quantized`` group raises "unsupported compressed-tensors
  configurtion", so TGI serves no FP4 scheme.
- .../compressed_tensors/w8an_fp.py @ 575af7e — the FP8 loader ignores the ``strategy`` ("we try to use the
  best-possible configuration") and reshapes every weight scale to one per output row: 128x128 block scales
  do not fit that, so FP8 block is not served. A per-tensor static checkpoint runs whatever layers/fp8.py
  @ 14e8ca5 picks by GPU: FP8 Marlin weight-only on every 8.x (``get_fp8_linear``: major 8), fbgemm with
  dynamic per-row activations on 9.x (the static input scale unused), ``torch._scaled_mm`` with the static
  input scale only elsewhere — not verified to run there with per-row-expanded weight scales, so no row.

How it batches (``PROFILE``, for the scheduler simulation; defaults of the releases the measured runs used, read
in the released sources):

* TGI: no measured runs here. `--max-batch-prefill-tokens` defaults to a compute-optimal
  figure per GPU (launcher/src/main.rs), falling back to 4096: modelled with 4096, mixed,
  and the engine-agnostic step cost.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from recommender.engines._base import (
    Engine,
    EngineLaunch,
    LaunchSettings,
    Option,
    check_choice,
    checkpoint_note,
    double_quant_note,
    flatten,
)
from recommender.engines.kernels import Kernel
from recommender.perf.sim.engine_profiles import EngineProfile

if TYPE_CHECKING:
    from recommender.quantize import QuantScheme

# launcher/src/main.rs @ 009c4e0, enum Quantization (kebab-case values).
QUANTIZE_CHOICES = frozenset(
    {"awq", "eetq", "exl2", "gptq", "marlin", "bitsandbytes", "bitsandbytes-nf4", "bitsandbytes-fp4", "fp8"}
)
# launcher/src/main.rs @ 009c4e0, enum KVCacheDtype; "auto" means the flag is left out.
KV_CACHE_DTYPE = {"auto": None, "fp8": "fp8_e4m3fn"}
# launcher/src/main.rs @ 009c4e0: --max-concurrent-requests default.
DEFAULT_MAX_CONCURRENT_REQUESTS = 128


#: How Tgi batches (sources in the module docstring).
PROFILE = EngineProfile("tgi", max_num_batched_tokens=4096, mixed_prefill=True, max_num_seqs=1024)
#: Where Tgi runs each scheme family (sources in the module docstring).
KERNELS: tuple[Kernel, ...] = (
    Kernel("bf16", "TGI bf16", (8, 0)),
    Kernel("fp16", "TGI fp16", (7, 5)),
    Kernel(
        "ct-fp8-w8a8",
        "TGI's fbgemm FP8 W8A8 (per-token)",
        (9, 0),
        nvidia_below=(10, 0),
        fallback="it runs per-tensor FP8 (8.9) or weight-only FP8 Marlin (8.x), not the measured numerics",
    ),
    Kernel("ct-int8-w8a8", "TGI's CUTLASS INT8 W8A8", (7, 5)),
    Kernel("ct-w4a16", "TGI's GPTQ-Marlin W4A16", (8, 0)),
    Kernel("bnb-nf4", "TGI's bitsandbytes NF4", (7, 0), flag="bitsandbytes-nf4"),
    Kernel("bnb-fp4", "TGI's bitsandbytes FP4", (7, 0), flag="bitsandbytes-fp4"),
    Kernel("bnb-int8", "TGI's bitsandbytes LLM.int8", (7, 0), flag="bitsandbytes"),
)


class TgiEngine(Engine):
    """``text-generation-launcher`` with TGI's names for the launch settings."""

    name = "tgi"
    label = "TGI"
    sources = (
        "https://github.com/huggingface/text-generation-inference/blob/009c4e0b945b2c111368afdc2c9813c32db0a9b7/"
        "launcher/src/main.rs",
        "https://github.com/huggingface/text-generation-inference/blob/41c2623735819bcb370063795127153dcee1e7a8/"
        "backends/v3/src/main.rs",
        "https://github.com/huggingface/text-generation-inference/blob/1d0847a90e6bee759ab0af1cc854e78b09892d93/"
        "backends/v3/src/backend.rs",
        "https://github.com/huggingface/text-generation-inference/blob/14e8ca523602d0025c285063b3232100675b933e/"
        "server/text_generation_server/layers/fp8.py",
        "https://github.com/huggingface/text-generation-inference/blob/fd89d9dfaef408e4482ba5e230473de5bb203a99/"
        "server/text_generation_server/layers/eetq.py",
    )
    kernels = KERNELS
    profile = PROFILE
    speculation_refusal = (
        "TGI's --speculate N drafts n-grams its own way (docs/source/conceptual/speculation.md) and uses Medusa "
        "heads where the model has them; vLLM's prompt lookup, which was measured, is not what it runs"
    )

    def _emit(self, settings: LaunchSettings, flag: str) -> EngineLaunch:
        options: list[Option] = []
        notes: list[str] = []
        if flag:
            check_choice(self.label, "--quantize", flag, QUANTIZE_CHOICES)
            options.append(("--quantize", flag))
            notes.append(
                f"TGI refuses --dtype together with --quantize, so {settings.dtype} is not passed: the compute "
                "dtype follows the checkpoint."
            )
        else:
            options.append(("--dtype", settings.dtype))
        concurrent = max(settings.max_num_seqs, DEFAULT_MAX_CONCURRENT_REQUESTS)
        options += [
            ("--num-shard", settings.tensor_parallel),
            ("--max-concurrent-requests", concurrent),
            ("--max-batch-size", settings.max_num_seqs),
            ("--max-batch-prefill-tokens", settings.max_num_batched_tokens),
            ("--max-input-tokens", settings.max_model_len - 1),
            ("--max-total-tokens", settings.max_model_len),
            ("--cuda-memory-fraction", settings.gpu_memory_utilization),
        ]
        kv_cache_dtype = KV_CACHE_DTYPE[settings.kv_cache_dtype]
        if kv_cache_dtype is not None:
            options.append(("--kv-cache-dtype", kv_cache_dtype))
            notes.append("TGI names the FP8 E4M3 KV cache fp8_e4m3fn; it is CUDA-only.")
        options.append(("--port", settings.port))
        notes += [
            *_quantization_notes(settings.method, flag),
            f"--max-batch-size caps each batch at {settings.max_num_seqs}; --max-concurrent-requests is "
            f"{concurrent} because TGI rejects requests beyond it (overloaded) instead of queueing them — "
            "raise it to admit a longer queue.",
            "--max-input-tokens is max_model_len - 1 because TGI requires it below --max-total-tokens.",
        ]
        if settings.max_num_batched_tokens < settings.max_model_len - 1:
            notes.append(
                "--max-batch-prefill-tokens is below --max-input-tokens, which TGI's router accepts only when the "
                "backend supports chunked prefill (TGI 3 on CUDA); older versions refuse to start."
            )
        command = ["text-generation-launcher", "--model-id", settings.model, *flatten(options)]
        return self._config(command=command, notes=notes)

    def no_equivalent_hint(self, method: QuantScheme) -> str:
        if method.library == "torchao":
            return (
                "TGI's in-flight `--quantize eetq` casts weights to float16 and computes in fp16, and `--quantize fp8` "
                "picks its kernel by GPU, so neither serves the numerics that were evaluated — pick a method with a "
                "TGI equivalent"
            )
        if method.precision == "int4":
            return (
                "TGI's in-flight 4-bit formats are bitsandbytes-nf4 and bitsandbytes-fp4; group-wise int4 needs a "
                "GPTQ, AWQ or Marlin checkpoint (--quantize gptq|awq|marlin) — pick a method with a TGI equivalent"
            )
        if method.precision == "int8" and not method.weight_only:
            return (
                "TGI quantizes int8 in flight only weight-only (eetq) or as LLM.int8 (bitsandbytes) — pick a "
                "method with a TGI equivalent"
            )
        return super().no_equivalent_hint(method)


def _quantization_notes(method: QuantScheme, flag: str) -> list[str]:
    checkpoint = checkpoint_note(method, "TGI")
    if checkpoint is not None:
        return [checkpoint]
    if flag.startswith("bitsandbytes"):
        notes = ["TGI turns CUDA graphs off for bitsandbytes, so decode is slower than with graph capture."]
        if flag == "bitsandbytes":
            notes.append("TGI marks bitsandbytes 8-bit as deprecated in favour of eetq (warning at startup).")
        else:
            double_quant = double_quant_note(method, "TGI")
            notes += [double_quant + "."] if double_quant else []
        return notes
    return []
