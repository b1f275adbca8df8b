"""What each serving lever does for the winner: its measured input, and TPOT and $/month with and without it.

The levers are prefix caching (on by default in every engine emitted for; its effect comes from the
traffic's shared prefix) and speculative decoding (a searched setting, at the acceptance measured on the
use case's documents). The winner is re-simulated with the lever flipped, everything else kept, so the
comparison is like for like and says whether the lever pays at this traffic and why.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from recommender.evaluation.performance import PerformanceEvaluator
from recommender.evaluation.refusal import Refused
from recommender.evaluation.speed import Performance
from recommender.money import usd
from recommender.speculation.methods import NONE

if TYPE_CHECKING:
    from recommender.config.candidate import Candidate
    from recommender.config.spec import SearchSpec
    from recommender.evaluation.candidate import CandidateResult

__all__ = ["LeverEffect", "lever_effects"]

#: Relative $/month change below which a lever is said to change nothing (replicas are whole GPUs).
SAME_COST = 1e-9


@dataclass(frozen=True, slots=True)
class LeverEffect:
    """One lever on the winner's configuration: what was measured for it and the fleet with and without it.

    Args:
        lever: "prefix caching" or "speculative <method>".
        measured: the lever's input with its provenance (hit rate simulated from the traffic's prefix; acceptance
            measured on which device and documents, with its interval).
        with_tpot_p99_ms / without_tpot_p99_ms: the replica's P99 TPOT at its load, with and without the lever.
        with_usd_per_month / without_usd_per_month: the fleet's cost at the traffic (None: the configuration without
            it is not feasible or not priced).
        verdict: whether it pays at this traffic, and why, in one line.
    """

    lever: str
    measured: str
    with_tpot_p99_ms: float | None
    without_tpot_p99_ms: float | None
    with_usd_per_month: float | None
    without_usd_per_month: float | None
    verdict: str


def _performance(evaluator: PerformanceEvaluator, c: Candidate) -> Performance | Refused:
    """`c`'s performance, or its refusal: a lever compares both sides, refused or not."""
    try:
        return evaluator.performance(c)
    except Refused as refused:
        return refused


def _figures(performance: Performance | Refused) -> tuple[float | None, float | None, str]:
    """P99 TPOT, $/month and why there is none (a refused configuration), of one evaluation."""
    if isinstance(performance, Refused):
        return None, None, performance.broken
    cost = performance.cost.usd_per_month if performance.cost is not None else None
    return performance.serving.tpot_ms.p99, cost, ""


def _verdict(with_cost: float | None, without_cost: float | None, why_not: str, binding: str) -> str:
    if with_cost is None or without_cost is None:
        return f"not compared: {why_not or 'one side has no price'}"
    change = (with_cost - without_cost) / without_cost
    if change < -SAME_COST:
        return f"pays: {usd(with_cost)}/month with it, {usd(without_cost)} without ({change:+.1%})"
    if change > SAME_COST:
        return f"does not pay: {usd(with_cost)}/month with it, {usd(without_cost)} without ({change:+.1%}): {binding}"
    return f"same {usd(with_cost)}/month with and without: the replica count is set by {binding}"


