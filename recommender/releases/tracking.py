"""MLflow tracking: one parent run per study, one child run per evaluated trial.

Uses ``MlflowClient`` with explicit run ids rather than mlflow's active-run stack, so
nothing depends on global state and several workers can log into one study. The
default store is ``sqlite:///mlruns/mlflow.db`` (MLflow 3 refuses the old file store
by default), with artifacts beside it in ``mlruns/artifacts``.
"""

from __future__ import annotations

import math
import os
import subprocess
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from recommender.errors import BadInputError

if TYPE_CHECKING:
    from collections.abc import Collection

    from mlflow import MlflowClient

    from recommender.decision.recommendation import Recommendation
    from recommender.evaluation.candidate import CandidateResult

DEFAULT_TRACKING_URI = "sqlite:///mlruns/mlflow.db"
#: The experiment tag MLflow 3's UI reads to choose an experiment's page (read from its built UI,
#: mlflow/server/js: ``mlflow.experimentKind``). Untagged, MLflow 3.17 opens on the GenAI traces page,
#: where a study's runs are invisible until the user switches views; this value opens the runs table.
EXPERIMENT_KIND_TAG = "mlflow.experimentKind"
EXPERIMENT_KIND = "custom_model_development"
#: A trial's child run carries its trial number from the moment it is created, so a log retried after the store
#: came back finds the run an earlier, interrupted attempt left (see `Tracker.logged_trials`).
TRIAL_TAG = "recommender.trial"


def tracking_errors() -> tuple[type[BaseException], ...]:
    """What a store that cannot be reached raises: MLflow's errors (a server's, a database's) and the OS's
    (requests' connection errors are OSErrors)."""
    from mlflow.exceptions import MlflowException

    return (MlflowException, OSError)


def resolve_tracking_uri(flag: str | None) -> str:
    """The flag, else MLFLOW_TRACKING_URI, else the local sqlite store."""
    return flag or os.environ.get("MLFLOW_TRACKING_URI") or DEFAULT_TRACKING_URI


def absolute_store_uri(uri: str) -> str:
    """A sqlite store's URI with an absolute path, so another process in another directory finds it."""
    if uri.startswith("sqlite:///"):
        return "sqlite:///" + str(Path(uri.removeprefix("sqlite:///")).resolve())
    return uri


def absolute_storage_uri(uri: str) -> str:
    """An Optuna storage or MLflow store URI with any local path made absolute (sqlite, or a journal file path),
    so a tag or note that records it names the same file from any working directory."""
    if uri.startswith("sqlite:///"):
        return absolute_store_uri(uri)
    if "://" not in uri:
        return str(Path(uri).resolve())
    return uri


#: MLflow 3.17's UI picks an experiment's page from a GenAI / Model-training switch kept in the browser
#: (localStorage ``mlflow.workflowType``, default GenAI) that overrides the experiment tag; its URL parameter
#: ``workflowType`` overrides both, so links to a study carry it and open on the runs table.
UI_RUNS_QUERY = "workflowType=machine_learning"


def ui_hint(uri: str, run_id: str, *, host: str = "http://127.0.0.1:5000") -> str:
    """How to see a study in MLflow's UI: the server command and the page that opens on its runs."""
    command = f"mlflow ui --backend-store-uri {absolute_store_uri(uri)}"
    try:
        from mlflow import MlflowClient

        experiment = MlflowClient(tracking_uri=uri).get_run(run_id).info.experiment_id
    except Exception:  # noqa: BLE001 - a hint, never a failure: the command alone still helps
        return command
    return f"{command}, then open {host}/#/experiments/{experiment}/runs/{run_id}?{UI_RUNS_QUERY}"


def _artifact_root(uri: str) -> str | None:
    """For a sqlite store, keep artifacts in a folder beside the database file."""
    if uri.startswith("sqlite:///"):
        db = Path(uri.removeprefix("sqlite:///"))
        return (db.parent.resolve() / "artifacts").as_uri()
    return None


