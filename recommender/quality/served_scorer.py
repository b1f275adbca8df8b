"""The hook by which a quality evaluation scores its tasks through a serving engine instead of in process.

Its own module so the quality layer names the shape it calls while the engine (started by the evaluation layer,
``evaluation/engine_quality.py``) stays above it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from recommender.quantize import QuantScheme

__all__ = ["ServedScorer"]


class ServedScorer(Protocol):
    """Scores a scheme's documents through a serving engine instead of in process (``evaluation/engine_quality.py``).

    One call per scheme with every task's whole budget: the engine is started on the scheme's checkpoint once, and
    the sequential looks read slices of what it scored. `engine` names it in cache keys and in the result.
    """

    engine: str

    def serves(self, method: QuantScheme) -> bool:
        """Whether the engine serves `method` here (a scheme it does not serve is scored in process, its reference
        too, so each comparison shares its numerics)."""
        ...

    def score(self, method: QuantScheme, docs: dict[str, tuple[str, list[int]]]) -> dict[str, dict[int, list[float]]]:
        """Per task (name -> (metric, ids)), each id's (numerator, denominator) as scored through the engine."""
        ...
