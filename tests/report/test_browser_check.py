"""The report in a real browser (headless Chromium): no console errors, every figure decodes, nothing cut off.

`slow`: starts a browser. Skipped where no Chromium is installed (Debian: `apt-get install chromium`;
benchmarks/browser_check.py installs it itself when run as a script) or where Playwright, which drives it,
is not (`pip install -e '.[dev]'`; no `playwright install`: the system's Chromium is used).
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest

from recommender.report.render import write_report
from tests.benchmark_scripts import load_benchmark
from tests.report.test_report_render import Study, _with_assumptions, study  # noqa: F401  (the fixture)

pytestmark = pytest.mark.slow


def _browser_check() -> ModuleType:
    return load_benchmark("browser_check")


@pytest.fixture(scope="module")
def check() -> ModuleType:
    pytest.importorskip("playwright.sync_api", reason="playwright not installed (the dev extras)")
    module = _browser_check()
    if module.find_chromium() is None:
        pytest.skip("no chromium installed")
    return module


def test_report_passes_in_chromium_and_a_broken_page_fails(
    tmp_path: Path,
    study: Study,  # noqa: F811  (the imported fixture)
    check: ModuleType,
) -> None:
    rec = _with_assumptions(study)
    report = write_report(tmp_path / "report", rec, study[1], study[2])["html"]
    broken = tmp_path / "broken.html"
    broken.write_text(
        '<!DOCTYPE html><html><body><p>x</p><img src="missing.png" alt="a missing figure">'
        '<pre style="white-space: pre; width: 200px; overflow-x: auto">' + "y" * 400 + "</pre>"
        '<script>console.error("boom")</script></body></html>',
        encoding="utf-8",
    )
    good, bad = check.check_pages(
        [str(report), str(broken)], tmp_path / "shots", expect=["Buy:"], settle_s=1.0, install=False
    )
    assert good.ok, good.problems
    assert "Buy:" in good.first_screen_text and "Assumptions" in good.first_screen_text
    for shot in good.screenshots:
        assert shot.read_bytes().startswith(b"\x89PNG") and shot.stat().st_size > 10_000
    problems = " | ".join(bad.problems)
    for expected in (
        "console error: boom",
        "image did not load: a missing figure",
        "code block cut off",
        "expected text not on the page: 'Buy:'",
    ):
        assert expected in problems
