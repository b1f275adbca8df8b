"""How long the first run takes, and whether it shows the loop: the demo search from a cold start on this CPU.

    .venv/bin/python benchmarks/demo_speed.py [--compute-dtype bfloat16|float32] [--repeats 1] [--save-output F]

Runs `recommender search` (the shipped demo, no argument) in a fresh directory with an empty quality
and checkpoint cache (``RECOMMENDER_CACHE_DIR``), as a new user's first `make demo` does after set-up,
and prints one JSON object: the wall time (and the CPU time the search process used, which says how much
of the wall time was other processes' load on a shared machine), the CPU it ran on, the dtype the
quality runs computed in, how many quality evaluations the search made, every scheme whose quality was
measured with its verdict and the checks it broke, and the winner with its $/month. ``--compute-dtype``
forces the dtype (``RECOMMENDER_CPU_COMPUTE_DTYPE``). ``--save-output`` keeps the search's printed output.
Exit 1 if the search fails or its best wall time is over ``--limit-s`` (120).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from recommender.decision.evidence import read_evidence
from recommender.device import CPU_COMPUTE_DTYPE_ENV, DeviceInfo, cpu_has_native_bf16, quality_compute_dtype
from recommender.evaluation.candidate import CandidateResult

RECOMMENDER = Path(sys.executable).with_name("recommender")
#: The summary line `recommender search` ends with: "(80 new candidates evaluated, 3 quality evaluations, 0 probes)".
EVALUATIONS = re.compile(r"(\d+) quality evaluations")


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            names = [line.split(":", 1)[1].strip() for line in f if line.startswith("model name")]
    except OSError:
        names = []
    return f"{names[0] if names else platform.processor() or platform.machine()}, {os.cpu_count()} cores"


def _measured(results: list[CandidateResult]) -> list[dict[str, Any]]:
    """One entry per scheme whose quality was measured (not skipped as unable to decide): verdict, checks broken."""
    seen: dict[str, dict[str, Any]] = {}
    for r in results:
        if r.quality is None or r.quality.verdict == "unverified" or r.quality.method in seen:
            continue
        broken = [b for b in r.broken if b.startswith("quality")]
        seen[r.quality.method] = {"scheme": r.quality.method, "verdict": r.quality.verdict, "broken": broken}
    return list(seen.values())


def _one_run(env: dict[str, str], save: Path | None) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        run_env = {**env, "RECOMMENDER_CACHE_DIR": str(Path(tmp) / "cache")}
        cpu_before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        done = subprocess.run([str(RECOMMENDER), "search"], cwd=tmp, env=run_env, capture_output=True, text=True)
        seconds = time.perf_counter() - started
        cpu_after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if save is not None:
            save.write_text(done.stdout, encoding="utf-8")
        if done.returncode != 0:
            sys.exit(f"the demo search failed (exit {done.returncode}):\n{done.stderr[-2000:]}")
        (folder,) = Path(tmp).glob("mlruns/studies/*")
        evidence = read_evidence(folder)
        rec, found = evidence.recommendation, EVALUATIONS.search(done.stdout)
        cpu = (cpu_after.ru_utime - cpu_before.ru_utime) + (cpu_after.ru_stime - cpu_before.ru_stime)
        return {
            "wall_s": round(seconds, 1),
            "cpu_s": round(cpu, 1),
            "quality_evaluations": int(found.group(1)) if found else None,
            "measured": _measured(evidence.results),
            "winner": rec.winner.key if rec.winner else None,
            "winner_usd_per_month": rec.winner.usd_per_month if rec.winner else None,
            "quantization_note": rec.quantization_note,
        }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--compute-dtype", choices=("bfloat16", "float32"), default=None)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--limit-s", type=float, default=120.0)
    parser.add_argument("--save-output", type=Path, default=None, help="write the search's printed output here")
    args = parser.parse_args()
    env = dict(os.environ)
    if args.compute_dtype:
        env[CPU_COMPUTE_DTYPE_ENV] = args.compute_dtype
        os.environ[CPU_COMPUTE_DTYPE_ENV] = args.compute_dtype
    runs = [_one_run(env, args.save_output) for _ in range(args.repeats)]
    best = min(runs, key=lambda r: r["wall_s"])
    load = os.getloadavg()
    print(
        json.dumps(
            {
                "benchmark": "demo search, cold cache (recommender search, no argument)",
                "cpu": _cpu_model(),
                "native_bf16": cpu_has_native_bf16(),
                "quality_dtype": quality_compute_dtype(DeviceInfo("cpu")),
                "load_average_1_5_15_min_at_end": [round(x, 2) for x in load],
                "limit_s": args.limit_s,
                "best_of": len(runs),
                **best,
                "all_wall_s": [r["wall_s"] for r in runs],
            },
            indent=2,
        )
    )
    return 0 if best["wall_s"] <= args.limit_s else 1


if __name__ == "__main__":
    sys.exit(main())
