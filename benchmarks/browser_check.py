"""Open pages in headless Chromium as a person would, fail on what a person would see broken, keep screenshots.

    .venv/bin/python benchmarks/browser_check.py mlruns/studies/<study>/report.html [more pages or URLs]
        [--out browser-check] [--expect "Buy:"] [--settle-s 2] [--no-install]

For each page: console errors, uncaught exceptions and failed loads (Chrome's log), images that did
not decode, code blocks and the page itself wider than the window (a command cut off in a side-
scrolling box), the first copy button not answering a click, and any `--expect` text missing once
the page settles (an app like MLflow's UI renders after load: the text is polled for). Screenshots
of the first screen and of the whole page go to `--out`. Exit status 1 when any page has a problem.

Chromium is Debian's `chromium` package; when it is absent the script installs it with apt-get
(root only) unless `--no-install`. It is driven with Playwright's sync API (`playwright`, in the
`dev` extras), launched through `executable_path`: Playwright's own browser download
(`playwright install`) is never needed, so the browser is the one the distribution patches.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from playwright.sync_api import Browser, ConsoleMessage, FloatRect, Page, sync_playwright
from playwright.sync_api import Error as PlaywrightError
from playwright.sync_api import TimeoutError as PlaywrightTimeoutError

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
WIDTH, HEIGHT = 1280, 900
#: Tallest full-page screenshot kept (Chrome's texture limit is 16384 px).
MAX_FULL_HEIGHT = 16000
#: How long a page may take to fire its load event before that alone is a problem.
LOAD_TIMEOUT_S = 60.0


def find_chromium() -> str | None:
    """The first Chromium on PATH; Playwright is pointed at it instead of downloading a browser of its own."""
    return next((path for name in BROWSERS if (path := shutil.which(name))), None)


def install_chromium() -> str | None:
    """Install Debian's chromium with apt-get when running as root; the browser's path, or None."""
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        return None
    env = os.environ | {"DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run(["apt-get", "update", "-qq"], check=False, env=env)
    subprocess.run(["apt-get", "install", "-y", "-qq", "chromium"], check=False, env=env)
    return find_chromium()


#: Run in the page after it settles: images that did not decode, boxes wider than their room, the copy button.
_CHECKS = """
async () => {
  const broken = Array.from(document.images).filter(i => !i.complete || i.naturalWidth === 0)
    .map(i => i.alt || i.src.slice(0, 80));
  const cut = Array.from(document.querySelectorAll("pre")).filter(e => e.scrollWidth > e.clientWidth + 1)
    .map(e => e.textContent.slice(0, 60));
  const wide = document.documentElement.scrollWidth > window.innerWidth + 1;
  let copy = null;
  const button = document.querySelector("button.copy");
  if (button) {
    button.click();
    await new Promise(r => setTimeout(r, 300));
    copy = button.textContent;
  }
  return {broken, cut, wide, copy, height: document.documentElement.scrollHeight};
}
"""


@dataclass
class PageReport:
    url: str
    problems: list[str]
    screenshots: list[Path]
    first_screen_text: str = ""

    @property
    def ok(self) -> bool:
        return not self.problems


def _as_url(target: str) -> str:
    return target if "://" in target else Path(target).resolve().as_uri()


def _stem(index: int, target: str) -> str:
    """The screenshots' name: `page1-report` for the first target `.../report.html` (`index` for a bare URL)."""
    return f"page{index}-{Path(target.split('#')[0].rstrip('/')).stem or 'index'}"


def _console_problem(message: ConsoleMessage) -> str | None:
    """A console error or failed assertion, or an error of Chrome's own log (a failed load among them).

    Playwright reports entries of Chrome's log (`Log.entryAdded`) as console messages without
    arguments, so a message with none is labelled as the browser's and carries the URL it names.
    """
    if message.type not in ("error", "assert"):
        return None
    if message.args:
        return f"console error: {message.text[:300]}"
    url = message.location.get("url", "") if message.location else ""
    return f"browser log error: {message.text[:200]} {url[:120]}".strip()


def _page_error_problem(error: PlaywrightError) -> str:
    """An uncaught exception, with its stack as Chrome describes it (`Error: message\\n    at ...`)."""
    return f"uncaught exception: {(error.stack or f'{error.name}: {error.message}')[:300]}"


def _evaluate(page: Page, expression: str) -> Any:
    """`page.evaluate`, retried once the page settles when a navigation replaced the document under it.

    A load that fails leaves Chrome committing its error page after `goto` has returned, and a page may
    redirect itself; either destroys the context an evaluation was running in.
    """
    for attempt in range(3):
        try:
            return page.evaluate(expression)
        except PlaywrightError as error:
            if attempt == 2 or "Execution context was destroyed" not in str(error):
                raise
            page.wait_for_load_state("load", timeout=LOAD_TIMEOUT_S * 1000)
    return None


def _body_text(page: Page, limit: int | None = None) -> str:
    text = str(_evaluate(page, "() => document.body ? document.body.innerText : ''") or "")
    return text if limit is None else text[:limit]


