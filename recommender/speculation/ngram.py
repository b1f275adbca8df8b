"""vLLM's n-gram proposer replayed over a greedy generation: how many tokens each verification step keeps.

The proposer (vllm/v1/spec_decode/ngram_proposer.py, ``_find_longest_matched_ngram_and_propose_tokens``)
looks for the longest suffix of the sequence, ``min_n`` to ``max_n`` tokens, that occurred earlier, takes
its earliest occurrence and drafts the (at most) ``k`` tokens that followed it. With greedy sampling the
target keeps the draft's longest prefix equal to its own greedy tokens, plus one token of its own, so the
replay needs only the target's greedy continuation: no second forward pass per step.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from recommender.speculation.methods import NgramMethod

__all__ = ["DecodeReplay", "propose", "replay"]


def propose(tokens: np.ndarray, method: NgramMethod) -> np.ndarray:
    """The draft for a sequence of `tokens`: what followed the earliest earlier occurrence of its longest suffix."""
    total = len(tokens)
    for n in range(min(method.max_n, total - 1), method.min_n - 1, -1):
        suffix = tokens[total - n :]
        # Windows starting at 0 .. total - n - 1: every earlier occurrence, overlapping the suffix or not.
        windows = np.lib.stride_tricks.sliding_window_view(tokens[: total - 1], n)
        hits = np.flatnonzero((windows == suffix).all(axis=1))
        if hits.size:
            start = int(hits[0]) + n
            return tokens[start : start + method.k]
    return tokens[:0]


@dataclass(frozen=True, slots=True)
class DecodeReplay:
    """One document's decode under speculation: steps taken, tokens they produced, draft tokens verified."""

    steps: int
    tokens: int
    drafted: int


def replay(prompt: np.ndarray, generated: np.ndarray, method: NgramMethod) -> DecodeReplay:
    """Speculative decode of `generated` (the target's greedy tokens after `prompt`), step by step.

    The first generated token comes from the prefill and is not counted; each later step drafts from the
    sequence so far, keeps the draft's prefix matching the greedy tokens, and adds one token of its own.
    """
    sequence = np.concatenate([prompt, generated])
    position = len(prompt) + 1  # tokens known after the prefill
    end = len(sequence)
    steps = drafted = 0
    while position < end:
        draft = propose(sequence[:position], method)
        truth = sequence[position : position + len(draft)]
        agree = draft[: len(truth)] == truth
        accepted = int(agree.argmin()) if not agree.all() else len(truth)
        steps += 1
        drafted += len(draft)
        position = min(end, position + accepted + 1)
    return DecodeReplay(steps, end - len(prompt) - 1, drafted)
