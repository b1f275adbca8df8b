"""Releases of one model over time: MLflow tracking of every study, the history read back, and the release gate."""
