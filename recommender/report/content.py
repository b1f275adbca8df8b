"""The report's content: the recommendation as blocks, built once for both report.md and report.html.

Order: the one-line answer, how to launch it, winner against current, the quality evidence,
the cheaper candidates that were rejected and why, the ties, the figures, the notes and tie
policy, the counts.

Honesty rules carried over from the search: every speed figure is labelled with the kind of
its provenance (measured, calibrated or modeled) and its full provenance; a verdict is
printed as recorded, and a check with no measured value is shown as "unverified" whatever
else it says, never as "pass".
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from recommender.report.blocks import (
    Block,
    Bullets,
    Code,
    Heading,
    Image,
    Para,
    Span,
    Table,
    bold,
    code,
    num,
    para,
    usd,
    usd_1m,
)
from recommender.report.figure_data import describe_figures, speed_kind

if TYPE_CHECKING:
    from collections.abc import Callable

    from recommender.candidate import CandidateResult
    from recommender.emit import EmittedConfig
    from recommender.performance import LoadCurve
    from recommender.quality.verdict import Check
    from recommender.recommendation import Recommendation
    from recommender.spec import LatencySLA

    _Row = tuple[str, Callable[[CandidateResult], str]]

#: Rows of the rejected table; the rest are in recommendation.json.
MAX_REJECTED_ROWS = 30
#: Misses shown when nothing met every threshold.
CLOSEST_MISSES = 3


def check_verdict(check: Check) -> str:
    """The check's verdict as recorded, except that nothing measured is always 'unverified'."""
    if check.value is None or not check.verdict:
        return "unverified"
    return check.verdict


def _price(result: CandidateResult) -> float:
    return math.inf if result.usd_per_1m_tokens is None else result.usd_per_1m_tokens


def closest_misses(rec: Recommendation) -> list[CandidateResult]:
    """Priced candidates that broke the fewest thresholds, cheapest first among equals."""
    return sorted(rec.rejected_cheaper, key=lambda r: (len(r.broken), _price(r)))[:CLOSEST_MISSES]


def _no_winner() -> list[Block]:
    return [para(bold("Nothing met every threshold."), " Loosen a threshold or widen the search space.")]


def _misses(rec: Recommendation) -> list[Block]:
    misses = closest_misses(rec)
    if not misses:
        return [para("No candidate could be priced: every one was pruned or met no rate within the SLA.")]
    items = tuple(
        (code(r.key), Span(f" at {usd_1m(r.usd_per_1m_tokens)} per 1M tokens: " + "; ".join(r.broken))) for r in misses
    )
    return [para("Closest misses (fewest thresholds broken, then cheapest):"), Bullets(items)]


def _against_current(rec: Recommendation, winner: CandidateResult) -> list[str | Span]:
    current, saving = rec.current, rec.saving
    if current is not None and current.key == winner.key:
        return [" — the current deployment already is the cheapest configuration that meets every threshold."]
    if current is not None and saving is not None:
        per_token, per_month = saving.percent_per_1m_tokens, saving.usd_per_month
        parts: list[str | Span] = [
            f" — {abs(per_token):.1f} % {'cheaper' if per_token >= 0 else 'dearer'} per token than the current ",
            code(current.key),
            f", {'saving' if per_month >= 0 else 'costing'} {usd(abs(per_month))}/month "
            f"({abs(saving.percent_per_month):.1f} %){'' if per_month >= 0 else ' more'}.",
        ]
        if current.broken:
            parts.append(" The current deployment breaks: " + "; ".join(current.broken) + ".")
        return parts
    if current is not None:
        return [" — no saving against the current ", code(current.key), " could be computed (it has no price)."]
    return [" — no current deployment was evaluated to compare against."]


def answer(rec: Recommendation) -> list[Block]:
    """The one-line answer: the winner, its price and fleet, and the saving against what runs today."""
    winner = rec.winner
    if winner is None:
        return _no_winner() + _misses(rec)
    replicas = winner.cost.replicas if winner.cost is not None else None
    head: list[str | Span] = [
        bold("Recommended: "),
        code(winner.key),
        f" at {usd_1m(winner.usd_per_1m_tokens)} per 1M tokens "
        f"({replicas} replica(s), {usd(winner.usd_per_month)}/month at the target traffic)",
    ]
    note = [para(rec.quantization_note)] if rec.quantization_note else []
    return [para(*head, *_against_current(rec, winner)), *note]


def _sources(sources: Sequence[str]) -> Para:
    spans: list[Span] = [Span("Sources: ")]
    for i, src in enumerate(sources):
        spans += [Span(", ")] if i else []
        is_url = src.startswith(("http://", "https://"))
        spans.append(Span(src, "link", src) if is_url else Span(src))
    return Para(tuple(spans))