def _prepare_store(uri: str) -> None:
    """Create a sqlite store's folder; make an HTTP server that does not answer fail in seconds.

    MLflow retries HTTP requests with backoff for minutes by default; a search should say
    "that server does not answer" at once instead. Its documented environment variables are
    the only knobs, so they are set here (unless the user set them).
    """
    if uri.startswith("sqlite:///"):
        Path(uri.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
    elif uri.startswith(("http://", "https://")):
        os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
        os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", "10")


def _unreachable(uri: str, exc: BaseException) -> BadInputError:
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return BadInputError(
        "--tracking-uri",
        f"MLflow store {uri!r} cannot be used: {first[:200]}",
        "pass a reachable tracking server or a sqlite:///path.db URI",
    )


def probe_server(uri: str, *, field: str = "--tracking-uri") -> None:
    """An HTTP(S) tracking server answers a read (listing one experiment); nothing is created. Other stores are
    local files or databases whose checks are static (`recommender.config.destinations`)."""
    from mlflow import MlflowClient
    from mlflow.exceptions import MlflowException

    if not uri.startswith(("http://", "https://")):
        return
    _prepare_store(uri)
    try:
        MlflowClient(tracking_uri=uri).search_experiments(max_results=1)
    except (MlflowException, OSError, ValueError) as exc:
        error = _unreachable(uri, exc)
        raise BadInputError(field, error.problem, error.fix) from None


def open_client(uri: str) -> MlflowClient:
    """A client for reading a store that must already exist; one that cannot be reached is bad input."""
    from mlflow import MlflowClient
    from mlflow.exceptions import MlflowException

    if uri.startswith("sqlite:///") and not Path(uri.removeprefix("sqlite:///")).is_file():
        raise BadInputError("--tracking-uri", f"no MLflow store at {uri}", "run `recommender search` first")
    _prepare_store(uri)
    try:
        client = MlflowClient(tracking_uri=uri)
        client.search_experiments(max_results=1)
    except (MlflowException, OSError, ValueError) as exc:
        raise _unreachable(uri, exc) from None
    return client


def download_run_artifacts(uri: str, run_id: str, names: list[str], dst: Path) -> dict[str, Path]:
    """The named artifacts of one run, downloaded into `dst`; a missing one is left out of the answer."""
    from mlflow.exceptions import MlflowException

    client = open_client(uri)
    try:
        run = client.get_run(run_id)
    except MlflowException as exc:
        if "RESOURCE_DOES_NOT_EXIST" in str(getattr(exc, "error_code", "")) or "not found" in str(exc).lower():
            raise BadInputError(
                "run_id", f"no MLflow run {run_id!r} in {uri}", "copy the id `recommender search` printed"
            ) from None
        raise _unreachable(uri, exc) from None
    except (OSError, ValueError) as exc:
        raise _unreachable(uri, exc) from None
    present = {a.path for a in client.list_artifacts(run.info.run_id)}
    found: dict[str, Path] = {}
    for name in names:
        if name in present:
            found[name] = Path(client.download_artifacts(run.info.run_id, name, str(dst)))
    return found


def git_sha() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5, check=False)
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return out.stdout.strip() or "unknown"


