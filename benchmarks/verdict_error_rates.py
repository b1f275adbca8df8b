"""How often the quality verdicts and the release gate are wrong, on simulated per-document scores.

Every rate comes from the project's own functions — `paired_bootstrap` (single looks), `run_looks`
with `chunk_schedule`/`first_look`/`looks_counted` (the adaptive procedure), `fidelity_check` (KL over
windows) and the gate's `relative_loss`/`loss_growth`/`judge` — fed per-document scores drawn from a
stated model; nothing is re-implemented here. Nominal one-sided false-pass rate: 2.5 % (95 %).

- false pass: a model truly past its threshold is judged "pass" (or a regressed release passes the gate);
- power: a model well inside its threshold is judged "pass" (what the bounds cost);
- unchanged-release gate pass: a release whose models answer every document as before passes the gate at
  its defaults (1 % allowance, 95 %), on the documents README's rule asks for (n >= 4 / (L * a)).

Usage:  PYTHONPATH=. .venv/bin/python benchmarks/verdict_error_rates.py [--reps 400] [--seed 34]
The last line is `max false pass X.X %; unchanged-release gate pass Y.Y %`.
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from recommender.quality.evaluate import chunk_schedule, first_look, looks_counted, run_looks
from recommender.quality.fidelity import FidelityResult
from recommender.quality.statistics import paired_bootstrap
from recommender.quality.suite import Fidelity, TaskThreshold, Threshold, UseCase
from recommender.quality.verdict import Check, fidelity_check
from recommender.releases.gate import GateLimits, judge, relative_loss
from recommender.releases.growth import loss_growth

Rng = np.random.Generator
Pairs = tuple[np.ndarray, np.ndarray]
ACC = TaskThreshold(task="acc", metric="acc", higher_is_better=True, threshold=Threshold(max_absolute_drop=0.03))
BPB = TaskThreshold(
    task="bpb", metric="bits_per_byte", higher_is_better=False, threshold=Threshold(max_relative_drop=0.01)
)
KL_LIMIT = 0.002


@dataclass(frozen=True)
class Scenario:
    kind: str  # "false pass", "power", "unchanged gate"
    name: str
    n: int
    run: Callable[[Rng], bool]  # True when the verdict passes


# -- per-document scores -------------------------------------------------------------------------
def binary(rng: Rng, n: int, accuracy: float, loss: float, gain: float = 0.0) -> Pairs:
    """Reference right with probability `accuracy`; a right answer lost with probability loss / accuracy,
    a wrong one gained with probability gain / (1 - accuracy): a drop of loss - gain in accuracy points."""
    ref = rng.random(n) < accuracy
    u = rng.random(n)
    var = np.where(ref, u >= loss / accuracy, u < gain / (1.0 - accuracy))
    ones = np.ones(n)
    return np.stack([ref.astype(float), ones], 1), np.stack([var.astype(float), ones], 1)


def bits(rng: Rng, n: int, fraction: float, damage: float, noise: float = 0.003) -> Pairs:
    """Documents of 500-3000 bytes at about 0.8 nats/byte; `fraction` of them `damage` worse, all with noise."""
    size = rng.uniform(500, 3000, n)
    ll = -rng.lognormal(math.log(0.8), 0.25, n) * size
    hit = rng.random(n) < fraction
    worse = ll * (1.0 + np.where(hit, damage, 0.0) + rng.normal(0.0, noise, n))
    return np.stack([ll, size], 1), np.stack([worse, size], 1)


# -- verdicts through the project's functions -----------------------------------------------------
def single(spec: TaskThreshold, draw: Callable[[Rng, int], Pairs], n: int) -> Callable[[Rng], bool]:
    def run(rng: Rng) -> bool:
        ref, var = draw(rng, n)
        return paired_bootstrap(spec, ref, var, seed=int(rng.integers(1 << 31))).verdict == "pass"

    return run


def adaptive(spec: TaskThreshold, draw: Callable[[Rng, int], Pairs], budget: int) -> Callable[[Rng], bool]:
    def run(rng: Rng) -> bool:
        ref, var = draw(rng, budget)
        schedule = chunk_schedule(budget, adaptive=True, min_chunk=first_look(ref))
        result = run_looks(spec, ref, lambda k: var[:k], schedule, looks=looks_counted([], schedule))
        return result.verdict == "pass"

    return run


def rerun(spec: TaskThreshold, draw: Callable[[Rng, int], Pairs], first: int, second: int) -> Callable[[Rng], bool]:
    """An inconclusive adaptive run, re-run with a larger budget: the earlier looks count (as evaluate.py does)."""

    def run(rng: Rng) -> bool:
        ref, var = draw(rng, second)
        taken: list[int] = []
        before = chunk_schedule(first, adaptive=True, min_chunk=first_look(ref))
        result = run_looks(spec, ref, lambda k: var[:k], before, looks=len(before), on_look=taken.append)
        if result.verdict != "inconclusive":
            return result.verdict == "pass"
        after = chunk_schedule(second, adaptive=True, min_chunk=first_look(ref))
        again = run_looks(spec, ref, lambda k: var[:k], after, looks=looks_counted(taken, after))
        return again.verdict == "pass"

    return run


def kl(windows: int, fraction: float, ratio: float) -> Callable[[Rng], bool]:
    """Windows' mean KL: lognormal (cv 0.5); `fraction` of them `ratio` times the rest; true mean 1.04 x limit."""
    use_case = UseCase(name="u", tasks=[ACC], fidelity=Fidelity(max_mean_kl=KL_LIMIT))
    scale = 1.04 * KL_LIMIT / (1.0 - fraction + fraction * ratio)

    def run(rng: Rng) -> bool:
        base = rng.lognormal(math.log(scale) - 0.5 * 0.47**2, 0.47, windows)
        values = np.where(rng.random(windows) < fraction, base * ratio, base)
        result = FidelityResult(float(values.mean()), 0.0, 0.99, 1.0, windows * 255, tuple(float(v) for v in values))
        check = fidelity_check(use_case, result)
        return check is not None and check.verdict == "pass"

    return run


