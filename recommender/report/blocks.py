"""The report's building blocks: headings, paragraphs, bullets, tables, code and figures, and number formats.

The report's content is assembled once as a list of these plain blocks (`content.py`) and
written out by the Markdown and HTML serializers (`render.py`), so the two documents never
say different things.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from recommender.report.figure_data import FigureInfo

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


#: A table cell: plain text, or inline spans (code, links) where a figure's source is one click away.
Cell = str | tuple[Span, ...]


@dataclass(frozen=True, slots=True)
class Table:
    header: tuple[str, ...]
    rows: tuple[tuple[Cell, ...], ...]


@dataclass(frozen=True, slots=True)
class Code:
    text: str
    lang: str = ""


@dataclass(frozen=True, slots=True)
class Image:
    info: FigureInfo
    src: str


Block = Heading | Para | Bullets | Table | Code | Image


def para(*parts: str | Span) -> Para:
    return Para(tuple(Span(p) if isinstance(p, str) else p for p in parts))


def bold(text: str) -> Span:
    return Span(text, "b")


def code(text: str) -> Span:
    return Span(text, "code")


def link(text: str, href: str) -> Span:
    return Span(text, "link", href)


_INLINE = re.compile(r"`([^`]+)`|(https?://[^\s,;)`]+)")


def inline(text: str) -> tuple[Span, ...]:
    """Spans of free text written by other modules: `backticked` words as code, http(s) addresses as links.

    Notes and sources are plain strings written for both the console and the report; here they
    become code and links instead of showing literal backticks and dead addresses.
    """
    spans: list[Span] = []
    at = 0
    for found in _INLINE.finditer(text):
        if found.start() > at:
            spans.append(Span(text[at : found.start()]))
        if found.group(1) is not None:
            spans.append(code(found.group(1)))
        else:
            url = found.group(2).rstrip(".")
            spans.append(link(url, url))
            if len(url) < len(found.group(2)):
                spans.append(Span(found.group(2)[len(url) :]))
        at = found.end()
    if at < len(text):
        spans.append(Span(text[at:]))
    return tuple(spans)


# -- number formats ------------------------------------------------------------------------


def num(value: float | None, spec: str = ".4g") -> str:
    return "-" if value is None else format(value, spec)
