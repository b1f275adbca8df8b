"""Open pages in headless Chromium as a person would, fail on what a person would see broken, keep screenshots.

    .venv/bin/python benchmarks/browser_check.py mlruns/studies/<study>/report.html [more pages or URLs]
        [--out browser-check] [--expect "Buy:"] [--settle-s 2] [--no-install]

For each page: console errors, uncaught exceptions and failed loads (Chrome's log), images that did
not decode, code blocks and the page itself wider than the window (a command cut off in a side-
scrolling box), the first copy button not answering a click, and any `--expect` text missing once
the page settles (an app like MLflow's UI renders after load: the text is polled for). Screenshots
of the first screen and of the whole page go to `--out`. Exit status 1 when any page has a problem.

Chromium is Debian's `chromium` package; when it is absent the script installs it with apt-get
(root only) unless `--no-install`. It is driven over the DevTools protocol on a loopback port with a
minimal WebSocket client from the standard library, so nothing else is installed.
"""

from __future__ import annotations

import argparse
import base64
import http.client
import json
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
WIDTH, HEIGHT = 1280, 900
#: Tallest full-page screenshot kept (Chrome's texture limit is 16384 px).
MAX_FULL_HEIGHT = 16000


def find_chromium() -> str | None:
    return next((path for name in BROWSERS if (path := shutil.which(name))), None)


def install_chromium() -> str | None:
    """Install Debian's chromium with apt-get when running as root; the browser's path, or None."""
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        return None
    env = os.environ | {"DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run(["apt-get", "update", "-qq"], check=False, env=env)
    subprocess.run(["apt-get", "install", "-y", "-qq", "chromium"], check=False, env=env)
    return find_chromium()


class WebSocket:
    """Just enough of RFC 6455 for the DevTools protocol: masked text frames out, text frames in."""

    def __init__(self, host: str, port: int, path: str, timeout_s: float) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout_s)
        key = base64.b64encode(os.urandom(16)).decode()
        request = (f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                   f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n")  # fmt: skip
        self.sock.sendall(request.encode())
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self.sock.recv(4096)
            if not chunk:
                raise ConnectionError("the browser closed the DevTools connection")
            head += chunk
        if b" 101 " not in head.split(b"\r\n", 1)[0]:
            raise ConnectionError(f"no WebSocket upgrade: {head[:80]!r}")
        self.buffer = head.split(b"\r\n\r\n", 1)[1]

    def _read(self, n: int) -> bytes:
        while len(self.buffer) < n:
            chunk = self.sock.recv(1 << 16)
            if not chunk:
                raise ConnectionError("the browser closed the DevTools connection")
            self.buffer += chunk
        data, self.buffer = self.buffer[:n], self.buffer[n:]
        return data

    def _frame(self, opcode: int, payload: bytes) -> None:
        size = len(payload)
        if size < 126:
            header = struct.pack("!BB", 0x80 | opcode, 0x80 | size)
        elif size < 1 << 16:
            header = struct.pack("!BBH", 0x80 | opcode, 0x80 | 126, size)
        else:
            header = struct.pack("!BBQ", 0x80 | opcode, 0x80 | 127, size)
        mask = os.urandom(4)
        self.sock.sendall(header + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload)))

    def send(self, text: str) -> None:
        self._frame(0x1, text.encode())

    def recv(self) -> str:
        message = b""
        while True:
            first, second = self._read(2)
            size = second & 0x7F
            if size == 126:
                size = struct.unpack("!H", self._read(2))[0]
            elif size == 127:
                size = struct.unpack("!Q", self._read(8))[0]
            mask = self._read(4) if second & 0x80 else b""
            payload = self._read(size)
            if mask:
                payload = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
            opcode = first & 0x0F
            if opcode == 0x9:
                self._frame(0xA, payload)
                continue
            if opcode == 0x8:
                raise ConnectionError("the browser closed the DevTools connection")
            message += payload
            if first & 0x80:
                return message.decode()


