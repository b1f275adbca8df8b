"""An interrupted command leaves even when a library left a non-daemon thread running (cli/interrupt.py)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time

PROGRAM = textwrap.dedent(
    """
    import sys, threading, time
    from recommender.cli.interrupt import exit_within
    threading.Thread(target=lambda: time.sleep(3600)).start()  # as Optuna's heartbeat thread, never stopped
    exit_within({grace}, 130)
    sys.exit(130)
    """
)


def test_a_thread_that_never_stops_does_not_hold_the_exit() -> None:
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-c", PROGRAM.format(grace=0.5)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 130, done.stderr
    assert done.stderr.strip().splitlines() == [
        "interrupted: a library thread did not stop within 0.5 s; left without it"
    ]
    assert time.monotonic() - started < 30


def test_a_clean_exit_is_not_waited_for() -> None:
    program = "import sys; from recommender.cli.interrupt import exit_within; exit_within(30, 130); sys.exit(130)"
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=60)
    assert done.returncode == 130 and done.stderr == ""
    assert time.monotonic() - started < 25  # the watchdog is a daemon: it does not keep the process
