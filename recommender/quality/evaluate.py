"""Quality of one precision+method for one use case: lm-eval scores, fidelity, verdicts.

The quantity that does not depend on GPU type or batch size, so the search computes it
once per method and reuses it. The reference is the unquantized bf16 model ("baseline").
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from recommender.errors import MethodUnavailableError
from recommender.model_cache import ModelCache
from recommender.quality import fidelity as fid
from recommender.quality.lm_eval_runner import TaskScore, run_use_case, task_manager
from recommender.quality.suite import UseCase
from recommender.quality.verdict import Check, Verdict, all_checks, overall
from recommender.quantize import QuantMethod, get_method

if TYPE_CHECKING:
    from lm_eval.tasks import TaskManager

REFERENCE_METHOD = "baseline"


@dataclass(frozen=True)
class QualityResult:
    """Everything known about one method's quality for the use case."""

    method: str
    precision: str
    verdict: Verdict
    checks: list[Check]
    scores: dict[str, TaskScore]
    fidelity: fid.FidelityResult | None
    device: str
    seconds: float
    reason: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "precision": self.precision,
            "verdict": self.verdict,
            "reason": self.reason,
            "device": self.device,
            "seconds": round(self.seconds, 2),
            "checks": [c.to_dict() for c in self.checks],
            "scores": {
                k: {kk: vv for kk, vv in v.to_dict().items() if kk != "per_doc"} for k, v in self.scores.items()
            },
            "fidelity": self.fidelity.to_dict() if self.fidelity else None,
        }


@dataclass
class QualityEvaluator:
    """Evaluates methods on the local device, computing the baseline once and caching every result."""

    use_case: UseCase
    models: ModelCache
    limit: int | None = None
    manager: TaskManager | None = None
    _results: dict[str, QualityResult] = field(default_factory=dict)
    _baseline_scores: dict[str, TaskScore] | None = None
    _baseline_logits: fid.BaselineLogits | None = None

    def __post_init__(self) -> None:
        self._manager = self.manager or task_manager(self.use_case)

    @property
    def evaluations(self) -> int:
        """How many methods were really evaluated (cache misses)."""
        return len(self._results)

    def has(self, method_name: str) -> bool:
        """Whether this method's quality is already known (no evaluation needed)."""
        return method_name in self._results

    def _ensure_baseline(self) -> None:
        if self._baseline_scores is not None:
            return
        reference = get_method(REFERENCE_METHOD)
        model = self.models.get(reference)
        self._baseline_scores = run_use_case(
            model, self.models.tokenizer, self.use_case, manager=self._manager, limit=self.limit
        )
        windows = fid.fidelity_windows(self.use_case, self._manager, self.models.tokenizer)
        self._baseline_logits = fid.baseline_logits(model, windows)

    def evaluate(self, method: QuantMethod) -> QualityResult:
        if method.name in self._results:
            return self._results[method.name]
        started = time.perf_counter()
        device = self.models.device.label
        reason = method.unavailable_reason(self.models.device)
        if reason is not None:
            checks = all_checks(self.use_case, {}, {}, None)
            result = QualityResult(method.name, method.precision, "unverified", checks, {}, None, device, 0.0, reason)
            self._results[method.name] = result
            return result
        self._ensure_baseline()
        assert self._baseline_scores is not None and self._baseline_logits is not None
        try:
            model = self.models.get(method)
        except MethodUnavailableError as exc:
            checks = all_checks(self.use_case, {}, {}, None)
            result = QualityResult(method.name, method.precision, "unverified", checks, {}, None, device, 0.0, str(exc))
            self._results[method.name] = result
            return result
        if method.name == REFERENCE_METHOD:
            scores = self._baseline_scores
        else:
            scores = run_use_case(model, self.models.tokenizer, self.use_case, manager=self._manager, limit=self.limit)
        fidelity = fid.compare(model, self._baseline_logits)
        checks = all_checks(self.use_case, self._baseline_scores, scores, fidelity)
        result = QualityResult(
            method.name,
            method.precision,
            overall(checks),
            checks,
            scores,
            fidelity,
            device,
            time.perf_counter() - started,
        )
        self._results[method.name] = result
        return result
