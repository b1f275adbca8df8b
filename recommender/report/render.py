"""The recommendation as a document for people: report.md (with PNGs beside it) and a self-contained report.html.

The content is assembled once as a list of plain blocks (headings, paragraphs, tables, code,
figures) and written out by two small serializers, so the Markdown and the HTML never say
different things. Order: the one-line answer, how to launch it, winner against current,
the quality evidence, the cheaper candidates that were rejected and why, the figures, the
notes and tie policy, the counts.

Honesty rules carried over from the search: every speed figure is labelled measured or
modeled with its full provenance; a verdict is printed as recorded, and a check with no
measured value is shown as "unverified" whatever else it says, never as "pass".
"""

from __future__ import annotations

import base64
import html
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from recommender.report.plots import FigureInfo, LoadCurve, describe_figures, draw_figures, provenance_kind

#: Rows of the rejected table; the rest are in recommendation.json.
MAX_REJECTED_ROWS = 30
#: Misses shown when nothing met every threshold.
CLOSEST_MISSES = 3

# -- blocks --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Span:
    """A run of inline text: plain, bold ("b"), code ("code"), or a link ("link", with ``href``)."""

    text: str
    style: str = ""
    href: str = ""


@dataclass(frozen=True, slots=True)
class Heading:
    text: str
    level: int = 2


@dataclass(frozen=True, slots=True)
class Para:
    spans: tuple[Span, ...]


@dataclass(frozen=True, slots=True)
class Bullets:
    items: tuple[tuple[Span, ...], ...]


@dataclass(frozen=True, slots=True)
class Table:
    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]


@dataclass(frozen=True, slots=True)
class Code:
    text: str
    lang: str = ""


@dataclass(frozen=True, slots=True)
class Image:
    info: FigureInfo
    src: str


Block = Heading | Para | Bullets | Table | Code | Image


def _p(*parts: str | Span) -> Para:
    return Para(tuple(Span(p) if isinstance(p, str) else p for p in parts))


def _b(text: str) -> Span:
    return Span(text, "b")


def _c(text: str) -> Span:
    return Span(text, "code")


# -- number formats ------------------------------------------------------------------------


def _usd_1m(value: float | None) -> str:
    if value is None:
        return "-"
    if value >= 100:
        return f"${value:,.0f}"
    return f"${value:,.2f}" if value >= 1 else f"${value:#.4g}"


def _usd(value: float | None) -> str:
    return "-" if value is None else f"${value:,.0f}"


def _num(value: float | None, spec: str = ".4g") -> str:
    return "-" if value is None else format(value, spec)


def _verdict(verdict: str | None, value: Any = "measured") -> str:
    """The verdict as recorded, except that nothing measured is always 'unverified'."""
    if value is None or not verdict:
        return "unverified"
    return verdict


# -- content -------------------------------------------------------------------------------


@dataclass
class _Context:
    rec: Mapping[str, Any]
    results: Sequence[Mapping[str, Any]]
    load_curve: LoadCurve | None
    figures: list[Image] = field(default_factory=list)

    @property
    def sla(self) -> Mapping[str, float]:
        return self.rec.get("sla") or (self.load_curve or {}).get("sla") or {}


