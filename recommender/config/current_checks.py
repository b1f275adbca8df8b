"""The spec's `current` deployment checked by the checks its `space` gets, for every key they share (issue 57).

`current` is the baseline every saving is measured against and is evaluated as the search's first trial: a value
there that the same value in `space` would have been refused for (a decode degree wider than its GPU's node, a
decode GPU the price set does not price) started a search, wrote a study and ended in exit 1 with the reason on the
current row, or was pruned while the search answered as if disaggregated pools had been weighed. Each is one line
here, before any work. The checks that need the model (an expert-parallel degree on a dense model) are
``study/layout_checks.py``'s, where the space's are.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from recommender.config.candidate import LOCAL_DEVICE
from recommender.errors import BadInputError

if TYPE_CHECKING:
    from recommender.config.candidate import Candidate
    from recommender.perf.catalog.gpus import Catalog

__all__ = ["check_current"]


def check_current(current: Candidate, catalog: Catalog) -> None:
    """Refuse a `current` whose degrees do not fit its GPUs' nodes, or whose GPUs the price set does not price."""
    _check_degree(current.hardware, current.tensor_parallel, "current.tensor_parallel", catalog)
    if current.decode_tensor_parallel:
        _check_degree(current.decode_gpu, current.decode_tensor_parallel, "current.decode_tensor_parallel", catalog)
    for field, hw in (("current.hardware", current.hardware), ("current.decode_hardware", current.decode_hardware)):
        if hw and hw != LOCAL_DEVICE and (unpriced := catalog.price_refusal(hw)) is not None:
            raise BadInputError(field, unpriced)


def _check_degree(hardware: str, degree: int, field: str, catalog: Catalog) -> None:
    """A tensor-parallel degree wider than `hardware`'s node (as ``space.decode_tensor_parallel`` is refused)."""
    if hardware == LOCAL_DEVICE:
        return
    node = catalog.get(hardware).max_tensor_parallel
    if degree > node:
        raise BadInputError(field, f"TP{degree} is wider than a {hardware} node ({node} GPUs)", f"give at most {node}")
