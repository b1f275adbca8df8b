"""What n-gram speculation accepts on the use case's own documents, measured with the model as it is served.

Each document's text is cut into a prompt (its first ``prompt_tokens`` tokens) and the model, quantized as
the candidate is (acceptance moves with quantization: a quantized model's greedy tokens differ), continues it
greedily for ``new_tokens`` tokens; vLLM's proposer is replayed over that continuation (``ngram.py``). The
figures are ratios over every step of every document: tokens gained per step (accepted drafts plus one) and
draft tokens verified per step, with a bootstrap interval over documents (the unit that varies: one file
copies its identifiers, another does not).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from recommender.speculation.ngram import DecodeReplay

if TYPE_CHECKING:
    from collections.abc import Sequence

    from torch import nn

    from recommender.speculation.methods import NgramMethod

__all__ = ["AcceptanceRate", "greedy_continuations", "rate_of"]

#: Bootstrap resamples of the documents, and the interval's two-sided confidence.
RESAMPLES = 2000
CONFIDENCE = 0.95


@dataclass(frozen=True, slots=True)
class AcceptanceRate:
    """Tokens per step and drafts per step of one method on one model and scheme, over `documents` documents.

    Args:
        method: the speculative method's name ("ngram", "ngram:6").
        tokens_per_step: accepted draft tokens plus one, per verification step (all steps pooled).
        tokens_per_step_low / tokens_per_step_high: its bootstrap interval over documents at `CONFIDENCE`.
        drafted_per_step: draft tokens verified per step (steps with no match draft none).
        documents: documents measured; steps: verification steps replayed.
        evidence: where and on what it was measured, as reports say it.
    """

    method: str
    tokens_per_step: float
    tokens_per_step_low: float
    tokens_per_step_high: float
    drafted_per_step: float
    documents: int
    steps: int
    evidence: str


def rate_of(replays: Sequence[DecodeReplay], method: NgramMethod, evidence: str, *, seed: int = 0) -> AcceptanceRate:
    """The pooled ratios over `replays` (one per document) and the tokens-per-step interval."""
    steps = np.array([r.steps for r in replays], dtype=float)
    tokens = np.array([r.tokens for r in replays], dtype=float)
    drafted = np.array([r.drafted for r in replays], dtype=float)
    if steps.sum() == 0:
        raise ValueError("no document generated more than one token: nothing to measure acceptance on")
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(replays), size=(RESAMPLES, len(replays)))
    resampled = tokens[picks].sum(axis=1) / np.maximum(steps[picks].sum(axis=1), 1.0)
    tail = (1 - CONFIDENCE) / 2 * 100
    low, high = np.percentile(resampled, [tail, 100 - tail])
    return AcceptanceRate(
        method=method.name,
        tokens_per_step=float(tokens.sum() / steps.sum()),
        tokens_per_step_low=float(low),
        tokens_per_step_high=float(high),
        drafted_per_step=float(drafted.sum() / steps.sum()),
        documents=len(replays),
        steps=int(steps.sum()),
        evidence=evidence,
    )


def greedy_continuations(
    model: nn.Module,
    prompts: Sequence[Sequence[int]],
    *,
    new_tokens: int,
    eos_token_id: int | None,
    batch_size: int = 16,
) -> list[np.ndarray]:
    """The model's greedy continuation of each prompt (at most `new_tokens` tokens, cut after an EOS).

    Prompts of one length are generated `batch_size` at a time (no padding, so batching changes nothing but
    the time); others one by one.
    """
    import torch

    device = next(model.parameters()).device
    continuations: list[np.ndarray] = []
    same_length = len({len(p) for p in prompts}) == 1
    step = batch_size if same_length else 1
    with torch.inference_mode():
        for start in range(0, len(prompts), step):
            ids = torch.tensor([list(p) for p in prompts[start : start + step]], dtype=torch.long, device=device)
            out = model.generate(  # type: ignore[operator]
                input_ids=ids,
                attention_mask=torch.ones_like(ids),
                max_new_tokens=new_tokens,
                do_sample=False,
                pad_token_id=eos_token_id if eos_token_id is not None else 0,
            )
            for row in out[:, ids.shape[1] :].cpu().numpy():
                ends = np.flatnonzero(row == eos_token_id) if eos_token_id is not None else np.array([], dtype=int)
                continuations.append(row[: int(ends[0]) + 1] if ends.size else row)
    return continuations
