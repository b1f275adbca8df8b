"""The accelerator catalog: a data file of GPUs with sourced specs, priced from one price set.

The built-in file is ``hardware.yaml`` beside this module; prices come from one named price
set (``prices.py``), never mixed across providers. A user's file (spec key ``hardware_catalog``)
overrides fields of existing entries or adds new ones, so contract prices need no code change:
a ``price_per_hour_usd`` there wins over the set's.
"""

from __future__ import annotations

import copy
import difflib
from functools import cache, cached_property
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from recommender.device import DeviceInfo
from recommender.errors import BadInputError, pydantic_location, pydantic_message
from recommender.input_files import load_yaml
from recommender.perf.catalog.prices import PriceSet, get_price_set

BUILTIN_CATALOG = Path(__file__).with_name("hardware.yaml")


class Interconnect(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)
    kind: str
    bandwidth_gbps: float = Field(gt=0, le=1e6)


class Accelerator(BaseModel):
    """One accelerator: dense peak rates, memory, interconnect, price, and where each came from.

    `compute_capability` ("8.9") is required for NVIDIA: which engine runs which scheme on it is
    decided by it (each engine's `kernels` in `recommender.engines`); an AMD entry has none (ROCm rows decide there).
    """

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    key: str = ""
    name: str
    vendor: Literal["nvidia", "amd"]
    compute_capability: str | None = Field(default=None, pattern=r"^\d+\.\d$")
    #: An AMD GPU's gfx target ("gfx950"): which ROCm kernels run on it, as `compute_capability` on NVIDIA.
    gfx_arch: str | None = Field(default=None, pattern=r"^gfx[0-9a-f]{2,4}$")
    # Upper bounds 100x past today's largest parts: a unit slip (GB/s written as MB/s) is refused, not priced.
    memory_gb: float = Field(gt=0, le=100_000)
    #: The device memory `nvidia-smi` reports (MiB), where known: the engines size their KV cache from it
    #: (vLLM's gpu_memory_utilization and TensorRT-LLM's free fraction are fractions of what CUDA reports),
    #: and an HBM part's "80 GB" is 81,559 MiB = 85.5 GB there (see `device_memory_gb`).
    memory_mib: int | None = Field(default=None, gt=0, le=100_000_000)
    memory_bandwidth_gbps: float = Field(gt=0, le=1_000_000)
    peak_tflops: dict[str, Annotated[float, Field(gt=0, le=1_000_000)]] = Field(min_length=1)
    native_precisions: list[str]
    interconnect: Interconnect
    max_tensor_parallel: int = Field(default=8, gt=0, le=1024)
    #: A price of 0 (or less) would divide a saving by zero; a free GPU is left unpriced, not priced at 0.
    price_per_hour_usd: float | None = Field(default=None, gt=0, le=10_000)
    price_source: str = ""
    price_date: str = ""
    #: The price set the price came from, or "hardware_catalog" for a contract price; "" when unpriced.
    price_set: str = ""
    spec_source: str

    @model_validator(mode="after")
    def _capability_matches_vendor(self) -> Accelerator:
        if self.vendor == "nvidia" and self.compute_capability is None:
            raise ValueError(
                'an NVIDIA entry needs its compute_capability, e.g. "8.9" (it decides which engine kernels run on it)'
            )
        if self.vendor == "amd" and self.compute_capability is not None:
            raise ValueError("compute_capability is NVIDIA's; leave it out (null) for an AMD entry")
        if self.vendor == "nvidia" and self.gfx_arch is not None:
            raise ValueError("gfx_arch is AMD's; leave it out for an NVIDIA entry")
        return self

    @model_validator(mode="after")
    def _has_16_bit_peak(self) -> Accelerator:
        if not {"bf16", "fp16"} & set(self.peak_tflops):
            raise ValueError("peak_tflops needs a bf16 or fp16 entry (every other dtype falls back to it)")
        return self

    @property
    def device_memory_gb(self) -> float:
        """Decimal GB the engine sees: `memory_mib` when known, else the datasheet's `memory_gb` (conservative:
        an HBM part's datasheet figure is in binary units, so this understates it by up to 7 %)."""
        return self.memory_mib * 2**20 / 1e9 if self.memory_mib is not None else self.memory_gb

    @property
    def device(self) -> DeviceInfo:
        """The device a quantization method would meet on this accelerator."""
        if self.vendor == "amd":
            return DeviceInfo("rocm", arch=self.gfx_arch)
        major, minor = (int(x) for x in (self.compute_capability or "0.0").split("."))
        return DeviceInfo("cuda", (major, minor))

    @property
    def price_note(self) -> str:
        """Where the price comes from, for a cost line: the set's source and date, or the contract price."""
        if self.price_set == "hardware_catalog":
            said = f": {self.price_source}" if self.price_source else ""
            return f"contract price from hardware_catalog{said}" + (f" ({self.price_date})" if self.price_date else "")
        return f"{self.price_source} ({self.price_date})"

    def peak_flops(self, dtype: str) -> float:
        """Dense peak in FLOP/s for a compute dtype; 16-bit when the dtype has no tensor cores."""
        tflops = self.peak_tflops.get(dtype) or self.peak_tflops.get("bf16") or self.peak_tflops["fp16"]
        return tflops * 1e12