def _wait_for_text(page: Page, expect: list[str], settle_s: float) -> list[str]:
    """The expected texts still missing from the page after up to `settle_s` seconds.

    Waits with `page.wait_for_timeout`, not `time.sleep`, so Playwright keeps taking the page's events meanwhile.
    """
    deadline = time.monotonic() + settle_s
    while True:
        text = _body_text(page)
        missing = [t for t in expect if t not in text]
        if not missing or time.monotonic() > deadline:
            return missing
        page.wait_for_timeout(500)


def _screenshots(page: Page, out: Path, stem: str, height: int) -> list[Path]:
    """The first screen (the window, 1280x900) and the whole page, as tall as it is up to `MAX_FULL_HEIGHT`."""
    first = out / f"{stem}-first-screen.png"
    page.screenshot(path=first, type="png")
    clip: FloatRect = {"x": 0, "y": 0, "width": WIDTH, "height": min(max(height, HEIGHT), MAX_FULL_HEIGHT)}
    full = out / f"{stem}-full.png"
    page.screenshot(path=full, type="png", full_page=True, clip=clip)
    return [first, full]


def _load(page: Page, url: str) -> list[str]:
    """Navigate and wait for the load event; a load that times out or fails is the page's problem, not a crash."""
    try:
        page.goto(url, wait_until="load", timeout=LOAD_TIMEOUT_S * 1000)
    except PlaywrightTimeoutError:
        return [f"the page did not finish loading in {LOAD_TIMEOUT_S:.0f} s"]
    except PlaywrightError as error:
        return [f"the page did not load: {str(error).splitlines()[0][:300]}"]
    return []


def check_page(
    browser: Browser, target: str, out: Path, *, stem: str, expect: list[str], settle_s: float
) -> PageReport:
    """Load one page in a fresh state and report what a reader would find broken; screenshots into `out`.

    Each page gets its own browser context (no cookies, storage or cache from the page before), with a
    1280x900 window at scale 1 so screenshots and the sideways-scroll check see what a laptop shows.
    """
    url = _as_url(target)
    context = browser.new_context(viewport={"width": WIDTH, "height": HEIGHT}, device_scale_factor=1)
    try:
        page = context.new_page()
        events: list[str] = []
        page.on("console", lambda message: events.append(problem) if (problem := _console_problem(message)) else None)
        page.on("pageerror", lambda error: events.append(_page_error_problem(error)))
        problems = _load(page, url)
        missing = _wait_for_text(page, expect, settle_s)
        problems += [f"expected text not on the page: {t!r}" for t in missing]
        found: dict[str, Any] = _evaluate(page, _CHECKS) or {}
        problems += [f"image did not load: {name}" for name in found.get("broken", [])]
        problems += [f"code block cut off (scrolls sideways): {text!r}" for text in found.get("cut", [])]
        problems += [f"the page scrolls sideways at {WIDTH} px"] if found.get("wide") else []
        if found.get("copy") not in (None, "Copied", "Selected"):
            problems.append(f"copy button did not answer a click (reads {found.get('copy')!r})")
        problems += events
        _evaluate(page, "() => window.scrollTo(0, 0)")
        shots = _screenshots(page, out, stem, int(found.get("height", HEIGHT)))
        return PageReport(url, problems, shots, _body_text(page, 3000))
    finally:
        context.close()


def check_pages(
    targets: list[str],
    out: Path,
    *,
    expect: list[str],
    settle_s: float,
    install: bool = True,
    executable: str | None = None,
) -> list[PageReport]:
    """Check each page in one browser; raises RuntimeError when no Chromium can be found (or installed).

    The browser is the system's Chromium launched by path, so no `playwright install` download is needed.
    """
    executable = executable or find_chromium() or (install_chromium() if install else None)
    if executable is None:
        raise RuntimeError("no chromium: `apt-get install chromium` (Debian) or pass --browser")
    out.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, headless=True, args=["--disable-gpu"])
        try:
            return [
                check_page(browser, t, out, stem=_stem(i, t), expect=expect, settle_s=settle_s)
                for i, t in enumerate(targets, 1)
            ]
        finally:
            browser.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("targets", nargs="+", help="report.html paths or URLs")
    parser.add_argument("--out", type=Path, default=Path("browser-check"), help="folder for the screenshots")
    parser.add_argument("--expect", action="append", default=[], help="text each page must show (repeatable)")
    parser.add_argument("--settle-s", type=float, default=2.0, help="how long to wait for --expect text")
    parser.add_argument("--browser", default=None, help="the Chromium executable (default: found on PATH)")
    parser.add_argument("--no-install", action="store_true", help="do not apt-get install chromium when absent")
    args = parser.parse_args(argv)
    reports = check_pages(
        args.targets,
        args.out,
        expect=args.expect,
        settle_s=args.settle_s,
        install=not args.no_install,
        executable=args.browser,
    )
    for report in reports:
        print(f"{'ok  ' if report.ok else 'FAIL'} {report.url}")
        for problem in report.problems:
            print(f"     {problem}")
        print(f"     screenshots: {', '.join(str(p) for p in report.screenshots)}")
    return 0 if all(r.ok for r in reports) else 1


if __name__ == "__main__":
    sys.exit(main())
