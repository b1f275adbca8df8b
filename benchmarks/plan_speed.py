"""Wall time of `recommender plan` on GPUs with kernel tables: datasheet, kernels from a cold cache, kernels cached.

    .venv/bin/python benchmarks/plan_speed.py [--model llama-3.1-70b] [--hardware l40s --hardware h100-sxm]

Runs the same `plan` three times in fresh interpreters: with aiconfigurator-core blocked (the datasheet step
cost, as before the kernel tables), with the kernel tables sampled from scratch (an empty
``$RECOMMENDER_CACHE_DIR``), and again with the tables that run cached. Prints each wall time and the rows'
step basis. Target (issue 39): plan on a covered GPU in about the time it took on the datasheet, once cached.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

_BLOCK = "import sys; sys.modules['aiconfigurator_core'] = None; "
_RUN = "from recommender.cli.main import main; sys.argv = ['recommender'] + sys.argv[1:]; main()"


def _plan(args: list[str], cache: str, blocked: bool) -> tuple[float, list[dict[str, object]]]:
    code = "import sys; " + (_BLOCK if blocked else "") + _RUN
    # One process: the datasheet run blocks aiconfigurator-core in this interpreter only, and the three runs compare
    # the step costs, not how many cores the rows spread over (``fleet.row_processes``).
    env = os.environ | {"RECOMMENDER_CACHE_DIR": cache, "RECOMMENDER_PLAN_PROCESSES": "1"}
    started = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-c", code, "plan", *args, "--json"],
        capture_output=True,
        text=True,
        env=env,
        check=True,
        timeout=1800,
    )
    return time.perf_counter() - started, json.loads(out.stdout)


def _bases(rows: list[dict[str, object]]) -> str:
    bases = [str(row["provenance"]["basis"]) for row in rows if isinstance(row.get("provenance"), dict)]  # type: ignore[index]
    return f"{bases.count('measured kernels')} on measured kernels, {bases.count('datasheet')} on the datasheet"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="llama-3.1-70b")
    parser.add_argument("--hardware", action="append")
    args = parser.parse_args()
    plan = ["--model", args.model, "--rps", "20", "--prompt-tokens", "2048", "--output-tokens", "256"]
    for gpu in args.hardware or ["l40s", "h100-sxm"]:
        plan += ["--hardware", gpu]
    with tempfile.TemporaryDirectory() as cache:
        for label, blocked in (
            ("datasheet (aiconfigurator-core blocked)", True),
            ("kernels, cold cache", False),
            ("kernels, cached", False),
        ):
            seconds, rows = _plan(plan, cache, blocked)
            print(f"{label:40s} {seconds:6.1f} s  {len(rows)} rows, {_bases(rows)}")


if __name__ == "__main__":
    main()
