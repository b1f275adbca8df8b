"""Price sets: named, dated GPU prices from one provider and one tier each.

A catalog that took each GPU's price from whichever provider quoted it cheapest would make a
"saving" out of a gap between two providers (H100 SXM at one cloud's $2.00 under H100 PCIe at
another's $2.89). A price set (``price_sets.yaml``) lists one provider's one tier, with the source
and date of every figure; a GPU that provider does not price is absent, never filled in from
another. The spec's ``price_set:`` picks the set (default: the file's ``default``); a
``hardware_catalog`` file's ``price_per_hour_usd`` is a contract price and overrides the set.

A union (``unions:`` in the file) joins one provider's dated sets of one tier, newest first: a provider's
transcription of one date can miss GPUs another date lists (RunPod's 2026-09-25 set prices 7 GPUs, its
2026-08-27 set 12), so the union prices each GPU from the newest set that lists it, keeping that set's
source and date and naming it (`GpuPrice.dated_set`). Never across providers or tiers.
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
    #: In a union of dated sets: the dated set this price comes from ("" in a dated set itself).
    dated_set: str = ""


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
        dated = f" (from {price.dated_set})" if price.dated_set else ""
        return f"price set {self.name}{dated}: {self.provider} {price.product}, {price.source}"


class PriceSets(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    default: str
    #: Union name -> one provider's dated sets of one tier, newest first.
    unions: dict[str, list[str]] = {}
    price_sets: dict[str, PriceSet]


def union_of(name: str, dated: list[PriceSet]) -> PriceSet:
    """One provider's dated sets as one: each GPU from the newest set (first listed) that prices it."""
    first = dated[0]
    mixed = {(s.provider, s.tier.split(" (")[0]) for s in dated}  # a tier's remark in brackets aside
    if len(mixed) > 1:
        raise ValueError(f"price set union {name} mixes providers or tiers: {sorted(mixed)}")
    prices: dict[str, GpuPrice] = {}
    for s in dated:
        for key, price in s.prices.items():
            prices.setdefault(key, price.model_copy(update={"dated_set": s.name}))
    names = ", ".join(s.name for s in dated)
    absent = "; ".join(f"{s.name}: {s.absent}" for s in dated)  # a GPU the union lacks, every member names
    return PriceSet(
        name=name, provider=first.provider, tier=f"{first.tier}; newest of {names}", absent=absent, prices=prices
    )


@cache
def load_price_sets() -> PriceSets:
    """The shipped price sets (read once per process: the file ships with the code)."""
    data = yaml.safe_load(PRICE_SETS_FILE.read_text(encoding="utf-8"))
    sets = PriceSets.model_validate(data)
    named = {name: s.model_copy(update={"name": name}) for name, s in sets.price_sets.items()}
    for union, members in sets.unions.items():
        missing = [m for m in members if m not in named]
        if missing or not members or union in named:
            raise ValueError(f"{PRICE_SETS_FILE.name}: union {union!r} needs dated sets of its own name, not {missing}")
        named[union] = union_of(union, [named[m] for m in members])
    if sets.default not in named:
        raise ValueError(f"{PRICE_SETS_FILE.name}: default {sets.default!r} is not a price set")
    return PriceSets(default=sets.default, unions=sets.unions, price_sets=named)


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
