"""Keeps the most recently loaded quantized model, so quality runs and probes share one load.

One model at a time: quantized variants of a large model do not fit side by side, and
the search visits one method's trials together often enough that one slot pays off.
"""

from __future__ import annotations

import gc
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from recommender.device import DeviceInfo, quality_compute_dtype
from recommender.models.source import ModelSource
from recommender.quantize import QuantScheme
from recommender.quantize.checkpoint import QuantizeContext

if TYPE_CHECKING:
    from torch import nn
    from transformers import PreTrainedTokenizerBase


@dataclass
class ModelCache:
    source: ModelSource
    device: DeviceInfo
    #: Where checkpoint schemes keep their checkpoints and get calibration documents.
    context: QuantizeContext | None = None
    loads: int = 0
    _name: str | None = field(default=None, repr=False)
    _model: nn.Module | None = field(default=None, repr=False)
    _tokenizer: PreTrainedTokenizerBase | None = field(default=None, repr=False)
    #: What every model here computes in (`device.quality_compute_dtype`): float32 on a CPU without bfloat16.
    compute_dtype: str = field(init=False)

    def __post_init__(self) -> None:
        self.compute_dtype = quality_compute_dtype(self.device)

    @property
    def tokenizer(self) -> PreTrainedTokenizerBase:
        if self._tokenizer is None:
            self._tokenizer = self.source.load_tokenizer()
        return self._tokenizer

    def get(self, method: QuantScheme) -> nn.Module:
        """The model quantized with `method` on this cache's device (SchemeUnavailableError if it can't run)."""
        if self._name == method.name and self._model is not None:
            return self._model
        self.release()
        model = method.load(self.source, self.device, self.context)
        if self.compute_dtype == "float32":
            upcast_to_float32(model)
        self._name, self._model = method.name, model
        self.loads += 1
        return model

    def release(self) -> None:
        self._name, self._model = None, None
        gc.collect()


def upcast_to_float32(model: nn.Module) -> None:
    """Every bfloat16 parameter and buffer of `model` in float32, and bitsandbytes' 4-bit layers computing in it.

    The values are the same (bfloat16 widens exactly): weights as stored, scales and zero points as the
    scheme made them; only the arithmetic around them is float32. Quantized storage (bitsandbytes' packed
    uint8, int8) is not floating and stays as it is; tensor subclasses (torchao) are quantized from float32
    by their loader instead.
    """
    import torch

    for module in model.modules():
        if isinstance(getattr(module, "compute_dtype", None), torch.dtype):  # bitsandbytes Linear4bit
            setattr(module, "compute_dtype", torch.float32)  # noqa: B010  (not a declared attribute of nn.Module)
        for _, param in list(module.named_parameters(recurse=False)):
            if param.dtype == torch.bfloat16 and type(param.data) is torch.Tensor:
                param.data = param.data.float()
        for name, buffer in list(module.named_buffers(recurse=False)):
            if buffer.dtype == torch.bfloat16 and type(buffer) is torch.Tensor:
                module._buffers[name] = buffer.float()
    config = getattr(model, "config", None)
    if config is not None:
        config.dtype = torch.float32
