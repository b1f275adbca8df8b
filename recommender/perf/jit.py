"""`njit` with its compiled code kept on disk where numba can keep it, and compiled in memory where it cannot.

numba keeps a function's machine code beside its source (``__pycache__``) or, failing that, in the user's cache
folder; where neither can be written (a read-only install with a read-only or missing home, as for a service
user) ``cache=True`` raises at import ("no locator available"), so every command that simulates would end in a
traceback. Here the function is then compiled for this process only: slower to start, the same answers.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from numba import njit


def cached_njit(**options: Any) -> Callable[[Callable[..., Any]], Any]:
    """``numba.njit(cache=True, **options)``, or without the disk cache where numba has nowhere to keep it."""

    def wrap(function: Callable[..., Any]) -> Any:
        try:
            return njit(cache=True, **options)(function)
        except RuntimeError as exc:
            if "cannot cache function" not in str(exc):
                raise
            return njit(**options)(function)

    return wrap