def _speculation(evaluator: PerformanceEvaluator, spec: SearchSpec, winner: CandidateResult) -> list[LeverEffect]:
    """Each searched method on the winner, against the winner without it on the same engine (like for like); the
    cheapest engine without speculation is named where it differs."""
    c = winner.candidate
    methods = [m for m in dict.fromkeys([*spec.space.speculative, c.speculative]) if m != NONE]
    effects = []
    for method in methods:
        on, off = replace(c, speculative=method), replace(c, speculative=NONE)
        with_perf = _performance(evaluator, on)
        with_tpot, with_cost, why_on = _figures(with_perf)
        same = _on_engine(evaluator, with_perf.setup.engine) if isinstance(with_perf, Performance) else evaluator
        without_perf = _performance(same, off)
        without_tpot, without_cost, why_off = _figures(without_perf)
        measured = why_on if not isinstance(with_perf, Performance) else _acceptance(with_perf)
        binding = (
            "verifying the drafts of every running sequence costs more per step than the accepted tokens save"
            if with_tpot is not None and without_tpot is not None and with_tpot >= without_tpot
            else "the prefill and the KV cache, not the decode steps speculation shortens"
        )
        verdict = _verdict(with_cost, without_cost, why_on or why_off, binding) + _engine_note(with_perf)
        verdict += _cheaper_elsewhere(_performance(evaluator, off), with_cost)
        effects.append(
            LeverEffect(f"speculative {method}", measured, with_tpot, without_tpot, with_cost, without_cost, verdict)
        )
    return effects


def _on_engine(evaluator: PerformanceEvaluator, engine: str) -> PerformanceEvaluator:
    """`evaluator` restricted to one engine (the local device, engine '', keeps its own)."""
    return replace(evaluator, engines=(engine,)) if engine else evaluator


def _engine_note(performance: Performance | Refused) -> str:
    engine = performance.setup.engine if isinstance(performance, Performance) else ""
    return f" (both on {engine})" if engine else ""


def _cheaper_elsewhere(best_without: Performance | Refused, with_cost: float | None) -> str:
    """'; without it, <engine> serves it for $X/month' where another engine does cheaper without speculation."""
    _, cost, _ = _figures(best_without)
    if not isinstance(best_without, Performance) or cost is None or with_cost is None or cost >= with_cost:
        return ""
    return f"; without it {best_without.setup.engine} serves it for {usd(cost)}/month"


def _acceptance(performance: Performance) -> str:
    s = performance.setup.speculation
    if s is None:
        return ""
    return (
        f"{s.tokens_per_step:.2f} tokens and {s.drafted_per_step:.2f} draft tokens verified per step "
        f"(k={s.num_speculative_tokens}); {s.evidence}"
    )


def _prefix_caching(evaluator: PerformanceEvaluator, winner: CandidateResult) -> list[LeverEffect]:
    """The winner with and without its replicas keeping computed prefixes (a shared prefix, conversations)."""
    traffic = evaluator.traffic
    if not (traffic.shared_prefix or traffic.conversation) or winner.serving is None:
        return []
    without = replace(evaluator, cache_prefixes=False)
    with_tpot, with_cost, _ = _figures(_performance(evaluator, winner.candidate))
    without_tpot, without_cost, why = _figures(_performance(without, winner.candidate))
    hit = winner.serving.prefix_hit_rate or 0.0
    shared = []
    if traffic.shared_prefix is not None:
        p = traffic.shared_prefix
        shared.append(f"a {p.tokens}-token prefix on {p.fraction:.0%} of requests, {p.templates} template(s)")
    if traffic.conversation is not None:
        c = traffic.conversation
        shared.append(f"{c.turns}-turn conversations, {c.think_time_s:g} s apart, carrying their history")
    measured = (
        f"{hit:.0%} of prompt tokens served from the replica's prefix cache at its load (simulated: "
        f"{'; '.join(shared)}; full 16-token blocks, LRU eviction)"
    )
    binding = "decode steps and the KV cache, not the prefill the cache skips"
    return [
        LeverEffect(
            "prefix caching",
            measured,
            with_tpot,
            without_tpot,
            with_cost,
            without_cost,
            _verdict(with_cost, without_cost, why, binding),
        )
    ]


def lever_effects(
    evaluator: PerformanceEvaluator, spec: SearchSpec, winner: CandidateResult | None
) -> list[LeverEffect]:
    """Prefix caching (when the traffic shares a prefix) and each searched speculative method, on the winner."""
    if winner is None or winner.serving is None:
        return []
    return _prefix_caching(evaluator, winner) + _speculation(evaluator, spec, winner)
