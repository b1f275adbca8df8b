"""The step of an expert-parallel replica: one attention rank's batch, the busiest GPU's experts, the all-to-all.

One replica of ``ep`` GPUs (``perf/model/expert_parallel.py``) runs ``attention_dp`` attention ranks in lockstep,
each with its own sequences; the simulator replays one rank at its share of the traffic, and every rank is
taken to carry the same batch (the engines pad the ranks' steps to a common shape: SGLang's DP attention and
TensorRT-LLM's attention DP gather the ranks' tokens before the MoE layers). A step of that rank is priced with
the calibrated features of ``features.py``, each at what one GPU of the rank does:

- attention, KV reads, per-token work and the rank's all-reduces at the rank's width ``ep / attention_dp``
  (``StepFeatures`` at that tensor-parallel degree; MLA's latent whole on every GPU of the rank, its absorbed
  decode FLOPs over the rank's ``heads / (ep / attention_dp)`` heads, at least a 64-row tile's, where they
  outlast the read);
- dense weights (attention, shared experts, dense MLPs, lm_head) streamed and multiplied at the rank's width;
- routed experts on the busiest GPU: the replica's step routes ``attention_dp x rank tokens x top_k``
  token-expert pairs, the busiest GPU computes ``imbalance / ep`` of them (``expert_load.py``) and streams
  the distinct experts of its ``(E + redundant) / ep`` that the step touches (uniform routing, as
  ``moe.py``: the conservative side for bytes);
- plus, outside the fit (no measured EP run calibrates it), ``n_moe_layers x`` dispatch and combine of the
  rank's tokens over the links (``all_to_all.py``), at the busiest GPU's load.

The all-to-all term is modeled, the rest calibrated; the provenance says both.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

import numpy as np

from recommender.perf.model.all_to_all import all_to_all_cost, dispatch_bytes_per_element
from recommender.perf.model.expert_parallel import ep_kv_bytes_per_token_per_gpu
from recommender.perf.step.cost import PrefillAwareStepCostModel, PrefillChunks, VectorStepCostModel
from recommender.perf.step.features import (
    FEATURES,
    N_FEATURES,
    FeatureStepCost,
    StepFeatures,
    decode_attention_extra_s,
)
from recommender.perf.step.kernels import weight_traffic_bytes_per_param

if TYPE_CHECKING:
    from recommender.perf.catalog.gpus import Accelerator
    from recommender.perf.model.expert_parallel import ExpertParallelLayout
    from recommender.perf.model.link import Link
    from recommender.perf.model.shape import ModelShape
    from recommender.perf.scheme import Scheme
    from recommender.perf.step.calibrated import CalibratedModel
    from recommender.provenance import Provenance

__all__ = ["AllToAllLinks", "ExpertParallelStepCost", "ExpertParallelStepFeatures", "expert_parallel_step_costs"]

_WEIGHTS, _LINEAR, _KV = FEATURES.index("weights"), FEATURES.index("linear"), FEATURES.index("kv")
_LAYERS = FEATURES.index("layers")


@dataclass(frozen=True, slots=True)
class AllToAllLinks:
    """The links an expert-parallel all-to-all crosses: within a node, and between nodes (None: one node)."""

    node: Link
    network: Link | None
    gpus_per_node: int


@dataclass(frozen=True)
class ExpertParallelStepFeatures:
    """The calibrated step features of one attention rank of an expert-parallel replica (a ``StepFeatureSource``).

    Args:
        shape, method, accel, kv_cache_dtype: as ``StepFeatures``.
        layout: the replica (``ep`` GPUs, ``attention_dp`` ranks, redundant experts).
        imbalance: the busiest GPU's expert load over the mean (``expert_load.ExpertLoad.imbalance``; 1 = even).
    """

    shape: ModelShape
    method: Scheme
    accel: Accelerator
    layout: ExpertParallelLayout
    imbalance: float = 1.0
    kv_cache_dtype: str = "auto"
    kv_read_at_cache_width: bool = True
    _rank: StepFeatures = field(init=False, repr=False)
    _dense_bytes_s: float = field(init=False, repr=False)
    _dense_flops_token: float = field(init=False, repr=False)
    _expert_flops_pair: float = field(init=False, repr=False)
    _expert_bytes_s: float = field(init=False, repr=False)
    _kv_s: float = field(init=False, repr=False)
    _decode_extra_s: float = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.layout.check(self.shape)
        if self.imbalance < 1.0:
            raise ValueError(f"the busiest GPU carries at least the mean load, got imbalance {self.imbalance}")
        shape, tp = self.shape, self.layout.attention_tp
        rank = StepFeatures(shape, self.method, self.accel, tp, self.kv_cache_dtype, self.kv_read_at_cache_width)
        bw = rank.rates.bandwidth
        per_param = weight_traffic_bytes_per_param(self.method, 1)
        kv_s = ep_kv_bytes_per_token_per_gpu(shape, self._rank_kv_dtype(), self.layout) / bw
        dense = shape.per_gpu_params(shape.dense_body_params, tp)  # the replicated projections whole
        values = {
            "_rank": rank,
            "_dense_bytes_s": (dense * per_param + shape.lm_head_params * 2.0 / tp) / bw,
            "_dense_flops_token": 2.0 * dense,
            # One token-expert pair through one expert of every MoE layer; the busiest GPU does imbalance/ep of them.
            "_expert_flops_pair": 2.0 * shape.expert_params * self._moe_layers * self.imbalance / self.layout.ep,
            "_expert_bytes_s": self._moe_layers * shape.expert_params * per_param / bw,
            "_kv_s": kv_s,
            # MLA's absorbed decode over the rank's heads: compute-bound at attention DP (features.py's docstring).
            "_decode_extra_s": decode_attention_extra_s(rank.rates, kv_s),
        }
        for name, value in values.items():
            object.__setattr__(self, name, value)

    @property
    def _moe_layers(self) -> int:
        assert self.shape.moe is not None  # layout.check refused a dense model
        return self.shape.moe.n_moe_layers

    def _rank_kv_dtype(self) -> str:
        return self.kv_cache_dtype if self.kv_read_at_cache_width else "auto"

    @property
    def tensor_parallel(self) -> int:
        """The attention rank's width (what a per-GPU term is divided by)."""
        return self.layout.attention_tp

    @property
    def always_zero(self) -> frozenset[int]:
        return self._rank.always_zero

    def local_experts_touched(self, rank_tokens: int) -> float:
        """Distinct experts per MoE layer the busiest GPU streams in a step of `rank_tokens` tokens on every rank."""
        moe = self.shape.moe
        assert moe is not None
        local = (moe.n_experts + self.layout.redundant_experts) / self.layout.ep
        replica_tokens = rank_tokens * self.layout.attention_dp
        if replica_tokens <= 0:
            return 0.0
        return local * (1.0 - (1.0 - moe.experts_per_token / moe.n_experts) ** replica_tokens)

    def _moe_terms(self, tokens: int, seqs: int) -> tuple[float, float]:
        """(weights seconds, linear FLOPs / peak) of one GPU of the rank for a step of `tokens` tokens per rank."""
        moe = self.shape.moe
        assert moe is not None
        pairs = tokens * self.layout.attention_dp * moe.experts_per_token
        weights = self._dense_bytes_s + self._expert_bytes_s * self.local_experts_touched(tokens)
        rates = self._rank.rates  # the lm_head's FLOPs and the peak are the rank's
        flops = tokens * self._dense_flops_token + seqs * rates.head_flops_per_seq + pairs * self._expert_flops_pair
        return weights, flops / rates.peak

    def of_step(self, chunks: PrefillChunks, decode_seqs: int, context_tokens: int) -> np.ndarray:
        row = self._rank.of_step(chunks, decode_seqs, context_tokens)
        row[_WEIGHTS], row[_LINEAR] = self._moe_terms(chunks.tokens + decode_seqs, chunks.seqs + decode_seqs)
        row[_KV] = self._kv_s * context_tokens + self._decode_extra_s * (context_tokens - chunks.prior_tokens)
        return row

    def of_decode_steps(self, decode_seqs: int, context_tokens: np.ndarray) -> np.ndarray:
        rows = np.tile(self.of_step(PrefillChunks(), decode_seqs, 0), (len(context_tokens), 1))
        rows[:, _KV] = (self._kv_s + self._decode_extra_s) * context_tokens
        return rows


