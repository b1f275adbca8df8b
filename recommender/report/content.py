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

from recommender.money import usd
from recommender.perf.model.memory import RUNTIME_OVERHEAD_GB
from recommender.report.assumptions_block import assumptions, headline
from recommender.report.blocks import (
    Block,
    Bullets,
    Cell,
    Code,
    Heading,
    Image,
    Para,
    Span,
    Table,
    bold,
    code,
    inline,
    num,
    para,
)
from recommender.report.figure_data import describe_figures, speed_kind
from recommender.report.levers_block import layouts, levers
from recommender.report.quality_block import multiplicity_note, quality_of

if TYPE_CHECKING:
    from collections.abc import Callable

    from recommender.config.spec import LatencySLA
    from recommender.decision.recommendation import Recommendation
    from recommender.engines import EngineLaunch
    from recommender.evaluation.candidate import CandidateResult
    from recommender.evaluation.load_curve import LoadCurve

    _Row = tuple[str, Callable[[CandidateResult], Cell]]

#: Rows of the rejected table; the rest are in recommendation.json.
MAX_REJECTED_ROWS = 30
#: Misses shown when nothing met every threshold.
CLOSEST_MISSES = 3


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
        (code(r.key), Span(f" at {usd(r.usd_per_1m_tokens)} per 1M tokens: " + "; ".join(r.broken))) for r in misses
    )
    return [para("Closest misses (fewest thresholds broken, then cheapest):"), Bullets(items)]


def _against_current(rec: Recommendation, winner: CandidateResult) -> list[str | Span]:
    current, saving = rec.current, rec.saving
    if current is not None and current.key == winner.key:
        return [" — the current deployment already is the cheapest configuration that meets every threshold."]
    if current is not None and saving is not None:
        per_token, per_month = saving.percent_per_1m_tokens, saving.usd_per_month
        parts: list[str | Span] = [
            f" — {abs(per_token):.1f} % {'cheaper' if per_token >= 0 else 'dearer'} per token (at capacity) than "
            "the current ",
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
    """The answer: what to buy at what traffic, price and utilisation, and the saving per month (the one-line
    answer when the recommendation carries no assumptions block)."""
    winner = rec.winner
    if winner is None:
        return _no_winner() + _misses(rec)
    note = [Para(inline(rec.quantization_note))] if rec.quantization_note else []
    first = headline(rec)
    if first:
        return first + note
    replicas = winner.cost.replicas if winner.cost is not None else None
    head: list[str | Span] = [
        bold("Recommended: "),
        code(winner.key),
        f" at {usd(winner.usd_per_1m_tokens)} per 1M tokens "
        f"({replicas} replica(s), {usd(winner.usd_per_month)}/month at the target traffic)",
    ]
    return [para(*head, *_against_current(rec, winner)), *note]


def _sources(sources: Sequence[str]) -> Para:
    spans: list[Span] = [Span("Sources: ")]
    for i, src in enumerate(sources):
        spans += [Span(", ")] if i else []
        spans += inline(src)
    return Para(tuple(spans))


def _engine(entry: EngineLaunch) -> list[Block]:
    blocks: list[Block] = [Heading(entry.engine, 3)]
    if entry.command:
        blocks.append(Code(entry.command, "bash"))
    if entry.config_yaml:
        blocks.append(Code(entry.config_yaml, "yaml"))
    if entry.notes:
        blocks.append(Bullets(tuple(inline(n) for n in entry.notes)))
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
    ("$/1M tokens at capacity", lambda r: usd(r.usd_per_1m_tokens)),
    ("replicas at target traffic", lambda r: "-" if r.cost is None else str(r.cost.replicas)),
    ("$/month", lambda r: usd(r.usd_per_month)),
    ("P99 TTFT", lambda r: _latency(r, "ttft", ",.1f")),
    ("P99 TPOT", lambda r: _latency(r, "tpot", ",.2f")),
    ("capacity per replica (within SLA)", lambda r: _capacity(r)),
    ("memory per device", lambda r: _memory(r)),
    ("quality verdict", lambda r: r.quality_verdict),
    ("thresholds broken", lambda r: "; ".join(r.broken) or "none"),
    ("price per GPU-hour", lambda r: usd(None if r.cost is None else r.cost.price_per_hour_usd)),
    (
        "price source",
        lambda r: inline(r.cost.price_source) if r.cost is not None and r.cost.price_source else "not recorded",
    ),
    ("speed and latency source", lambda r: "not recorded" if r.serving is None else str(r.serving.provenance)),
    ("quality measured on", lambda r: (r.quality.device if r.quality is not None else "") or "not measured"),
)


def _memory(result: CandidateResult) -> str:
    """Needed of usable GB per device, saying that a fixed runtime reserve is in it (it dominates small models)."""
    if result.memory is None:
        return "-"
    m = result.memory
    return (
        f"{m.needed_gb:.2f} GB of {m.available_gb:.1f} GB usable (incl. {RUNTIME_OVERHEAD_GB:g} GB assumed "
        "engine runtime; weights, KV cache of one request, workspace)"
    )


def _capacity(result: CandidateResult) -> str:
    s = result.serving
    if s is None:
        return "-"
    return f"{s.requests_per_s:,.4g} req/s = {s.tokens_per_s:,.0f} tokens/s (prompt + output)"


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


def quality(rec: Recommendation) -> list[Block]:
    """Each check of the winner's (or the closest misses') and the current deployment's method against bf16."""
    subjects = quality_subjects(rec)
    if not subjects:
        return []
    blocks: list[Block] = [Heading("Quality evidence against bf16")]
    for label, result in subjects:
        blocks += quality_of(label, result)
    note = multiplicity_note(rec)
    return blocks + ([note] if note else [])


def rejected(rec: Recommendation) -> list[Block]:
    """The cheaper candidates that were rejected, with the thresholds they broke."""
    title = Heading("Cheaper candidates that were rejected")
    if not rec.rejected_cheaper:
        return [title, para("None: nothing cheaper was evaluated.")]
    rows = tuple(
        (r.key, usd(r.usd_per_month), usd(r.usd_per_1m_tokens), r.quality_verdict, speed_kind(r), "; ".join(r.broken))
        for r in rec.rejected_cheaper[:MAX_REJECTED_ROWS]
    )
    header = ("config", "$/month", "$/1M tokens at capacity", "quality", "speed", "threshold broken")
    blocks: list[Block] = [title, Table(header, rows)]
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
    rows = tuple(
        (r.key, usd(r.usd_per_month), usd(r.usd_per_1m_tokens), num(_mean_kl(r), ".2g"))
        for r in rec.ties[:MAX_REJECTED_ROWS]
    )
    return [
        Heading("Ties: feasible candidates within the tie tolerance"),
        para(f"Tie policy: {rec.tie_policy}."),
        Table(("config", "$/month", "$/1M tokens at capacity", "mean KL (nats/token)"), rows),
    ]


def closing(rec: Recommendation) -> list[Block]:
    """The notes, the tie policy and the counts."""
    notes = [*rec.notes, f"tie policy: {rec.tie_policy or 'not recorded'}"]
    n = rec.counts
    return [
        Heading("Notes"),
        Bullets(tuple(inline(note) for note in notes)),
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
        *assumptions(rec),
        *launch(rec),
        *comparison(rec, sla),
        *levers(rec),
        *layouts(rec),
        *quality(rec),
        *rejected(rec),
        *ties(rec),
        *([Heading("Figures"), *figures] if figures else []),
        *closing(rec),
    ]
