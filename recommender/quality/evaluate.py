"""Quality of one precision+method for one use case: paired task deltas, fidelity, verdicts.

The quantity that does not depend on GPU type or batch size, so it is computed once per method and reused, across
trials, studies and resumes (per-document results live in the QualityCache). The reference is the unquantized bf16
model ("baseline"); it is evaluated on each task's whole document budget once, and every variant on the same
documents: in process, or through a serving engine (``served_scorer.py``), the reference then through it too.

Adaptive evaluation: a variant is evaluated on a growing prefix of the budget (a quarter, a half, all of it) and
stops as soon as the paired interval clears or crosses the threshold for every task. Every look could stop on a wrong
verdict, so the looks share the suite's error rate: each interval is taken at 1 - (1 - confidence) / looks (Bonferroni
over the planned looks, see statistics.py), and the result records that confidence. A look that cannot decide (fewer
documents than a metric without exact bounds needs) is not planned, so it spends none of the error rate.

Documents are taken in a seeded random order (`document_order`), not the dataset's: a dataset sorted by source or
length would make a budget's prefix unrepresentative, and the first look would judge only its first kind of document.
The order is fixed by the seed and the task's size, so every method, release and re-run sees the same documents, and
the per-document cache is reused across budgets. Every look taken is recorded with the variant's cached documents: a
re-run with a larger budget counts the looks already taken on that method as looks, so the error-rate split covers
them too (they were decisions, whatever the re-run is called).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from recommender.errors import SchemeUnavailableError
from recommender.quality import fidelity as fid
from recommender.quality.cache import QualityCache, cache_key
from recommender.quality.exact import is_binary
from recommender.quality.lm_eval_runner import TaskData, describe_task, lm_eval_version, run_docs, task_manager
from recommender.quality.result import QualityResult
from recommender.quality.statistics import MIN_CONTINUOUS_DOCS, PairedResult, Policy, paired_bootstrap
from recommender.quality.suite import TaskThreshold, UseCase
from recommender.quality.verdict import fidelity_check, overall, task_check
from recommender.quantize import QuantScheme, get_scheme
from recommender.quantize.model_cache import ModelCache
from recommender.serialization import from_data, to_data

if TYPE_CHECKING:
    from lm_eval.tasks import TaskManager

    from recommender.quality.served_scorer import ServedScorer

REFERENCE_METHOD = "baseline"
#: Seed of every task's document order (`document_order`).
DOC_ORDER_SEED = 34
#: Changes whenever what a verdict means changes (bounds, intervals, minimum documents, document order), so a
#: study's stored verdicts (the claim key) are not reused across it; per-document scores stay valid and are reused.
VERDICT_VERSION = "v2-unconditional-exact-studentised-seeded-order"
#: Smallest adaptive chunk, in documents: fewer gives intervals too wide to decide anything.
MIN_CHUNK = 8


def chunk_schedule(budget: int, *, adaptive: bool, min_chunk: int = MIN_CHUNK) -> list[int]:
    """Document counts to evaluate in turn (the planned looks): a quarter, a half, then the whole budget.

    No look is planned below `min_chunk` documents; the number of looks is fixed by the budget
    alone, before any result is seen, as the error-rate split across them requires.
    """
    if not adaptive or budget < 2 * min_chunk:
        return [budget]
    sizes = {max(min_chunk, math.ceil(budget / 4)), max(min_chunk, math.ceil(budget / 2)), budget}
    return sorted(s for s in sizes if s <= budget)


def task_budget(use_case: UseCase, spec: TaskThreshold, n_docs: int, limit: int | None = None) -> int:
    """Documents scored for `spec`'s task: the limit asked, else the task's, else the suite's; at most `n_docs`."""
    cap = limit or spec.limit or use_case.limit
    return min(cap, n_docs) if cap else n_docs


def document_order(total: int, seed: int = DOC_ORDER_SEED) -> list[int]:
    """The task's document ids in the order budgets and looks take them: a seeded permutation of 0..total-1."""
    return [int(i) for i in np.random.default_rng(seed).permutation(total)]


def looks_counted(taken: list[int], schedule: list[int]) -> int:
    """Looks sharing the error rate: the ones planned now plus the ones an earlier run already took."""
    return len(set(taken) | set(schedule))


