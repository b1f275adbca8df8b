"""A candidate's whole evaluation, cheapest first: runnable, memory, speed and cost, then quality.

Speed and cost come from the `PerformanceEvaluator` (the same pipeline `recommender plan`
runs). Quality is measured last, and only where it can decide: a candidate that already
breaks a latency limit, costs more per month than a feasible candidate found earlier (tie
tolerance included), or loses the tie to one before quality is compared, cannot be
recommended, so its quality stays "unverified" with that reason — unless its method's
quality is already known. That rule is the decision's (`decision.rules.quality_skip`), a layer
above: the search injects it as the evaluator's `skip_quality` policy, the way optuna's study
holds a pruner the objective never imports.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from recommender.config.candidate import AGGREGATED, Candidate
from recommender.evaluation.candidate import MARGIN_BOUND, CandidateResult, quality_margin
from recommender.evaluation.load_curve import LoadCurve, load_curve
from recommender.evaluation.performance import PerformanceEvaluator
from recommender.evaluation.refusal import Refused
from recommender.quality.evaluate import QualityEvaluator
from recommender.quality.result import QualityResult
from recommender.quality.verdict import Check
from recommender.speculation.methods import NONE

#: Why a candidate cannot be recommended whatever its quality, given its speed-and-cost result and the results known
#: so far (every worker's), or None when its quality decides.
QualityPolicy = Callable[[CandidateResult, Sequence[CandidateResult]], str | None]
#: A disaggregated or expert-parallel candidate judged on speed, memory and cost, a layer above: the search injects
#: ``fleet/layouts/layout_candidate.py``'s `evaluate_layout` (``disaggregated_candidate.py``,
#: ``expert_parallel_candidate.py``), as it injects the quality policy.
LayoutPolicy = Callable[[Candidate], CandidateResult]


def describe_broken_check(check: Check) -> str:
    if check.value is None:
        return f"quality: {check.name} {check.metric} unverified"
    base = "" if check.baseline is None else f" (bf16 {check.baseline:.4g})"
    verb = "is inconclusive against" if check.verdict == "inconclusive" else "breaks"
    return f"quality: {check.name} {check.metric} {check.value:.4g}{base} {verb} {check.threshold}"


def with_quality(result: CandidateResult, quality: QualityResult) -> CandidateResult:
    """`result` with its quality known: the quality constraint and the checks it breaks added."""
    normalised = quality_margin(quality)
    if normalised is None:  # a check without its threshold's size: its raw margin (the same sign)
        normalised = max(ch.margin for ch in quality.checks if ch.margin is not None)
    margin = max(-MARGIN_BOUND, min(MARGIN_BOUND, normalised))
    if quality.reason:  # nothing measured: one line saying why, not one per check
        quality_broken = [f"quality: unverified ({quality.reason})"]
    else:
        quality_broken = [describe_broken_check(ch) for ch in quality.checks if ch.verdict != "pass"]
    return replace(
        result,
        constraints=replace(result.constraints, quality=margin),
        broken=quality_broken + result.broken,
        quality=quality,
    )


@dataclass
class CandidateEvaluator:
    """Evaluates candidates of one study: speed and cost per candidate, quality once per method where it can decide.

    Args:
        performance: speed and cost.
        quality: quality, once per method.
        skip_quality: says when quality cannot decide (the search passes `decision.rules.quality_skip`).
        other_layouts: sizes and prices a disaggregated or expert-parallel candidate (None: such candidates are pruned).
    """

    performance: PerformanceEvaluator
    quality: QualityEvaluator
    skip_quality: QualityPolicy
    other_layouts: LayoutPolicy | None = None

    @property
    def probes_run(self) -> int:
        return self.performance.probes_run

    def evaluate(self, c: Candidate, *, known: Sequence[CandidateResult] = ()) -> CandidateResult:
        """Everything about `c`, cheapest checks first; `known`: the results stored so far (`skip_quality` reads them).

        A disaggregated or expert-parallel candidate is sized by `other_layouts`; its quality is its scheme's, measured
        (or read back) once whatever the layout, since every layout serves the same checkpoint.
        A speculative candidate is evaluated once its scheme's quality passed without speculation (its twin):
        greedy verification keeps the target's own tokens, so quality is the twin's, and measuring the
        acceptance (quantizing and generating) is spent only on schemes that can be recommended.
        """
        if c.layout != AGGREGATED or c.expert_parallel != 1:
            result = self._other_layout(c)
        elif c.speculative != NONE and (refused := self._unverified_for_speculation(c, known)) is not None:
            return refused
        else:
            result = self.performance.evaluate(c)
        if result.status != "evaluated":
            return result
        method = c.scheme
        skip = None if self.quality.has(method.name) else self.skip_quality(result, known)
        quality = self.quality.evaluate(method) if skip is None else self.quality.not_evaluated(method, skip)
        return with_quality(result, quality)

    def _other_layout(self, c: Candidate) -> CandidateResult:
        if self.other_layouts is None:
            return Refused("runnable", "disaggregated pools and expert parallelism are not sized here").result(c)
        return self.other_layouts(c)

    def _unverified_for_speculation(self, c: Candidate, known: Sequence[CandidateResult]) -> CandidateResult | None:
        """None when `c`'s scheme passed its quality checks (evaluating its twin without speculation first, which
        measures the quality where it can matter); else `c` pruned, saying why."""
        method = c.scheme
        if not self.quality.has(method.name):
            self.evaluate(replace(c, speculative=NONE), known=known)
        quality = self.quality.evaluate(method) if self.quality.has(method.name) else None
        if quality is not None and quality.verdict == "pass":
            return None
        verdict = (
            "not measured (its twin without speculation cannot be recommended)"
            if quality is None
            else (f"{quality.verdict}" + (f" ({quality.reason})" if quality.reason else ""))
        )
        return Refused(
            "quality",
            f"{method.name}'s quality is {verdict}; speculative acceptance is measured only "
            "on schemes whose quality passed",
        ).result(c)

    def load_curve(self, c: Candidate) -> LoadCurve | None:
        return load_curve(self.performance, c)
