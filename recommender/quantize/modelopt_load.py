"""A ModelOpt checkpoint loaded for scoring as an engine serves it: never through plain ``from_pretrained``.

Stock transformers reads a ModelOpt FP8 export without its scales (the FP8 weights cast as they are:
the demo model's loss 5.99 against 5.01) and refuses NVFP4 and W4A16 AWQ. So this loader reads the
checkpoint's own description — ``quantization_config`` in config.json (``quant_method: modelopt``) or
``hf_quant_config.json`` — builds the architecture from config.json, and replaces every quantized linear
layer with `ServedLinear`: its weight dequantized exactly in float32 (`modelopt_numerics`), its input
multiplied by the AWQ ``pre_quant_scale`` where the checkpoint has one, and its input quantized the way the
engine's kernel quantizes it (static FP8 per tensor, NVFP4 per 16 values) where the scheme quantizes
activations; the matmul runs in float32, as the engines accumulate. A checkpoint with an FP8 KV cache
(``kv_cache_quant_algo: FP8``) has calibrated ``k_scale``/``v_scale`` per layer: keys (after the rotary
embedding) and values are rounded through e4m3 with them on their way into attention.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from recommender.device import DeviceInfo
from recommender.errors import BadInputError
from recommender.quantize import modelopt_numerics as numerics

if TYPE_CHECKING:
    import torch
    from torch import nn

#: The attention implementation name registered with transformers for calibrated FP8 KV scales.
MODELOPT_KV_ATTENTION = "recommender_modelopt_fp8_kv_sdpa"
#: The ``quant_algo`` values this loader reproduces.
KNOWN_ALGOS = ("FP8", "NVFP4", "W4A16_AWQ")


@dataclass(frozen=True, slots=True)
class ModelOptConfig:
    """What a ModelOpt checkpoint says about itself."""

    quant_algo: str
    group_size: int | None
    kv_cache_quant_algo: str | None
    exclude_modules: tuple[str, ...]


def read_modelopt_config(path: Path, *, field: str = "--checkpoint") -> ModelOptConfig:
    """The checkpoint's ModelOpt description (config.json first, as the engines read it, else hf_quant_config.json)."""
    config = json.loads((path / "config.json").read_text(encoding="utf-8"))
    quant: dict[str, Any] = config.get("quantization_config") or {}
    if str(quant.get("quant_method", "")).lower() == "modelopt":
        kv = quant.get("kv_cache_scheme") or {}
        kv_algo = "FP8" if kv.get("type") == "float" and kv.get("num_bits") == 8 else None
        group = quant.get("group_size") or _group_size(quant) or _hf_group_size(path)
        algo, excluded = str(quant.get("quant_algo", "")).upper(), quant.get("ignore", [])
    elif (path / "hf_quant_config.json").is_file():
        quant = json.loads((path / "hf_quant_config.json").read_text(encoding="utf-8")).get("quantization", {})
        algo, group = str(quant.get("quant_algo", "")).upper(), quant.get("group_size")
        kv_algo = quant.get("kv_cache_quant_algo") or None
        excluded = quant.get("exclude_modules", [])
    else:
        raise BadInputError(
            field,
            f"{path} is not a ModelOpt checkpoint (no quant_method modelopt, no hf_quant_config.json)",
            "give a directory written by `recommender quantize`",
        )
    if algo not in KNOWN_ALGOS:
        raise BadInputError(
            field, f"ModelOpt quant_algo {algo!r} is not reproduced here", f"known: {', '.join(KNOWN_ALGOS)}"
        )
    return ModelOptConfig(algo, int(group) if group else None, kv_algo, tuple(excluded))


def _hf_group_size(path: Path) -> int | None:
    """The group size ModelOpt 0.47 writes only to hf_quant_config.json (its config.json for W4A16_AWQ has none)."""
    hf = path / "hf_quant_config.json"
    if not hf.is_file():
        return None
    size = json.loads(hf.read_text(encoding="utf-8")).get("quantization", {}).get("group_size")
    return int(size) if size else None


