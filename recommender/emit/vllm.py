"""vLLM: ``vllm serve MODEL ...`` and the same settings as a ``vllm serve --config`` YAML.

Verified against (flag names, accepted values, behaviour quoted in the notes):

- vllm/engine/arg_utils.py @ 99d7eb5 — ``--quantization/-q``, ``--dtype``, ``--kv-cache-dtype``,
  ``--max-num-seqs``, ``--max-num-batched-tokens``, ``--tensor-parallel-size/-tp``,
  ``--gpu-memory-utilization``, ``--max-model-len``; ``--quantization bitsandbytes`` also sets
  the bitsandbytes load format by itself (``create_load_config``).
- vllm/config/cache.py @ c1d8642 — ``CacheDType`` accepts ``fp8`` (= ``fp8_e4m3``); KV scales
  default to 1.0 unless the checkpoint has them or ``--calculate-kv-scales`` is set.
- vllm/model_executor/layers/quantization/__init__.py @ 05d9095 — ``QuantizationMethods``.
- vllm/model_executor/model_loader/bitsandbytes_loader.py @ c9e9c48 — in-flight quantization
  calls ``quantize_4bit(compress_statistics=True, quant_type="nf4")``; LLM.int8 (``load_in_8bit``)
  is read only from pre-quantized checkpoints, which refuse tensor parallelism.
- docs/features/quantization/fp8.md @ 405f4e1 — online ``fp8``: E4M3 weights with a per-tensor
  scale, dynamic per-tensor activation scale; W8A8 needs compute capability >= 8.9, Ampere
  runs weight-only W8A16 through FP8 Marlin; the model is loaded at full precision first.
- vllm/model_executor/layers/quantization/fp8.py @ 1436674 — ``Fp8LinearMethod`` quantizes dynamic
  activations per token where CUTLASS FP8 is supported, per tensor otherwise (ROCm).
- docs/features/quantization/llm_compressor/int8_w8a8.md @ 4ad1404 — an llm-compressor checkpoint
  is served as ``LLM("./CHECKPOINT")``: the scheme comes from its config.json, no flag.
- Which GPUs each scheme runs on: recommender/emit/support.py (one table, every row sourced).
- https://docs.vllm.ai/en/latest/configuration/serve_args/ — ``--config`` YAML takes the long
  option names; command-line values override the file.
- vllm-project/vllm PR #23014 and issue #31668 — torchao in vLLM needs a serialized torchao
  config (``--hf-overrides quantization_config_dict_json``) or a torchao checkpoint.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import yaml

from recommender.emit._base import (
    EmittedConfig,
    Emitter,
    LaunchSettings,
    Option,
    check_choice,
    checkpoint_note,
    double_quant_note,
    flatten,
)

if TYPE_CHECKING:
    from recommender.quantize import QuantMethod

# vllm/model_executor/layers/quantization/__init__.py @ 05d9095, QuantizationMethods.
QUANTIZATION_CHOICES = frozenset(
    {
        "awq", "fp8", "ptpc_fp8", "fbgemm_fp8", "fp_quant", "modelopt", "modelopt_fp4", "bitblas", "gguf",
        "gptq_marlin_24", "gptq_marlin", "gptq_bitblas", "awq_marlin", "gptq", "compressed-tensors",
        "bitsandbytes", "experts_int8", "ipex", "quark", "moe_wna16", "torchao", "inc", "mxfp4", "mxfp8",
        "petit_nvfp4", "cpu_awq",
    }
)  # fmt: skip
# vllm/config/cache.py @ c1d8642: "fp8" is e4m3 on CUDA and ROCm.
KV_CACHE_DTYPE = {"auto": "auto", "fp8": "fp8"}


class VllmEmitter(Emitter):
    """``vllm serve`` with the settings as flags, plus the same settings as a ``--config`` YAML."""

    name = "vllm"
    label = "vLLM"
    sources = (
        "https://github.com/vllm-project/vllm/blob/99d7eb5d6a512cfcc5a2b104f24ebf2d6cda772b/vllm/engine/arg_utils.py",
        "https://github.com/vllm-project/vllm/blob/c1d86421174a87056edc90a41dc9942391509e84/vllm/config/cache.py",
        "https://github.com/vllm-project/vllm/blob/05d909563e1d1ada39a13b67e7b9a4cbca1d6a8e/"
        "vllm/model_executor/layers/quantization/__init__.py",
        "https://github.com/vllm-project/vllm/blob/c9e9c484932eb025a29752972a29047802bc1bbb/"
        "vllm/model_executor/model_loader/bitsandbytes_loader.py",
        "https://github.com/vllm-project/vllm/blob/405f4e1f24aff3c057a3117d7a0f2b5e5c02ead7/"
        "docs/features/quantization/fp8.md",
        "https://github.com/vllm-project/vllm/blob/1436674bcb3f46f4c960d09334cf7dd1534943ca/"
        "vllm/model_executor/layers/quantization/fp8.py",
        "https://github.com/vllm-project/vllm/blob/4ad14044b2546e9b374cf57de5070746f30f2890/"
        "docs/features/quantization/llm_compressor/int8_w8a8.md",
        "https://docs.vllm.ai/en/latest/features/quantization/bnb/",
        "https://docs.vllm.ai/en/latest/configuration/serve_args/",
        "https://github.com/vllm-project/vllm/pull/23014",
    )

    def _emit(self, settings: LaunchSettings, flag: str) -> EmittedConfig:
        options: list[Option] = []
        if flag:
            check_choice(self.label, "--quantization", flag, QUANTIZATION_CHOICES)
            options.append(("--quantization", flag))
        options += [
            ("--dtype", settings.dtype),
            ("--kv-cache-dtype", KV_CACHE_DTYPE[settings.kv_cache_dtype]),
            ("--max-num-seqs", settings.max_num_seqs),
            ("--max-num-batched-tokens", settings.max_num_batched_tokens),
            ("--tensor-parallel-size", settings.tensor_parallel),
            ("--gpu-memory-utilization", settings.gpu_memory_utilization),
            ("--max-model-len", settings.max_model_len),
            ("--port", settings.port),
        ]
        document = {"model": settings.model, **{option.removeprefix("--"): value for option, value in options}}
        notes = [
            *_quantization_notes(settings.method, flag),
            *_kv_cache_notes(settings.kv_cache_dtype),
            *_token_budget_notes(settings),
            "config_yaml holds the same settings: save it as config.yaml and run `vllm serve --config config.yaml` "
            "(values given on the command line override the file).",
        ]
        return self._config(
            command=["vllm", "serve", settings.model, *flatten(options)],
            config_yaml=yaml.safe_dump(document, sort_keys=False),
            notes=notes,
        )

    def no_equivalent_hint(self, method: QuantMethod) -> str:
        if method.library == "bitsandbytes":
            return (
                "vLLM's in-flight `--quantization bitsandbytes` always quantizes to 4-bit NF4; it serves "
                f"{method.name}'s format only from a checkpoint saved pre-quantized with bitsandbytes "
                "(read from its quantization_config, tensor parallel 1) — save one with transformers and serve "
                "that, or pick a method with a vLLM equivalent"
            )
        if method.library == "torchao":
            return (
                "its only torchao route is `--quantization torchao` with the torchao config supplied: a checkpoint "
                "saved with torchao, or (vLLM with PR #23014) `--hf-overrides` carrying quantization_config_dict_json "
                "from torchao's config_to_dict — check it on your vLLM version (issue #31668), or pick a method "
                "with a vLLM equivalent"
            )
        return super().no_equivalent_hint(method)


def _quantization_notes(method: QuantMethod, flag: str) -> list[str]:
    checkpoint = checkpoint_note(method, "vLLM")
    if checkpoint is not None:
        return [checkpoint]
    if flag == "fp8":
        return _fp8_notes(method)
    if flag == "bitsandbytes":
        notes = [
            "vLLM quantizes in flight to 4-bit NF4 (the only in-flight bitsandbytes format) and needs bitsandbytes "
            "installed next to vLLM (its loader checks >= 0.46.1; the current docs ask for >= 0.49.2).",
        ]
        double_quant = double_quant_note(method, "vLLM")
        return notes + ([double_quant + "."] if double_quant else [])
    return []


def _fp8_notes(method: QuantMethod) -> list[str]:
    return [
        "vLLM's online `--quantization fp8` runs W8A8 only on compute capability >= 8.9 (Ada, Hopper) and on "
        "ROCm; on Ampere (8.0-8.6) it falls back to weight-only W8A16 through FP8 Marlin kernels, which is not "
        f"what {method.name} measured, so the search does not count those GPUs.",
        "vLLM loads the model at its original precision before quantizing, so each GPU needs room for "
        "its 16-bit shard at startup (the memory check counts it).",
        "vLLM quantizes dynamic activations per token where its CUTLASS FP8 kernels run (per tensor on ROCm); "
        f"{method.name} was evaluated as {method.description}.",
    ]


def _kv_cache_notes(kv_cache_dtype: str) -> list[str]:
    if kv_cache_dtype != "fp8":
        return []
    return [
        "`--kv-cache-dtype fp8` stores the KV cache as FP8 E4M3; without scales in the checkpoint they default "
        "to 1.0 (add --calculate-kv-scales to compute them), which vLLM warns may cost accuracy.",
    ]


def _token_budget_notes(settings: LaunchSettings) -> list[str]:
    if settings.max_num_batched_tokens >= settings.max_model_len:
        return []
    return [
        "--max-num-batched-tokens is below --max-model-len, which vLLM accepts only with chunked prefill "
        "(on by default in the V1 engine); long prompts are prefilled in chunks.",
    ]
