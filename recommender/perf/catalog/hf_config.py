"""A config.json as Hugging Face writes it, turned into the language model's fields that the shape model reads.

Multimodal wrappers (Llama-4-Scout, Qwen3.5, Kimi-K2.5, Gemma-3, Mistral-3) write the language model under
``text_config`` beside a ``vision_config`` (or an audio tower); remote-code ones write it under ``llm_config``
(InternVL-Chat) or ``language_config`` (DeepSeek-VL2). The language model is what is planned: its fields are read
from that mapping, and the wrapper's own top-level fields the text config lacks (``quantization_config``,
``torch_dtype``/``dtype``, ``architectures``, ``_name``, ``_hub_ids``) are kept beside them, as the engines read
them from the top of the file; ``architectures`` is the wrapper's even where the text config names its own (the
class the engines look up). The vision or audio tower is not priced; :func:`language_model` says which.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from recommender.errors import BadInputError

__all__ = ["ENGINE_READS_TOP", "TEXT_CONFIG_KEYS", "LanguageModel", "language_model"]

#: Where a wrapper keeps its language model: transformers' own decoder-side names
#: (``PretrainedConfig.get_text_config``, transformers 5.17.0: ``("decoder", "generator", "text_config")``;
#: its encoder-side ``text_encoder`` is no decoder to plan), then the remote-code names ``llm_config``
#: (OpenGVLab InternVL-Chat's configuration_internvl_chat.py) and ``language_config`` (deepseek-ai DeepSeek-VL2).
TEXT_CONFIG_KEYS = ("decoder", "generator", "text_config", "llm_config", "language_config")
#: Top-level fields the engines read from the top of the file even where the text config has its own.
ENGINE_READS_TOP = ("architectures",)
#: Words naming a tower that is not the language model (``vision_config``, ``audio_config``, ``speech_config``...).
_TOWER_WORDS = ("vision", "visual", "image", "video", "audio", "speech")


@dataclass(frozen=True, slots=True)
class LanguageModel:
    """The fields planned, the key they were nested under (None: a flat config) and the towers left unpriced."""

    fields: dict[str, Any]
    nested_under: str | None
    unpriced: tuple[str, ...]

    @property
    def note(self) -> str | None:
        """What a plan says of the wrapper: the language model it prices and the towers it does not."""
        if self.nested_under is None:
            return None
        towers = f"; {', '.join(self.unpriced)} not priced" if self.unpriced else ""
        return f"language model of {self.nested_under}{towers}"


def language_model(config: dict[str, Any], *, field: str) -> LanguageModel:
    """`config`'s language model: the one mapping under a `TEXT_CONFIG_KEYS` key over the wrapper's other top-level
    fields, or `config` itself when it nests none. Two of them are ambiguous (transformers raises there too)."""
    nested = [key for key in TEXT_CONFIG_KEYS if isinstance(config.get(key), dict)]
    if len(nested) > 1:
        raise BadInputError(
            field,
            f"the model config nests a language model under both {nested[0]} and {nested[1]}",
            "keep the decoder's fields under one of them, as transformers' get_text_config needs",
        )
    if not nested:
        return LanguageModel(config, None, ())
    key = nested[0]
    towers = tuple(
        name
        for name, value in config.items()
        if isinstance(value, dict) and name != key and any(word in name.lower() for word in _TOWER_WORDS)
    )
    wrapper = {name: value for name, value in config.items() if name != key and name not in towers}
    # The engines look the wrapper's own class up (Kimi-K2.5's text_config names DeepseekV3ForCausalLM, its top
    # KimiK25ForConditionalGeneration): the wrapper's names win over the text config's.
    top = {name: config[name] for name in ENGINE_READS_TOP if name in config}
    return LanguageModel({**wrapper, **config[key], **top}, key, towers)
