"""The accelerator catalog: a data file of GPUs with sourced specs and prices.

The built-in file is ``hardware.yaml`` beside this module. A user's file (spec key
``hardware_catalog``) overrides fields of existing entries or adds new ones, so contract
prices need no code change.
"""

from __future__ import annotations

import difflib
from functools import cached_property
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from recommender.device import DeviceInfo
from recommender.errors import BadInputError, pydantic_location, pydantic_message
from recommender.input_files import load_yaml

BUILTIN_CATALOG = Path(__file__).with_name("hardware.yaml")


class Interconnect(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)
    kind: str
    bandwidth_gbps: float = Field(gt=0, le=1e6)


class Accelerator(BaseModel):
    """One accelerator: dense peak rates, memory, interconnect, price, and where each came from.

    `compute_capability` ("8.9") is required for NVIDIA: which engine runs which scheme on it is
    decided by it (`recommender.emit.support`); an AMD entry has none (ROCm rows decide there).
    """

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    key: str = ""
    name: str
    vendor: Literal["nvidia", "amd"]
    compute_capability: str | None = Field(default=None, pattern=r"^\d+\.\d$")
    # Upper bounds 100x past today's largest parts: a unit slip (GB/s written as MB/s) is refused, not priced.
    memory_gb: float = Field(gt=0, le=100_000)
    memory_bandwidth_gbps: float = Field(gt=0, le=1_000_000)
    peak_tflops: dict[str, Annotated[float, Field(gt=0, le=1_000_000)]] = Field(min_length=1)
    native_precisions: list[str]
    interconnect: Interconnect
    max_tensor_parallel: int = Field(default=8, gt=0, le=1024)
    price_per_hour_usd: float = Field(ge=0, le=10_000)
    price_source: str
    price_date: str
    spec_source: str

    @model_validator(mode="after")
    def _capability_matches_vendor(self) -> Accelerator:
        if self.vendor == "nvidia" and self.compute_capability is None:
            raise ValueError("an NVIDIA entry needs its compute_capability, e.g. \"8.9\" (it decides which engine "
                             "kernels run on it)")  # fmt: skip
        if self.vendor == "amd" and self.compute_capability is not None:
            raise ValueError("compute_capability is NVIDIA's; leave it out (null) for an AMD entry")
        return self

    @model_validator(mode="after")
    def _has_16_bit_peak(self) -> Accelerator:
        if not {"bf16", "fp16"} & set(self.peak_tflops):
            raise ValueError("peak_tflops needs a bf16 or fp16 entry (every other dtype falls back to it)")
        return self

    @property
    def device(self) -> DeviceInfo:
        """The device a quantization method would meet on this accelerator."""
        if self.vendor == "amd":
            return DeviceInfo("rocm")
        major, minor = (int(x) for x in (self.compute_capability or "0.0").split("."))
        return DeviceInfo("cuda", (major, minor))

    def peak_flops(self, dtype: str) -> float:
        """Dense peak in FLOP/s for a compute dtype; 16-bit when the dtype has no tensor cores."""
        tflops = self.peak_tflops.get(dtype) or self.peak_tflops.get("bf16") or self.peak_tflops["fp16"]
        return tflops * 1e12


class Catalog(BaseModel):
    model_config = ConfigDict(frozen=True)
    accelerators: dict[str, Accelerator]
    source: str

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
            f"hardware_catalog: {path}", "no 'accelerators' mapping", "see recommender/perf/hardware.yaml"
        )
    for key, fields in entries.items():
        if not isinstance(key, str) or not isinstance(fields, dict | None):
            raise BadInputError(f"hardware_catalog: accelerators.{key}", f"must be a mapping of fields, not "
                                f"{type(fields).__name__}", "see recommender/perf/hardware.yaml")  # fmt: skip
    return entries


def load_catalog(override: Path | None = None) -> Catalog:
    """The built-in catalog, with a user's file merged over it entry by entry."""
    entries = {k: dict(v) for k, v in _read(BUILTIN_CATALOG).items()}
    source = str(BUILTIN_CATALOG.name)
    if override is not None:
        for key, fields in _read(override).items():
            entries[key] = {**entries.get(key, {}), **(fields or {})}
        source += f" + {override}"
    accelerators: dict[str, Accelerator] = {}
    for key, fields in entries.items():
        try:
            accelerators[key] = Accelerator.model_validate({**fields, "key": key})
        except ValidationError as exc:
            first = exc.errors()[0]
            loc = pydantic_location(tuple(first["loc"]))
            raise BadInputError(
                f"hardware_catalog: accelerators.{key}.{loc}",
                pydantic_message(dict(first)),
                "every entry needs the fields of the built-in entries in recommender/perf/hardware.yaml",
            ) from None
    return Catalog(accelerators=accelerators, source=source)
