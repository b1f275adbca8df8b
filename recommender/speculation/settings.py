"""How speculative decoding is measured for a search: which documents, how long a prompt, how many new tokens.

The spec's ``space.speculative`` names the methods to try (``none``, ``ngram``, ``ngram:K``:
``recommender/speculation/methods.py``); this section says what their acceptance is measured on. The
documents are the use case's own text task (its fidelity text task unless ``task`` names another), the
split lm-eval scores: the text the use case serves, not calibration data.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["SpeculationSettings"]


class SpeculationSettings(BaseModel):
    """What a speculative method's acceptance is measured on (``recommender.speculation.acceptance``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    documents: Annotated[int, Field(ge=1, le=10_000)] = Field(
        default=16, description="Documents whose greedy continuations the proposer is replayed over (>= 1)."
    )
    prompt_tokens: Annotated[int, Field(ge=8, le=1_000_000)] = Field(
        default=512, description="Tokens of each document given as the prompt (fewer when the document is shorter)."
    )
    new_tokens: Annotated[int, Field(ge=2, le=4096)] = Field(
        default=64, description="Tokens the model generates greedily after each prompt."
    )
    task: str | None = Field(
        default=None,
        description="lm-eval task whose documents are used; default: the use "
        "case's fidelity text task, else its first task.",
    )
