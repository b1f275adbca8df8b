"""The recommendation as a document for people: report.md (with PNGs beside it) and a self-contained report.html.

The content is assembled once as a list of plain blocks (`content.build_blocks`: headings,
paragraphs, tables, code, figures) and written out here by two small serializers, so the
Markdown and the HTML never say different things.
"""

from __future__ import annotations

import base64
import html
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from recommender.report.blocks import Block, Bullets, Cell, Code, Heading, Para, Span, Table
from recommender.report.content import build_blocks, title
from recommender.report.plots import draw_figures

if TYPE_CHECKING:
    from recommender.decision.recommendation import Recommendation
    from recommender.evaluation.candidate import CandidateResult
    from recommender.evaluation.load_curve import LoadCurve

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


def _md_cell(cell: Cell) -> str:
    text = _md_text(cell) if isinstance(cell, str) else _md_spans(cell)
    return text.replace("|", "\\|").replace("\n", " ")


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
    recommendation: Recommendation,
    results: Sequence[CandidateResult],
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
pre { background: #f6f8fa; padding: 0.75rem; border-radius: 4px; margin: 0;
      white-space: pre-wrap; overflow-wrap: anywhere; }
.code { position: relative; margin: 0.5rem 0; }
.code pre { padding-right: 5rem; }
.code button { position: absolute; top: 0.4rem; right: 0.4rem; font-size: 0.8rem; padding: 0.15rem 0.6rem;
               border: 1px solid #bbb; border-radius: 4px; background: #fff; cursor: pointer; }
p code, li code, td code { background: #eef0f3; padding: 0 0.2rem; border-radius: 3px; }
figure { margin: 1.5rem 0; } figcaption { font-size: 0.9rem; color: #444; max-width: 56rem; }
img { max-width: 100%; height: auto; border: 1px solid #e5e7eb; }
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
        body = "".join("<tr>" + "".join(f"<td>{_html_cell(c)}</td>" for c in row) + "</tr>" for row in block.rows)
        return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
    if isinstance(block, Code):
        lang = f' class="language-{html.escape(block.lang, quote=True)}"' if block.lang else ""
        copy = '<button type="button" class="copy" title="Copy to the clipboard">Copy</button>'
        return f'<div class="code">{copy}<pre><code{lang}>{html.escape(block.text.rstrip())}</code></pre></div>'
    return (
        f'<figure><img src="{html.escape(block.src, quote=True)}" alt="{html.escape(block.info.title, quote=True)}">'
        f"<figcaption>{html.escape(block.info.caption)}</figcaption></figure>"
    )


def _html_cell(cell: Cell) -> str:
    return html.escape(cell) if isinstance(cell, str) else _html_spans(cell)


#: The page's only script: copy buttons on commands and configs. Inline (the file stays self-contained);
#: falls back to selecting the text where the clipboard API is refused (a file:// page in some browsers).
_SCRIPT = """
document.querySelectorAll("button.copy").forEach(function (button) {
  button.addEventListener("click", function () {
    var code = button.parentElement.querySelector("code");
    var done = function (label) {
      button.textContent = label;
      setTimeout(function () { button.textContent = "Copy"; }, 1500);
    };
    var select = function () {
      var range = document.createRange(); range.selectNodeContents(code);
      var sel = window.getSelection(); sel.removeAllRanges(); sel.addRange(range);
      done(document.execCommand && document.execCommand("copy") ? "Copied" : "Selected");
    };
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(code.textContent).then(function () { done("Copied"); }, select);
    } else { select(); }
  });
});
"""


def data_uri(png: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


def render_html(
    recommendation: Recommendation,
    results: Sequence[CandidateResult],
    load_curve: LoadCurve | None = None,
    images: Mapping[str, str] | None = None,
) -> str:
    """report.html, one self-contained file: inline CSS and script (copy buttons), figures as data URIs,
    nothing fetched.

    ``images`` maps figure names to sources (data URIs keep the file self-contained); when None,
    the figures are drawn here and embedded.
    """
    if images is None:
        images = {p.info.name: data_uri(p.png) for p in draw_figures(recommendation, results, load_curve)}
    blocks = build_blocks(recommendation, results, load_curve, images)
    body = "\n".join(_html_block(b) for b in blocks)
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f"<title>{html.escape(title(recommendation))}</title>\n<style>{_CSS}</style>\n</head>\n"
        f"<body>\n{body}\n<script>{_SCRIPT}</script>\n</body>\n</html>\n"
    )


# -- files ---------------------------------------------------------------------------------


def write_report(
    out_dir: Path,
    recommendation: Recommendation,
    results: Sequence[CandidateResult],
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
    markdown, page_path = out_dir / "report.md", out_dir / "report.html"
    markdown.write_text(md, encoding="utf-8")
    page_path.write_text(page, encoding="utf-8")
    return written | {"markdown": markdown, "html": page_path}
