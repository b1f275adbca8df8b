"""What several commands share: the tracking-store help and how a reading command resolves its store."""

from __future__ import annotations

__all__ = ["TRACKING_URI_HELP", "read_store"]

TRACKING_URI_HELP = "MLflow tracking URI (default: $MLFLOW_TRACKING_URI, else sqlite:///mlruns/mlflow.db)."


def read_store(flag: str | None) -> str:
    """The tracking URI a reading command uses, its scheme checked (it must exist: nothing is created)."""
    from recommender.config.destinations import check_tracking_uri, tracking_uri_field
    from recommender.releases.tracking import resolve_tracking_uri

    uri = resolve_tracking_uri(flag)
    check_tracking_uri(uri, field=tracking_uri_field(uri))
    return uri
