"""The expert-parallel all-to-all: dispatch tokens to the GPUs that hold their experts, combine the results back.

Costed by volume over the links it crosses. Each GPU sends each of its tokens to the ``top_k`` experts the
router picked: ``tokens x top_k x hidden x bytes`` leave it per MoE layer for dispatch, and as much comes
back for combine. With experts spread evenly over ``ep`` GPUs, a token-expert pair stays on its GPU with
probability ``1/ep``, goes to another GPU of the node with ``(min(ep, node) - 1)/ep`` (NVLink) and to
another node with ``(ep - min(ep, node))/ep`` (the network). The two tiers run at once (DeepEP's kernels
forward NVLink traffic while RDMA is in flight), so a transfer takes the slower tier's bytes over its
bandwidth plus that tier's latency. The busiest GPU receives ``imbalance`` times the mean
(``expert_load.py``), and the layer waits for it.

Bytes per element: DeepEP dispatches in FP8 with one fp32 scale per 128 values and combines in BF16
("FP8 dispatching and BF16 combining", deepseek-ai/DeepEP docs/legacy.md @ 0297fc80); a 16-bit scheme
dispatches 16-bit activations. Tokens that share a node for several of their experts are sent as many
times here (DeepEP's node-limited routing sends them once over RDMA): the network term is an upper bound
for DeepSeek-V3's group-limited router. Checked against DeepEP V1's published low-latency table
(tests/perf/model/test_expert_parallel.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from recommender.errors import BadInputError
from recommender.perf.model.link import Link

#: FP8 dispatch: one byte per value plus one fp32 scale per 128 values (DeepEP's per-token, per-128 scales).
FP8_DISPATCH_BYTES = 1.0 + 4.0 / 128
#: BF16 combine.
COMBINE_BYTES = 2.0
#: Precision families whose activations are dispatched in FP8.
_FP8_DISPATCH = frozenset({"fp8", "fp4"})


def dispatch_bytes_per_element(precision: str) -> float:
    """Bytes per dispatched value for a scheme of `precision`: FP8 (+ scales) for fp8/fp4 schemes, else 16-bit."""
    return FP8_DISPATCH_BYTES if precision in _FP8_DISPATCH else 2.0


@dataclass(frozen=True, slots=True)
class AllToAllCost:
    """One MoE layer's dispatch and combine on the busiest GPU, seconds, and the bytes each tier carries."""

    dispatch_s: float
    combine_s: float
    node_bytes: float
    network_bytes: float

    @property
    def seconds(self) -> float:
        return self.dispatch_s + self.combine_s


def _tier_fractions(ep: int, gpus_per_node: int) -> tuple[float, float]:
    """Fractions of token-expert pairs that cross NVLink (same node) and the network (other nodes)."""
    in_node = min(ep, gpus_per_node)
    return (in_node - 1) / ep, (ep - in_node) / ep


def _transfer(
    values: float, bytes_per_value: float, fractions: tuple[float, float], links: tuple[Link, Link | None]
) -> float:
    node_s = links[0].seconds(values * bytes_per_value * fractions[0])
    network = links[1]
    network_s = 0.0 if network is None else network.seconds(values * bytes_per_value * fractions[1])
    return max(node_s, network_s)


def all_to_all_cost(
    tokens_per_gpu: float,
    *,
    top_k: int,
    hidden: int,
    ep: int,
    gpus_per_node: int,
    node_link: Link,
    network_link: Link | None = None,
    dispatch_bytes: float = FP8_DISPATCH_BYTES,
    combine_bytes: float = COMBINE_BYTES,
    imbalance: float = 1.0,
) -> AllToAllCost:
    """Dispatch and combine of one MoE layer for `tokens_per_gpu` tokens on each of `ep` GPUs.

    Args:
        tokens_per_gpu: tokens each GPU routes this step (its attention-DP rank's batch share).
        top_k: experts per token.
        hidden: the hidden size (values per token copy).
        ep: expert-parallel degree (GPUs the experts are spread over).
        gpus_per_node: GPUs one NVLink (or PCIe) domain holds.
        node_link: the link within a node; network_link: between nodes (needed when `ep` > `gpus_per_node`).
        dispatch_bytes, combine_bytes: bytes per value each way.
        imbalance: the busiest GPU's load over the mean (``expert_load``): it receives that much more.
    """
    if ep > gpus_per_node and network_link is None:
        raise BadInputError(
            "link",
            f"expert parallelism over {ep} GPUs spans nodes of {gpus_per_node}",
            "name the network between nodes (infiniband-ndr or roce-400g)",
        )
    if ep <= 1:
        return AllToAllCost(0.0, 0.0, 0.0, 0.0)
    values = tokens_per_gpu * top_k * hidden * max(1.0, imbalance)
    fractions = _tier_fractions(ep, gpus_per_node)
    links = (node_link, network_link)
    return AllToAllCost(
        dispatch_s=_transfer(values, dispatch_bytes, fractions, links),
        combine_s=_transfer(values, combine_bytes, fractions, links),
        node_bytes=values * (dispatch_bytes + combine_bytes) * fractions[0],
        network_bytes=values * (dispatch_bytes + combine_bytes) * fractions[1],
    )
