"""The speculative methods a search may try: ``none``, or ``ngram`` / ``ngram:K`` (vLLM's n-gram proposer).

N-gram (prompt lookup) needs nothing but the target model: it drafts the tokens that followed the latest
suffix of the sequence where that suffix occurred before, so what it accepts can be measured on the use
case's own documents with the model as quantized (``acceptance.py``). Draft models, EAGLE heads and MTP
layers need a second network and its cost on each GPU; they are refused with that reason, not guessed.

vLLM's knobs (vllm/config/speculative.py; docs/features/spec_decode/n_gram.md): ``num_speculative_tokens`` (no
default: always given), ``prompt_lookup_min`` and ``prompt_lookup_max`` (both 5 when neither is set); the
emitted command gives all three, the values measured here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["DEFAULT_DRAFT_TOKENS", "NONE", "NgramMethod", "parse_speculative", "speculative_error"]

#: No speculation: every decode step samples one token per sequence.
NONE = "none"
#: Draft tokens per step when a spec says plain ``ngram``; vLLM's docs' example uses 5, lookup of 2-4 tokens.
DEFAULT_DRAFT_TOKENS = 4
#: Most draft tokens a spec may ask for (vLLM's docs suggest up to 16-32 for suffix decoding; n-gram far less).
MAX_DRAFT_TOKENS = 16
_NGRAM = re.compile(r"ngram(?::(\d{1,2}))?")


@dataclass(frozen=True, slots=True)
class NgramMethod:
    """vLLM's n-gram proposer: the longest suffix of 2..4 tokens that occurred before, and the `k` tokens after it."""

    k: int = DEFAULT_DRAFT_TOKENS
    min_n: int = 2
    max_n: int = 4

    @property
    def name(self) -> str:
        return "ngram" if self.k == DEFAULT_DRAFT_TOKENS else f"ngram:{self.k}"


def speculative_error(value: str) -> str | None:
    """Why `value` is not a speculative method this tool runs (None: it is one)."""
    if value == NONE:
        return None
    match = _NGRAM.fullmatch(value)
    if match is None:
        kind = value.split(":", 1)[0]
        if kind in ("draft", "eagle", "eagle3", "mtp", "suffix", "medusa"):
            return (
                f"{value!r}: {kind} speculation needs a second network (or vLLM's arctic-inference plugin) whose "
                "cost per GPU this tool does not model yet; use none, ngram or ngram:K"
            )
        return f"{value!r} is not a speculative method; use none, ngram or ngram:K (K draft tokens, 1-16)"
    k = int(match.group(1) or DEFAULT_DRAFT_TOKENS)
    if not 1 <= k <= MAX_DRAFT_TOKENS:
        return f"{value!r}: K must be 1 to {MAX_DRAFT_TOKENS} draft tokens"
    return None


def parse_speculative(value: str) -> NgramMethod | None:
    """The method `value` names (None for ``none``); ValueError naming the fix for anything else."""
    why = speculative_error(value)
    if why is not None:
        raise ValueError(why)
    if value == NONE:
        return None
    match = _NGRAM.fullmatch(value)
    assert match is not None  # speculative_error accepted it
    return NgramMethod(k=int(match.group(1) or DEFAULT_DRAFT_TOKENS))