def run_looks(
    spec: TaskThreshold,
    reference: np.ndarray,
    variant_docs: Callable[[int], np.ndarray],
    schedule: list[int],
    *,
    looks: int,
    policy: Policy = "confidence",
    confidence: float = 0.95,
    on_look: Callable[[int], None] | None = None,
) -> PairedResult:
    """The adaptive procedure: each planned look in turn, stopping at the first decisive verdict.

    `variant_docs(n)` gives the variant's pairs of the first n documents (evaluated on demand);
    `looks` is how many looks share the error rate (`looks_counted`); `on_look(n)` records each one taken.
    """
    result: PairedResult | None = None
    for n in schedule:
        result = paired_bootstrap(
            spec, reference[:n], variant_docs(n), policy=policy, confidence=confidence, looks=looks
        )
        if on_look is not None:
            on_look(n)
        if result.verdict != "inconclusive":
            break
    if result is None:
        raise ValueError("no look planned")
    return result


def first_look(reference_pairs: np.ndarray) -> int:
    """The smallest planned look for a task: a metric without exact bounds decides nothing on fewer documents."""
    return MIN_CHUNK if is_binary(reference_pairs) else max(MIN_CHUNK, MIN_CONTINUOUS_DOCS)


class RunsOnce(Protocol):
    """Runs a computation once across workers and hands every caller its result (and whether it ran here).

    The study injects its claim table (``recommender.study.claims.ClaimStore``) so quality never imports the
    study: the table lives in the study's database, a layer above.
    """

    def run_once(self, key: str, label: str, compute: Callable[[], dict[str, Any]]) -> tuple[dict[str, Any], bool]: ...


