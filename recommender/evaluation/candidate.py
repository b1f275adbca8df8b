"""The typed result of evaluating a candidate (`recommender.config.candidate.Candidate`).

Its result holds every figure the search learned — quality, the serving estimate,
cost, memory fit, the probe it was measured with — each a typed value carrying its own
provenance, so the decision, the report, MLflow and the release gate read attributes, never
string keys. (De)serialisation lives in `recommender/serialization.py`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from recommender.config.candidate import Candidate
from recommender.evaluation.constraints import Constraints
from recommender.evaluation.two_pools import TwoPools
from recommender.perf.model.memory import MemoryFit

# Imported at run time, not under TYPE_CHECKING: serialization reads these annotations.
from recommender.perf.pricing import CostEstimate
from recommender.perf.probe import ProbeResult
from recommender.perf.sim.serving import ServingEstimate
from recommender.quality.result import QualityResult
from recommender.quality.verdict import Verdict

#: "pruned": refused before a model loads (runnable, memory); "failed": its evaluation raised (out of memory,
#: a kernel error), the reason in `broken`.
Status = Literal["evaluated", "pruned", "failed"]

#: Largest quality constraint stored: a margin past a zero allowance is ±inf, which Optuna's constraints cannot sum.
MARGIN_BOUND = 1e6


def quality_margin(quality: QualityResult | None) -> float | None:
    """The worst quality check's margin as a fraction of its own threshold (< 0: inside it); 1 while unmeasured.

    The one quality margin: the search's quality constraint (clamped to ``MARGIN_BOUND``) and the tie-break
    both read it. Normalised because the checks come in different units — accuracy points, a relative rise
    of bits per byte, KL in nats/token — and a tie-break that compared raw margins would let the check with
    the largest numbers decide: -0.5 leaves half the allowance unused whatever the unit, and the candidate is
    as good as its tightest check. None for a result logged before checks carried their threshold's size.
    """
    if quality is None or quality.verdict == "unverified":
        return 1.0
    margins = [c.normalised_margin for c in quality.checks if c.margin is not None]
    if any(m is None for m in margins):
        return None
    return max((m for m in margins if m is not None), default=0.0)


@dataclass(frozen=True)
class CandidateResult:
    """What the search knows about a candidate; `constraints` > 0 means that limit is broken.

    A pruned or failed candidate has no serving estimate or cost; a candidate whose quality was
    not measured has a `quality` whose verdict is "unverified" (with the reason), or none at all.
    `engines` are the spec's serving engines that launch it on its hardware as measured (a tie
    goes to the candidate more of them launch).
    """

    candidate: Candidate
    status: Status
    constraints: Constraints
    broken: list[str]
    quality: QualityResult | None = None
    serving: ServingEstimate | None = None
    cost: CostEstimate | None = None
    memory: MemoryFit | None = None
    probe: ProbeResult | None = None
    engines: tuple[str, ...] = ()
    #: A disaggregated candidate's prefill and decode pools (None: aggregated replicas, or not sized).
    pools: TwoPools | None = None
    #: An expert-parallel candidate's attention ranks as it was priced: 1 or its degree, whichever needed fewer GPUs
    #: (None: not expert-parallel, or stored before it was kept); its launch needs it.
    attention_dp: int | None = None

    @property
    def key(self) -> str:
        return self.candidate.key

    @property
    def quality_verdict(self) -> Verdict:
        return "unverified" if self.quality is None else self.quality.verdict

    @property
    def feasible(self) -> bool:
        return self.status == "evaluated" and not self.broken and self.quality_verdict == "pass"

    @property
    def quality_margin(self) -> float:
        """`quality_margin(self.quality)`; results logged before checks carried their threshold's size fall back
        to their stored quality constraint."""
        margin = quality_margin(self.quality)
        return self.constraints.quality if margin is None else margin

    @property
    def quality_loss(self) -> float:
        """Mean KL divergence from the bf16 model — a threshold-free measure of what quantization
        lost, the second objective of the Pareto front; infinite while quality is unmeasured."""
        if self.quality is None:
            return math.inf
        if self.quality.fidelity is not None:
            return self.quality.fidelity.mean_kl
        return 0.0 if self.quality.method == "baseline" else math.inf

    @property
    def usd_per_1m_tokens(self) -> float | None:
        return None if self.cost is None else self.cost.usd_per_1m_tokens

    @property
    def usd_per_month(self) -> float | None:
        return None if self.cost is None else self.cost.usd_per_month
