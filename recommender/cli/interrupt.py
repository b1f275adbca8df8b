"""Ctrl-C as an event the long-running commands check between trials.

Library code sometimes swallows the KeyboardInterrupt that SIGINT raises (torch while
importing a module), so the search cannot rely on the exception alone: it also checks
this event between trials, which gives the user's Ctrl-C a second chance to stop it.
"""

from __future__ import annotations

import logging
import signal
import sys
import threading
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