@dataclass
class QualityEvaluator:
    """Evaluates methods on the local device; results are cached per document on disk and per method in memory.

    With `claims` (the study's database), a method is evaluated by one worker only: the others
    wait for its result and reuse it.
    """

    use_case: UseCase
    models: ModelCache
    cache: QualityCache | None = None
    limit: int | None = None
    manager: TaskManager | None = None
    adaptive: bool | None = None
    claims: RunsOnce | None = None
    docs_evaluated: int = 0
    #: Methods whose quality this process computed (not read from another worker's claim).
    computed_here: int = 0
    #: Scores the tasks through a serving engine (a spec's ``probe: {engine: vllm}``); None: in process. KL stays in
    #: process on the same checkpoint (an engine's API returns top-k log-probs only).
    served: ServedScorer | None = None
    _results: dict[str, QualityResult] = field(default_factory=dict)
    _tasks: dict[str, TaskData] = field(default_factory=dict)
    _model_fingerprint: str | None = None
    _reference_log_probs: fid.ReferenceLogProbs | None = None
    _served_memo: dict[str, dict[str, dict[int, list[float]]]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._manager = self.manager or task_manager(self.use_case)
        if self.adaptive is None:
            self.adaptive = self.use_case.adaptive

    @property
    def evaluations(self) -> int:
        """How many methods were evaluated in this process (cache hits included)."""
        return len(self._results)

    def has(self, method_name: str) -> bool:
        """Whether this method's quality is already known (no evaluation needed)."""
        return method_name in self._results

    # -- identity of what is evaluated -------------------------------------------------
    def _fingerprint(self) -> str:
        if self._model_fingerprint is None:
            self._model_fingerprint = self.models.source.fingerprint()
        return self._model_fingerprint

    def _task(self, name: str) -> TaskData:
        if name not in self._tasks:
            self._tasks[name] = describe_task(self._manager, name)
        return self._tasks[name]

    def budget(self, spec: TaskThreshold) -> int:
        return task_budget(self.use_case, spec, self._task(spec.task).n_docs, self.limit)

    def _compute(self) -> dict[str, str]:
        """The compute dtype as a key part: only when it is not bfloat16, so bfloat16 keys stay as they were."""
        dtype = self.models.compute_dtype
        return {} if dtype == "bfloat16" else {"compute_dtype": dtype}

    def _measured_on(self, judged: QuantScheme) -> str:
        """Where `judged`'s quality was measured, as results and reports say it ("cpu", "cpu, float32 compute")."""
        dtype = self.models.compute_dtype
        here = self.models.device.label + ("" if dtype == "bfloat16" else f", {dtype} compute")
        scorer = self._scorer(judged)
        return here if scorer is None else f"{here}: tasks through {scorer.engine}, KL in process"

    def _scorer(self, judged: QuantScheme) -> ServedScorer | None:
        """The engine `judged`'s comparison is scored through (its reference too), or None: in process."""
        return self.served if self.served is not None and self.served.serves(judged) else None

    def _engine(self, judged: QuantScheme) -> dict[str, str]:
        """The serving engine as a key part: only where the tasks are scored through one."""
        return {} if (scorer := self._scorer(judged)) is None else {"engine": scorer.engine}

    def _key(self, method: QuantScheme, spec: TaskThreshold, judged: QuantScheme | None = None) -> str:
        return cache_key(
            model=self._fingerprint(),
            method=method.identity(),
            task=spec.task,
            metric=spec.metric,
            data=self._task(spec.task).fingerprint,
            lm_eval=lm_eval_version(),
            batch_size=self.use_case.batch_size,
            **self._compute(),
            **self._engine(judged or method),
        )

    # -- per-document scores -------------------------------------------------------------
    def doc_ids(self, spec: TaskThreshold, n: int) -> list[int]:
        """The ids of the first n documents of the task's seeded order."""
        return document_order(self._task(spec.task).n_docs)[:n]

    def doc_pairs(
        self, method: QuantScheme, spec: TaskThreshold, n: int, judged: QuantScheme | None = None
    ) -> np.ndarray:
        """Per-document (numerator, denominator) pairs of the first n documents in order; only missing ones are run.
        Scored as `judged`'s comparison is (default `method`): the reference through the engine where it is."""
        key, scorer = self._key(method, spec, judged), self._scorer(judged or method)
        stored = self.cache.get(key) if self.cache else None
        have: dict[int, list[float]] = {int(k): v for k, v in (stored or {}).get("docs", {}).items()}
        ids = self.doc_ids(spec, n)
        missing = [i for i in ids if i not in have]
        if missing:
            new = self._served_docs(scorer, method, spec, missing) if scorer else self._docs_here(method, spec, missing)
            have.update({i: list(v) for i, v in new.items()})
            self.docs_evaluated += len(new)
            if self.cache:
                entry = dict(stored or {})
                entry.update({"docs": {str(i): v for i, v in have.items()}, "task": spec.task})
                self.cache.put(key, entry)
        return np.asarray([have[i] for i in ids], dtype=np.float64)

    def _docs_here(self, method: QuantScheme, spec: TaskThreshold, ids: list[int]) -> dict[int, tuple[float, float]]:
        model, batch = self.models.get(method), self.use_case.batch_size
        return run_docs(
            model,
            self.models.tokenizer,
            self._manager,
            task=spec.task,
            metric=spec.metric,
            doc_ids=ids,
            batch_size=batch,
        )

    def _served_docs(
        self, scorer: ServedScorer, method: QuantScheme, spec: TaskThreshold, ids: list[int]
    ) -> dict[int, list[float]]:
        """`ids` through the engine: every task's whole budget scored on the scheme's first miss (one start)."""
        if method.name not in self._served_memo:
            budgets = {t.task: (t.metric, self.doc_ids(t, self.budget(t))) for t in self.use_case.tasks}
            self._served_memo[method.name] = scorer.score(method, budgets)
        scored = self._served_memo[method.name][spec.task]
        return {i: scored[i] for i in ids}

    def _looks_taken(self, method: QuantScheme, spec: TaskThreshold) -> list[int]:
        stored = self.cache.get(self._key(method, spec)) if self.cache else None
        return [int(n) for n in (stored or {}).get("looks", [])]

    def _record_look(self, method: QuantScheme, spec: TaskThreshold, n: int) -> None:
        if self.cache:
            key = self._key(method, spec)
            entry = self.cache.get(key) or {}
            entry["looks"] = sorted({*entry.get("looks", []), n})
            self.cache.put(key, entry)

    def _compare_task(self, method: QuantScheme, spec: TaskThreshold) -> PairedResult:
        reference = get_scheme(REFERENCE_METHOD)
        budget = self.budget(spec)
        base = self.doc_pairs(reference, spec, budget, judged=method)  # the whole budget, once for every method
        policy, confidence = self.use_case.verdict_policy, self.use_case.confidence
        if method.name == REFERENCE_METHOD:
            return paired_bootstrap(spec, base, base, policy=policy, confidence=confidence, same_model=True)
        schedule = chunk_schedule(budget, adaptive=bool(self.adaptive), min_chunk=first_look(base))
        return run_looks(
            spec,
            base,
            lambda n: self.doc_pairs(method, spec, n),
            schedule,
            looks=looks_counted(self._looks_taken(method, spec), schedule),
            policy=policy,
            confidence=confidence,
            on_look=lambda n: self._record_look(method, spec, n),
        )

    # -- fidelity ------------------------------------------------------------------------
    def _fidelity(self, method: QuantScheme) -> fid.FidelityResult:
        settings = self.use_case.fidelity
        key = cache_key(
            model=self._fingerprint(),
            method=method.identity(),
            fidelity=settings.model_dump(),
            algorithm=fid.ALGORITHM,
            text_task=self._task(settings.text_task or self.use_case.task_names[0]).fingerprint,
            **self._compute(),
        )
        stored = self.cache.get(key) if self.cache else None
        if stored is not None:
            return from_data(fid.FidelityResult, stored)
        if self._reference_log_probs is None:  # kept on disk for the process's later candidates (see fidelity.py)
            windows = fid.fidelity_windows(self.use_case, self._manager, self.models.tokenizer)
            reference = self.models.get(get_scheme(REFERENCE_METHOD))
            self._reference_log_probs = fid.reference_log_probs(reference, windows)
        result = fid.compare(self.models.get(method), self._reference_log_probs)
        if self.cache:
            self.cache.put(key, to_data(result))
        return result

    # -- the verdict ---------------------------------------------------------------------
    def not_evaluated(self, method: QuantScheme, reason: str) -> QualityResult:
        """An "unverified" result saying why nothing was measured; not remembered, so a later call evaluates."""
        checks = [task_check(spec, None) for spec in self.use_case.tasks]
        kl = fidelity_check(self.use_case, None)
        checks += [kl] if kl else []
        return QualityResult(
            method.name,
            method.precision,
            "unverified",
            checks,
            None,
            self._measured_on(method),
            0.0,
            0,
            reason,
            self.models.compute_dtype,
        )

    def _claim_key(self, method: QuantScheme) -> str:
        """What one evaluation computes: this model, method, suite (thresholds, budgets, task data) and lm-eval.

        Task data enter by fingerprint, not by the suite's include_path, so workers whose checkouts
        sit in different directories agree on the key.
        """
        return "quality:" + cache_key(
            model=self._fingerprint(),
            method=method.identity(),
            limit=self.limit,
            adaptive=self.adaptive,
            verdict=VERDICT_VERSION,
            use_case=self.use_case.model_dump(mode="json", exclude={"include_path"}),
            lm_eval=lm_eval_version(),
            data={name: self._task(name).fingerprint for name in self.use_case.task_names},
            **self._compute(),
            **self._engine(method),
        )

    def _measure(self, method: QuantScheme) -> QualityResult:
        started = time.perf_counter()
        docs_before = self.docs_evaluated
        checks = [task_check(spec, self._compare_task(method, spec)) for spec in self.use_case.tasks]
        fidelity = self._fidelity(method) if self.use_case.fidelity.max_mean_kl is not None else None
        kl = fidelity_check(self.use_case, fidelity)
        checks += [kl] if kl else []
        self.computed_here += 1
        return QualityResult(
            method.name,
            method.precision,
            overall(checks),
            checks,
            fidelity,
            self._measured_on(method),
            time.perf_counter() - started,
            self.docs_evaluated - docs_before,
            "",
            self.models.compute_dtype,
        )

    def evaluate(self, method: QuantScheme) -> QualityResult:
        if method.name in self._results:
            return self._results[method.name]
        reason = method.unavailable_reason(self.models.device)
        result: QualityResult
        if reason is None:
            try:
                if self.claims is None:
                    result = self._measure(method)
                else:
                    label = f"quality of {method.precision}/{method.name}"
                    data, _ = self.claims.run_once(
                        self._claim_key(method), label, lambda: to_data(self._measure(method))
                    )
                    result = from_data(QualityResult, data)
            except SchemeUnavailableError as exc:
                reason = str(exc)
        if reason is not None:
            result = self.not_evaluated(method, reason)
        self._results[method.name] = result
        return result