# -- the release gate ------------------------------------------------------------------------------
def _check(ref: np.ndarray) -> Check:
    return Check("acc", "acc", 0.0, 0.0, 0.0, 0.0, "", "pass", higher_is_better=True)


def gate_passes(
    n: int, accuracy: float, *, bf16_drop: float = 0.0, int8_growth: float = 0.0, int8_loss: float = 0.02
) -> Callable[[Rng], bool]:
    """Both gate lines of one task at defaults: bf16 across releases, and the int8 loss growth.

    The old release: bf16 right with `accuracy`, int8 losing `int8_loss` of the documents. The new one
    answers every document as the old did, except that bf16 loses `bf16_drop` (relative) more answers
    and int8 `int8_growth` (relative) more.
    """
    limits = GateLimits()

    def run(rng: Rng) -> bool:
        old_ref, old_var = binary(rng, n, accuracy, int8_loss)
        new_ref, new_var = old_ref.copy(), old_var.copy()
        lost = rng.random(n) < bf16_drop
        new_ref[lost & (old_ref[:, 0] == 1), 0] = 0.0
        new_var[lost & (old_var[:, 0] == 1), 0] = 0.0
        grown = rng.random(n) < int8_growth
        new_var[grown & (new_var[:, 0] == 1), 0] = 0.0
        check = _check(old_ref)
        bf16 = relative_loss(
            check, tuple(map(tuple, old_ref)), tuple(map(tuple, new_ref)), confidence=limits.confidence
        )
        growth = loss_growth("acc", True, (old_ref, old_var), (new_ref, new_var), confidence=limits.confidence)
        assert bf16 is not None and growth is not None
        lines = [
            judge("bf16", bf16, limits, confidence=limits.confidence, what="drop"),
            judge("int8", growth, limits, confidence=limits.confidence, what="growth"),
        ]
        return not any(lines)

    return run


