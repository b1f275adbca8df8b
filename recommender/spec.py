"""The search specification: what to serve, for which use case, under which SLAs, over which space.

A spec is a YAML file (see ``search_spaces/demo.yaml``). Relative paths inside it are
resolved against the spec file's own directory, so a spec can be run from anywhere.
Every validation error becomes one `BadInputError` naming the file and the field.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Annotated, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from recommender.errors import BadInputError, pydantic_location, pydantic_message

Precision = Literal["bf16", "fp16", "fp8", "int8", "int4"]
#: KV-cache storage dtypes, named as vLLM names them (`--kv-cache-dtype`); see perf/memory.py.
KVCacheDtype = Literal["auto", "fp8"]
#: The hardware name that means "this machine, measured"; everything else is a catalog entry.
LOCAL_DEVICE = "local"

PositiveInt = Annotated[int, Field(gt=0)]
PositiveFloat = Annotated[float, Field(gt=0)]


class _Strict(BaseModel):
    """Unknown keys are errors: a typo in a spec must not silently fall back to a default."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class ModelRef(_Strict):
    """The model to serve: a local directory or a hub id, with its release label."""

    source: str = Field(description="Local directory (relative to the spec) or a hub id such as org/name.")
    name: str | None = Field(default=None, description="Name runs are grouped under; default: hub id or dir name.")
    release: str = Field(default="unreleased", description="Release label recorded with every run.")
    revision: str | None = Field(default=None, description="Hub revision (commit or tag) for hub ids.")
    allow_pickle: bool = Field(default=False, description="Allow pickle (.bin) weights; off by default.")
    trust_remote_code: bool = Field(default=False, description="Run the model repo's own code; off by default.")


class Traffic(_Strict):
    """The load to serve: request shape and rate."""

    prompt_tokens: PositiveInt
    output_tokens: PositiveInt
    requests_per_second: PositiveFloat


class LatencySLA(_Strict):
    """P99 latency limits, in milliseconds."""

    ttft_p99_ms: PositiveFloat = Field(description="Time to first token, 99th percentile.")
    tpot_p99_ms: PositiveFloat = Field(description="Time per output token after the first, 99th percentile.")


class LocalDevice(_Strict):
    """What this machine costs, so its measured candidates can be priced like catalog GPUs."""

    price_per_hour_usd: Annotated[float, Field(ge=0)]
    price_source: str


class Space(_Strict):
    """The categorical search space."""

    methods: dict[Precision, list[str]] = Field(description="Precision -> quantization methods to try.")
    hardware: list[str] = Field(min_length=1, description="Catalog accelerator names, or 'local'.")
    batch_sizes: list[PositiveInt] = Field(min_length=1, description="max_num_seqs values (concurrent sequences).")
    tensor_parallel: list[PositiveInt] = Field(default=[1])
    max_num_batched_tokens: list[PositiveInt] = Field(
        default=[8192], min_length=1, description="Token budgets per engine step (chunked prefill)."
    )
    kv_cache_dtypes: list[KVCacheDtype] = Field(
        default=["auto"], min_length=1, description="'auto' (the model's 16-bit dtype) and/or 'fp8'."
    )

    @field_validator("methods")
    @classmethod
    def _non_empty(cls, value: dict[str, list[str]]) -> dict[str, list[str]]:
        if not value or not any(value.values()):
            raise ValueError("no methods to search; list at least one, e.g. bf16: [baseline]")
        return value


class Deployment(_Strict):
    """One concrete configuration: what runs today, or a candidate."""

    precision: Precision
    method: str
    hardware: str
    batch_size: PositiveInt
    tensor_parallel: PositiveInt = 1
    max_num_batched_tokens: PositiveInt = Field(default=8192, description="Token budget per engine step.")
    kv_cache_dtype: KVCacheDtype = "auto"


