"""Does the CPU's compute dtype move a quality verdict? The demo's serving schemes scored in bfloat16 and in float32.

    .venv/bin/python benchmarks/cpu_compute_dtype.py [--methods fp8-dynamic int8-w8a8 ...] [--json out.json]

On a CPU without native bfloat16 the quality runs compute in float32 (``device.quality_compute_dtype``):
the reference and every scheme alike, weights as stored, activation quantization simulated as before.
This scores each scheme on the demo use case twice, once per dtype (``RECOMMENDER_CPU_COMPUTE_DTYPE``),
every document of the suite's budgets (no adaptive stop), and prints per task the delta against bf16 with
its paired interval in each dtype, whether each dtype's delta lies inside the other's interval, the mean KL
in each, the verdicts, and the seconds each took. Exit 1 if a delta falls outside the other dtype's interval
or a verdict changes.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from recommender.device import CPU_COMPUTE_DTYPE_ENV, DeviceInfo, cpu_has_native_bf16
from recommender.models.source import ModelSource
from recommender.quality.cache import QualityCache
from recommender.quality.calibration_docs import quantize_context
from recommender.quality.evaluate import QualityEvaluator
from recommender.quality.lm_eval_runner import task_manager
from recommender.quality.result import QualityResult
from recommender.quality.suite import load_use_case
from recommender.quality.verdict import Check
from recommender.quantize import get_scheme
from recommender.quantize.model_cache import ModelCache
from recommender.serialization import to_data

REPO = Path(__file__).resolve().parents[1]
DTYPES = ("bfloat16", "float32")
DEFAULT_METHODS = ["fp8-dynamic", "int8-w8a8", "w4a16-gptq-g128", "bnb-nf4"]


def _score(
    dtype: str, methods: list[str], suite: Path, model: Path, cache: Path
) -> dict[str, tuple[QualityResult, float]]:
    os.environ[CPU_COMPUTE_DTYPE_ENV] = dtype
    use_case = load_use_case(suite)
    source = ModelSource.resolve(str(model), base_dir=REPO)
    manager = task_manager(use_case)
    models = ModelCache(source, DeviceInfo("cpu"), quantize_context(use_case, manager, source))
    evaluator = QualityEvaluator(use_case, models, adaptive=False, manager=manager, cache=QualityCache(cache))
    out = {}
    for name in methods:
        started = time.perf_counter()
        out[name] = (evaluator.evaluate(get_scheme(name)), time.perf_counter() - started)
    return out


def _shown(check: Check) -> str:
    if check.delta_ci is None or check.delta is None:  # KL: its value (nats/token), no interval
        return f"{check.value:.5f}"
    return f"{check.delta:+.4f} [{check.delta_ci[0]:+.4f}, {check.delta_ci[1]:+.4f}]"


def _inside(value: float | None, interval: tuple[float, float] | None) -> bool:
    return value is not None and interval is not None and interval[0] - 1e-12 <= value <= interval[1] + 1e-12


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--suite", type=Path, default=REPO / "recommender" / "demo" / "use_case.yaml")
    parser.add_argument("--model", type=Path, default=REPO / "recommender" / "demo" / "model")
    parser.add_argument("--methods", nargs="+", default=DEFAULT_METHODS)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    console = Console()
    console.print(f"this CPU has native bfloat16: {cpu_has_native_bf16()}")
    with tempfile.TemporaryDirectory() as tmp:  # a cold quality cache per dtype: nothing scored is reused
        scored = {d: _score(d, args.methods, args.suite, args.model, Path(tmp) / d) for d in DTYPES}
    table = Table(title="the demo's schemes scored in bfloat16 and float32 (delta vs bf16 [paired interval])")
    for column in ("scheme", "check", "bfloat16", "float32", "each inside the other's", "verdicts", "s (bf16/fp32)"):
        table.add_column(column)
    ok, rows = True, []
    for name in args.methods:
        (bf, bf_s), (fp, fp_s) = scored["bfloat16"][name], scored["float32"][name]
        for a, b in zip(bf.checks, fp.checks, strict=True):
            shown = [_shown(c) for c in (a, b)]
            inside = a.delta_ci is None or (_inside(a.delta, b.delta_ci) and _inside(b.delta, a.delta_ci))
            same = a.verdict == b.verdict
            ok &= inside and same
            table.add_row(
                name,
                f"{a.name} {a.metric}",
                *shown,
                "yes" if inside else "NO",
                f"{a.verdict}/{b.verdict}",
                f"{bf_s:.0f}/{fp_s:.0f}",
            )
        rows.append({"method": name, "bfloat16": to_data(bf), "float32": to_data(fp), "seconds": [bf_s, fp_s]})
    console.print(table)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
