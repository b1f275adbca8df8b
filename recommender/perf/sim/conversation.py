"""Multi-turn conversations: each turn's prompt carries the conversation so far, which prefix caching can serve.

A chat or agent session sends its whole history with every turn: turn j's prompt is turn j-1's prompt, the
answer it got and a new message. An engine with prefix caching keeps a finished turn's KV blocks, so the next
turn prefills only the new message when it arrives before those blocks are evicted; without it, the whole
history again. Conversations start as Poisson arrivals at the request rate over the turns; turn j arrives
`think_time_s` after turn j-1 did (open loop: the user's think time is taken to include reading the answer,
so a turn that arrives before the previous one finished simply finds less cached).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import numpy.typing as npt

__all__ = ["Conversation", "ConversationRequests", "conversation_requests", "conversations_for"]


@dataclass(frozen=True, slots=True)
class Conversation:
    """Sessions of `turns` requests, `think_time_s` apart; every later turn adds `message_tokens` new tokens."""

    turns: int
    think_time_s: float
    message_tokens: int

    def __post_init__(self) -> None:
        if self.turns < 2 or not self.think_time_s > 0 or self.message_tokens < 1:
            raise ValueError(f"need turns >= 2, think_time_s > 0 and message_tokens >= 1, got {self}")

    def longest_prompt(self, first_prompt: int, output: int) -> int:
        """The last turn's prompt: the first prompt, then every answer and new message before it."""
        return first_prompt + (self.turns - 1) * (output + self.message_tokens)

    def mean_prompt(self, first_prompt: int, output: int) -> int:
        """The mean prompt over a conversation's turns (what the traffic's tokens per request are)."""
        return first_prompt + round((self.turns - 1) / 2 * (output + self.message_tokens))


@dataclass(frozen=True)
class ConversationRequests:
    """The requests of a set of conversations, in arrival order (arrays of one entry per request)."""

    arrivals_s: npt.NDArray[np.float64]
    prompt_tokens: npt.NDArray[np.int64]
    output_tokens: npt.NDArray[np.int64]
    prefix_keys: npt.NDArray[np.int64]
    prefix_tokens: npt.NDArray[np.int64]
    history_keys: npt.NDArray[np.int64]


def conversation_requests(
    *,
    first: npt.NDArray[np.int64],
    outputs: npt.NDArray[np.int64],
    starts: npt.NDArray[np.float64],
    conversation: Conversation,
    first_keys: npt.NDArray[np.int64],
    first_shared: npt.NDArray[np.int64],
    own_key0: int,
    n_requests: int,
) -> ConversationRequests:
    """The first `n_requests` turns, in arrival order, of conversations starting at `starts`.

    `first` holds each conversation's first prompt, `first_keys`/`first_shared` what it reads from a shared
    prefix (a system prompt; -1/0: nothing), `outputs` one answer length per turn (conversation by conversation).
    A later turn reads its conversation's history under the conversation's own key (`own_key0` + its index);
    every turn, when it finishes, keeps its whole sequence under that key for the next.
    """
    turns, n_conv = conversation.turns, len(first)
    out = outputs.reshape(n_conv, turns)
    prompts = np.empty((n_conv, turns), dtype=np.int64)
    prompts[:, 0] = first
    for j in range(1, turns):
        prompts[:, j] = prompts[:, j - 1] + out[:, j - 1] + conversation.message_tokens
    history_keys = np.repeat(own_key0 + np.arange(n_conv, dtype=np.int64)[:, None], turns, axis=1)
    keys = history_keys.copy()
    keys[:, 0] = first_keys
    shared = np.zeros((n_conv, turns), dtype=np.int64)
    shared[:, 0] = first_shared
    shared[:, 1:] = prompts[:, :-1] + out[:, :-1]
    arrivals = starts[:, None] + conversation.think_time_s * np.arange(turns)[None, :]
    order = np.argsort(arrivals, axis=None, kind="stable")[:n_requests]
    arrived = arrivals.ravel()[order]
    return ConversationRequests(
        arrived - arrived[0],
        prompts.ravel()[order],
        out.ravel()[order],
        keys.ravel()[order],
        shared.ravel()[order],
        history_keys.ravel()[order],
    )


def conversations_for(n_requests: int, turns: int) -> int:
    """Conversations whose turns cover `n_requests` requests."""
    return math.ceil(n_requests / turns)
