"""Speculative decoding as the speed evaluation reads it: the measured acceptance, and who launches it.

A candidate with ``speculative`` other than ``none`` runs only where the acceptance was measured (the search
loads the model; ``plan`` and ``estimate`` do not) and only on engines that launch the proposer that was
replayed (each engine's ``speculation_refusal``).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Protocol

from recommender.engines import ENGINES_BY_NAME
from recommender.errors import SchemeUnavailableError
from recommender.evaluation.refusal import Refused
from recommender.speculation.methods import NONE

if TYPE_CHECKING:
    from recommender.config.candidate import Candidate
    from recommender.engines.eligibility import Eligibility
    from recommender.perf.sim.speculative import SpeculativeDecoding
    from recommender.quantize import QuantScheme

__all__ = ["SpeculationSource", "speculation_for"]


class SpeculationSource(Protocol):
    """Measures (or reads back) what a speculative method accepts on the model quantized with a scheme."""

    def decoding(self, method: QuantScheme, speculative: str) -> SpeculativeDecoding:
        """The method at its acceptance; SchemeUnavailableError when it cannot be measured here."""
        ...


def speculation_for(
    c: Candidate, served: Eligibility, source: SpeculationSource | None
) -> tuple[Eligibility, SpeculativeDecoding | None]:
    """The engines of `served` that launch `c` with its speculation and its measured acceptance (None: none);
    `Refused` ("runnable") where its speculation cannot run."""
    if c.speculative == NONE:
        return served, None
    if source is None:
        raise Refused(
            "runnable",
            f"speculative {c.speculative}: its acceptance is measured on the model by `recommender search`; "
            "this command loads no model",
        )
    engines = tuple(e for e in served.engines if not ENGINES_BY_NAME[e].speculation_refusal)
    if not engines:
        why = "; ".join(f"{e}: {ENGINES_BY_NAME[e].speculation_refusal}" for e in served.engines)
        raise Refused(
            "runnable", f"speculative {c.speculative}: no engine that launches {c.method} runs it as measured — {why}"
        )
    try:
        decoding = source.decoding(c.scheme, c.speculative)
    except SchemeUnavailableError as exc:
        raise Refused("runnable", f"speculative {c.speculative}: acceptance not measured ({exc})") from exc
    return replace(served, engines=engines), decoding
