"""A vLLM server the tool starts on a checkpoint, waits for, and stops: ``probe --serve vllm``.

The server runs in its own process group (its engine core is a child process), its output in a log file beside
nothing the user owns (a temporary file named in every error); ``/health`` answering 200 means ready (35-85 s on two
CPU cores with ``--enforce-eager``). Stopping sends SIGTERM to the group, then SIGKILL after a grace period.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from recommender.engines.cpu_engine_env import EngineEnv, server_command
from recommender.errors import BadInputError

__all__ = ["RunningServer", "free_port", "serve"]


def free_port() -> int:
    """A TCP port nothing listens on now (the OS's pick)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@dataclass(frozen=True, kw_only=True)
class RunningServer:
    """A started server: where it answers, how it was started, how long it took, where it logs."""

    base_url: str
    command: list[str]
    start_s: float
    log: Path


def _healthy(base_url: str) -> bool:
    try:
        with urllib.request.urlopen(base_url + "/health", timeout=2) as answer:  # noqa: S310 (our own server)
            return int(answer.status) == 200
    except (urllib.error.URLError, OSError, ValueError):
        return False


def _tail(log: Path, lines: int = 2) -> str:
    """The log's first line naming an error (the root cause; the engine's later lines only repeat that it failed),
    else its last lines."""
    try:
        text = log.read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    causes = [line for line in text if re.search(r"\b\w*(Error|Exception): ", line)]
    return (causes[0] if causes else " | ".join(text[-lines:]))[-400:]


def _stop(process: subprocess.Popen[bytes], grace_s: float = 20.0) -> None:
    if process.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()


@contextlib.contextmanager
def serve(
    env: EngineEnv, *, model: str, extra: tuple[str, ...] = (), ready_timeout_s: float = 300.0
) -> Iterator[RunningServer]:
    """Start vLLM on ``model``, wait for ``/health``, yield the server, stop it on the way out (also on errors).

    Raises:
        BadInputError: the server exited or was not healthy within ``ready_timeout_s`` (its log's last lines quoted).
    """
    port = free_port()
    command = server_command(env, model=model, port=port, extra=extra)
    base_url = f"http://127.0.0.1:{port}"
    log = Path(tempfile.mkstemp(prefix="recommender-vllm-", suffix=".log")[1])
    started = time.perf_counter()
    with log.open("wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        while not _healthy(base_url):
            if process.poll() is not None:
                raise BadInputError(
                    "--serve vllm", f"the server exited ({process.returncode}): {_tail(log)}", f"read {log}"
                )
            if time.perf_counter() - started > ready_timeout_s:
                raise BadInputError(
                    "--serve vllm", f"not healthy after {ready_timeout_s:.0f} s: {_tail(log)}", f"read {log}"
                )
            time.sleep(1.0)
        yield RunningServer(base_url=base_url, command=command, start_s=time.perf_counter() - started, log=log)
    finally:
        _stop(process)
