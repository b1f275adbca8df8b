"""A candidate refused before anything ran: raised where the refusal is found, made a result where it is caught.

The way optuna's objective raises `TrialPruned` wherever it decides to stop and the study records the trial
once: the speed pipeline's checks (serving engines, device, KV dtype, tensor-parallel degree, price, memory, the
local probe, speculation) raise `Refused` with the constraint they break and why, and
`PerformanceEvaluator.evaluate` turns it into the one "pruned" `CandidateResult` the search stores. Callers that
only need a runnable candidate's setup (`plan`'s layouts, the GPU mix, the load curve) catch it or let it pass.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from recommender.evaluation.candidate import CandidateResult
from recommender.evaluation.constraints import Constraints

if TYPE_CHECKING:
    from recommender.config.candidate import Candidate
    from recommender.evaluation.constraints import ConstraintKey
    from recommender.perf.model.memory import MemoryFit

__all__ = ["Refused"]


class Refused(Exception):
    """A candidate cannot run or does not fit.

    Args:
        key: the constraint it breaks ("runnable" or "memory"; "quality" for a speculative candidate whose scheme's
            quality did not pass).
        reason: why, in one line, with the fix where there is one.
        memory: the memory plan's fit, where the memory check refused it (the result reports it).
    """

    def __init__(self, key: ConstraintKey, reason: str, memory: MemoryFit | None = None) -> None:
        super().__init__(key, reason, memory)  # every argument in `args`: it pickles like any exception
        self.key: ConstraintKey = key
        self.reason = reason
        self.memory = memory

    def __str__(self) -> str:
        return self.broken

    @property
    def broken(self) -> str:
        """The line the pruned result's `broken` holds: the constraint, then why."""
        return f"{self.key}: {self.reason}"

    def result(self, c: Candidate) -> CandidateResult:
        """`c` pruned: `key` broken (1), every other limit 0, this refusal its one broken line."""
        return CandidateResult(c, "pruned", Constraints.refused(self.key), [self.broken], memory=self.memory)
