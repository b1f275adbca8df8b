"""The traffic one configuration must carry, as the simulator draws it: rate, lengths and what prompts share.

Apart from ``serving.py`` (which re-exports it) so the modules that simulate a pool or a transfer can name it
without the serving estimate.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from recommender.perf.sim.conversation import Conversation
    from recommender.perf.sim.workload import Lengths, SharedPrefix

__all__ = ["TrafficLoad"]


@dataclass(frozen=True, slots=True)
class TrafficLoad:
    """The traffic a configuration must carry, as the simulator draws it (``config.traffic.traffic_load`` builds it
    from the spec): the target rate, the mean lengths and the length models (fixed, lognormal or a trace's)."""

    requests_per_second: float
    prompt_tokens: int
    output_tokens: int
    prompt: Lengths
    output: Lengths
    #: Prompts sharing a prefix (a system prompt, templates) that prefix caching serves; None: nothing shared.
    prefix: SharedPrefix | None = None
    #: Multi-turn sessions whose turns carry their history (``conversation.py``); None: single requests.
    conversation: Conversation | None = None
    #: Whether the engine keeps computed prefixes (all four engines do by default; False: the lever turned off).
    cache_prefixes: bool = True

    @property
    def shares_prompts(self) -> bool:
        """Whether any prompt shares tokens another computed (a prefix cache's hit rate means something)."""
        return self.prefix is not None or self.conversation is not None

    @property
    def sharing(self) -> dict[str, Any]:
        """What `make_workload` draws besides the lengths: the prefixes, the conversations, whether they are cached."""
        return {
            "prefix": self.prefix,
            "conversation": self.conversation,
            "cache_prefixes": self.cache_prefixes,
        }
