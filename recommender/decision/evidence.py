"""A study's evidence: the recommendation, every candidate's result, the winner's load curve.

Three JSON files written by the search beside its report and logged to the study's MLflow
run, so the documents (report.md, report.html) can be regenerated from MLflow alone and the
release gate can compare studies. Read back as the same typed objects the search built.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from recommender.decision.recommendation import Recommendation
from recommender.evaluation.candidate import CandidateResult
from recommender.evaluation.load_curve import LoadCurve
from recommender.serialization import from_data, list_from_data, list_to_data, to_data, write_json

RECOMMENDATION_JSON = "recommendation.json"
RESULTS_JSON = "results.json"
LOAD_CURVE_JSON = "load_curve.json"
EVIDENCE_FILES = (RECOMMENDATION_JSON, RESULTS_JSON, LOAD_CURVE_JSON)


@dataclass(frozen=True)
class StudyEvidence:
    recommendation: Recommendation
    results: list[CandidateResult]
    load_curve: LoadCurve | None


def write_evidence(out_dir: Path, evidence: StudyEvidence) -> list[Path]:
    """Write the JSON evidence; returns every path written."""
    written = [
        write_json(out_dir / RECOMMENDATION_JSON, to_data(evidence.recommendation)),
        write_json(out_dir / RESULTS_JSON, list_to_data(evidence.results)),
    ]
    if evidence.load_curve is not None:
        written.append(write_json(out_dir / LOAD_CURVE_JSON, to_data(evidence.load_curve)))
    return written


def read_evidence(directory: Path) -> StudyEvidence:
    """The evidence of a study directory (ValueError when a file is not of this schema)."""

    def load(name: str) -> object:
        return json.loads((directory / name).read_text(encoding="utf-8"))

    curve_path = directory / LOAD_CURVE_JSON
    return StudyEvidence(
        recommendation=from_data(Recommendation, load(RECOMMENDATION_JSON)),
        results=list_from_data(CandidateResult, load(RESULTS_JSON)),
        load_curve=from_data(LoadCurve, load(LOAD_CURVE_JSON)) if curve_path.is_file() else None,
    )
