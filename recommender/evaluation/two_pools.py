"""A disaggregated candidate's two pools: what the search and `plan` know about a prefill pool and a decode pool.

The pools are sized by ``fleet/layouts/disaggregated_plan.py`` (a layer above); their figures live here, beside the
candidate's result, so a result read back from a study carries both pools, the KV transfer between them and the
commands that launch them, without importing the planner.
"""

from __future__ import annotations

from dataclasses import dataclass

# Imported at run time, not under TYPE_CHECKING: serialization reads these annotations.
from recommender.deploy.disaggregated import DisaggregatedLaunch
from recommender.perf.sim.disaggregated import PoolEstimate

__all__ = ["LayoutVerdict", "PoolChoice", "TwoPools"]


@dataclass(frozen=True, slots=True)
class PoolChoice:
    """One pool's worker configuration and how it does at the target traffic.

    A tensor-parallel worker is `tensor_parallel` GPUs (`expert_parallel` 1). An expert-parallel worker (a MoE model
    with ``plan --expert-parallel``) is `expert_parallel` GPUs holding the routed experts and `attention_dp`
    attention ranks of `tensor_parallel` GPUs each (EP = TP x DP), `batch_size` per rank; `imbalance` is its
    busiest GPU's expert load over the mean (``expert_imbalance`` in ``fleet/layouts/expert_parallel_plan.py``)."""

    tensor_parallel: int
    batch_size: int
    estimate: PoolEstimate
    expert_parallel: int = 1
    attention_dp: int = 1
    redundant_experts: int = 0
    imbalance: float | None = None

    @property
    def gpus_per_worker(self) -> int:
        """GPUs of one worker: its attention ranks times their width (the expert-parallel degree under EP)."""
        return self.tensor_parallel * self.attention_dp

    @property
    def layout(self) -> str:
        """The worker's layout in words: ``TP4``, or ``EP8 (DP8 x TP1)``: 8 attention ranks of one GPU each."""
        if self.expert_parallel == 1:
            return f"TP{self.tensor_parallel}"
        return f"EP{self.expert_parallel} (DP{self.attention_dp} x TP{self.tensor_parallel})"


@dataclass(frozen=True, slots=True)
class TwoPools:
    """A disaggregated candidate's prefill and decode pools, the KV transfer between them, and their launch."""

    engine: str
    kv_cache_dtype: str
    link: str
    #: The longest prompt's KV over `link` at the pools' degrees, ms (part of the TTFT).
    transfer_ms: float
    prefill: PoolChoice
    decode: PoolChoice
    #: Each pool's worker command with its role, the router and (vLLM) the Dynamo file; None: not emitted.
    launch: DisaggregatedLaunch | None = None

    @property
    def gpus(self) -> int:
        return self.prefill.estimate.gpus + self.decode.estimate.gpus


@dataclass(frozen=True, slots=True)
class LayoutVerdict:
    """Aggregated against disaggregated for the winner's scheme and GPU in a search: each layout's best candidate,
    the winner and why (`plan --layout`'s reason, ``fleet/layouts/layout_compare.py``)."""

    aggregated: str
    disaggregated: str
    aggregated_gpus: int | None
    disaggregated_gpus: int | None
    aggregated_usd_per_month: float | None
    disaggregated_usd_per_month: float | None
    #: "aggregated", "disaggregated", or "" when neither meets the SLA.
    winner: str
    reason: str