class SearchSettings(_Strict):
    n_trials: PositiveInt = Field(default=30, description="Distinct candidates to evaluate (duplicates are free).")
    seed: int = 0
    timeout_s: PositiveFloat | None = None
    study_name: str | None = Field(default=None, description="Default: <name>-<spec hash>.")
    heartbeat_s: PositiveFloat = Field(
        default=10.0, description="Trial heartbeat; a trial silent for 3 heartbeats (a killed worker) is retried."
    )


class SearchSpec(_Strict):
    """Everything one search needs; validated on load."""

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
    model: ModelRef
    use_case: Path = Field(description="Use-case suite YAML (tasks and thresholds), relative to the spec.")
    traffic: Traffic
    sla: LatencySLA
    space: Space
    current: Deployment = Field(description="What runs today: the baseline every saving is measured against.")
    local_device: LocalDevice | None = None
    hardware_catalog: Path | None = Field(default=None, description="A catalog file overriding the built-in one.")
    search: SearchSettings = SearchSettings()
    #: Where the file was read from (set by load_spec, not by the user).
    spec_path: Path | None = Field(default=None, exclude=True)

    @model_validator(mode="after")
    def _known_names(self) -> SearchSpec:
        # Imported here: the registry imports nothing heavy, but keeps spec.py free of cycles.
        from recommender.perf.catalog import load_catalog
        from recommender.quantize import get_method

        for precision, names in self.space.methods.items():
            for name in names:
                method = get_method(name, field=f"space.methods.{precision}")
                if method.precision != precision:
                    raise BadInputError(
                        f"space.methods.{precision}",
                        f"method {name!r} is a {method.precision} method, listed under {precision}",
                        f"move it under {method.precision}",
                    )
        get_method(self.current.method, field="current.method")
        catalog = load_catalog(self.hardware_catalog)
        for i, hw in enumerate([*self.space.hardware, self.current.hardware]):
            where = f"space.hardware[{i}]" if i < len(self.space.hardware) else "current.hardware"
            if hw == LOCAL_DEVICE:
                if self.local_device is None:
                    raise BadInputError(
                        where,
                        "'local' needs a local_device section with its price per hour",
                        "add local_device: {price_per_hour_usd: ..., price_source: ...}",
                    )
                continue
            catalog.get(hw, field=where)
        return self

    def resolve(self, path: Path) -> Path:
        """A path from the spec, made absolute against the spec file's directory."""
        base = self.spec_path.parent if self.spec_path else Path.cwd()
        return path if path.is_absolute() else (base / path).resolve()

    def fingerprint(self) -> str:
        """A short hash of what is searched (not of how long or with which seed): the default study name's
        suffix, so a longer budget or a timeout continues the same study."""
        payload = json.dumps(self.model_dump(mode="json", exclude={"search"}), sort_keys=True)
        return hashlib.sha256(payload.encode()).hexdigest()[:10]

    @property
    def study_name(self) -> str:
        return self.search.study_name or f"{self.name}-{self.fingerprint()}"


def load_spec(path: Path) -> SearchSpec:
    """Read and validate a spec file; any problem becomes one BadInputError naming the field."""
    if not path.is_file():
        raise BadInputError(
            str(path), "spec file not found", "pass an existing YAML file, e.g. search_spaces/demo.yaml"
        )
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise BadInputError(where, f"malformed YAML: {problem}", "fix the YAML syntax at that line") from None
    if not isinstance(raw, dict):
        raise BadInputError(str(path), "the spec must be a YAML mapping", "see search_spaces/demo.yaml for the layout")
    try:
        spec = SearchSpec.model_validate(raw)
    except BadInputError as exc:
        raise BadInputError(f"{path}: {exc.field}", exc.problem, exc.fix) from None
    except ValidationError as exc:
        first = exc.errors()[0]
        raise BadInputError(
            f"{path}: {pydantic_location(tuple(first['loc']))}",
            pydantic_message(dict(first)),
            "see search_spaces/demo.yaml for a valid spec",
        ) from None
    return spec.model_copy(update={"spec_path": path.resolve()})