class Catalog(BaseModel):
    model_config = ConfigDict(frozen=True)
    accelerators: dict[str, Accelerator]
    source: str
    prices: PriceSet | None = None

    def price_refusal(self, key: str) -> str | None:
        """Why catalog GPU `key` cannot be priced (one line naming the fix), or None when it has a price."""
        if self.accelerators[key].price_per_hour_usd is not None:
            return None
        named = f"price set {self.prices.label}" if self.prices is not None else "this catalog"
        return (
            f"{key} has no price in {named}; choose a price_set that lists it, or give its contract "
            "price_per_hour_usd in a hardware_catalog file"
        )

    def hourly_price(self, key: str) -> float:
        """GPU `key`'s price per hour; refused (one line naming the fix) when the price set has none."""
        price = self.accelerators[key].price_per_hour_usd
        if price is None:
            refusal = self.price_refusal(key) or key
            raise BadInputError("hardware", refusal, "see recommender/perf/catalog/price_sets.yaml")
        return price

    @cached_property
    def names(self) -> list[str]:
        return sorted(self.accelerators)

    def get(self, key: str, *, field: str = "hardware") -> Accelerator:
        if key in self.accelerators:
            return self.accelerators[key]
        close = difflib.get_close_matches(key, self.accelerators, n=3)
        hint = f"did you mean {', '.join(close)}?" if close else f"known: {', '.join(self.names)} or local"
        raise BadInputError(field, f"unknown accelerator {key!r}", hint)


def _read(path: Path) -> dict[str, dict[str, object]]:
    data = load_yaml(path, field="hardware_catalog", what="catalog", expect=None) or {}
    entries = data.get("accelerators") if isinstance(data, dict) else None
    if not isinstance(entries, dict):
        raise BadInputError(
            f"hardware_catalog: {path}", "no 'accelerators' mapping", "see recommender/perf/catalog/hardware.yaml"
        )
    for key, fields in entries.items():
        if not isinstance(key, str) or not isinstance(fields, dict | None):
            raise BadInputError(
                f"hardware_catalog: accelerators.{key}",
                f"must be a mapping of fields, not {type(fields).__name__}",
                "see recommender/perf/catalog/hardware.yaml",
            )
    return entries


@cache
def _builtin_entries() -> dict[str, dict[str, object]]:
    """The shipped catalog parsed once per process (callers get a deep copy): a file of the package, read by
    every command and by each `--help` that lists its GPUs, where parsing it each time cost most of a refusal."""
    return _read(BUILTIN_CATALOG)


def _priced(entries: dict[str, dict[str, object]], prices: PriceSet) -> None:
    """Put `prices`' figures on the built-in entries (each of its GPUs must be one)."""
    for key in prices.prices:
        if key not in entries:
            raise ValueError(f"price set {prices.name} prices {key!r}, which is not in {BUILTIN_CATALOG.name}")
        price = prices.prices[key]
        entries[key].update(
            price_per_hour_usd=price.usd_per_hour,
            price_source=prices.source_of(key),
            price_date=price.date,
            price_set=prices.name,
        )


def load_catalog(override: Path | None = None, *, price_set: str | None = None) -> Catalog:
    """The built-in catalog priced from `price_set` (None: the default set), a user's file merged over it.

    A user's ``price_per_hour_usd`` is a contract price: it replaces the set's, labelled ``hardware_catalog``.
    """
    prices = get_price_set(price_set)
    entries = copy.deepcopy(_builtin_entries())
    _priced(entries, prices)
    source = f"{BUILTIN_CATALOG.name}, prices: {prices.name}"
    if override is not None:
        for key, fields in _read(override).items():
            fields = dict(fields or {})
            if "price_per_hour_usd" in fields:  # a contract price: nothing of the set's price survives
                fields = {"price_source": "", "price_date": "", "price_set": "hardware_catalog", **fields}
            entries[key] = {**entries.get(key, {}), **fields}
        source += f" + {override}"
    accelerators: dict[str, Accelerator] = {}
    for key, fields in entries.items():
        try:
            accelerators[key] = Accelerator.model_validate({**fields, "key": key})
        except ValidationError as exc:
            first = exc.errors()[0]
            loc = pydantic_location(tuple(first["loc"]))
            fix = (
                "give the hourly price in USD (above 0), or leave the key out to leave the GPU unpriced"
                if loc == "price_per_hour_usd"
                else "every entry needs the fields of the built-in entries in recommender/perf/catalog/hardware.yaml"
            )
            raise BadInputError(
                f"hardware_catalog: accelerators.{key}.{loc}", pydantic_message(dict(first)), fix
            ) from None
    return Catalog(accelerators=accelerators, source=source, prices=prices)
