"""A measured serving probe in MLflow: one run per probe, one step per load level.

The run's params name the endpoint, the model, the engine release, the command that started the server (for
``--serve``) and the load generator's command; each load level's numbers are metrics at step = its position
(``ttft_p99_ms`` at step 0 is the first rate), and the whole answer is the run's ``probe.json`` artifact.
"""

from __future__ import annotations

import json
import math
import tempfile
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

from recommender.releases.tracking import Tracker, git_sha

if TYPE_CHECKING:
    from recommender.engines.load_run import MeasuredLoad

__all__ = ["PROBE_EXPERIMENT", "log_endpoint_probe"]

PROBE_EXPERIMENT = "recommender-probe"


def log_endpoint_probe(
    uri: str,
    *,
    points: list[MeasuredLoad],
    params: dict[str, str],
    predicted: dict[int, dict[str, float]] | None = None,
    experiment: str = PROBE_EXPERIMENT,
) -> str:
    """Log the probe's load levels as one MLflow run; returns its id. `predicted`: the simulator's figures for the
    level at each step (``engines/engine_prediction.py``), logged as ``predicted_<name>_ms`` at that step."""
    from mlflow.entities import Metric, Param

    tracker = Tracker.open(uri, experiment)
    name = f"probe {params.get('model', '')} @ {params.get('engine_release', '')}"
    run = tracker.client.create_run(tracker.experiment_id, run_name=name, tags={"recommender.git": git_sha()})
    run_id = str(run.info.run_id)
    metrics = [Metric(k, v, 0, step) for step, p in enumerate(points) for k, v in p.flat().items()]
    metrics += [Metric("rate", p.shape.rate or 0.0, 0, step) for step, p in enumerate(points)]
    metrics += [Metric("concurrency", float(p.shape.concurrency or 0), 0, step) for step, p in enumerate(points)]
    metrics += [
        Metric(f"predicted_{name}_ms", value, 0, step)
        for step, figures in (predicted or {}).items()
        for name, value in figures.items()
        if math.isfinite(value)
    ]
    tracker.client.log_batch(run_id, metrics=metrics, params=[Param(k, v[:6000]) for k, v in params.items()])
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "probe.json"
        path.write_text(json.dumps({"params": params, "points": [asdict(p) for p in points]}, indent=1))
        tracker.log_artifacts(run_id, [path])
    tracker.client.set_terminated(run_id, "FINISHED")
    return run_id
