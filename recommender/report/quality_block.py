"""The quality evidence of one method against bf16: a row per check, with units and an honest interval.

Split from `content.py` (which picks whose evidence to show). Every row compares bf16 and the method
on the same documents; a check with no measured value is "unverified", whatever else it says.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from recommender.report.blocks import Block, Heading, Table, bold, num, para

if TYPE_CHECKING:
    from recommender.decision.recommendation import Recommendation
    from recommender.evaluation.candidate import CandidateResult
    from recommender.quality.verdict import Check


def check_verdict(check: Check) -> str:
    """The check's verdict as recorded, except that nothing measured is always 'unverified'."""
    if check.value is None or not check.verdict:
        return "unverified"
    return check.verdict


#: Units of the metrics lm-eval and the fidelity check report, for the quality tables.
METRIC_UNITS = {
    "mean_kl": "nats/token",
    "bits_per_byte": "bits/byte",
    "word_perplexity": "perplexity",
    "acc": "fraction correct",
    "acc_norm": "fraction correct",
    "exact_match": "fraction exact",
}


def _interval(c: Check, reference: bool) -> str:
    """The interval with its confidence; a zero-width one says what it does and does not show.

    [+0, +0] means the two models scored every document alike, not that no difference exists: with n
    documents a per-document disagreement rate up to 3/n is not excluded at 95 % (the rule of three).
    """
    if c.delta_ci is None:
        return "-"  # the interval's confidence is per look when looks shared the error rate
    if reference:
        return f"{c.interval} (bf16 against itself)"
    if c.delta_ci == (0.0, 0.0) and c.n_docs:
        return (
            f"{c.interval}: no document scored differently; with {c.n_docs} documents a disagreement rate up to "
            f"{min(1.0, 3 / c.n_docs):.0%} is not excluded (rule of three, 95 %)"
        )
    return c.interval


def multiplicity_note(rec: Recommendation) -> Block | None:
    """What the search's choice among several methods does to the error rate, stated rather than corrected.

    Each method's verdict wrongly passes a method past its threshold at most (1 - confidence) / 2 of the
    time; the search picks the cheapest method that passes, so where k methods near their thresholds are
    evaluated the chance that one of them passes wrongly grows to at most k times that (Bonferroni's
    bound, reached when their errors do not overlap). Correcting it would widen every interval by the
    number of methods a search happens to try; saying it lets the reader re-run the winner alone.
    """
    shown = [r for r in (rec.winner, rec.current, *rec.ties, *rec.rejected_cheaper) if r is not None]
    measured = {
        (r.candidate.precision, r.candidate.method)
        for r in shown
        if r.quality is not None and r.quality.verdict != "unverified"
    }
    confidences = [
        c.confidence for r in shown if r.quality is not None for c in r.quality.checks if c.confidence is not None
    ]
    if len(measured) < 2 or not confidences:
        return None
    per_method = (1.0 - max(confidences)) / 2.0
    return para(
        f"Multiplicity: each method's verdict is wrong-way (passes past a threshold) at most {per_method:.1%} of the "
        f"time; {len(measured)} methods were judged here and the cheapest passing one is recommended, so the chance "
        f"that some passed wrongly is up to {min(1.0, len(measured) * per_method):.1%}. To confirm the winner at "
        f"{per_method:.1%}, evaluate it alone with `recommender eval` on documents of a larger budget."
    )


def _check_row(c: Check, reference: bool = False) -> tuple[str, ...]:
    unit = METRIC_UNITS.get(c.metric)
    return (
        c.name,
        f"{c.metric} ({unit})" if unit else c.metric,
        num(c.baseline),
        num(c.value),
        "-" if c.delta is None else f"{c.delta:+.4g}",
        _interval(c, reference),
        str(c.n_docs or "-"),
        c.threshold,
        check_verdict(c),
    )


def quality_of(label: str, result: CandidateResult) -> list[Block]:
    c, quality = result.candidate, result.quality
    method = f"{c.precision}/{c.method}"
    device = (quality.device if quality is not None else "") or "no device (not measured)"
    blocks: list[Block] = [Heading(f"{method} ({label}): {result.quality_verdict}", 3)]
    checks = quality.checks if quality is not None else []
    if checks:
        header = (
            "check",
            "metric (unit)",
            "bf16, same docs",
            method,
            "delta",
            "interval of delta",
            "docs (tokens for KL)",
            "threshold",
            "verdict",
        )
        blocks.append(
            para(
                f"Each row scores bf16 and {method} on the same documents (their count in the docs "
                "column), so a row's delta compares like with like. The bf16 figure can differ between "
                "methods: an evaluation stops early, on fewer documents, once its verdict is clear."
            )
        )
        blocks.append(Table(header, tuple(_check_row(check, c.method == "baseline") for check in checks)))
    else:
        blocks.append(para("No quality check was run: quality is ", bold("unverified"), "."))
    fidelity = quality.fidelity if quality is not None else None
    if fidelity is not None:
        blocks.append(
            para(
                f"KL against bf16 over {fidelity.tokens} tokens, measured on {device}: "
                f"mean {num(fidelity.mean_kl, '.3g')} nats/token, p99 {num(fidelity.p99_kl, '.3g')} nats/token, "
                f"top-1 agreement {num(fidelity.top1_agreement, '.1%')}, "
                f"perplexity ratio {num(fidelity.ppl_ratio, '.4f')}."
            )
        )
    else:
        blocks.append(para(f"No KL measurement (quality measured on {device})."))
    return blocks
