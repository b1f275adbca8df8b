"""The workload a deployment is sized for: the traffic it serves and the latency limits it must keep.

Apart from the search spec (`config/spec.py`) because `plan`, the fleet planner and the report take these two
without a spec: a command line builds them from flags. The spec holds them as its ``traffic`` and ``sla``.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, model_validator

from recommender.config.candidate import MAX_TOKENS, TokenCount
from recommender.config.strict import StrictModel
from recommender.config.traffic import (
    MAX_RPS,
    MIN_RPS,
    ConversationTurns,
    PromptPrefix,
    TrafficProfile,
    check_prefix_inside_rows,
    traffic_defaults,
)
from recommender.errors import BadInputError

#: A latency SLA in milliseconds: one day (far beyond any SLA; a typo of three extra zeros is refused).
MAX_SLA_MS = 86_400_000.0

Millis = Annotated[float, Field(gt=0, le=MAX_SLA_MS)]


class Traffic(StrictModel):
    """The load to serve: request shape and rate; with a `profile` (recommender/config/traffic.py), its peak hour
    and mean lengths unless given."""

    prompt_tokens: TokenCount
    output_tokens: TokenCount
    requests_per_second: Annotated[float, Field(ge=MIN_RPS, le=MAX_RPS)]
    profile: TrafficProfile | None = Field(default=None, description="Hourly rates or a trace over a day.")
    shared_prefix: PromptPrefix | None = Field(
        default=None, description="A prompt prefix requests share (system prompt, templates): prefix caching."
    )
    conversation: ConversationTurns | None = Field(
        default=None, description="Multi-turn sessions whose turns carry their history (prefix caching serves it)."
    )

    _profile_defaults = model_validator(mode="before")(traffic_defaults)

    @model_validator(mode="after")
    def _prefix_inside_prompt(self) -> Traffic:
        prefix, profile = self.shared_prefix, self.profile
        if prefix is not None and profile is not None and profile.requests is not None:  # each row, not their mean
            check_prefix_inside_rows(prefix, profile.requests, profile.trace)
        if prefix is not None and prefix.tokens >= self.prompt_tokens:
            raise ValueError(
                f"shared_prefix.tokens ({prefix.tokens}) must be shorter than prompt_tokens ({self.prompt_tokens}), "
                "which counts the prefix: give the whole prompt's length"
            )
        if self.max_model_len > MAX_TOKENS:
            field = "traffic.conversation" if self.conversation else "traffic.prompt_tokens"
            raise BadInputError(
                field,
                f"the longest request's {self.longest_prompt_tokens:,} prompt tokens + "
                f"{self.output_tokens:,} output tokens exceed {MAX_TOKENS:,}",
                "fewer turns or shorter messages" if self.conversation else "shorten the request",
            )
        return self

    @property
    def longest_prompt_tokens(self) -> int:
        """The longest prompt a request carries: a conversation's last turn, else `prompt_tokens`."""
        c = self.conversation
        return c.as_sessions().longest_prompt(self.prompt_tokens, self.output_tokens) if c else self.prompt_tokens

    @property
    def max_model_len(self) -> int:
        """The longest request, prompt and output, in tokens: what one request needs of the KV cache (the memory
        check) and what an engine's launch must accept (vLLM's ``--max-model-len``)."""
        return self.longest_prompt_tokens + self.output_tokens

    @property
    def mean_prompt_tokens(self) -> int:
        """The mean prompt over requests: a conversation's mean turn, else `prompt_tokens`."""
        c = self.conversation
        return c.as_sessions().mean_prompt(self.prompt_tokens, self.output_tokens) if c else self.prompt_tokens


#: The default confidence of SLA checks on calibrated figures.
DEFAULT_SLA_CONFIDENCE = 0.9


class LatencySLA(StrictModel):
    """P99 latency limits, in milliseconds."""

    ttft_p99_ms: Millis = Field(description="Time to first token, 99th percentile.")
    tpot_p99_ms: Millis = Field(description="Time per output token after the first, 99th percentile.")
    confidence: float = Field(
        default=DEFAULT_SLA_CONFIDENCE,
        ge=0.5,
        le=0.99,
        description="Confidence of SLA checks on calibrated GPU figures: the traffic is simulated with every step "
        "at the one-sided upper bound of its held-out error at this level (prefill and decode apart), and that "
        "simulation's P99s must meet the SLA.",
    )