def _metrics_of(result: CandidateResult) -> dict[str, float]:
    metrics: dict[str, float] = {}
    if result.serving is not None:
        serving = result.serving
        for name, latency in (("ttft", serving.ttft_ms), ("tpot", serving.tpot_ms)):
            for q in ("p50", "p95", "p99"):
                metrics[f"{name}_{q}_ms"] = getattr(latency, q)
        metrics["tokens_per_s"] = serving.tokens_per_s
        metrics["max_requests_per_s_per_replica"] = serving.requests_per_s
    if result.memory is not None:
        metrics["memory_gb"] = result.memory.needed_gb
    if result.cost is not None:
        metrics["usd_per_1m_tokens"] = result.cost.usd_per_1m_tokens
        metrics["replicas"] = float(result.cost.replicas)
        metrics["usd_per_month"] = result.cost.usd_per_month
    metrics |= {f"constraint_{name}": value for name, value in result.constraints.items()}
    if result.quality is not None:
        for check in result.quality.checks:
            if check.value is not None:
                metrics[f"quality_{check.name}_{check.metric}"] = check.value
            if check.delta is not None:
                metrics[f"quality_{check.name}_{check.metric}_delta"] = check.delta
        if result.quality.fidelity is not None:
            for key, value in asdict(result.quality.fidelity).items():
                if isinstance(value, int | float):  # the scalars; per-window KLs are in the result's JSON
                    metrics[f"fidelity_{key}"] = float(value)
    return {k: v for k, v in metrics.items() if math.isfinite(v)}


def _pool_params(result: CandidateResult) -> dict[str, str | int]:
    """A disaggregated candidate's pools as run parameters (the layout itself is the candidate's `layout`)."""
    pools = result.pools
    if pools is None:
        return {}
    params: dict[str, str | int] = {
        "link": pools.link,
        "pool_engine": pools.engine,
        "kv_transfer_ms": f"{pools.transfer_ms:.3f}",
    }
    for role, pool in (("prefill", pools.prefill), ("decode", pools.decode)):
        params |= {
            f"{role}_tensor_parallel": pool.tensor_parallel,
            f"{role}_batch_size": pool.batch_size,
            f"{role}_workers": pool.estimate.workers,
            f"{role}_gpus": pool.estimate.gpus,
        }
    return params


@dataclass
class Tracker:
    """Logs a study into MLflow."""

    uri: str
    experiment_id: str
    client: MlflowClient

    @classmethod
    def open(cls, uri: str, experiment: str) -> Tracker:
        """Connect to the store (creating a local sqlite one if needed) and the experiment."""
        from mlflow import MlflowClient
        from mlflow.exceptions import MlflowException

        try:
            _prepare_store(uri)
            client = MlflowClient(tracking_uri=uri)
            found = client.get_experiment_by_name(experiment)
            experiment_id = (
                found.experiment_id
                if found is not None
                else client.create_experiment(experiment, artifact_location=_artifact_root(uri))
            )
            # Also on an experiment an older version created: the UI then opens it on its runs.
            client.set_experiment_tag(experiment_id, EXPERIMENT_KIND_TAG, EXPERIMENT_KIND)
        except (MlflowException, OSError, ValueError) as exc:
            raise _unreachable(uri, exc) from None
        return cls(uri, experiment_id, client)

    def start_study(self, *, study_name: str, tags: dict[str, str], params: dict[str, Any]) -> str:
        run = self.client.create_run(self.experiment_id, run_name=study_name, tags=tags)
        from mlflow.entities import Param

        self.client.log_batch(run.info.run_id, params=[Param(k, str(v)[:6000]) for k, v in params.items()])
        return str(run.info.run_id)

    def log_trial(self, parent_run_id: str, trial_number: int, result: CandidateResult) -> str:
        from mlflow.entities import Metric, Param, RunTag

        c = result.candidate
        run = self.client.create_run(
            self.experiment_id,
            run_name=f"trial-{trial_number:03d} {c.key}",
            tags={"mlflow.parentRunId": parent_run_id, TRIAL_TAG: str(trial_number)},
        )
        run_id = run.info.run_id
        params = asdict(c) | {"trial_number": trial_number} | _pool_params(result)
        tags = trial_tags(result)
        metrics = [Metric(k, v, 0, 0) for k, v in _metrics_of(result).items()]
        self.client.log_batch(
            run_id,
            metrics=metrics,
            params=[Param(k, str(v)) for k, v in params.items()],
            tags=[RunTag(k, v) for k, v in tags.items()],
        )
        # A trial whose evaluation raised (out of memory, a kernel error) ends FAILED, its reason in `broken`.
        self.client.set_terminated(run_id, "FAILED" if result.status == "failed" else "FINISHED")
        return str(run_id)

    def logged_trials(self, parent_run_id: str, numbers: Collection[int] | None = None) -> dict[int, tuple[str, str]]:
        """The study's child runs by trial number: (run id, status); RUNNING is a log cut off half-way.

        With `numbers` holding one trial (each trial's own log, the common case) the store is asked for that
        trial's run alone: asking for all of them made logging a search quadratic in its trials.
        """
        from mlflow.entities import ViewType

        query = f"tags.mlflow.parentRunId = '{parent_run_id}'"
        if numbers is not None and len(numbers) == 1:
            query += f" and tags.`{TRIAL_TAG}` = '{next(iter(numbers))}'"
        found: dict[int, tuple[str, str]] = {}
        token: str | None = None
        while True:
            page = self.client.search_runs(
                [self.experiment_id],
                filter_string=query,
                run_view_type=ViewType.ACTIVE_ONLY,
                max_results=1000,
                page_token=token,
            )
            for run in page:
                number = run.data.tags.get(TRIAL_TAG)
                if number is not None and number.isdigit():
                    found[int(number)] = (str(run.info.run_id), str(run.info.status))
            token = page.token
            if not token:
                return found

    def run_status(self, run_id: str) -> str:
        return str(self.client.get_run(run_id).info.status)

    def log_artifacts(self, run_id: str, paths: list[Path]) -> None:
        for path in paths:
            self.client.log_artifact(run_id, str(path))

    def finish(
        self, run_id: str, *, metrics: dict[str, float], status: str = "FINISHED", tags: dict[str, str] | None = None
    ) -> None:
        """End the study's run with its summary metrics and tags (the winner's key and price, see `winner_tags`)."""
        from mlflow.entities import Metric, RunTag

        self.client.log_batch(
            run_id,
            metrics=[Metric(k, v, 0, 0) for k, v in metrics.items()],
            tags=[RunTag(k, v[:5000]) for k, v in (tags or {}).items()],
        )
        self.client.set_terminated(run_id, status)


