"""The release gate's quality rules on per-document scores: paired intervals over the same documents, not points."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from recommender.config.candidate import Candidate
from recommender.decision.recommendation import build
from recommender.decision.rules import pick
from recommender.evaluation.candidate import CandidateResult
from recommender.evaluation.constraints import Constraints
from recommender.evaluation.evaluator import with_quality
from recommender.perf.pricing import CostEstimate
from recommender.quality.result import QualityResult
from recommender.quality.statistics import paired_bootstrap
from recommender.quality.suite import TaskThreshold, Threshold
from recommender.quality.verdict import overall, task_check
from recommender.releases.gate import GateLimits, gate
from recommender.releases.history import ReleaseStudy

ACC = TaskThreshold(task="next_line", metric="acc", higher_is_better=True, threshold=Threshold(max_absolute_drop=0.05))


def _pairs(scores: list[int]) -> np.ndarray:
    return np.asarray([[s, 1.0] for s in scores], dtype=float)


def _flip(scores: list[int], losses: int = 0, gains: int = 0) -> list[int]:
    """`scores` with the first `losses` right answers made wrong and the first `gains` wrong ones made right."""
    out = list(scores)
    right, wrong = [i for i, s in enumerate(scores) if s], [i for i, s in enumerate(scores) if not s]
    for i in right[:losses]:
        out[i] = 0
    for i in wrong[:gains]:
        out[i] = 1
    return out


def _candidate(precision: str, method: str, usd: float, reference: list[int], variant: list[int]) -> CandidateResult:
    same = method == "baseline"
    paired = paired_bootstrap(ACC, _pairs(reference), _pairs(variant), same_model=same)
    checks = [task_check(ACC, paired)]
    cost = CostEstimate(
        usd_per_1m_tokens=usd,
        replicas=1,
        accelerators=1,
        usd_per_month=1000 * usd,
        price_per_hour_usd=1.0,
        price_source="t",
    )
    bare = CandidateResult(Candidate(precision, method, "l4", 8), "evaluated", Constraints(quality=1.0), [], cost=cost)
    return with_quality(bare, QualityResult(method, precision, overall(checks), checks, None, "cpu", 0.0))


def _release(name: str, bf16: list[int], int8: list[int] | None = None) -> ReleaseStudy:
    results = [_candidate("bf16", "baseline", 1.0, bf16, bf16)]
    if int8 is not None:
        results.append(_candidate("int8", "torchao-int8-wo", 0.5, bf16, int8))
    rec = build(results, winner=pick(results), current=results[0], study=name, model="m", release=name, use_case="u")
    return ReleaseStudy(name, f"run-{name}", name, "u", f"sha256:{name}", 0, rec, results)


def _quality_lines(candidate: ReleaseStudy, against: ReleaseStudy, drop_pct: float) -> list[str]:
    return gate(candidate, against, GateLimits(max_quality_drop_pct=drop_pct))


V1_BF16 = [1, 1, 0, 1, 0] * 200  # 1000 documents, 60 % right


def test_bf16_across_releases_is_judged_on_a_paired_interval() -> None:
    # Equal point values on 30 documents: a point comparison passes; 30 documents cannot rule out a 1 % drop.
    small = V1_BF16[:30]
    lines = _quality_lines(_release("v2", small), _release("v1", small), 1.0)
    assert len(lines) == 1 and lines[0].startswith("bf16 next_line/acc: cannot rule out drop against release v1")
    assert "on 30 documents" in lines[0]
    # 1000 documents where v2 loses 60 of v1's right answers: the whole interval is past 1 %.
    worse = _quality_lines(_release("v2", _flip(V1_BF16, losses=60)), _release("v1", V1_BF16), 1.0)
    assert len(worse) == 1 and "drop against release v1 +10.00%" in worse[0] and "> 1 %" in worse[0]
    assert "cannot rule out" not in worse[0]
    # 50 answers lost and 50 gained: no net drop; paired, the interval is within 5 % (two independent
    # 1000-document samples of a 60 % accuracy would give about +-7 % relative, and could not pass).
    swapped = _flip(V1_BF16, losses=50, gains=50)
    assert _quality_lines(_release("v2", swapped), _release("v1", V1_BF16), 5.0) == []
    assert _quality_lines(_release("v2", swapped), _release("v1", V1_BF16), 1.0) != []


def test_recommended_precision_losing_more_than_before_is_a_regression() -> None:
    v1 = _release("v1", V1_BF16, int8=V1_BF16)  # int8 agrees with its bf16 on every document
    v2 = _release("v2", V1_BF16, int8=_flip(V1_BF16, losses=30))  # 3 points lost: within its own 5-point threshold
    assert v1.winner is not None and v2.winner is not None
    assert v1.winner.candidate.method == v2.winner.candidate.method == "torchao-int8-wo"
    lines = _quality_lines(v2, v1, 1.0)
    assert len(lines) == 1 and lines[0].startswith("int8/torchao-int8-wo next_line/acc: loss against its bf16 grown")
    # The same growth is within a 15 % allowance: the intervals' far ends stay below it.
    assert _quality_lines(v2, v1, 15.0) == []
    # No flip in either release: paired per document, nothing changed, and the growth is bounded by the exact
    # zero-change bound, 3.69 / 1000 of accuracy = 0.61 % of 60 %: within the default 1 % (issue 34: the two
    # losses' far ends, unpaired, spanned +-1.45 % and failed every unchanged release).
    unchanged = _release("v2", V1_BF16, int8=V1_BF16)
    assert _quality_lines(unchanged, v1, 1.0) == []


def test_an_unchanged_release_passes_the_gate_at_its_defaults() -> None:
    # 45 % accuracy: README's rule, n >= 4 / (L * a) = 889 documents for the default 1 %.
    bf16 = ([1] * 9 + [0] * 11) * 45  # 900 documents, 45 % right
    int8 = _flip(bf16, losses=18)  # int8 loses 2 % of the documents, the same ones in both releases
    v1, v2 = _release("v1", bf16, int8=int8), _release("v2", bf16, int8=int8)
    assert v2.winner is not None and v2.winner.candidate.method == "torchao-int8-wo"
    assert gate(v2, v1, GateLimits()) == []
    # Too few documents for the allowance: the gate says it cannot rule a regression out, and why.
    small_v1, small_v2 = _release("v1", bf16[:300], int8=int8[:300]), _release("v2", bf16[:300], int8=int8[:300])
    lines = gate(small_v2, small_v1, GateLimits())
    assert lines and all("cannot rule out" in line and "more documents needed" in line for line in lines)
    # A real regression does not pass: bf16 v2 loses 3 % of v1's right answers.
    assert gate(_release("v2", _flip(bf16, losses=12), int8=int8), v1, GateLimits()) != []


def test_a_release_without_per_document_scores_is_not_compared_silently() -> None:
    v1 = _release("v1", V1_BF16)
    old = [
        replace(
            r,
            quality=replace(
                r.quality, checks=[replace(c, reference_docs=(), variant_docs=()) for c in r.quality.checks]
            ),
        )
        for r in v1.results
        if r.quality is not None
    ]
    legacy = replace(v1, results=old)
    lines = _quality_lines(_release("v2", V1_BF16), legacy, 1.0)
    assert lines == [
        "bf16 next_line/acc: release v1 recorded no per-document scores (studied before they were kept): "
        "re-run its search"
    ]
