"""Step features from measured kernels: what a step's GEMMs and attention took on the GPU, plus what kernels hide.

Where aiconfigurator-core has kernel tables for a configuration (``kernel_tables.py``), a step's GPU work is
their time at that step's shape: the non-attention kernels of all its tokens, the prefill chunks' attention and
the decoding sequences' attention over their KV. That sum is one feature, ``kernels``, in place of the datasheet
terms (weights, linear, attention, kv, tokens) of ``features.StepFeatures``. What kernels do not show stays a
feature, fitted on measured serving runs (``step_fit.py``): the per-step and per-prefill-step host time
(scheduling, sampling, launches), the per-layer dispatch, and the all-reduces, priced from the topology
(bytes over the link and a fixed cost per call) rather than from the node a table was collected on.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from recommender.perf.step.features import FEATURES, StepFeatures

if TYPE_CHECKING:
    from recommender.perf.catalog.gpus import Accelerator
    from recommender.perf.model.shape import ModelShape
    from recommender.perf.scheme import Scheme
    from recommender.perf.step.cost import PrefillChunks
    from recommender.perf.step.kernel_grid import KernelTable

__all__ = ["KernelStepFeatures"]

#: The datasheet features the measured kernels replace (zero in a kernel row).
_REPLACED = [FEATURES.index(name) for name in ("weights", "linear", "attention", "kv", "tokens")]
_KERNELS = FEATURES.index("kernels")
_STEP, _PREFILL_STEP, _LAYERS = FEATURES.index("step"), FEATURES.index("prefill_step"), FEATURES.index("layers")
_AR_BYTES, _AR_CALLS = FEATURES.index("allreduce_bytes"), FEATURES.index("allreduce_calls")


@dataclass(frozen=True)
class KernelStepFeatures:
    """The features of one configuration with its GPU work from `table` (module docstring).

    `topology` is the same configuration's datasheet features: the host and all-reduce terms are taken from it.
    """

    topology: StepFeatures
    table: KernelTable
    _mask: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        mask = np.ones(len(FEATURES))
        mask[_REPLACED] = 0.0
        object.__setattr__(self, "_mask", mask)

    @property
    def shape(self) -> ModelShape:
        return self.topology.shape

    @property
    def method(self) -> Scheme:
        return self.topology.method

    @property
    def accel(self) -> Accelerator:
        return self.topology.accel

    @property
    def tensor_parallel(self) -> int:
        return self.topology.tensor_parallel

    @property
    def kv_cache_dtype(self) -> str:
        return self.topology.kv_cache_dtype

    @property
    def kv_read_at_cache_width(self) -> bool:
        return self.topology.kv_read_at_cache_width

    @property
    def always_zero(self) -> frozenset[int]:
        return frozenset(_REPLACED) | (self.topology.always_zero - {_KERNELS})

    def kernel_seconds(self, chunks: PrefillChunks, decode_seqs: int, context_tokens: int) -> float:
        """The step's GPU kernels, collectives excluded, s."""
        table = self.table
        decode_kv = max(context_tokens - chunks.prior_tokens, 0)
        return (
            table.linear(chunks.tokens + decode_seqs)
            + table.context_attention(chunks.sum_sq, chunks.sum_cross)
            + table.decode_attention_one(decode_seqs, float(decode_kv))
        )

    def step_seconds(
        self, chunks: PrefillChunks, decode_seqs: int, context_tokens: int, coefficients: Sequence[float]
    ) -> float:
        """``of_step(...) @ coefficients`` in plain floats (the simulator's per-step path; equal to it)."""
        host = self._host_seconds(bool(chunks.seqs), chunks.tokens + decode_seqs, coefficients)
        return host + float(coefficients[_KERNELS]) * self.kernel_seconds(chunks, decode_seqs, context_tokens)

    def _host_seconds(self, prefilling: bool, tokens: int, c: Sequence[float]) -> float:
        """Everything in a step but its GPU kernels: host time per step and per layer, and the all-reduces."""
        topology = self.topology
        return (
            float(c[_STEP])
            + (float(c[_PREFILL_STEP]) if prefilling else 0.0)
            + float(c[_LAYERS]) * topology.shape.n_layers
            + float(c[_AR_BYTES]) * topology.allreduce_per_token_s * tokens
            + float(c[_AR_CALLS]) * topology.allreduce_calls
        )

    def decode_stepper(
        self, decode_seqs: int, coefficients: Sequence[float], floor_s: float = 0.0, factor: float = 1.0
    ) -> Callable[[int], float]:
        """``(step_seconds(no prefill, decode_seqs, context) + floor_s) x factor`` as a function of the context,
        to the last bit: the host time, the linear kernels and the batch's attention row are computed once (a
        decode stretch's steps differ in their context alone)."""
        host = self._host_seconds(False, decode_seqs, coefficients)
        kernels, linear = float(coefficients[_KERNELS]), self.table.linear(decode_seqs)
        attention = self.table.decode_attention_of(decode_seqs)

        def step(context_tokens: int) -> float:
            return (host + kernels * (linear + attention(float(max(context_tokens, 0)))) + floor_s) * factor

        return step

    def of_step(self, chunks: PrefillChunks, decode_seqs: int, context_tokens: int) -> np.ndarray:
        tokens, topology = chunks.tokens + decode_seqs, self.topology
        row = np.zeros(len(FEATURES))
        row[_STEP], row[_PREFILL_STEP], row[_LAYERS] = 1.0, 1.0 if chunks.seqs else 0.0, topology.shape.n_layers
        row[_AR_BYTES], row[_AR_CALLS] = topology.allreduce_per_token_s * tokens, topology.allreduce_calls
        row[_KERNELS] = self.kernel_seconds(chunks, decode_seqs, context_tokens)
        return row

    def of_decode_steps(self, decode_seqs: int, context_tokens: np.ndarray) -> np.ndarray:
        rows: np.ndarray = self.topology.of_decode_steps(decode_seqs, context_tokens) * self._mask
        rows[:, _KERNELS] = self.table.linear(decode_seqs) + self.table.decode_attention(decode_seqs, context_tokens)
        return rows
