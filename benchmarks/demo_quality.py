"""Quality of every serving scheme on the demo use case, scored on the checkpoint an engine loads.

    .venv/bin/python benchmarks/demo_quality.py [--suite recommender/demo/use_case.yaml] [--all] [--methods M ...]
        [--json out.json]

Prints one row per scheme: task scores with their deltas against bf16 and the paired interval
of each delta, mean/p99 KL (nats/token), top-1 agreement, the verdict under the suite's
thresholds and the seconds it took (making the checkpoint included: GPTQ, AWQ and SmoothQuant
calibrate on the suite's unscored documents). `--all` adds the evaluation-only torchao schemes.
This is where the demo's thresholds were checked to make the decision non-trivial.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from recommender.device import DeviceInfo
from recommender.engines import evaluation_only
from recommender.models.source import ModelSource
from recommender.quality.calibration_docs import quantize_context
from recommender.quality.evaluate import QualityEvaluator
from recommender.quality.lm_eval_runner import task_manager
from recommender.quality.suite import load_use_case
from recommender.quantize import all_schemes
from recommender.quantize.model_cache import ModelCache
from recommender.serialization import to_data

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--suite", type=Path, default=REPO / "recommender" / "demo" / "use_case.yaml")
    parser.add_argument("--model", type=Path, default=REPO / "recommender" / "demo" / "model")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--all", action="store_true", help="also the evaluation-only schemes")
    parser.add_argument("--methods", nargs="+", default=None, help="only these schemes (default: every one)")
    args = parser.parse_args()

    cpu = DeviceInfo("cpu")
    use_case = load_use_case(args.suite)
    source = ModelSource.resolve(str(args.model), base_dir=REPO)
    manager = task_manager(use_case)
    models = ModelCache(source, cpu, quantize_context(use_case, manager, source))
    # Every method on every document of the suite's budgets: no adaptive stop, no cache.
    evaluator = QualityEvaluator(use_case, models, adaptive=False, manager=manager)
    size_mb = sum(p.stat().st_size for p in args.model.glob("*.safetensors")) / 1e6
    console = Console()
    console.print(f"model {args.model}: {size_mb:.1f} MB safetensors; next-line chance level 0.25")

    table = Table(title=f"{use_case.name} on {cpu.label}")
    for col in (
        "scheme",
        *[f"{t.task}\n{t.metric}" for t in use_case.tasks],
        "mean KL",
        "p99 KL",
        "top-1",
        "verdict",
        "s",
    ):
        table.add_column(col)
    rows = []
    for name, method in all_schemes().items():
        if method.unavailable_reason(cpu) or (evaluation_only(method) and not args.all):
            continue
        if args.methods and name not in args.methods:
            continue
        started = time.perf_counter()
        result = evaluator.evaluate(method)
        cells = []
        for spec in use_case.tasks:
            check = next(c for c in result.checks if c.name == spec.task)
            low, high = check.delta_ci or (float("nan"), float("nan"))
            cells.append(f"{check.value:.4f} ({check.delta:+.4f} [{low:+.4f}, {high:+.4f}], n={check.n_docs})")
        fid = result.fidelity
        assert fid is not None
        table.add_row(
            name,
            *cells,
            f"{fid.mean_kl:.4f}",
            f"{fid.p99_kl:.4f}",
            f"{fid.top1_agreement:.3f}",
            result.verdict,
            f"{time.perf_counter() - started:.0f}",
        )
        console.print(f"{name}: {result.verdict}, mean KL {fid.mean_kl:.5f}, {time.perf_counter() - started:.0f} s")
        rows.append(to_data(result))
    console.print(table)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