def _group_size(quant: dict[str, Any]) -> int | None:
    groups = quant.get("config_groups") or {}
    for group in groups.values():
        size = (group.get("weights") or {}).get("group_size")
        if size:
            return int(size)
    return None


def _served_linear_class() -> type[nn.Module]:
    import torch
    from torch import nn

    class ServedLinear(nn.Module):
        """A quantized linear layer as served: exact float32 weight, the engine's input transform, float32 matmul."""

        def __init__(
            self,
            weight: torch.Tensor,
            bias: torch.Tensor | None,
            algo: str,
            input_scale: torch.Tensor | None,
            pre_quant_scale: torch.Tensor | None,
        ) -> None:
            super().__init__()
            self.algo = algo
            self.weight = nn.Parameter(weight, requires_grad=False)
            self.bias = None if bias is None else nn.Parameter(bias.float(), requires_grad=False)
            self.input_scale: torch.Tensor | None
            self.pre_quant_scale: torch.Tensor | None
            self.register_buffer("input_scale", input_scale)
            self.register_buffer("pre_quant_scale", None if pre_quant_scale is None else pre_quant_scale.float())

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = x.float()
            if self.pre_quant_scale is not None:
                y = y * self.pre_quant_scale
            if self.algo == "FP8" and self.input_scale is not None:
                y = numerics.quantize_fp8_static(y, self.input_scale)
            elif self.algo == "NVFP4" and self.input_scale is not None:
                y = numerics.quantize_nvfp4_dynamic(y, self.input_scale)
            return torch.nn.functional.linear(y, self.weight, self.bias).to(x.dtype)

    return ServedLinear


def _dequantize(algo: str, tensors: dict[str, torch.Tensor], group_size: int | None) -> torch.Tensor:
    if algo == "FP8":
        return numerics.dequantize_fp8(tensors["weight"], tensors["weight_scale"])
    if algo == "NVFP4":
        return numerics.dequantize_nvfp4(tensors["weight"], tensors["weight_scale"], tensors["weight_scale_2"])
    return numerics.dequantize_int4_awq(tensors["weight"], tensors["weight_scale"], group_size or 128)


