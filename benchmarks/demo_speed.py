"""How long the first run takes: the demo search from a cold start, on this machine's CPU.

    .venv/bin/python benchmarks/demo_speed.py [--compute-dtype bfloat16|float32] [--repeats 1]

Runs `recommender search` (the shipped demo, no argument) in a fresh directory with an empty quality
and checkpoint cache (``RECOMMENDER_CACHE_DIR``), as a new user's first `make demo` does after set-up,
and prints the wall time with the CPU it ran on, whether that CPU has native bfloat16 and the dtype the
quality runs computed in. ``--compute-dtype`` forces the dtype (``RECOMMENDER_CPU_COMPUTE_DTYPE``): on
a CPU with bfloat16, float32 shows what the float32 path costs here; the float32 speed-up itself only
shows on a CPU without it. Exit 1 if the search fails or takes more than ``--limit-s`` (120).
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from recommender.device import CPU_COMPUTE_DTYPE_ENV, DeviceInfo, cpu_has_native_bf16, quality_compute_dtype

RECOMMENDER = Path(sys.executable).with_name("recommender")


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            names = [line.split(":", 1)[1].strip() for line in f if line.startswith("model name")]
    except OSError:
        names = []
    return f"{names[0] if names else platform.processor() or platform.machine()}, {os.cpu_count()} cores"


def _one_run(env: dict[str, str]) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        run_env = {**env, "RECOMMENDER_CACHE_DIR": str(Path(tmp) / "cache")}
        started = time.perf_counter()
        done = subprocess.run([str(RECOMMENDER), "search"], cwd=tmp, env=run_env, capture_output=True, text=True)
        seconds = time.perf_counter() - started
        if done.returncode != 0:
            sys.exit(f"the demo search failed (exit {done.returncode}):\n{done.stderr[-2000:]}")
        winner = next((line for line in done.stdout.splitlines() if "recommended" in line), "").strip()
        print(f"  {seconds:.1f} s; {' '.join(winner.split())}")
        return seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--compute-dtype", choices=("bfloat16", "float32"), default=None)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--limit-s", type=float, default=120.0)
    args = parser.parse_args()
    env = dict(os.environ)
    if args.compute_dtype:
        env[CPU_COMPUTE_DTYPE_ENV] = args.compute_dtype
        os.environ[CPU_COMPUTE_DTYPE_ENV] = args.compute_dtype
    dtype = quality_compute_dtype(DeviceInfo("cpu"))
    print(f"{_cpu_model()}; native bfloat16: {cpu_has_native_bf16()}; quality computes in {dtype}")
    times = [_one_run(env) for _ in range(args.repeats)]
    best = min(times)
    print(f"demo search, cold cache: {best:.1f} s (best of {len(times)}; limit {args.limit_s:.0f} s)")
    return 0 if best <= args.limit_s else 1


if __name__ == "__main__":
    sys.exit(main())
