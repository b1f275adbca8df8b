"""The demo's question is one quantization answers: at its traffic INT8 W8A8 is the cheapest on speed and cost,
so the search must make and score a quantized checkpoint before it can recommend anything.

The fast test checks the premise on the calibrated step costs alone (no model is quantized); the slow one runs
the demo search itself, as `make demo` does, and checks that it shows the whole loop.
"""

from __future__ import annotations

from recommender.config.candidate import Candidate
from recommender.config.spec import load_spec
from recommender.decision.rules import COST_TOLERANCE
from recommender.evaluation.performance import PerformanceEvaluator
from recommender.study.prepare import prepare
from tests.conftest import DEMO_SPEC


def test_at_the_demo_traffic_only_int8_tensor_cores_fit_one_rtx_4090() -> None:
    spec = load_spec(DEMO_SPEC)
    prepared = prepare(spec)
    evaluator = PerformanceEvaluator(
        prepared.catalog, prepared.shape, spec.traffic, spec.sla, engines=tuple(spec.engines)
    )
    batch = max(spec.space.batch_sizes or [64])

    def month(method: str, precision: str, hardware: str) -> float:
        result = evaluator.evaluate(Candidate(precision, method, hardware, batch))
        assert result.status == "evaluated" and result.cost is not None, result.broken
        return result.cost.usd_per_month

    bf16 = min(month("baseline", "bf16", hw) for hw in spec.space.hardware)
    eight_bit = {m: month(m, p, "rtx-4090") for p, m in (("fp8", "fp8-dynamic"), ("int8", "int8-w8a8"))}
    four_bit = month("w4a16-gptq-g128", "int4", "rtx-4090")
    # INT8 saves more than the tie tolerance against every bf16 fleet: it must be scored.
    assert eight_bit["int8-w8a8"] * (1 + COST_TOLERANCE) < bf16, (eight_bit, bf16)
    # FP8 does not (it needs a second 4090 at this rate): one scheme scored keeps the first run under 2 minutes.
    assert eight_bit["fp8-dynamic"] > bf16, (eight_bit, bf16)
    # And 4-bit weights do not: on a model this small they save no replica, so the search never scores them.
    assert four_bit > min(eight_bit.values()) * (1 + COST_TOLERANCE)


# The demo search itself, from an empty directory and cache, is run and checked by .ci/wheel_check (twice: the
# development install and the wheel): a quantized winner, the reference and INT8 scored, no "does not pay",
# money as money. Not repeated here, to keep CI's slow step inside its time.