def scenarios() -> list[Scenario]:
    out: list[Scenario] = []
    fp, pw, gate = "false pass", "power", "unchanged gate"
    for n in (8, 15, 30, 60, 120, 300, 600):
        out.append(
            Scenario(
                fp,
                "acc 0.1, half the right answers lost (-5 pts vs 3)",
                n,
                single(ACC, lambda r, k: binary(r, k, 0.1, 0.05), n),
            )
        )
    for accuracy in (0.5, 0.9):
        for n in (15, 60, 300, 600):
            out.append(
                Scenario(
                    fp,
                    f"acc {accuracy}, -3.5 pts, losses only",
                    n,
                    single(ACC, lambda r, k, a=accuracy: binary(r, k, a, 0.035), n),
                )
            )
            out.append(
                Scenario(
                    fp,
                    f"acc {accuracy}, -3.5 pts, 8.5 lost + 5 gained",
                    n,
                    single(ACC, lambda r, k, a=accuracy: binary(r, k, a, 0.085, 0.05), n),
                )
            )
    for budget in (32, 60, 300):
        out.append(
            Scenario(
                fp, "adaptive: acc 0.1, -5 pts", budget, adaptive(ACC, lambda r, k: binary(r, k, 0.1, 0.05), budget)
            )
        )
        out.append(
            Scenario(
                fp, "adaptive: acc 0.5, -3.5 pts", budget, adaptive(ACC, lambda r, k: binary(r, k, 0.5, 0.035), budget)
            )
        )
    out.append(
        Scenario(
            fp, "re-run 60 -> 300: acc 0.5, -3.5 pts", 300, rerun(ACC, lambda r, k: binary(r, k, 0.5, 0.035), 60, 300)
        )
    )
    for n in (20, 32, 40, 60, 120, 200):
        out.append(
            Scenario(
                fp, "bpb +1.04 %: 10 % of docs 10.4 % worse", n, single(BPB, lambda r, k: bits(r, k, 0.1, 0.104), n)
            )
        )
        out.append(Scenario(fp, "bpb +1.04 %: every doc", n, single(BPB, lambda r, k: bits(r, k, 1.0, 0.0104), n)))
    for n in (120, 200):
        out.append(
            Scenario(
                fp, "bpb +1.04 %: 5 % of docs 20.8 % worse", n, single(BPB, lambda r, k: bits(r, k, 0.05, 0.208), n)
            )
        )
    out.append(
        Scenario(fp, "adaptive: bpb +1.04 %, 10 % of docs", 64, adaptive(BPB, lambda r, k: bits(r, k, 0.1, 0.104), 64))
    )
    for windows in (16, 40, 64, 80):
        out.append(Scenario(fp, "KL 1.04 x limit, spread over windows", windows, kl(windows, 0.0, 1.0)))
        out.append(Scenario(fp, "KL 1.04 x limit, 10 % of windows 4x", windows, kl(windows, 0.1, 4.0)))
    for n in (889,):
        out.append(Scenario(fp, "gate: bf16 1.5 % worse (allowance 1 %)", n, gate_passes(n, 0.45, bf16_drop=0.015)))
        out.append(Scenario(fp, "gate: int8 loss grown 1.5 %", n, gate_passes(n, 0.45, int8_growth=0.015)))
    for n in (60, 300, 600):
        out.append(Scenario(pw, "acc 0.5, no loss (power)", n, single(ACC, lambda r, k: binary(r, k, 0.5, 0.0), n)))
        out.append(Scenario(pw, "acc 0.5, -1 pt (power)", n, single(ACC, lambda r, k: binary(r, k, 0.5, 0.01), n)))
    for n in (40, 60, 120):
        out.append(
            Scenario(pw, "bpb +0.3 % everywhere (power)", n, single(BPB, lambda r, k: bits(r, k, 1.0, 0.003), n))
        )
    for n, accuracy in ((889, 0.45), (445, 0.9)):
        out.append(Scenario(gate, f"gate: unchanged release, acc {accuracy}", n, gate_passes(n, accuracy)))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--reps",
        type=int,
        default=400,
        help="runs per scenario of 121-600 documents; twice as many below, a quarter above",
    )
    parser.add_argument("--seed", type=int, default=34)
    args = parser.parse_args()
    started = time.perf_counter()
    worst_fp, unchanged = 0.0, 1.0
    print(f"{'kind':<15} {'scenario':<52} {'n':>5} {'pass %':>7}")
    for i, sc in enumerate(scenarios()):
        rng = np.random.default_rng([args.seed, i])
        reps = args.reps * 2 if sc.n <= 120 else args.reps if sc.n <= 600 else max(100, args.reps // 4)
        rate = sum(sc.run(rng) for _ in range(reps)) / reps
        print(f"{sc.kind:<15} {sc.name:<52} {sc.n:>5} {100 * rate:>6.1f}")
        if sc.kind == "false pass":
            worst_fp = max(worst_fp, rate)
        elif sc.kind == "unchanged gate":
            unchanged = min(unchanged, rate)
    print(f"(--reps {args.reps}, seed {args.seed}, {time.perf_counter() - started:.0f} s)")
    print(f"max false pass {100 * worst_fp:.1f} %; unchanged-release gate pass {100 * unchanged:.1f} %")


if __name__ == "__main__":
    main()