def _engine(entry: EmittedConfig) -> list[Block]:
    blocks: list[Block] = [Heading(entry.engine, 3)]
    if entry.command:
        blocks.append(Code(entry.command, "bash"))
    if entry.config_yaml:
        blocks.append(Code(entry.config_yaml, "yaml"))
    if entry.notes:
        blocks.append(Bullets(tuple((Span(n),) for n in entry.notes)))
    if entry.sources:
        blocks.append(_sources(entry.sources))
    return blocks


def launch(rec: Recommendation) -> list[Block]:
    """How to launch the winner, per engine; the engines that cannot run it, and why, at the end."""
    if not rec.launch:
        return []
    blocks: list[Block] = [Heading("How to launch it")]
    unsupported: list[tuple[Span, ...]] = []
    for entry in rec.launch:
        if entry.supported:
            blocks += _engine(entry)
            continue
        why = " — " + "; ".join(entry.notes) if entry.notes else ""
        unsupported.append((bold(entry.engine), Span(": not supported" + why)))
    if unsupported:
        blocks.append(Bullets(tuple(unsupported)))
    return blocks


def _latency(result: CandidateResult, which: str, digits: str) -> str:
    if result.serving is None:
        return "-"
    value = (result.serving.ttft_ms if which == "ttft" else result.serving.tpot_ms).p99
    return f"{value:{digits}} ms ({result.serving.provenance.kind})"


_COMPARISON_ROWS: tuple[_Row, ...] = (
    ("config", lambda r: r.key),
    ("$/1M tokens", lambda r: usd_1m(r.usd_per_1m_tokens)),
    ("replicas at target traffic", lambda r: "-" if r.cost is None else str(r.cost.replicas)),
    ("$/month", lambda r: usd(r.usd_per_month)),
    ("P99 TTFT", lambda r: _latency(r, "ttft", ",.1f")),
    ("P99 TPOT", lambda r: _latency(r, "tpot", ",.2f")),
    ("tokens/s per replica", lambda r: num(None if r.serving is None else r.serving.tokens_per_s, ",.0f")),
    ("memory per device", lambda r: "-" if r.memory is None else f"{r.memory.needed_gb:.2f} GB"),
    ("quality verdict", lambda r: r.quality_verdict),
    ("thresholds broken", lambda r: "; ".join(r.broken) or "none"),
    ("price source", lambda r: (r.cost.price_source if r.cost is not None else "") or "not recorded"),
    ("speed and latency source", lambda r: "not recorded" if r.serving is None else str(r.serving.provenance)),
    ("quality measured on", lambda r: (r.quality.device if r.quality is not None else "") or "not measured"),
)


def _sla_limits(sla: LatencySLA | None) -> dict[str, str]:
    if sla is None:
        return {"P99 TTFT": "not recorded", "P99 TPOT": "not recorded"}
    return {"P99 TTFT": f"<= {sla.ttft_p99_ms:g} ms", "P99 TPOT": f"<= {sla.tpot_p99_ms:g} ms"}


def comparison(rec: Recommendation, sla: LatencySLA | None) -> list[Block]:
    """The winner and the current deployment side by side, every figure with its source."""
    columns = [(label, r) for label, r in (("recommended", rec.winner), ("current", rec.current)) if r is not None]
    if not columns:
        return []
    limits = _sla_limits(sla)
    rows = tuple((name, *(cell(r) for _, r in columns), limits.get(name, "")) for name, cell in _COMPARISON_ROWS)
    return [Heading("Recommended against current"), Table(("", *(label for label, _ in columns), "limit"), rows)]


def quality_subjects(rec: Recommendation) -> list[tuple[str, CandidateResult]]:
    """Whose quality evidence to show, once per precision+method (quality does not depend on GPU or batch)."""
    if rec.winner is not None:
        candidates = [("recommended", rec.winner)]
    else:
        candidates = [("closest miss", r) for r in closest_misses(rec)]
    if rec.current is not None:
        candidates.append(("current", rec.current))
    seen: dict[tuple[str, str], list[str]] = {}
    order: list[CandidateResult] = []
    for label, r in candidates:
        method = (r.candidate.precision, r.candidate.method)
        if method not in seen:
            seen[method] = []
            order.append(r)
        seen[method].append(label)
    return [(" and ".join(seen[(r.candidate.precision, r.candidate.method)]), r) for r in order]


def _check_row(c: Check) -> tuple[str, ...]:
    ci = c.delta_ci
    return (
        c.name,
        c.metric,
        num(c.baseline),
        num(c.value),
        "-" if c.delta is None else f"{c.delta:+.4g}",
        c.interval if ci else "-",  # with its confidence: per look, when looks shared the error rate
        str(c.n_docs or "-"),
        c.threshold,
        check_verdict(c),
    )


