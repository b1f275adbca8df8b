"""The tensor-parallel degrees a disaggregated candidate's decode pool is searched at, and the spec's checks of them.

`recommender plan --layout disaggregated` chooses each pool's degree on its own
(``fleet/layouts/disaggregated_plan.py``:
every degree of the node for the prefill pool, every degree for the decode pool, equal degrees only where the engine
needs them). The search asks the same with one more candidate field, `decode_tensor_parallel`, an Optuna parameter
suggested only for a disaggregated candidate, like `decode_hardware` (``config/decode_pools.py`` says why a
conditional parameter rather than "the cheapest decode degree per candidate"): each pair of degrees is a candidate
with its own result, key (``/decode-tp<N>``) and line in the report. Its choices:

- `space.decode_tensor_parallel` where the spec lists it (each searched with every prefill degree of the space);
- left out, the space's `tensor_parallel` degrees where there are two or more, so a search over several degrees pairs
  them as `plan` does; else none (no parameter: both pools at the candidate's degree, the study's parameters those
  of a spec written before decode degrees).

A spec whose decode degrees are searched hashes them into its study name (``SearchSpec.fingerprint``), as decode
GPUs are: its trials hold a parameter older ones lack.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from recommender.config.candidate import DISAGGREGATED, LOCAL_DEVICE
from recommender.config.decode_pools import decode_choices
from recommender.errors import BadInputError

if TYPE_CHECKING:
    from recommender.config.candidate import Candidate
    from recommender.config.space import Space
    from recommender.perf.catalog.gpus import Catalog

__all__ = ["check_decode_degrees", "decode_degree_choices"]


def decode_degree_choices(space: Space, current: Candidate) -> list[int]:
    """The `decode_tensor_parallel` parameter's choices, sorted; [] where it is not searched (no parameter). The
    current deployment's decode degree is among them when it runs disaggregated, so it can be enqueued as a trial."""
    if DISAGGREGATED not in {*space.layout, current.layout}:
        return []
    own = {current.decode_tp} if current.layout == DISAGGREGATED else set()
    if space.decode_tensor_parallel is not None:
        return sorted(set(space.decode_tensor_parallel) | own)
    degrees = set(space.tensor_parallel) | {current.tensor_parallel} | own
    return sorted(degrees) if len(degrees) > 1 else []


def check_decode_degrees(space: Space, current: Candidate, catalog: Catalog) -> None:
    """Refuse a listed degree no decode GPU of the spec takes
    (over its node's `max_tensor_parallel`: every candidate at it would be pruned, the search answering as if the
    degree had been tried)."""
    if space.decode_tensor_parallel is None:
        return
    gpus = decode_choices(space, current) or [*space.hardware, current.hardware]
    nodes = {hw: catalog.get(hw).max_tensor_parallel for hw in dict.fromkeys(gpus) if hw != LOCAL_DEVICE}
    if not nodes:
        return  # no catalog GPU: ``study/layout_checks.py`` refuses the disaggregated layout itself
    widest = max(nodes.values())
    for i, degree in enumerate(space.decode_tensor_parallel):
        if degree > widest:
            held = ", ".join(f"{hw} {n}" for hw, n in nodes.items())
            raise BadInputError(
                f"space.decode_tensor_parallel[{i}]",
                f"TP{degree} is wider than any decode GPU's node (GPUs per node: {held})",
                f"list degrees up to {widest}",
            )
