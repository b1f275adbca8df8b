"""Help texts read from the registries (GPU catalog, price sets, precisions), so `--help` cannot go stale."""

from __future__ import annotations

from recommender.perf.catalog.gpus import load_catalog
from recommender.perf.catalog.prices import load_price_sets
from recommender.quantize.precisions import PLANNED_PRECISIONS

__all__ = ["gpu_names", "precision_names", "price_set_names"]


def gpu_names() -> str:
    """Every catalog GPU key, comma-separated."""
    return ", ".join(load_catalog().names)


def price_set_names() -> str:
    """Every shipped price set (dated sets and provider unions), the default marked."""
    sets = load_price_sets()
    return ", ".join(f"{n} (default)" if n == sets.default else n for n in sorted(sets.price_sets))


def precision_names() -> str:
    """The precisions `plan` and `estimate` take, each meaning its usual scheme."""
    return ", ".join(PLANNED_PRECISIONS)
