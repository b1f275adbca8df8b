"""Every type written to an artifact builds its pydantic adapter: its annotations resolve at run time.

A type imported only under TYPE_CHECKING in the module that annotates with it leaves the adapter
"not fully defined", which the search finds only when it writes the artifact (after hours of work).
"""

from __future__ import annotations

import pytest
from pydantic import TypeAdapter

from recommender.decision.recommendation import Recommendation
from recommender.evaluation.candidate import CandidateResult
from recommender.evaluation.load_curve import LoadCurve
from recommender.fleet.plan_row import PlanRow
from recommender.fleet.spec_plan import FleetPlan
from recommender.perf.sim.estimate import BenchmarkEstimate
from recommender.quality.result import QualityResult


@pytest.mark.parametrize(
    "kind", [Recommendation, CandidateResult, LoadCurve, PlanRow, FleetPlan, BenchmarkEstimate, QualityResult]
)
def test_the_artifact_type_builds_its_adapter(kind: type) -> None:
    assert TypeAdapter(kind).json_schema()
