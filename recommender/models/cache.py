"""Keeps the most recently loaded quantized model, so quality runs and probes share one load.

One model at a time: quantized variants of a large model do not fit side by side, and
the search visits one method's trials together often enough that one slot pays off.
"""

from __future__ import annotations

import gc
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from recommender.device import DeviceInfo
from recommender.models.source import ModelSource
from recommender.quantize import QuantMethod
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

    @property
    def tokenizer(self) -> PreTrainedTokenizerBase:
        if self._tokenizer is None:
            self._tokenizer = self.source.load_tokenizer()
        return self._tokenizer

    def get(self, method: QuantMethod) -> nn.Module:
        """The model quantized with `method` on this cache's device (MethodUnavailableError if it can't run)."""
        if self._name == method.name and self._model is not None:
            return self._model
        self.release()
        model = method.load(self.source, self.device, self.context)
        self._name, self._model = method.name, model
        self.loads += 1
        return model

    def release(self) -> None:
        self._name, self._model = None, None
        gc.collect()
