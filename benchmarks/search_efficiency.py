"""What the Optuna search costs against the exhaustive grid it replaces, on the demo space.

    .venv/bin/python benchmarks/search_efficiency.py [--spec recommender/demo/search_space.yaml]

Two arms, each from cold caches (a fresh quality cache and fresh Optuna/MLflow stores; the
demo's lm-eval data is copied in, since building it is set-up, not search): the grid
evaluates every candidate of the space; the search runs the spec's study (n_trials,
seed). Reported per arm: wall time, quality evaluations (quantize + lm-eval + KL),
documents scored, probes, and the winner. Target: the search costs <= 20 % of the grid
and finds the same winner.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path

from recommender.config.spec import load_spec
from recommender.decision.rules import pick
from recommender.paths import cache_root
from recommender.study import grid, prepare, run_search

REPO = Path(__file__).resolve().parents[1]


def _fresh_cache(root: Path, seed_from: Path) -> None:
    """A cache with the demo's task data but no quality results."""
    root.mkdir(parents=True)
    for name in ("eval_data", "hf_datasets"):
        if (seed_from / name).is_dir():
            shutil.copytree(seed_from / name, root / name)
    os.environ["RECOMMENDER_CACHE_DIR"] = str(root)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--spec", type=Path, default=REPO / "recommender" / "demo" / "search_space.yaml")
    args = parser.parse_args()
    spec = load_spec(args.spec)
    seed_cache = cache_root()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        _fresh_cache(Path(tmp) / "grid-cache", seed_cache)
        started = time.perf_counter()
        evaluator = prepare(spec).evaluator()
        results = [evaluator.evaluate(c) for c in grid(spec)]
        best = pick(results)
        quality = evaluator.quality
        best_key = best.candidate.key if best else None
        rows.append(
            (
                "grid",
                len(results),
                time.perf_counter() - started,
                quality.evaluations,
                quality.docs_evaluated,
                evaluator.probes_run,
                best_key,
            )
        )

        _fresh_cache(Path(tmp) / "search-cache", seed_cache)
        started = time.perf_counter()
        outcome = run_search(
            spec,
            storage=f"sqlite:///{tmp}/optuna.db",
            tracking_uri=f"sqlite:///{tmp}/mlflow.db",
            output_root=Path(tmp) / "out",
        )
        winner = outcome.recommendation.winner
        rows.append(
            (
                "search",
                outcome.new_trials,
                time.perf_counter() - started,
                outcome.quality_evaluations,
                outcome.docs_evaluated,
                outcome.probes,
                winner.key if winner else None,
            )
        )

    print(f"{'arm':8s} {'trials':>6s} {'wall s':>8s} {'quality evals':>13s} {'docs':>6s} {'probes':>6s}  winner")
    for arm, trials, wall, evals, docs, probes, key in rows:
        print(f"{arm:8s} {trials:6d} {wall:8.1f} {evals:13d} {docs:6d} {probes:6d}  {key}")
    (_, _, grid_wall, grid_evals, grid_docs, grid_probes, grid_key) = rows[0]
    (_, _, wall, evals, docs, probes, key) = rows[1]
    print(
        f"search / grid: wall {wall / grid_wall:.0%}, quality evaluations {evals / max(grid_evals, 1):.0%}, "
        f"documents {docs / max(grid_docs, 1):.0%}, probes {probes / max(grid_probes, 1):.0%}; "
        f"same winner: {key == grid_key}"
    )


if __name__ == "__main__":
    main()