def _quality_of(label: str, result: CandidateResult) -> list[Block]:
    c, quality = result.candidate, result.quality
    method = f"{c.precision}/{c.method}"
    device = (quality.device if quality is not None else "") or "no device (not measured)"
    blocks: list[Block] = [Heading(f"{method} ({label}): {result.quality_verdict}", 3)]
    checks = quality.checks if quality is not None else []
    if checks:
        header = ("check", "metric", "bf16", method, "delta", "interval of delta", "docs", "threshold", "verdict")
        blocks.append(Table(header, tuple(_check_row(check) for check in checks)))
    else:
        blocks.append(para("No quality check was run: quality is ", bold("unverified"), "."))
    fidelity = quality.fidelity if quality is not None else None
    if fidelity is not None:
        blocks.append(
            para(
                f"KL against bf16 over {fidelity.tokens} tokens, measured on {device}: "
                f"mean {num(fidelity.mean_kl, '.3g')}, p99 {num(fidelity.p99_kl, '.3g')}, "
                f"top-1 agreement {num(fidelity.top1_agreement, '.1%')}, "
                f"perplexity ratio {num(fidelity.ppl_ratio, '.4f')}."
            )
        )
    else:
        blocks.append(para(f"No KL measurement (quality measured on {device})."))
    return blocks


def quality(rec: Recommendation) -> list[Block]:
    """Each check of the winner's (or the closest misses') and the current deployment's method against bf16."""
    subjects = quality_subjects(rec)
    if not subjects:
        return []
    blocks: list[Block] = [Heading("Quality evidence against bf16")]
    for label, result in subjects:
        blocks += _quality_of(label, result)
    return blocks


def rejected(rec: Recommendation) -> list[Block]:
    """The cheaper candidates that were rejected, with the thresholds they broke."""
    title = Heading("Cheaper candidates that were rejected")
    if not rec.rejected_cheaper:
        return [title, para("None: nothing cheaper was evaluated.")]
    rows = tuple(
        (r.key, usd_1m(r.usd_per_1m_tokens), r.quality_verdict, speed_kind(r), "; ".join(r.broken))
        for r in rec.rejected_cheaper[:MAX_REJECTED_ROWS]
    )
    blocks: list[Block] = [title, Table(("config", "$/1M tokens", "quality", "speed", "threshold broken"), rows)]
    hidden = len(rec.rejected_cheaper) - MAX_REJECTED_ROWS
    if hidden > 0:
        blocks.append(para(f"... and {hidden} more in recommendation.json."))
    return blocks


def _mean_kl(result: CandidateResult) -> float | None:
    quality = result.quality
    return None if quality is None or quality.fidelity is None else quality.fidelity.mean_kl


def ties(rec: Recommendation) -> list[Block]:
    if not rec.ties:
        return []
    rows = tuple((r.key, usd_1m(r.usd_per_1m_tokens), num(_mean_kl(r), ".2g")) for r in rec.ties[:MAX_REJECTED_ROWS])
    return [
        Heading("Ties: feasible candidates within the tie tolerance"),
        para(f"Tie policy: {rec.tie_policy}."),
        Table(("config", "$/1M tokens", "mean KL"), rows),
    ]


def closing(rec: Recommendation) -> list[Block]:
    """The notes, the tie policy and the counts."""
    notes = [*rec.notes, f"tie policy: {rec.tie_policy or 'not recorded'}"]
    n = rec.counts
    return [
        Heading("Notes"),
        Bullets(tuple((Span(note),) for note in notes)),
        para(
            f"{n.candidates} distinct candidates: {n.evaluated} evaluated, "
            f"{n.pruned} pruned before loading a model, {n.failed} failed, {n.feasible} feasible."
        ),
    ]


def title(rec: Recommendation) -> str:
    return f"Serving recommendation: {rec.model} ({rec.release}), use case {rec.use_case}"


def build_blocks(
    recommendation: Recommendation,
    results: Sequence[CandidateResult],
    load_curve: LoadCurve | None = None,
    images: Mapping[str, str] | None = None,
) -> list[Block]:
    """The report's content, in reading order; figures appear only for names that ``images`` maps to a source."""
    images = images or {}
    figures: list[Block] = [
        Image(info, images[info.name])
        for info in describe_figures(recommendation, results, load_curve)
        if info.name in images
    ]
    rec = recommendation
    sla = rec.sla if rec.sla is not None else (load_curve.sla if load_curve is not None else None)
    return [
        Heading(title(rec), 1),
        *([para("study ", code(rec.study))] if rec.study else []),
        *answer(rec),
        *launch(rec),
        *comparison(rec, sla),
        *quality(rec),
        *rejected(rec),
        *ties(rec),
        *([Heading("Figures"), *figures] if figures else []),
        *closing(rec),
    ]