class _RankCost(PrefillAwareStepCostModel, VectorStepCostModel, Protocol):
    """The calibrated step cost of one rank, at its point or at the upper end of its interval."""


@dataclass(frozen=True)
class ExpertParallelStepCost:
    """A calibrated rank step (`rank`, over ``ExpertParallelStepFeatures``) plus the modeled all-to-all.

    Implements the scheduler's ``StepCostModel``, ``PrefillAwareStepCostModel`` and ``VectorStepCostModel``;
    `rank` is the calibrated step cost or its upper bound (``upper.UpperStepCost``): the all-to-all is added to
    either unscaled, a modeled term the fit's residuals never saw.
    """

    rank: _RankCost
    features: ExpertParallelStepFeatures
    links: AllToAllLinks
    provenance: Provenance
    #: The MoE runs' scale on the whole step (``moe_calibration.py``), here on the all-to-all (the rank's
    #: coefficients carry it already).
    a2a_scale: float = 1.0
    _a2a_fixed_s: float = field(init=False, repr=False)
    _a2a_per_token_s: float = field(init=False, repr=False)

    def __post_init__(self) -> None:
        one, two = self.a2a_scale * self._all_to_all_s(1), self.a2a_scale * self._all_to_all_s(2)
        object.__setattr__(self, "_a2a_per_token_s", two - one)
        object.__setattr__(self, "_a2a_fixed_s", one - (two - one))

    def _all_to_all_s(self, rank_tokens: int) -> float:
        """Dispatch + combine of every MoE layer for `rank_tokens` tokens on each attention rank, on the busiest GPU.

        A rank's tokens leave from its ``attention_tp`` GPUs, each sending its share."""
        f, links = self.features, self.links
        shape, layout = f.shape, f.layout
        assert shape.moe is not None
        layer = all_to_all_cost(
            rank_tokens / layout.attention_tp,
            top_k=shape.moe.experts_per_token,
            hidden=shape.hidden,
            ep=layout.ep,
            gpus_per_node=links.gpus_per_node,
            node_link=links.node,
            network_link=links.network,
            dispatch_bytes=dispatch_bytes_per_element(f.method.precision),
            imbalance=f.imbalance,
        )
        return shape.moe.n_moe_layers * layer.seconds

    def all_to_all_seconds(self, rank_tokens: int) -> float:
        """The all-to-all of a step of `rank_tokens` per rank (affine in the tokens; 0 for an empty step)."""
        return self._a2a_fixed_s + self._a2a_per_token_s * rank_tokens if rank_tokens > 0 else 0.0

    def step_seconds(self, prefill_tokens: int, decode_seqs: int, context_tokens: int) -> float:
        return self.prefill_step_seconds(PrefillChunks.single(prefill_tokens), decode_seqs, context_tokens)

    def prefill_step_seconds(self, chunks: PrefillChunks, decode_seqs: int, context_tokens: int) -> float:
        rank = self.rank.prefill_step_seconds(chunks, decode_seqs, context_tokens)
        return rank + self.all_to_all_seconds(chunks.tokens + decode_seqs)

    def decode_steps_seconds(self, decode_seqs: int, context_tokens: np.ndarray) -> np.ndarray:
        rank = self.rank.decode_steps_seconds(decode_seqs, context_tokens)
        return np.asarray(rank + self.all_to_all_seconds(decode_seqs), dtype=float)


