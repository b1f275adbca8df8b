"""The demo's question is one quantization answers: at its traffic an 8-bit scheme is the cheapest on speed and
cost, so the search must make and score quantized checkpoints before it can recommend anything.

The fast test checks the premise on the calibrated step costs alone (no model is quantized); the slow one runs
the demo search itself, as `make demo` does, and checks that it shows the whole loop.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from recommender.config.candidate import Candidate
from recommender.config.spec import load_spec
from recommender.decision.evidence import read_evidence
from recommender.decision.rules import COST_TOLERANCE
from recommender.evaluation.performance import PerformanceEvaluator
from recommender.study.prepare import prepare
from tests.conftest import DEMO_SPEC


def test_at_the_demo_traffic_only_8_bit_tensor_cores_fit_one_rtx_4090() -> None:
    spec = load_spec(DEMO_SPEC)
    prepared = prepare(spec)
    evaluator = PerformanceEvaluator(prepared.catalog, prepared.shape, spec.traffic, spec.sla,
                                     engines=tuple(spec.engines))  # fmt: skip
    batch = max(spec.space.batch_sizes or [64])

    def month(method: str, precision: str, hardware: str) -> float:
        result = evaluator.evaluate(Candidate(precision, method, hardware, batch))
        assert result.status == "evaluated" and result.cost is not None, result.broken
        return result.cost.usd_per_month

    bf16 = min(month("baseline", "bf16", hw) for hw in spec.space.hardware)
    eight_bit = {m: month(m, p, "rtx-4090") for p, m in (("fp8", "fp8-dynamic"), ("int8", "int8-w8a8"))}
    four_bit = month("w4a16-gptq-g128", "int4", "rtx-4090")
    # Both 8-bit schemes save more than the tie tolerance against every bf16 fleet: each must be scored.
    assert all(m * (1 + COST_TOLERANCE) < bf16 for m in eight_bit.values()), (eight_bit, bf16)
    # And 4-bit weights do not: on a model this small they save no replica, so the search never scores them.
    assert four_bit > min(eight_bit.values()) * (1 + COST_TOLERANCE)


@pytest.mark.slow
def test_the_demo_search_makes_scores_and_recommends_a_quantized_checkpoint(tmp_path: Path) -> None:
    """`recommender search` with no argument, from an empty directory and cache: what a newcomer's `make demo` shows."""
    env = {**os.environ, "RECOMMENDER_CACHE_DIR": str(tmp_path / "cache")}
    done = subprocess.run([sys.executable, "-m", "recommender.cli.main", "search"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=1800)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    (folder,) = (tmp_path / "mlruns" / "studies").iterdir()
    evidence = read_evidence(folder)
    rec = evidence.recommendation
    measured = {r.quality.method: r.quality for r in evidence.results
                if r.quality is not None and r.quality.verdict != "unverified"}  # fmt: skip
    assert {"baseline", "fp8-dynamic", "int8-w8a8"} <= set(measured), sorted(measured)
    for method in ("fp8-dynamic", "int8-w8a8"):  # a real checkpoint scored with lm-eval and KL against bf16
        names = {c.name for c in measured[method].checks if c.value is not None}
        assert {"demo_code_ppl", "demo_code_next_line", "fidelity"} <= names
    assert rec.winner is not None and rec.winner.candidate.precision in ("fp8", "int8")
    assert rec.winner.quality is not None and rec.winner.quality.verdict == "pass"
    assert rec.quantization_note is None and "does not pay" not in done.stdout
    assert "e-0" not in done.stdout.split("launch the recommendation")[0]  # money as money
