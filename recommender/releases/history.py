"""Releases of one model, read back from MLflow: what each study recommended, and how that moved.

Every study's parent run carries the model name, release label, use case and weights
fingerprint as tags, and its evidence (recommendation.json, results.json) as artifacts,
so a comparison needs nothing but the tracking store. For each release the latest
finished study is used; releases are comparable only under the same use case (the same
tasks and thresholds), which is checked, not assumed.
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from recommender.decision.evidence import EVIDENCE_FILES, RECOMMENDATION_JSON, RESULTS_JSON
from recommender.decision.recommendation import Recommendation
from recommender.errors import BadInputError
from recommender.evaluation.candidate import CandidateResult
from recommender.quality.result import QualityResult
from recommender.releases.tracking import download_run_artifacts, open_client
from recommender.serialization import from_data, list_from_data


def download_study_evidence(uri: str, run_id: str, directory: Path) -> None:
    """A study run's evidence, downloaded into `directory` (the load curve only when the study had a winner).

    Only a study's parent run holds it; a trial's run id is refused with the id to pass instead.
    """
    found = download_run_artifacts(uri, run_id, list(EVIDENCE_FILES), directory)
    if RECOMMENDATION_JSON not in found or RESULTS_JSON not in found:
        raise BadInputError(
            "run_id",
            f"run {run_id} has no {RECOMMENDATION_JSON} and {RESULTS_JSON}",
            "pass the study's parent run id (the one `recommender search` printed), not a trial's",
        )


@dataclass(frozen=True)
class ReleaseStudy:
    """One release's latest finished study and its evidence."""

    release: str
    run_id: str
    study: str
    use_case: str
    fingerprint: str
    started_ms: int
    recommendation: Recommendation
    results: list[CandidateResult] = field(repr=False)

    @property
    def winner(self) -> CandidateResult | None:
        return self.recommendation.winner

    def quality_by_method(self) -> dict[str, QualityResult]:
        """Each method's measured quality (the same for every candidate of that method)."""
        found: dict[str, QualityResult] = {}
        for result in self.results:
            quality = result.quality
            if quality is not None and not quality.reason:
                found.setdefault(f"{result.candidate.precision}/{quality.method}", quality)
        return found


#: The one MLflow filter the tool sends: a constant. User strings (model, release, use case) are never pasted
#: into a filter (MLflow's filter language has no parameters, and its quoting rules are its parser's); they
#: are compared with the runs' tags here, so a quote or backslash in a name is just a character.
FINISHED_RUNS = "attributes.status = 'FINISHED'"


def _parent_runs(uri: str, model: str | None) -> list[Any]:
    client = open_client(uri)
    experiments = [e.experiment_id for e in client.search_experiments() if e.name.startswith("recommender/")]
    if not experiments:
        return []
    runs = client.search_runs(experiments, FINISHED_RUNS, max_results=50_000)
    return [
        r
        for r in runs
        if "recommender.model" in r.data.tags and (model is None or r.data.tags["recommender.model"] == model)
    ]


def known_models(uri: str) -> list[str]:
    return sorted({r.data.tags["recommender.model"] for r in _parent_runs(uri, None)})


def load_releases(
    uri: str,
    model: str,
    *,
    releases: list[str] | None = None,
    use_case: str | None = None,
    flags: list[str] | None = None,
) -> list[ReleaseStudy]:
    """The latest finished study of each release of `model` (in `releases` order when given, else by time).

    `flags` names the option each of `releases` came from (`gate`: ``--candidate``, ``--against``), so a refusal
    names the one the user wrote; default ``--releases`` (`compare`).
    """
    flag_of = dict(zip(releases or [], flags or [], strict=False))

    def flag_for(*names: str) -> str:
        return "/".join(dict.fromkeys(flag_of.get(n, "--releases") for n in names)) or "--releases"

    runs = _parent_runs(uri, model)
    if not runs:
        known = known_models(uri)
        raise BadInputError(
            "--model",
            f"no finished study of model {model!r} in {uri}",
            f"known models: {', '.join(known)}" if known else "run `recommender search` first",
        )
    if use_case is not None:
        runs = [r for r in runs if r.data.tags.get("recommender.use_case") == use_case]
        if not runs:
            raise BadInputError("--use-case", f"no study of {model!r} under use case {use_case!r}")
    latest: dict[str, Any] = {}
    for run in sorted(runs, key=lambda r: r.info.start_time):
        latest[run.data.tags.get("recommender.release", "")] = run
    wanted = releases or sorted(latest, key=lambda rel: latest[rel].info.start_time)
    missing = [rel for rel in wanted if rel not in latest]
    if missing:
        raise BadInputError(
            flag_for(*missing),
            f"no finished study of {model!r} release {', '.join(map(repr, missing))}",
            f"known releases: {', '.join(sorted(latest))}",
        )
    cases = {rel: latest[rel].data.tags.get("recommender.use_case", "") for rel in wanted}
    if len(set(cases.values())) > 1:
        listing = ", ".join(f"{rel}: {case}" for rel, case in cases.items())
        raise BadInputError(
            flag_for(*wanted),
            f"the releases were evaluated under different use cases ({listing}): not comparable",
            "pass --use-case to compare the releases studied under one of them",
        )
    return [_read(uri, latest[rel], field=flag_for(rel)) for rel in wanted]


def _load(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def _read(uri: str, run: Any, *, field: str) -> ReleaseStudy:
    client = open_client(uri)
    with tempfile.TemporaryDirectory() as tmp:
        paths = {}
        for name in (RECOMMENDATION_JSON, RESULTS_JSON):
            try:
                paths[name] = Path(client.download_artifacts(run.info.run_id, name, tmp))
            except Exception:  # an older study without the artifact: MLflow raises its own OSError/MlflowException
                raise BadInputError(
                    field, f"study run {run.info.run_id} has no {name}", "re-run its search to log it"
                ) from None
        try:
            recommendation = from_data(Recommendation, _load(paths[RECOMMENDATION_JSON]))
            results = list_from_data(CandidateResult, _load(paths[RESULTS_JSON]))
        except ValueError:
            raise BadInputError(
                field,
                f"study run {run.info.run_id} was logged by an older schema",
                "re-run its search with this version",
            ) from None
    tags = run.data.tags
    return ReleaseStudy(
        release=tags.get("recommender.release", ""),
        run_id=run.info.run_id,
        study=tags.get("recommender.study", ""),
        use_case=tags.get("recommender.use_case", ""),
        fingerprint=tags.get("recommender.model_fingerprint", ""),
        started_ms=int(run.info.start_time),
        recommendation=recommendation,
        results=results,
    )
