"""Every file a study leaves behind, written the same way by the search and by `recommender report`.

A study's evidence is three JSON files — the recommendation, every candidate's result,
and the winner's latency-against-load curve — and the documents drawn from them
(report.md with its PNGs, the self-contained report.html). The JSON files are logged to
the study's MLflow run, so the documents can be regenerated from MLflow alone.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from recommender.report.render import write_report

RECOMMENDATION_JSON = "recommendation.json"
RESULTS_JSON = "results.json"
LOAD_CURVE_JSON = "load_curve.json"


def _write_json(path: Path, data: Any) -> Path:
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    return path


def write_study_artifacts(
    out_dir: Path,
    recommendation: Mapping[str, Any],
    results: Sequence[Mapping[str, Any]],
    load_curve: Mapping[str, Any] | None,
) -> list[Path]:
    """Write the JSON evidence and the report; returns every path written."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written = [
        _write_json(out_dir / RECOMMENDATION_JSON, dict(recommendation)),
        _write_json(out_dir / RESULTS_JSON, list(results)),
    ]
    if load_curve is not None:
        written.append(_write_json(out_dir / LOAD_CURVE_JSON, dict(load_curve)))
    documents = write_report(out_dir, recommendation, results, load_curve)  # type: ignore[arg-type]
    return written + list(documents.values())


def read_study_artifacts(directory: Path) -> tuple[dict[str, Any], list[dict[str, Any]], dict[str, Any] | None]:
    """The recommendation, the results and the load curve (None when the study had no winner)."""
    recommendation = json.loads((directory / RECOMMENDATION_JSON).read_text(encoding="utf-8"))
    results = json.loads((directory / RESULTS_JSON).read_text(encoding="utf-8"))
    curve_path = directory / LOAD_CURVE_JSON
    curve = json.loads(curve_path.read_text(encoding="utf-8")) if curve_path.is_file() else None
    return recommendation, results, curve
