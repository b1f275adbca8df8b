"""Terminal output every command shares: a console sized for logs, the progress over candidates,
and the one-line form of a command-line mistake (the libraries' own chatter is kept off it in
recommender.quiet).

Here rather than in the CLI so that the commands only parse, call and print, and so that
a search and a worker show their trials the same way.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from rich.console import Console

from recommender.errors import one_line
from recommender.money import usd

if TYPE_CHECKING:
    from recommender.evaluation.candidate import CandidateResult
    from recommender.study.worker import ProgressFn, StatusFn


def usage_error(exc: Exception) -> str:
    """A wrong command, flag or value (click's exception) as one line pointing at the command's --help."""
    message = non_finite_message(exc) or one_line(" ".join(str(getattr(exc, "format_message", exc.__str__)()).split()))
    ctx = getattr(exc, "ctx", None)
    command = ctx.command_path if ctx is not None else "recommender"
    return f"error: {message} (fix: see `{command} --help`)"


def non_finite_message(exc: Exception) -> str:
    """ "Invalid value for '--x': 'nan' is not a finite number" where a number flag was given NaN or an infinity, or "".

    The parser checks a ranged number flag (``min=``/``max=``) by comparing it with its bounds, and every comparison
    with NaN is false: ``--expert-skew nan`` was refused as "should be less than or equal to 10", which names a
    bound the value never passed. The raw value is the input of the validation error the parser chains."""
    cause = exc.__cause__ or exc.__context__
    errors = getattr(cause, "errors", None)
    param = getattr(exc, "param", None)
    if not callable(errors) or param is None:
        return ""
    try:
        raw = errors()[0].get("input")
        number = float(raw) if isinstance(raw, str | float) else 0.0
    except (ValueError, TypeError, IndexError):
        return ""
    if math.isfinite(number):
        return ""
    name = one_line(str(raw))[:40]
    flag = (getattr(param, "opts", None) or [getattr(param, "name", "value")])[0]
    return f"Invalid value for '{flag}': {name!r} is not a finite number"


def make_console(*, stderr: bool) -> Console:
    """A console; in logs and CI (no terminal) wide enough that tables do not wrap config keys."""
    console = Console(stderr=stderr)
    return console if console.is_terminal else Console(stderr=stderr, width=140)


@contextlib.contextmanager
def trial_progress(console: Console, *, total: int | None) -> Iterator[tuple[ProgressFn, StatusFn]]:
    """A progress bar over candidates, with a status line and one printed line per evaluated candidate."""
    from rich.markup import escape
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    columns = (
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=console, transient=False) as progress:
        task = progress.add_task("candidates", total=total)

        def on_status(message: str) -> None:
            progress.update(task, description=f"candidates · {escape(message)}")

        def on_trial(done: int, planned: int, result: CandidateResult, cached: bool) -> None:
            progress.update(task, completed=done, total=planned)
            if not cached:
                # One line per candidate, never wrapped or cut: a pipe or CI log keeps the whole reason on it.
                progress.console.print(f"  {done:3d} {_line(result)}", markup=False, highlight=False, soft_wrap=True)

        yield on_trial, on_status


@contextlib.contextmanager
def step_progress(console: Console, *, total: int, description: str) -> Iterator[Callable[[str], None]]:
    """A transient progress bar over `total` steps; the callback advances it and names the step just done.
    Nothing at all when `console` is not a terminal (logs, CI, pipes stay clean)."""
    if not console.is_terminal:
        yield lambda step: None
        return
    from rich.markup import escape
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    columns = (
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=console, transient=True) as progress:
        task = progress.add_task(description, total=total)

        def done(step: str) -> None:
            progress.update(task, advance=1, description=f"{description} · {escape(step)}")

        yield done


def _line(result: CandidateResult) -> str:
    """An evaluated candidate in one line: its key, its monthly cost at the traffic, feasible or what it broke."""
    price = "-" if result.usd_per_month is None else f"{usd(result.usd_per_month)}/month"
    verdict = "feasible" if result.feasible else ("; ".join(result.broken) or result.quality_verdict)
    alarm = " (!) capacity far under its physics ceiling" if result.serving and result.serving.physics_alarm else ""
    return f"{result.candidate.key:<44} {price:>14}  {verdict}{alarm}"
