"""The quality of one method for one use case, as every other module reads it.

Kept apart from the evaluator (which needs lm-eval and the study's database) so that result
types import cheaply: the candidate result, the report and the release gate only read it.
"""

from __future__ import annotations

from dataclasses import dataclass

from recommender.quality.fidelity import FidelityResult
from recommender.quality.verdict import Check, Verdict

#: The compute dtype of a result measured through a serving engine (``endpoint_eval.py``): the engine's own.
AS_SERVED = "as served"


@dataclass(frozen=True)
class QualityResult:
    """Everything known about one method's quality for the use case."""

    method: str
    precision: str
    verdict: Verdict
    checks: list[Check]
    fidelity: FidelityResult | None
    device: str
    seconds: float
    docs_evaluated: int = 0
    reason: str = ""
    #: The dtype the reference and this method computed in (``device.quality_compute_dtype``): float32 on a CPU
    #: without native bfloat16; `device` then says so too.
    compute_dtype: str = "bfloat16"
