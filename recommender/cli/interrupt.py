"""Ctrl-C as an event the long-running commands check between trials.

Library code sometimes swallows the KeyboardInterrupt that SIGINT raises (torch while
importing a module), so the search cannot rely on the exception alone: it also checks
this event between trials, which gives the user's Ctrl-C a second chance to stop it.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time
from typing import Any


def ctrl_c_event() -> threading.Event:
    """An event set by Ctrl-C (SIGINT), which also raises KeyboardInterrupt as usual."""
    flag = threading.Event()

    def on_sigint(_signum: int, _frame: object) -> None:
        flag.set()
        # A database cursor this interrupt breaks mid-fetch is closed on the way out, and SQLAlchemy logs that
        # close's failure with its traceback ("Error closing cursor", the pool's logger): expected here, not news.
        logging.getLogger("sqlalchemy.pool").setLevel(logging.CRITICAL)
        raise KeyboardInterrupt

    default_hook = sys.unraisablehook

    def quiet_when_interrupted(unraisable: Any) -> None:
        # A KeyboardInterrupt raised inside a finalizer is "ignored" with a traceback; the flag handles it.
        if not isinstance(unraisable.exc_value, KeyboardInterrupt):
            default_hook(unraisable)

    signal.signal(signal.SIGINT, on_sigint)
    sys.unraisablehook = quiet_when_interrupted
    return flag


#: How long an interrupted command waits for its library threads at exit before it leaves without them.
EXIT_GRACE_S = 10.0


def exit_within(seconds: float, code: int) -> None:
    """Leave with `code` if the interpreter's exit has not finished `seconds` from now.

    Python's exit joins every non-daemon thread, and Optuna's trial heartbeat thread is one, stopped only by its
    context manager's exit: a Ctrl-C that lands inside that ``with`` statement's own entry leaves it beating
    forever (a third `search` in the fault test printed its interrupt line and had not exited 120 s later, once
    in four runs on two loaded cores). Everything finished is committed and the locks are let go by then
    (``finally`` blocks ran), so leaving without those threads loses nothing."""

    def leave() -> None:
        time.sleep(seconds)
        sys.stderr.write(f"interrupted: a library thread did not stop within {seconds:g} s; left without it\n")
        sys.stderr.flush()
        os._exit(code)

    threading.Thread(target=leave, name="exit-after-interrupt", daemon=True).start()
