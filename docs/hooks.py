"""mkdocs hooks (mkdocs.yml `hooks:`): the generated references (tables, the command-line reference), and the
changelog at the repository root.

The tables come from `references.py` beside this file, which imports the package, so a page shows what the
code holds at build time. CHANGELOG.md lives at the root (where people look for it) and joins the site as a
generated page.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))  # the checkout's package, when it is not installed

import references  # noqa: E402

CHANGELOG = HERE.parent / "CHANGELOG.md"


def on_files(files: Files, config: Any, **_: Any) -> Files:
    """Add the root CHANGELOG.md as the site's changelog page."""
    files.append(File.generated(config, "changelog.md", content=CHANGELOG.read_text(encoding="utf-8")))
    return files


def on_page_markdown(markdown: str, **_: Any) -> str:
    """Each `<!-- generated: NAME -->` marker replaced by its table."""
    return references.fill(markdown)
