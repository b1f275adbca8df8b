"""Price sets: named, dated GPU prices from one provider and one tier each.

A catalog that took each GPU's price from whichever provider quoted it cheapest would make a
"saving" out of a gap between two providers (H100 SXM at one cloud's $2.00 under H100 PCIe at
another's $2.89). A price set (``price_sets.yaml``) lists one provider's one tier, with the source
and date of every figure; a GPU that provider does not price is absent, never filled in from
another. The spec's ``price_set:`` picks the set (default: the file's ``default``); a
``hardware_catalog`` file's ``price_per_hour_usd`` is a contract price and overrides the set.
"""

from __future__ import annotations

import difflib
from functools import cache
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field

from recommender.errors import BadInputError

PRICE_SETS_FILE = Path(__file__).with_name("price_sets.yaml")


class GpuPrice(BaseModel):
    """One GPU's hourly price in a set, and where and when it was read."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    usd_per_hour: float = Field(gt=0, le=10_000, allow_inf_nan=False)  # 0 would divide a saving by zero
    product: str
    source: str
    date: str


class PriceSet(BaseModel):
    """One provider's one tier: the GPUs it prices, and which it does not (``absent``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    name: str = ""
    provider: str
    tier: str
    absent: str
    prices: dict[str, GpuPrice]

    @property
    def label(self) -> str:
        """How reports name the set: ``runpod-secure-2026-09-25 (RunPod, Secure Cloud on-demand, ...)``."""
        return f"{self.name} ({self.provider}, {self.tier})"

    def source_of(self, key: str) -> str:
        """The price source line of GPU `key` (which the set must price)."""
        price = self.prices[key]
        return f"price set {self.name}: {self.provider} {price.product}, {price.source}"


class PriceSets(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    default: str
    price_sets: dict[str, PriceSet]


@cache
def load_price_sets() -> PriceSets:
    """The shipped price sets (read once per process: the file ships with the code)."""
    data = yaml.safe_load(PRICE_SETS_FILE.read_text(encoding="utf-8"))
    sets = PriceSets.model_validate(data)
    named = {name: s.model_copy(update={"name": name}) for name, s in sets.price_sets.items()}
    if sets.default not in named:
        raise ValueError(f"{PRICE_SETS_FILE.name}: default {sets.default!r} is not a price set")
    return PriceSets(default=sets.default, price_sets=named)


def get_price_set(name: str | None = None, *, field: str = "price_set") -> PriceSet:
    """The set called `name` (None: the default); an unknown name is refused with the known ones."""
    sets = load_price_sets()
    key = sets.default if name is None else name
    if key in sets.price_sets:
        return sets.price_sets[key]
    close = difflib.get_close_matches(key, sets.price_sets, n=2)
    known = ", ".join(sorted(sets.price_sets))
    fix = f"did you mean {close[0]}?" if close else f"known: {known}"
    raise BadInputError(field, f"unknown price set {key!r}", fix)
