"""A model refused before planning when every engine asked for refuses it for one reason (its architecture, its
head size): one line naming the field, each engine's reason and the fix, instead of an empty plan."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from recommender.errors import BadInputError

__all__ = ["refuse_unless_one_serves"]


def refuse_unless_one_serves(
    engines: Sequence[str], why_not: Callable[[str], str | None], *, field: str, problem: str, fix: str
) -> None:
    """Nothing when one of `engines` serves the model (`why_not` None for it); else BadInputError naming `field`,
    `problem` and each engine's reason."""
    why = [(e, r) for e in engines if (r := why_not(e)) is not None]
    if len(why) < len(engines):
        return
    reasons = " — ".join(f"{e}: {r}" for e, r in why)
    raise BadInputError(field, f"no engine in [{', '.join(engines)}] {problem}: {reasons}", fix)