def _closest_misses(rec: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """Priced candidates that broke the fewest thresholds, cheapest first among equals."""
    rejected = rec.get("rejected_cheaper") or []
    return sorted(rejected, key=lambda s: (len(s["broken"]), s["usd_per_1m_tokens"]))[:CLOSEST_MISSES]


def _answer(rec: Mapping[str, Any]) -> list[Block]:
    winner, current, saving = rec.get("winner"), rec.get("current"), rec.get("saving")
    if winner is None:
        misses = _closest_misses(rec)
        blocks: list[Block] = [_p(_b("Nothing met every threshold."), " Loosen a threshold or widen the search space.")]
        if misses:
            blocks.append(_p("Closest misses (fewest thresholds broken, then cheapest):"))
            blocks.append(
                Bullets(
                    tuple(
                        (
                            _c(s["key"]),
                            Span(f" at {_usd_1m(s['usd_per_1m_tokens'])} per 1M tokens: " + "; ".join(s["broken"])),
                        )
                        for s in misses
                    )
                )
            )
        else:
            blocks.append(_p("No candidate could be priced: every one was pruned or met no rate within the SLA."))
        return blocks
    head: list[str | Span] = [
        _b("Recommended: "),
        _c(winner["key"]),
        f" at {_usd_1m(winner['usd_per_1m_tokens'])} per 1M tokens "
        f"({winner['replicas']} replica(s), {_usd(winner['usd_per_month'])}/month at the target traffic)",
    ]
    if current and current["key"] == winner["key"]:
        head.append(" — the current deployment already is the cheapest configuration that meets every threshold.")
    elif current and saving:
        per_token, per_month = saving["percent_per_1m_tokens"], saving["usd_per_month"]
        cheaper = per_token >= 0
        head += [
            f" — {abs(per_token):.1f} % {'cheaper' if cheaper else 'dearer'} per token than the current ",
            _c(current["key"]),
            f", {'saving' if per_month >= 0 else 'costing'} {_usd(abs(per_month))}/month "
            f"({abs(saving['percent_per_month']):.1f} %){'' if per_month >= 0 else ' more'}.",
        ]
        if current.get("broken"):
            head.append(" The current deployment breaks: " + "; ".join(current["broken"]) + ".")
    elif current:
        head += [" — no saving against the current ", _c(current["key"]), " could be computed (it has no price)."]
    else:
        head.append(" — no current deployment was evaluated to compare against.")
    return [_p(*head)]


def _launch(rec: Mapping[str, Any]) -> list[Block]:
    entries = rec.get("launch")
    if not entries:
        return []
    blocks: list[Block] = [Heading("How to launch it")]
    unsupported: list[tuple[Span, ...]] = []
    for entry in entries:
        notes = entry.get("notes") or []
        notes = [notes] if isinstance(notes, str) else list(notes)
        engine = str(entry.get("engine", "engine"))
        if not entry.get("supported"):
            unsupported.append((_b(engine), Span(": not supported" + (" — " + "; ".join(notes) if notes else ""))))
            continue
        blocks.append(Heading(engine, 3))
        if entry.get("command"):
            blocks.append(Code(str(entry["command"]), "bash"))
        if entry.get("config_yaml"):
            blocks.append(Code(str(entry["config_yaml"]), "yaml"))
        if notes:
            blocks.append(Bullets(tuple((Span(n),) for n in notes)))
        sources = entry.get("sources") or []
        if sources:
            spans: list[Span] = [Span("Sources: ")]
            for i, src in enumerate(sources):
                spans += [Span(", ")] if i else []
                is_url = isinstance(src, str) and src.startswith(("http://", "https://"))
                spans.append(Span(str(src), "link", str(src)) if is_url else Span(str(src)))
            blocks.append(Para(tuple(spans)))
    if unsupported:
        blocks.append(Bullets(tuple(unsupported)))
    return blocks


def _latency(summary: Mapping[str, Any] | None, field_name: str, digits: str) -> str:
    if not summary or summary.get(field_name) is None:
        return "-"
    return f"{summary[field_name]:{digits}} ms ({provenance_kind(summary.get('perf_provenance'))})"


def _comparison(ctx: _Context) -> list[Block]:
    winner, current = ctx.rec.get("winner"), ctx.rec.get("current")
    columns = [(label, s) for label, s in (("recommended", winner), ("current", current)) if s]
    if not columns:
        return []
    sla = ctx.sla

    def row(name: str, cell: Any, limit: str = "") -> tuple[str, ...]:
        return (name, *(cell(s) for _, s in columns), limit)

    def sla_text(key: str) -> str:
        return f"<= {sla[key]:g} ms" if key in sla else "not recorded"

    rows = (
        row("config", lambda s: s["key"]),
        row("$/1M tokens", lambda s: _usd_1m(s["usd_per_1m_tokens"])),
        row("replicas at target traffic", lambda s: str(s["replicas"] if s["replicas"] is not None else "-")),
        row("$/month", lambda s: _usd(s["usd_per_month"])),
        row("P99 TTFT", lambda s: _latency(s, "ttft_p99_ms", ",.1f"), sla_text("ttft_p99_ms")),
        row("P99 TPOT", lambda s: _latency(s, "tpot_p99_ms", ",.2f"), sla_text("tpot_p99_ms")),
        row("tokens/s per replica", lambda s: _num(s.get("tokens_per_s_per_replica"), ",.0f")),
        row("memory per device", lambda s: "-" if s.get("memory_gb") is None else f"{s['memory_gb']:.2f} GB"),
        row("quality verdict", lambda s: _verdict(s.get("quality_verdict"))),
        row("thresholds broken", lambda s: "; ".join(s.get("broken") or []) or "none"),
        row("price source", lambda s: str(s.get("price_source") or "not recorded")),
        row("speed and latency source", lambda s: str(s.get("perf_provenance") or "not recorded")),
        row("quality measured on", lambda s: str(s.get("quality_device") or "not measured")),
    )
    return [Heading("Recommended against current"), Table(("", *(label for label, _ in columns), "limit"), rows)]


def _quality_subjects(rec: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    """Whose quality evidence to show, once per precision+method (quality does not depend on GPU or batch)."""
    if rec.get("winner"):
        candidates = [("recommended", rec["winner"])]
    else:
        candidates = [("closest miss", s) for s in _closest_misses(rec)]
    if rec.get("current"):
        candidates.append(("current", rec["current"]))
    seen: dict[tuple[str, str], list[str]] = {}
    order: list[Mapping[str, Any]] = []
    for label, s in candidates:
        method = (s["precision"], s["method"])
        if method not in seen:
            seen[method] = []
            order.append(s)
        seen[method].append(label)
    return [(" and ".join(seen[(s["precision"], s["method"])]), s) for s in order]


def _quality(rec: Mapping[str, Any]) -> list[Block]:
    subjects = _quality_subjects(rec)
    if not subjects:
        return []
    blocks: list[Block] = [Heading("Quality evidence against bf16")]
    for label, s in subjects:
        method = f"{s['precision']}/{s['method']}"
        device = s.get("quality_device") or "no device (not measured)"
        blocks.append(Heading(f"{method} ({label}): {_verdict(s.get('quality_verdict'))}", 3))
        checks = s.get("quality_checks") or []
        if checks:
            rows = []
            for c in checks:
                ci = c.get("delta_ci")
                rows.append(
                    (
                        c["name"],
                        c["metric"],
                        _num(c.get("baseline")),
                        _num(c.get("value")),
                        "-" if c.get("delta") is None else f"{c['delta']:+.4g}",
                        "-" if not ci else f"[{ci[0]:+.4g}, {ci[1]:+.4g}]",
                        str(c.get("n_docs") or "-"),
                        c["threshold"],
                        _verdict(c.get("verdict"), c.get("value")),
                    )
                )
            header = ("check", "metric", "bf16", method, "delta", "95% CI of delta", "docs", "threshold", "verdict")
            blocks.append(Table(header, tuple(rows)))
        else:
            blocks.append(_p("No quality check was run: quality is ", _b("unverified"), "."))
        fidelity = s.get("fidelity")
        if fidelity:
            blocks.append(
                _p(
                    f"KL against bf16 over {fidelity.get('tokens', '?')} tokens, measured on {device}: "
                    f"mean {_num(fidelity.get('mean_kl'), '.3g')}, p99 {_num(fidelity.get('p99_kl'), '.3g')}, "
                    f"top-1 agreement {_num(fidelity.get('top1_agreement'), '.1%')}, "
                    f"perplexity ratio {_num(fidelity.get('ppl_ratio'), '.4f')}."
                )
            )
        else:
            blocks.append(_p(f"No KL measurement (quality measured on {device})."))
    return blocks


def _rejected(rec: Mapping[str, Any]) -> list[Block]:
    rejected = rec.get("rejected_cheaper") or []
    if not rejected:
        return [Heading("Cheaper candidates that were rejected"), _p("None: nothing cheaper was evaluated.")]
    rows = tuple(
        (
            s["key"],
            _usd_1m(s["usd_per_1m_tokens"]),
            _verdict(s.get("quality_verdict")),
            provenance_kind(s.get("perf_provenance")),
            "; ".join(s["broken"]),
        )
        for s in rejected[:MAX_REJECTED_ROWS]
    )
    blocks: list[Block] = [
        Heading("Cheaper candidates that were rejected"),
        Table(("config", "$/1M tokens", "quality", "speed", "threshold broken"), rows),
    ]
    hidden = len(rejected) - MAX_REJECTED_ROWS
    if hidden > 0:
        blocks.append(_p(f"... and {hidden} more in recommendation.json."))
    return blocks


def _ties(rec: Mapping[str, Any]) -> list[Block]:
    ties = rec.get("ties") or []
    if not ties:
        return []
    rows = tuple(
        (s["key"], _usd_1m(s["usd_per_1m_tokens"]), _num((s.get("fidelity") or {}).get("mean_kl"), ".2g"))
        for s in ties[:MAX_REJECTED_ROWS]
    )
    return [
        Heading("Ties: feasible candidates within the tie tolerance"),
        _p(f"Tie policy: {rec.get('tie_policy', '')}."),
        Table(("config", "$/1M tokens", "mean KL"), rows),
    ]


def _figures(ctx: _Context) -> list[Block]:
    return [Heading("Figures"), *ctx.figures] if ctx.figures else []


def _closing(rec: Mapping[str, Any]) -> list[Block]:
    blocks: list[Block] = [Heading("Notes")]
    notes = [*(rec.get("notes") or []), f"tie policy: {rec.get('tie_policy', 'not recorded')}"]
    blocks.append(Bullets(tuple((Span(n),) for n in notes)))
    counts = rec.get("counts") or {}
    if counts:
        blocks.append(
            _p(
                f"{counts.get('candidates', 0)} distinct candidates: {counts.get('evaluated', 0)} evaluated, "
                f"{counts.get('pruned', 0)} pruned before loading a model, {counts.get('failed', 0)} failed, "
                f"{counts.get('feasible', 0)} feasible."
            )
        )
    return blocks


def _title(rec: Mapping[str, Any]) -> str:
    model, release, use_case = (rec.get(k, "?") for k in ("model", "release", "use_case"))
    return f"Serving recommendation: {model} ({release}), use case {use_case}"


def build_blocks(
    recommendation: Mapping[str, Any],
    results: Sequence[Mapping[str, Any]],
    load_curve: LoadCurve | None = None,
    images: Mapping[str, str] | None = None,
) -> list[Block]:
    """The report's content, in reading order; figures appear only for names that ``images`` maps to a source."""
    images = images or {}
    figures = [
        Image(info, images[info.name])
        for info in describe_figures(recommendation, results, load_curve)
        if info.name in images
    ]
    ctx = _Context(recommendation, results, load_curve, figures)
    study = recommendation.get("study")
    return [
        Heading(_title(recommendation), 1),
        *([_p("study ", _c(str(study)))] if study else []),
        *_answer(recommendation),
        *_launch(recommendation),
        *_comparison(ctx),
        *_quality(recommendation),
        *_rejected(recommendation),
        *_ties(recommendation),
        *_figures(ctx),
        *_closing(recommendation),
    ]


# -- Markdown ------------------------------------------------------------------------------

_MD_SPECIAL = re.compile(r"([\\`*])")
_MD_TAG_START = re.compile(r"<(?=[A-Za-z/!?])")


def _md_text(text: str) -> str:
    """Escape what would change meaning: backslashes, backticks, asterisks, and '<' that could open a tag."""
    return _MD_TAG_START.sub("&lt;", _MD_SPECIAL.sub(r"\\\1", text))


def _md_code_span(text: str) -> str:
    fence = "`" * (max((len(m) for m in re.findall(r"`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _md_spans(spans: Sequence[Span]) -> str:
    out = []
    for s in spans:
        if s.style == "code":
            out.append(_md_code_span(s.text))
        elif s.style == "b":
            out.append(f"**{_md_text(s.text.strip())}**" + (" " if s.text.endswith(" ") else ""))
        elif s.style == "link":
            out.append(f"<{s.href}>")
        else:
            out.append(_md_text(s.text))
    return "".join(out)


def _md_cell(text: str) -> str:
    return _md_text(text).replace("|", "\\|").replace("\n", " ")


def _md_block(block: Block) -> str:
    if isinstance(block, Heading):
        return f"{'#' * block.level} {_md_text(block.text)}"
    if isinstance(block, Para):
        return _md_spans(block.spans)
    if isinstance(block, Bullets):
        return "\n".join(f"- {_md_spans(item)}" for item in block.items)
    if isinstance(block, Table):
        lines = [
            "| " + " | ".join(_md_cell(h) for h in block.header) + " |",
            "|" + "|".join("---" for _ in block.header) + "|",
        ]
        lines += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in block.rows]
        return "\n".join(lines)
    if isinstance(block, Code):
        fence = "`" * max(3, max((len(m) for m in re.findall(r"`+", block.text)), default=0) + 1)
        return f"{fence}{block.lang}\n{block.text.rstrip()}\n{fence}"
    return f"![{_md_text(block.info.title)}]({block.src})\n\n*{_md_text(block.info.caption)}*"


def render_markdown(
    recommendation: Mapping[str, Any],
    results: Sequence[Mapping[str, Any]],
    load_curve: LoadCurve | None = None,
    images: Mapping[str, str] | None = None,
) -> str:
    """report.md; ``images`` maps figure names (see plots.describe_figures) to paths relative to the report."""
    blocks = build_blocks(recommendation, results, load_curve, images)
    return "\n\n".join(_md_block(b) for b in blocks) + "\n"


# -- HTML ----------------------------------------------------------------------------------

_CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; max-width: 72rem; margin: 2rem auto;
       padding: 0 1rem; color: #1b1f24; line-height: 1.45; }
h1 { font-size: 1.5rem; } h2 { font-size: 1.2rem; margin-top: 2rem; border-bottom: 1px solid #ddd; }
h3 { font-size: 1.0rem; }
table { border-collapse: collapse; margin: 0.5rem 0; font-size: 0.9rem; }
th, td { border: 1px solid #ccc; padding: 0.25rem 0.5rem; text-align: left; vertical-align: top; }
th { background: #f3f4f6; }
code, pre { font-family: ui-monospace, "SFMono-Regular", Menlo, monospace; font-size: 0.88rem; }
pre { background: #f6f8fa; padding: 0.75rem; overflow-x: auto; border-radius: 4px; }
figure { margin: 1rem 0; } figcaption { font-size: 0.85rem; color: #555; max-width: 40rem; }
img { max-width: 100%; height: auto; }
"""


def _html_spans(spans: Sequence[Span]) -> str:
    out = []
    for s in spans:
        text = html.escape(s.text)
        if s.style == "code":
            out.append(f"<code>{text}</code>")
        elif s.style == "b":
            out.append(f"<strong>{text}</strong>")
        elif s.style == "link":
            out.append(f'<a href="{html.escape(s.href, quote=True)}">{text}</a>')
        else:
            out.append(text)
    return "".join(out)


def _html_block(block: Block) -> str:
    if isinstance(block, Heading):
        return f"<h{block.level}>{html.escape(block.text)}</h{block.level}>"
    if isinstance(block, Para):
        return f"<p>{_html_spans(block.spans)}</p>"
    if isinstance(block, Bullets):
        return "<ul>" + "".join(f"<li>{_html_spans(item)}</li>" for item in block.items) + "</ul>"
    if isinstance(block, Table):
        head = "".join(f"<th>{html.escape(h)}</th>" for h in block.header)
        body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in block.rows)
        return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
    if isinstance(block, Code):
        lang = f' class="language-{html.escape(block.lang, quote=True)}"' if block.lang else ""
        return f"<pre><code{lang}>{html.escape(block.text.rstrip())}</code></pre>"
    return (
        f'<figure><img src="{html.escape(block.src, quote=True)}" alt="{html.escape(block.info.title, quote=True)}">'
        f"<figcaption>{html.escape(block.info.caption)}</figcaption></figure>"
    )


def data_uri(png: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


def render_html(
    recommendation: Mapping[str, Any],
    results: Sequence[Mapping[str, Any]],
    load_curve: LoadCurve | None = None,
    images: Mapping[str, str] | None = None,
) -> str:
    """report.html, one self-contained file: inline CSS, figures as data URIs, no script, nothing fetched.

    ``images`` maps figure names to sources (data URIs keep the file self-contained); when None,
    the figures are drawn here and embedded.
    """
    if images is None:
        images = {p.info.name: data_uri(p.png) for p in draw_figures(recommendation, results, load_curve)}
    blocks = build_blocks(recommendation, results, load_curve, images)
    body = "\n".join(_html_block(b) for b in blocks)
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f"<title>{html.escape(_title(recommendation))}</title>\n<style>{_CSS}</style>\n</head>\n"
        f"<body>\n{body}\n</body>\n</html>\n"
    )


# -- files ---------------------------------------------------------------------------------


def write_report(
    out_dir: Path,
    recommendation: Mapping[str, Any],
    results: Sequence[Mapping[str, Any]],
    load_curve: LoadCurve | None = None,
) -> dict[str, Path]:
    """Write report.md with its PNGs beside it and a self-contained report.html; returns what was written.

    Keys: "markdown", "html", and one per figure name (e.g. "pareto") for its PNG.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    plots = draw_figures(recommendation, results, load_curve)
    written: dict[str, Path] = {}
    for plot in plots:
        path = out_dir / f"{plot.info.name}.png"
        path.write_bytes(plot.png)
        written[plot.info.name] = path
    md = render_markdown(recommendation, results, load_curve, {p.info.name: f"{p.info.name}.png" for p in plots})
    page = render_html(recommendation, results, load_curve, {p.info.name: data_uri(p.png) for p in plots})
    written["markdown"] = out_dir / "report.md"
    written["markdown"].write_text(md, encoding="utf-8")
    written["html"] = out_dir / "report.html"
    written["html"].write_text(page, encoding="utf-8")
    return written
