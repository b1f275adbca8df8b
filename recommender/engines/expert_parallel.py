"""An expert-parallel launch in engine-neutral terms: the replica `plan --expert-parallel` priced, one node's part.

A replica of ``ep`` GPUs splits the routed experts over all of them and runs ``attention_dp`` attention ranks, each
a tensor-parallel group of ``ep / attention_dp`` GPUs (``perf/model/expert_parallel.py``); ``redundant_experts``
extra expert slots are balanced by the engine's EPLB. A replica larger than one node (``gpus_per_node``) runs one
command per node: `node_rank` says which node's command an engine emits (0: the node that serves HTTP).

Each engine's module turns these into its own flags (``vllm.py``, ``sglang.py``, ``trtllm.py``, sources cited
there); an engine without expert parallelism refuses through ``Engine.expert_parallel_refusal``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from recommender.errors import BadInputError

__all__ = ["ExpertParallelLaunch", "HEAD_NODE_ADDRESS", "expand_placeholders"]

#: What the user sets on every node of a replica spanning several: the first node's address (a shell variable).
HEAD_NODE_ADDRESS = "${HEAD_NODE_IP}"
_QUOTED_HEAD = re.compile(r"'(\$\{HEAD_NODE_IP\}[\w.:-]*)'")


def expand_placeholders(command: str) -> str:
    """`shlex.join` single-quotes ``${HEAD_NODE_IP}``, which the shell then passes on literally: double-quote it,
    so the variable the user sets expands (the rest of the argument is plain address characters)."""
    return _QUOTED_HEAD.sub(r'"\1"', command)


@dataclass(frozen=True, kw_only=True)
class ExpertParallelLaunch:
    """One expert-parallel replica's layout, and which of its nodes a command is for.

    Args:
        ep: GPUs of the replica; the routed experts are split over all of them.
        attention_dp: attention ranks (data-parallel attention); each is ``ep / attention_dp`` GPUs.
        redundant_experts: extra expert slots placed by the engine's load balancer (0: none).
        gpus_per_node: GPUs of one node; a replica of more spans ``ep / gpus_per_node`` nodes.
        node_rank: the node this command is for (0: the first, which serves the API).
    """

    ep: int
    attention_dp: int
    redundant_experts: int = 0
    gpus_per_node: int = 8
    node_rank: int = 0

    def __post_init__(self) -> None:
        if self.ep < 2:
            raise BadInputError("launch.expert_parallel.ep", f"must be >= 2, got {self.ep}")
        if self.attention_dp < 1 or self.ep % self.attention_dp:
            raise BadInputError(
                "launch.expert_parallel.attention_dp",
                f"{self.attention_dp} attention ranks do not split {self.ep} GPUs",
                "use a divisor of ep (1 or ep)",
            )
        if self.redundant_experts < 0:
            raise BadInputError(
                "launch.expert_parallel.redundant_experts", f"must be >= 0, got {self.redundant_experts}"
            )
        if self.gpus_per_node < 1 or (self.ep > self.gpus_per_node and self.ep % self.gpus_per_node):
            raise BadInputError(
                "launch.expert_parallel.gpus_per_node",
                f"{self.ep} GPUs do not fill whole nodes of {self.gpus_per_node}",
                "plan a degree that is a multiple of the node's GPUs",
            )
        if not 0 <= self.node_rank < self.nodes:
            raise BadInputError("launch.expert_parallel.node_rank", f"must be in 0..{self.nodes - 1}")

    @property
    def attention_tp(self) -> int:
        """GPUs of one attention rank (its tensor-parallel group)."""
        return self.ep // self.attention_dp

    @property
    def nodes(self) -> int:
        """Nodes the replica spans."""
        return max(1, self.ep // self.gpus_per_node)

    @property
    def ranks_per_node(self) -> int:
        """Attention ranks on one node (data-parallel attention); 0 when one rank spans nodes."""
        return self.attention_dp // self.nodes
