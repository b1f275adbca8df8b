"""The documents drawn from a study's evidence: report.md with its PNGs and the self-contained report.html.

Written by `recommender search` after the study (the command line hands this function to the
search) and by `recommender report <run id>` from the evidence logged to MLflow, the same way.
"""

from __future__ import annotations

from pathlib import Path

from recommender.evidence import StudyEvidence
from recommender.report.render import write_report


def write_documents(out_dir: Path, evidence: StudyEvidence) -> list[Path]:
    """Write the report documents beside the evidence; returns every path written."""
    documents = write_report(out_dir, evidence.recommendation, evidence.results, evidence.load_curve)
    return list(documents.values())