@dataclass
class Browser:
    """One headless Chromium and a DevTools session on its first page; events kept as they arrive."""

    process: subprocess.Popen[bytes]
    ws: WebSocket
    profile: tempfile.TemporaryDirectory[str]
    events: list[dict[str, Any]] = field(default_factory=list)
    next_id: int = 0

    @classmethod
    def start(cls, executable: str, timeout_s: float = 30.0) -> Browser:
        profile = tempfile.TemporaryDirectory(prefix="browser-check-")
        args = [executable, "--headless=new", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
                "--disable-extensions", "--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0",
                f"--user-data-dir={profile.name}", f"--window-size={WIDTH},{HEIGHT}", "about:blank"]  # fmt: skip
        process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        port_file, deadline = Path(profile.name) / "DevToolsActivePort", time.monotonic() + timeout_s
        while not (port_file.is_file() and port_file.read_text().strip()):
            if time.monotonic() > deadline or process.poll() is not None:
                process.kill()
                raise RuntimeError(f"{executable} did not open a DevTools port")
            time.sleep(0.1)
        port = int(port_file.read_text().split()[0])
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout_s)
        conn.request("GET", "/json/list")
        pages = [t for t in json.loads(conn.getresponse().read()) if t.get("type") == "page"]
        path = pages[0]["webSocketDebuggerUrl"].split(str(port), 1)[1]
        return cls(process, WebSocket("127.0.0.1", port, path, timeout_s), profile)

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        self.next_id += 1
        self.ws.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            message = json.loads(self.ws.recv())
            if message.get("id") == self.next_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})  # type: ignore[no-any-return]
            self.events.append(message)

    def evaluate(self, expression: str) -> Any:
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        return result.get("result", {}).get("value")

    def wait_for(self, event: str, timeout_s: float) -> bool:
        """Until `event` arrives (True) or the time is up (False); other events are kept."""
        deadline = time.monotonic() + timeout_s
        self.ws.sock.settimeout(0.5)
        try:
            while time.monotonic() < deadline:
                if any(e.get("method") == event for e in self.events):
                    return True
                try:
                    self.events.append(json.loads(self.ws.recv()))
                except TimeoutError:
                    continue
            return False
        finally:
            self.ws.sock.settimeout(30.0)

    def close(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
        self.profile.cleanup()


#: Run in the page after it settles: images that did not decode, boxes wider than their room, the copy button.
_CHECKS = """
(async () => {
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
})()
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


def _event_problems(events: list[dict[str, Any]]) -> list[str]:
    """Console errors, uncaught exceptions and Chrome's own error log entries (failed loads among them)."""
    problems = []
    for e in events:
        method, params = e.get("method"), e.get("params", {})
        if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            args = " ".join(str(a.get("value", a.get("description", ""))) for a in params.get("args", []))
            problems.append(f"console error: {args[:300]}")
        elif method == "Runtime.exceptionThrown":
            details = params.get("exceptionDetails", {})
            text = details.get("exception", {}).get("description") or details.get("text", "")
            problems.append(f"uncaught exception: {str(text)[:300]}")
        elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
            entry = params["entry"]
            problems.append(f"browser log error: {entry.get('text', '')[:200]} {entry.get('url', '')[:120]}".strip())
    return problems


def _wait_for_text(browser: Browser, expect: list[str], settle_s: float) -> list[str]:
    """The expected texts still missing from the page after up to `settle_s` seconds."""
    deadline = time.monotonic() + settle_s
    while True:
        text = str(browser.evaluate("document.body ? document.body.innerText : ''") or "")
        missing = [t for t in expect if t not in text]
        if not missing or time.monotonic() > deadline:
            return missing
        time.sleep(0.5)


def _screenshots(browser: Browser, out: Path, stem: str, height: int) -> list[Path]:
    first = out / f"{stem}-first-screen.png"
    first.write_bytes(base64.b64decode(browser.call("Page.captureScreenshot", format="png")["data"]))
    clip = {"x": 0, "y": 0, "width": WIDTH, "height": min(max(height, HEIGHT), MAX_FULL_HEIGHT), "scale": 1}
    full = out / f"{stem}-full.png"
    data = browser.call("Page.captureScreenshot", format="png", captureBeyondViewport=True, clip=clip)["data"]
    full.write_bytes(base64.b64decode(data))
    return [first, full]


def check_page(
    browser: Browser, target: str, out: Path, *, stem: str, expect: list[str], settle_s: float
) -> PageReport:
    """Load one page in a fresh state and report what a reader would find broken; screenshots into `out`."""
    url = _as_url(target)
    browser.events.clear()
    for domain in ("Page", "Runtime", "Log"):
        browser.call(f"{domain}.enable")
    browser.call("Emulation.setDeviceMetricsOverride", width=WIDTH, height=HEIGHT, deviceScaleFactor=1, mobile=False)
    browser.events.clear()
    browser.call("Page.navigate", url=url)
    problems = [] if browser.wait_for("Page.loadEventFired", 60.0) else ["the page did not finish loading in 60 s"]
    missing = _wait_for_text(browser, expect, settle_s)
    problems += [f"expected text not on the page: {t!r}" for t in missing]
    found = browser.evaluate(_CHECKS) or {}
    problems += [f"image did not load: {name}" for name in found.get("broken", [])]
    problems += [f"code block cut off (scrolls sideways): {text!r}" for text in found.get("cut", [])]
    problems += ["the page scrolls sideways at 1280 px"] if found.get("wide") else []
    if found.get("copy") not in (None, "Copied", "Selected"):
        problems.append(f"copy button did not answer a click (reads {found.get('copy')!r})")
    problems += _event_problems(browser.events)
    browser.call("Runtime.evaluate", expression="window.scrollTo(0, 0)")
    shots = _screenshots(browser, out, stem, int(found.get("height", HEIGHT)))
    first_text = str(browser.evaluate("document.body ? document.body.innerText.slice(0, 3000) : ''") or "")
    return PageReport(url, problems, shots, first_text)


def check_pages(targets: list[str], out: Path, *, expect: list[str], settle_s: float, install: bool = True,
                executable: str | None = None) -> list[PageReport]:  # fmt: skip
    """Check each page in one browser; raises RuntimeError when no Chromium can be found (or installed)."""
    executable = executable or find_chromium() or (install_chromium() if install else None)
    if executable is None:
        raise RuntimeError("no chromium: `apt-get install chromium` (Debian) or pass --browser")
    out.mkdir(parents=True, exist_ok=True)
    browser = Browser.start(executable)
    try:
        return [
            check_page(browser, t, out, stem=f"page{i}-{Path(t.split('#')[0].rstrip('/')).stem or 'index'}",
                       expect=expect, settle_s=settle_s)  # fmt: skip
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
    reports = check_pages(args.targets, args.out, expect=args.expect, settle_s=args.settle_s,
                          install=not args.no_install, executable=args.browser)  # fmt: skip
    for report in reports:
        print(f"{'ok  ' if report.ok else 'FAIL'} {report.url}")
        for problem in report.problems:
            print(f"     {problem}")
        print(f"     screenshots: {', '.join(str(p) for p in report.screenshots)}")
    return 0 if all(r.ok for r in reports) else 1


if __name__ == "__main__":
    sys.exit(main())
