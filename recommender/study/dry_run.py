"""`recommender search --dry-run`: what a search would do, before it commits hours, with nothing written.

Every check of a real search runs (`prepare`: the spec, the use case's tasks, the model's architecture
from its config, the catalog and prices; no weights are loaded). Every catalog candidate is then priced
and simulated as the search would (speed and cost need no weights), which says which are pruned and why;
the schemes that would be quantized and scored are the distinct ones among the rest (at most: the search
skips those its cost bound rules out), each on the use case's document budgets. The time is an estimate
from a stated assumption: the tokens scored per scheme times the model's FLOPs per token, at the matmul
rate measured here in the dtype the quality runs compute in. No store is opened, no file written.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from recommender.config.spec import LOCAL_DEVICE
from recommender.device import local_device, quality_compute_dtype
from recommender.engines.cpu_engine_schemes import cpu_engine_refusal
from recommender.evaluation.performance import PerformanceEvaluator
from recommender.quantize import get_scheme
from recommender.speculation.methods import NONE
from recommender.study.prepare import Prepared
from recommender.study.space import UNQUANTIZED, grid

#: Tokens assumed per scored document, and per KL window beyond its own length (stated in the output).
ASSUMED_TOKENS_PER_DOCUMENT = 512


@dataclass(frozen=True)
class DryRun:
    """What the search would do (`recommender search --dry-run`), serialised as `--dry-run --json` prints it."""

    study_name: str
    candidates: int
    n_trials: int
    pruned: list[tuple[str, str]] = field(default_factory=list)
    measured_here: list[str] = field(default_factory=list)
    schemes_scored: list[str] = field(default_factory=list)
    checkpoints_made: list[str] = field(default_factory=list)
    documents_per_scheme: dict[str, int] = field(default_factory=dict)
    kl_tokens_per_scheme: int = 0
    seconds_per_scheme: float = 0.0
    estimate_basis: str = ""
    #: Speculative candidates: simulated when the search runs, once the acceptance is measured (needs the weights).
    speculative: list[str] = field(default_factory=list)
    speculation_basis: str = ""
    #: What measures the local candidates when the search runs (a spec's ``probe.engine``).
    local_measured_by: str = "transformers"


def dry_run(prepared: Prepared) -> DryRun:
    """Price, simulate and classify every candidate of the space; count what quality would be measured."""
    spec = prepared.spec  # speed and cost only: no model cache, no quality evaluator (local candidates: measured later)
    evaluator = PerformanceEvaluator(
        prepared.catalog,
        prepared.shape,
        spec.traffic,
        spec.sla,
        engines=tuple(spec.engines),
        engine_releases=spec.engine_releases,
    )
    candidates = grid(spec)
    through_engine = spec.probe is not None and spec.probe.through_engine
    pruned, measured_here, speculative = [], [], []
    reference = get_scheme("baseline")
    scored = {reference.name: reference}  # the schemes whose quality would be measured, by name
    for c in candidates:
        if c.speculative != NONE:
            speculative.append(c.key)  # its acceptance is measured on the model, when its scheme's quality passed
            continue
        if c.hardware == LOCAL_DEVICE:  # its step times are measured on this machine: that loads the weights
            if (why := cpu_engine_refusal(c.base_scheme.name, c.precision) if through_engine else None) is None:
                measured_here.append(c.key)
            else:
                pruned.append((c.key, f"runnable: {why}"))
            continue
        result = evaluator.evaluate(c)
        if result.status != "evaluated":
            pruned.append((c.key, "; ".join(result.broken)))
        elif c.precision not in UNQUANTIZED:
            scheme = c.scheme
            scored[scheme.name] = scheme
    methods = [scored[name] for name in sorted(scored)]
    documents = {t.task: t.limit or prepared.use_case.limit or 0 for t in prepared.use_case.tasks}
    fidelity = prepared.use_case.fidelity
    kl_tokens = fidelity.text_windows * fidelity.window_tokens if fidelity.max_mean_kl is not None else 0
    tokens = sum(documents.values()) * ASSUMED_TOKENS_PER_DOCUMENT + kl_tokens
    rate, dtype = _matmul_rate()
    seconds = 2.0 * prepared.shape.active_params * tokens / rate
    return DryRun(
        study_name=spec.study_name,
        candidates=len(candidates),
        n_trials=spec.search.n_trials,
        pruned=pruned,
        measured_here=measured_here,
        schemes_scored=[m.name for m in methods],
        checkpoints_made=[m.name for m in methods if m.checkpoint_format is not None],
        documents_per_scheme=documents,
        kl_tokens_per_scheme=kl_tokens,
        seconds_per_scheme=seconds,
        speculative=speculative,
        speculation_basis=_speculation_basis(prepared) if speculative else "",
        local_measured_by=spec.probe.engine if spec.probe is not None else "transformers",
        estimate_basis=(
            f"{sum(documents.values())} documents x {ASSUMED_TOKENS_PER_DOCUMENT} tokens (assumed) + {kl_tokens} KL "
            f"tokens per scheme, 2 x {prepared.shape.active_params / 1e6:,.0f} M active parameters FLOPs per token, at "
            f"{rate / 1e12:.2f} TFLOP/s ({dtype} matmul measured on this {local_device().label}); checkpoint "
            "calibration and model loading not included"
        ),
    )


def _speculation_basis(prepared: Prepared) -> str:
    s = prepared.spec.speculation
    task = s.task or prepared.use_case.fidelity.text_task or prepared.use_case.task_names[0]
    return (
        f"acceptance measured per scheme whose quality passes: greedy continuations of {s.new_tokens} tokens "
        f"after {s.prompt_tokens}-token prompts of {s.documents} {task} documents"
    )


def _matmul_rate() -> tuple[float, str]:
    """FLOP/s of a 1024-square matmul here, in the dtype quality runs compute in (the median of 5)."""
    import torch

    device = local_device()
    dtype_name = quality_compute_dtype(device)
    dtype = getattr(torch, dtype_name)
    where = "cuda" if device.kind == "cuda" else "cpu"
    a = torch.randn(1024, 1024, dtype=dtype, device=where)
    times = []
    for _ in range(5):
        started = time.perf_counter()
        (a @ a).sum().item()
        times.append(time.perf_counter() - started)
    return 2 * 1024**3 / sorted(times)[2], dtype_name
