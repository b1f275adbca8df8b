"""The documents drawn from a study's evidence: report.md with its PNGs and the self-contained report.html.

Written by `recommender search` after the study (the command line hands this function to the
search) and by `recommender report <run id>` from the evidence logged to MLflow, the same way.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from recommender.decision.evidence import StudyEvidence, read_evidence, write_evidence
from recommender.errors import BadInputError
from recommender.releases.history import download_study_evidence
from recommender.report.render import write_report


def write_documents(out_dir: Path, evidence: StudyEvidence) -> list[Path]:
    """Write the report documents beside the evidence; returns every path written."""
    documents = write_report(out_dir, evidence.recommendation, evidence.results, evidence.load_curve)
    return list(documents.values())


def regenerate_from_run(uri: str, run_id: str, out_dir: Path) -> list[Path]:
    """A study's evidence and documents, written into `out_dir` from its MLflow parent run alone; every path."""
    with tempfile.TemporaryDirectory() as tmp:
        download_study_evidence(uri, run_id, Path(tmp))
        try:
            evidence = read_evidence(Path(tmp))
        except ValueError:
            raise BadInputError(
                "run_id", f"run {run_id} was logged by an older schema", "re-run its search with this version"
            ) from None
    return write_evidence(out_dir, evidence) + write_documents(out_dir, evidence)