def trial_tags(result: CandidateResult) -> dict[str, str]:
    """What a child run says beside its metrics: verdicts, provenance of speed, price and quality, what broke.

    Price and quality device are tags (not params) because they are evidence about the figures, searched
    and shown as text in MLflow's runs table; every value is cut to MLflow's tag length.
    """
    cost, quality = result.cost, result.quality
    tags = {
        "status": result.status,
        "feasible": str(result.feasible).lower(),
        "quality_verdict": result.quality_verdict,
        "perf_provenance": "" if result.serving is None else result.serving.provenance.detail,
        "provenance": "" if result.serving is None else result.serving.provenance.kind,
        "broken": "; ".join(result.broken),
        "price_source": cost.price_source if cost is not None else "",
        "price_set": cost.price_set if cost is not None else "",
        "price_per_hour_usd": "" if cost is None else f"{cost.price_per_hour_usd:g}",
        "quality_device": (quality.device if quality is not None else "") or "not measured",
    }
    return {k: v[:5000] for k, v in tags.items()}


def winner_tags(rec: Recommendation) -> dict[str, str]:
    """The study run's answer as tags, so the runs table shows what won and at what price without opening it."""
    winner = rec.winner
    if winner is None:
        return {"recommender.winner": "none (nothing met every threshold)"}
    tags = {"recommender.winner": winner.key}
    if winner.cost is not None:
        tags["recommender.winner_usd_per_month"] = f"{winner.cost.usd_per_month:.2f}"
        tags["recommender.winner_usd_per_1m_tokens"] = f"{winner.cost.usd_per_1m_tokens:.6g}"
        tags["recommender.price_set"] = winner.cost.price_set
    if rec.saving is not None:
        tags["recommender.saving_usd_per_month"] = f"{rec.saving.usd_per_month:.2f}"
    return tags