def expert_parallel_step_costs(
    calibrated: CalibratedModel,
    features: ExpertParallelStepFeatures,
    engine: str,
    links: AllToAllLinks,
    *,
    confidence: float,
) -> tuple[ExpertParallelStepCost, ExpertParallelStepCost]:
    """The rank's step cost at its point and at the upper end of its interval (the SLA check's), each with the
    all-to-all: `engine`'s calibrated coefficients on the datasheet features (no kernel table has an EP layout),
    scaled and with the per-layer time the measured MoE runs add (``moe_step_fit.json``)."""
    moe = calibrated.moe
    scale = moe.parameter("scale")
    coefficients = moe.coefficients(calibrated.coefficients(engine)[:N_FEATURES], _LAYERS)
    layout = features.layout
    note = (
        f"expert parallelism {layout.ep} GPUs, {layout.attention_dp} attention ranks of {layout.attention_tp}, "
        f"{layout.redundant_experts} redundant experts, busiest GPU at {features.imbalance:.2f}x the mean expert "
        f"load; all-to-all modeled over {links.node.name}"
        + (f" and {links.network.name}" if links.network is not None else "")
        + f" (modeled), the step scaled by {scale:.3f}: {moe.provenance}"
    )
    point = FeatureStepCost(
        features,
        coefficients,
        calibrated.provenance(features.accel, engine, "expert-parallel layout: datasheet features").extended(note),
        floor_s=1e-6,
    )
    upper = calibrated.upper_step_cost(point, engine, confidence)
    return (
        ExpertParallelStepCost(point, features, links, point.provenance, scale),
        ExpertParallelStepCost(upper, features, links, upper.provenance, scale),
    )
