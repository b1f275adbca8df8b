"""What a trial pays to read the study before it runs: flat in the number of stored trials.

    .venv/bin/python benchmarks/trial_overhead.py [--trials 200] [--docs 64]

Every trial of a search first reads what every worker has stored (``study.worker.load_known``), so
duplicates are free and the cost bound is current. A real sqlite Optuna storage is filled with
`--trials` finished trials, each carrying a result the size of the demo's (two quality checks with
`--docs` per-document pairs for reference and variant, a KL fidelity result, a serving estimate);
then the read is timed as the study grows, the way a worker does it (the parsed results kept
across trials) and the way it did before (every stored result parsed at every trial).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import optuna

from recommender.config.candidate import Candidate
from recommender.evaluation.candidate import CandidateResult
from recommender.evaluation.constraints import CONSTRAINT_KEYS, Constraints
from recommender.perf.sim.results import Percentiles
from recommender.perf.sim.serving import ServingEstimate
from recommender.provenance import Provenance
from recommender.quality.fidelity import FidelityResult
from recommender.quality.result import QualityResult
from recommender.quality.verdict import Check
from recommender.serialization import to_data
from recommender.study.worker import RESULT_ATTR, load_known


def _result(i: int, docs: int) -> CandidateResult:
    """A demo-sized result: the per-document pairs are most of its bytes, as in a real study."""
    pairs = tuple((-3000.0 - j, 2900.0 + j) for j in range(docs))
    checks = [
        Check(
            name,
            "bits_per_byte",
            1.71,
            1.72,
            0.01,
            -0.005,
            "relative drop <= 1.0%",
            "pass",
            (0.0, 0.01),
            docs,
            False,
            0.01,
            0.95,
            1,
            pairs,
            pairs,
        )
        for name in ("demo_code_ppl", "demo_code_next_line")
    ]
    quality = QualityResult(
        "int8-w8a8", "int8", "pass", checks, FidelityResult(3e-4, 2e-3, 0.99, 1.0, 2048), "cpu", 12.0, 2 * docs
    )
    serving = ServingEstimate(
        Percentiles(40, 55, 60),
        Percentiles(2, 2.5, 2.7),
        4000.0,
        4e6,
        3900.0,
        Provenance("calibrated", "benchmark"),
        "sglang",
        180.0,
        4.0,
        0.9,
        9000.0,
    )
    c = Candidate(precision="int8", method="int8-w8a8", hardware="l40s", batch_size=8 + i)
    return CandidateResult(c, "evaluated", Constraints(**dict.fromkeys(CONSTRAINT_KEYS, -0.5)), [], quality, serving)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--docs", type=int, default=64, help="per-document pairs per check")
    args = parser.parse_args()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    with tempfile.TemporaryDirectory() as tmp:
        study = optuna.create_study(storage=f"sqlite:///{Path(tmp) / 'optuna.db'}", directions=["minimize"] * 2)
        parsed: dict[int, CandidateResult | None] = {}
        kept, fresh = [], []
        for i in range(args.trials):
            attrs = {RESULT_ATTR: to_data(_result(i, args.docs))}
            study.add_trial(
                optuna.trial.create_trial(state=optuna.trial.TrialState.COMPLETE, values=[1.0, 0.0], user_attrs=attrs)
            )
            started = time.perf_counter()
            load_known(study, parsed)
            kept.append(time.perf_counter() - started)
            if (i + 1) % 50 == 0:
                started = time.perf_counter()
                load_known(study)
                fresh.append((i + 1, time.perf_counter() - started))
    print(f"read before a trial, {args.docs} document pairs per check, sqlite storage:")
    print(f"  {'stored trials':>13s}  {'parsed once (ms)':>16s}  {'parsed every time (ms)':>22s}")
    for n, seconds in fresh:
        window = kept[max(0, n - 10) : n]
        print(f"  {n:13d}  {1e3 * sum(window) / len(window):16.1f}  {1e3 * seconds:22.1f}")


if __name__ == "__main__":
    main()
