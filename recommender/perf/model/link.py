"""A link between GPUs as the performance model reads it: bytes per second each way and a fixed cost per transfer.

Built from the link catalog (``perf/catalog/links.py``), which sits above this package; the all-to-all and
KV-transfer formulas take a `Link` and never read a catalog themselves.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True, slots=True)
class Link:
    """A link as one GPU sees it: bytes per second each way, seconds per transfer, where the figures came from.

    Args:
        name: the catalog's name (``nvlink``, ``infiniband-ndr``, ...).
        scope: ``node`` (GPUs of one server) or ``cluster`` (a network between servers).
        bytes_per_s: achievable bandwidth per GPU and direction.
        latency_s: fixed cost of one transfer, on top of bytes / bandwidth.
        source: where both figures came from.
    """

    name: str
    scope: Literal["node", "cluster"]
    bytes_per_s: float
    latency_s: float
    source: str

    def seconds(self, nbytes: float) -> float:
        """One transfer of `nbytes` (0 bytes: no transfer, no latency)."""
        return 0.0 if nbytes <= 0 else self.latency_s + nbytes / self.bytes_per_s
