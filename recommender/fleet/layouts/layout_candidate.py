"""How the study hands layout sizing to evaluation: the one function it injects as the evaluator's `LayoutPolicy`.

``evaluation/`` sits below ``fleet/`` and cannot import the layouts' planners, so ``CandidateEvaluator`` takes
``other_layouts``, a callable from a candidate to its result (``evaluation.evaluator.LayoutPolicy``), the way it
takes its quality policy. ``study/prepare.py`` binds ``evaluate_layout`` to the search's evaluator, the spec's link,
model and expert routing (``functools.partial``) and passes it where the spec's space holds a layout other than
aggregated tensor parallelism; without it such candidates are pruned. Each layout's candidate module prices the
candidate with the same planner as its `plan` flag.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from recommender.fleet.layouts.disaggregated_candidate import evaluate_disaggregated
from recommender.fleet.layouts.expert_parallel_candidate import ExpertRouting, evaluate_expert_parallel

if TYPE_CHECKING:
    from recommender.config.candidate import Candidate
    from recommender.evaluation.candidate import CandidateResult
    from recommender.evaluation.performance import PerformanceEvaluator

__all__ = ["evaluate_layout"]


def evaluate_layout(
    performance: PerformanceEvaluator, c: Candidate, *, link: str, model: str = "", experts: ExpertRouting | None = None
) -> CandidateResult:
    """A candidate of another layout than aggregated tensor parallelism: expert parallelism or disaggregated pools."""
    if c.expert_parallel != 1:
        return evaluate_expert_parallel(performance, c, link=link, experts=experts)
    return evaluate_disaggregated(performance, c, link=link, model=model)
