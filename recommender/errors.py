"""One exception family for everything a user can get wrong.

The CLI catches `BadInputError` once and prints it as a single line naming the field
and the fix, with exit code 2 — no traceback. Expected outcomes of a search (a method
that cannot run on a device, a config that does not fit) are *not* errors: they are
recorded as infeasible candidates with their reason.
"""

from __future__ import annotations

import re

#: Characters that would end or rewrite a terminal line: C0 and C1 controls, DEL, and the Unicode line and
#: paragraph separators. A user's value (a path, a key, a name) may hold any of them.
CONTROL_CHARACTERS = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def one_line(text: str) -> str:
    """`text` with every control character written as its escape (``\\n``, ``\\x00``): whatever a user's value
    holds, an error stays one line and cannot forge a second ``error:`` line or move the cursor."""
    return CONTROL_CHARACTERS.sub(lambda m: repr(m.group())[1:-1], text)


class RecommenderError(Exception):
    """Base class of the tool's own errors."""


class BadInputError(RecommenderError):
    """Input the user can fix: names the field (or flag, or file) and says how.

    Args:
        field: where the problem is, e.g. ``recommender/demo/search_space.yaml: space.gpus[2]``.
        problem: what is wrong with it.
        fix: what to do instead.
    """

    def __init__(self, field: str, problem: str, fix: str = "") -> None:
        self.field = field
        self.problem = problem
        self.fix = fix
        message = f"{field}: {problem}"
        if fix:
            message += f" (fix: {fix})"
        super().__init__(one_line(message))

    def __reduce__(self) -> tuple[type[BadInputError], tuple[str, str, str]]:
        """Pickled by its fields (a row planned in another process raises it there: ``fleet.row_processes``)."""
        return type(self), (self.field, self.problem, self.fix)


class SchemeUnavailableError(RecommenderError):
    """A quantization method cannot run here (device, kernel, library); the search records it."""


def pydantic_location(loc: tuple[object, ...]) -> str:
    """A pydantic error location as a user writes it: ``space.hardware[2]``."""
    parts: list[str] = []
    for part in loc:
        if isinstance(part, int):
            parts.append(f"[{part}]")
        else:
            parts.append(("." if parts else "") + str(part))
    return "".join(parts) or "(top level)"


def pydantic_message(error: dict[str, object]) -> str:
    """A pydantic error's message in the words a YAML author uses."""
    if error.get("type") == "extra_forbidden":
        return "unknown key"
    if error.get("type") == "missing":
        return "required key is missing"
    return str(error.get("msg", "invalid value")).removeprefix("Value error, ")
