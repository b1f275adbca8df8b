"""A plan that can plan nothing is refused: one line saying why, exit 2, whichever path reached it (issue 57).

`plan` printed a table of dashes and exited 0 where no row could serve the traffic: Llama-3.1-70B in BF16 on two
RTX 4090s "does not fit" as a plain plan and "neither layout meets the SLA" with ``--layout disaggregated``, where
the expert-parallel pools and `plan --spec`'s pool check refused the same question with exit 2. Every path now ends
here: the plain rows (flags or spec), the layouts' and the parallelism comparisons. Where some row serves the
traffic the plan stands (exit 0) and the empty rows keep their reasons in the table; where none does, the rows'
reasons become one `BadInputError` naming the setting to change — the degrees or GPUs for memory, the engines for
a scheme none launches, the SLA where not even a lone request meets it — in the words of the path that asked
(`FLAG_FIELDS` for the command line, `spec_fields` for a spec). Nothing computed is lost: an empty row holds no
figure but its reason, and the reasons are in the line.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from recommender.errors import BadInputError

if TYPE_CHECKING:
    from recommender.fleet.layouts.layout_compare import LayoutComparison
    from recommender.fleet.layouts.parallelism import ParallelismComparison
    from recommender.fleet.layouts.routing_compare import RoutingComparison
    from recommender.fleet.plan_row import EmptyReason, PlanRow

__all__ = ["FLAG_FIELDS", "EmptyPlanFields", "refuse_empty_plan", "spec_fields"]

#: Rows whose reasons are quoted in the line (the rest counted).
QUOTED_ROWS = 3


@dataclass(frozen=True, slots=True)
class EmptyPlanFields:
    """The setting each kind of empty plan is refused under, and its fix, in one path's words."""

    memory: tuple[str, str]
    engine: tuple[str, str]
    degree: tuple[str, str]
    sla: tuple[str, str]

    def of(self, kind: EmptyReason) -> tuple[str, str]:
        return {"memory": self.memory, "engine": self.engine, "degree": self.degree}.get(kind, self.sla)


FLAG_FIELDS = EmptyPlanFields(
    memory=("--tensor-parallel", "give larger --tensor-parallel degrees, GPUs with more memory, or a smaller scheme"),
    engine=("--engine", "add an engine that launches the scheme on these GPUs, or plan another --precision/--scheme"),
    degree=("--tensor-parallel", "give degrees a node of the GPUs holds"),
    sla=("--ttft-ms", "relax --ttft-ms/--tpot-ms, or plan faster GPUs or a smaller scheme"),
)


def spec_fields(prefix: str) -> EmptyPlanFields:
    """The spec's keys for the same refusals (`prefix`: the spec file, ``path: ``)."""
    return EmptyPlanFields(
        memory=(f"{prefix}space.tensor_parallel", "add larger degrees, GPUs with more memory, or a smaller scheme"),
        engine=(f"{prefix}engines", "add an engine that launches the space's schemes on its GPUs, or other schemes"),
        degree=(f"{prefix}space.tensor_parallel", "list degrees a node of the space's GPUs holds"),
        sla=(f"{prefix}sla", "relax the SLA, or add faster GPUs or smaller schemes to the space"),
    )


def _kind(row: PlanRow) -> EmptyReason:
    """A row's reason as a kind; a row built elsewhere without one is an SLA miss where it has figures."""
    if row.empty:
        return row.empty
    return "sla" if row.result is not None else "memory"


def refuse_empty_plan(
    rows: Sequence[PlanRow],
    *,
    fields: EmptyPlanFields,
    comparisons: Sequence[LayoutComparison | ParallelismComparison | RoutingComparison] = (),
) -> None:
    """BadInputError where no row serves the traffic and no comparison has a winner; nothing where one does.

    The setting named is the most common kind among the empty rows (ties to the first row's); the line quotes
    the first rows' reasons and counts the rest."""
    if not rows or any(r.capacity > 0 for r in rows) or any(c.winner for c in comparisons):
        return
    kinds = Counter(_kind(r) for r in rows)
    kind = max(kinds, key=lambda k: (kinds[k], k == _kind(rows[0])))
    field, fix = fields.of(kind)
    quoted = [f"{r.hardware}/{r.precision}: {r.note or 'no configuration meets the SLA'}" for r in rows[:QUOTED_ROWS]]
    more = f"; and {len(rows) - QUOTED_ROWS} more rows" if len(rows) > QUOTED_ROWS else ""
    raise BadInputError(field, f"nothing planned can serve the traffic ({'; '.join(quoted)}{more})", fix)