def _read_tensors(path: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    tensors: dict[str, torch.Tensor] = {}
    for shard in sorted(path.glob("*.safetensors")):
        tensors.update(load_file(str(shard)))
    return tensors


def _split_quantized(tensors: dict[str, torch.Tensor]) -> tuple[dict[str, dict[str, torch.Tensor]], dict[str, Any]]:
    """Per quantized layer (a prefix with a ``weight_scale``) its tensors; the rest as a plain state dict."""
    prefixes = {key.removesuffix(".weight_scale") for key in tensors if key.endswith(".weight_scale")}
    layers: dict[str, dict[str, torch.Tensor]] = {p: {} for p in prefixes}
    plain: dict[str, Any] = {}
    for key, tensor in tensors.items():
        prefix, _, leaf = key.rpartition(".")
        if prefix in layers and leaf not in ("k_scale", "v_scale"):  # KV scales ride on k_proj / v_proj
            layers[prefix][leaf] = tensor
        else:
            plain[key] = tensor
    return layers, plain


def _kv_scales(plain: dict[str, Any]) -> dict[str, torch.Tensor]:
    """``…self_attn.k_proj.k_scale`` / ``v_proj.v_scale`` (ModelOpt's names), by attention module and kind."""
    scales = {}
    for key in [k for k in plain if k.endswith((".k_scale", ".v_scale"))]:
        projection, kind = key.rsplit(".", 1)
        scales[f"{projection.rpartition('.')[0]}.{kind}"] = plain.pop(key)
    return scales


def _fp8_kv_sdpa(module: Any, query: Any, key: Any, value: Any, attention_mask: Any, **kwargs: Any) -> Any:
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    def round_trip(t: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
        return (numerics.round_fp8(t.float() / scale) * scale).to(t.dtype)

    key, value = round_trip(key, module.recommender_k_scale), round_trip(value, module.recommender_v_scale)
    return sdpa_attention_forward(module, query, key, value, attention_mask, **kwargs)


def _attach_kv_scales(model: nn.Module, scales: dict[str, torch.Tensor]) -> None:
    from transformers import AttentionInterface, PreTrainedModel

    modules = dict(model.named_modules())
    for name, tensor in scales.items():
        module, _, kind = name.rpartition(".")
        modules[module].register_buffer(f"recommender_{kind}", tensor.float().reshape(()))
    AttentionInterface.register(MODELOPT_KV_ATTENTION, _fp8_kv_sdpa)
    assert isinstance(model, PreTrainedModel)
    model.set_attn_implementation(MODELOPT_KV_ATTENTION)


def _install_served_layers(
    model: nn.Module, layers: dict[str, dict[str, torch.Tensor]], described: ModelOptConfig
) -> None:
    """Put a `ServedLinear` in place of every quantized linear layer, its weight dequantized from the checkpoint."""
    from torch import nn

    served = _served_linear_class()
    for prefix, tensors in layers.items():
        parent_name, _, child = prefix.rpartition(".")
        original = model.get_submodule(prefix)
        assert isinstance(original, nn.Linear), prefix  # ModelOpt quantizes linear layers only
        expected = tuple(original.weight.shape)
        weight = _dequantize(described.quant_algo, tensors, described.group_size)
        if tuple(weight.shape) != expected:
            raise BadInputError(
                "--checkpoint",
                f"{prefix} holds {tuple(weight.shape)}, the architecture {expected}",
                "give the checkpoint its own config.json",
            )
        layer = served(
            weight,
            tensors.get("bias"),
            described.quant_algo,
            tensors.get("input_scale"),
            tensors.get("pre_quant_scale"),
        )
        setattr(model.get_submodule(parent_name), child, layer)


def load_modelopt_checkpoint(path: Path, device: DeviceInfo) -> nn.Module:
    """The ModelOpt checkpoint at `path` as its engines serve it (module docstring), on `device`."""
    return load_served_checkpoint(path, device, read_modelopt_config(path))


def load_served_checkpoint(path: Path, device: DeviceInfo, described: ModelOptConfig) -> nn.Module:
    """The checkpoint at `path`, whose quantized layers hold ``weight``/``weight_scale``/``input_scale`` as
    `described` says, with every such layer a `ServedLinear` (also Quark's FP8 export: the same tensor names)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.from_pretrained(str(path))
    if hasattr(config, "quantization_config"):
        del config.quantization_config  # built plain; the quantized layers are put in below
    model: nn.Module = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)  # type: ignore[no-untyped-call]
    layers, plain = _split_quantized(_read_tensors(path))
    kv_scales = _kv_scales(plain) if described.kv_cache_quant_algo == "FP8" else {}
    _install_served_layers(model, layers, described)
    missing, unexpected = model.load_state_dict(plain, strict=False)
    left = [k for k in missing if not _is_quantized_or_tied(k, layers, config)]
    if left or unexpected:
        raise BadInputError(
            "--checkpoint",
            f"{path} does not match its architecture (missing {left[:3]}, unexpected {unexpected[:3]})",
            "give a checkpoint written by ModelOpt's HF export",
        )
    if kv_scales:
        _attach_kv_scales(model, kv_scales)
    target = "cuda" if device.kind in ("cuda", "rocm") else "cpu"
    return model.to(target).eval()


def _is_quantized_or_tied(key: str, layers: dict[str, Any], config: Any) -> bool:
    prefix = key.rpartition(".")[0]
    return prefix in layers or (key == "lm_head.weight" and bool(getattr(config, "tie_word_embeddings", False)))
