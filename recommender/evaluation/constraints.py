"""The limits a candidate is checked against, as one typed value: Optuna's constraints and the decision's flags.

Each value is Optuna's constraint convention (`optuna.trial.Trial.set_constraint`): > 0 means that limit is
broken, <= 0 that it holds, by that margin. The search stores them on every trial in `CONSTRAINT_KEYS`' order
(`Constraints.items`), the decision reads attributes (`latency_broken`), MLflow logs each as
``constraint_<name>``. Serialised as before, a mapping of the five names (`recommender/serialization.py`), so
results stored as a plain dict read back as this type; a name missing from an old mapping takes its default.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

#: The name of one limit: the field of `Constraints`, the key Optuna stores it under.
ConstraintKey = Literal["runnable", "memory", "quality", "ttft", "tpot"]

#: The limits in the order the search sets them on a trial (Optuna's in-memory storage keeps that order; its RDB
#: storage reads them back by name).
CONSTRAINT_KEYS: tuple[ConstraintKey, ...] = ("runnable", "memory", "quality", "ttft", "tpot")


@dataclass(frozen=True)
class Constraints:
    """A candidate's constraint values (> 0: broken); quality counts as broken (1) until it is measured.

    Args:
        runnable: 1 when no engine serves it on its device (or its evaluation failed), else 0.
        memory: the memory plan's constraint (needed over usable, less one).
        quality: the worst quality check's normalised margin, clamped (`candidate.MARGIN_BOUND`).
        ttft: the P99 time to first token over its SLA, less one.
        tpot: the P99 time per output token over its SLA, less one.
    """

    runnable: float = 0.0
    memory: float = 0.0
    quality: float = 1.0
    ttft: float = 0.0
    tpot: float = 0.0

    @classmethod
    def refused(cls, key: ConstraintKey) -> Constraints:
        """A candidate refused before (or failed while) it ran: `key` broken (1), every other limit 0."""
        return replace(cls(quality=0.0), **{key: 1.0})

    def items(self) -> tuple[tuple[ConstraintKey, float], ...]:
        """(name, value) in `CONSTRAINT_KEYS`' order: what the search sets on a trial, what MLflow logs."""
        return tuple((key, float(getattr(self, key))) for key in CONSTRAINT_KEYS)

    @property
    def broken(self) -> tuple[ConstraintKey, ...]:
        """The limits broken (value > 0), in `CONSTRAINT_KEYS`' order."""
        return tuple(key for key, value in self.items() if value > 0)

    @property
    def latency_broken(self) -> bool:
        """Whether a P99 latency limit (TTFT or TPOT) is broken."""
        return self.ttft > 0 or self.tpot > 0
