"""The search specification: what to serve, for which use case, under which SLAs, over which space.

A spec is a YAML file (see ``recommender/demo/search_space.yaml``). Relative paths inside it are
resolved against the spec file's own directory, so a spec can be run from anywhere.
Every validation error becomes one `BadInputError` naming the file and the field.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import BeforeValidator, Field, ValidationError, field_validator, model_validator

from recommender.config.candidate import LOCAL_DEVICE, Candidate
from recommender.config.current_checks import check_current
from recommender.config.decode_degrees import check_decode_degrees, decode_degree_choices
from recommender.config.decode_pools import check_decode_pools, decode_choices
from recommender.config.dependencies import check_space
from recommender.config.destinations import MAX_NAME_BYTES
from recommender.config.local_probe import LocalProbe, check_local_probe
from recommender.config.space import Space
from recommender.config.spellings import as_written, current_scheme_as_method, schema_with_current_scheme
from recommender.config.strict import StrictModel
from recommender.config.traffic import FleetPolicy, with_absolute_trace
from recommender.config.workload import DEFAULT_SLA_CONFIDENCE, LatencySLA, Traffic
from recommender.engines import ENGINE_NAMES
from recommender.engines.engine_release import releases_of_listed
from recommender.errors import BadInputError, pydantic_location, pydantic_message
from recommender.input_files import expand_user, load_yaml_mapping
from recommender.models.source import looks_like_hub_id
from recommender.perf.catalog.gpus import load_catalog
from recommender.perf.catalog.links import known_links, resolve_link
from recommender.quantize import get_scheme
from recommender.quantize.kv_cache import FP8_KV_SUFFIX
from recommender.speculation.settings import SpeculationSettings

if TYPE_CHECKING:
    from recommender.perf.catalog.gpus import Catalog

# Traffic and LatencySLA are the spec's `traffic` and `sla` sections; importers may name them from here.
__all__ = [
    "LOCAL_DEVICE",
    "LatencySLA",
    "LocalDevice",
    "ModelRef",
    "SearchSettings",
    "SearchSpec",
    "Traffic",
    "load_spec",
    "spec_from_mapping",
    "spec_json_schema",
]

# Upper bounds: far beyond anything served today, low enough that arithmetic on them stays exact and a typo
# (an extra three zeros, 1e12) is refused before a model loads rather than found out after. Trials a study may run:
MAX_TRIALS = 100_000
#: Seconds any search timeout or heartbeat may be: 30 days.
MAX_SECONDS = 30 * 86_400.0


class ModelRef(StrictModel):
    """The model to serve: a local directory or a hub id, with its release label."""

    source: str = Field(
        min_length=1,
        max_length=4096,
        description="Local directory (relative to the spec) or a hub id such as org/name.",
    )
    name: str | None = Field(
        default=None,
        pattern=r"^[^\x00-\x1f\x7f]+$",
        max_length=MAX_NAME_BYTES,
        description="Name runs are grouped under; default: hub id or dir name.",
    )
    release: str = Field(
        default="unreleased",
        pattern=r"^[^\x00-\x1f\x7f]+$",
        max_length=MAX_NAME_BYTES,
        description="Release label recorded with every run.",
    )
    revision: str | None = Field(default=None, description="Hub revision (commit or tag) for hub ids.")
    allow_pickle: bool = Field(default=False, description="Allow pickle (.bin) weights; off by default.")
    trust_remote_code: bool = Field(default=False, description="Run the model repo's own code; off by default.")


class LocalDevice(StrictModel):
    """What this machine costs, so its measured candidates can be priced like catalog GPUs."""

    price_per_hour_usd: Annotated[float, Field(ge=0, le=10_000)]
    price_source: str


class SearchSettings(StrictModel):
    n_trials: Annotated[int, Field(gt=0, le=MAX_TRIALS)] = Field(
        default=30, description="Distinct candidates to evaluate (duplicates are free)."
    )
    seed: Annotated[int, Field(ge=0, lt=2**32)] = 0
    timeout_s: Annotated[float, Field(gt=0, le=MAX_SECONDS)] | None = None
    study_name: str | None = Field(
        default=None, description="Default: <name>-<spec hash>-<performance model hash>; a folder name."
    )
    heartbeat_s: Annotated[float, Field(gt=0, le=3600)] = Field(
        default=10.0, description="Trial heartbeat; a trial silent for 3 heartbeats (a killed worker) is retried."
    )


class SearchSpec(StrictModel):
    """Everything one search needs, built by `spec_from_mapping` (through `load_spec`): its paths are
    absolute and its names known, so nothing downstream resolves or re-checks them."""

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$", max_length=MAX_NAME_BYTES - 11)
    model: ModelRef
    use_case: Path = Field(description="Use-case suite YAML (tasks and thresholds), relative to the spec.")
    traffic: Traffic
    sla: LatencySLA
    space: Space
    current: Annotated[Candidate, BeforeValidator(current_scheme_as_method)] = Field(
        description="What runs today: the baseline every saving is measured against."
    )
    local_device: LocalDevice | None = None
    probe: LocalProbe | None = Field(default=None, description="How 'local' candidates are measured.")
    hardware_catalog: Path | None = Field(default=None, description="A catalog file overriding the built-in one.")
    price_set: str | None = Field(
        default=None,
        description="Named, dated GPU prices from one provider and tier (recommender/perf/catalog/price_sets.yaml); "
        "default: that file's default. A GPU the set does not price is pruned from space.hardware with the "
        "reason; current.hardware must be priced. hardware_catalog prices are contract prices and win.",
    )
    engines: list[str] = Field(
        default=["vllm", "sglang"],
        min_length=1,
        description="Serving engines you would run: a candidate counts only where one of them launches its "
        "scheme on its GPU with the numerics that were measured.",
    )
    engine_releases: dict[str, str] = Field(
        default_factory=dict,
        description="The release of each engine to predict, e.g. {vllm: 0.12.0} (recommender/engines/"
        "engine_release.py); an engine not named: its current release.",
    )
    search: SearchSettings = SearchSettings()
    speculation: SpeculationSettings = Field(
        default=SpeculationSettings(), description="What space.speculative's acceptance is measured on."
    )
    fleet: FleetPolicy | None = Field(default=None, description="Autoscaling and GPU-mix settings for a profile.")
    #: Where the file was read from (set by spec_from_mapping, not by the user; not part of the spec's JSON).
    spec_path: Path | None = Field(default=None, exclude=True)

    def fingerprint(self) -> str:
        """A short hash of what is searched (not of how long or with which seed): the default study name's
        suffix, so a longer budget or a timeout continues the same study. Paths are hashed as seen from the
        spec's folder, so the name does not change with where the checkout lives."""
        # Fields added later are left out while unset, so specs written before them keep their study names.
        data = self.model_dump(mode="json", exclude={"search"} | ({"price_set"} if self.price_set is None else set()))
        data["space"]["methods"] = data["space"].pop("schemes")  # its name when study names began: they stay
        if data["space"]["speculative"] == ["none"]:  # added later: left out at its default, like the others
            del data["space"]["speculative"], data["speculation"]
        if data["current"]["speculative"] == "none":
            del data["current"]["speculative"]
        _drop_default_layouts(data)
        if decoders := decode_choices(self.space, self.current):  # searched: a new parameter set, a new study
            data["space"]["decode_hardware"] = decoders
        if degrees := decode_degree_choices(self.space, self.current):  # likewise the decode degrees searched
            data["space"]["decode_tensor_parallel"] = degrees
        for added in ("fleet", "probe", "engine_releases"):  # added later: left out while unset
            if not data[added]:
                del data[added]
        if self.sla.confidence == DEFAULT_SLA_CONFIDENCE:
            del data["sla"]["confidence"]
        for added in ("profile", "shared_prefix", "conversation"):
            if data["traffic"][added] is None:
                del data["traffic"][added]
        if self.spec_path is not None:
            base = self.spec_path.parent
            data["use_case"] = os.path.relpath(self.use_case, base)
            if self.hardware_catalog is not None:
                data["hardware_catalog"] = os.path.relpath(self.hardware_catalog, base)
            if self.traffic.profile is not None and self.traffic.profile.trace is not None:
                data["traffic"]["profile"]["trace"] = os.path.relpath(self.traffic.profile.trace, base)
            if Path(self.model.source).is_absolute():
                data["model"]["source"] = os.path.relpath(self.model.source, base)
        payload = json.dumps(data, sort_keys=True)
        return hashlib.sha256(payload.encode()).hexdigest()[:10]

    @field_validator("engines")
    @classmethod
    def _known_distinct_engines(cls, value: list[str]) -> list[str]:
        unknown = [e for e in value if e not in ENGINE_NAMES]
        if unknown:
            raise ValueError(f"unknown engine {unknown[0]!r}; known engines: {', '.join(ENGINE_NAMES)}")
        repeated = sorted({e for e in value if value.count(e) > 1})
        if repeated:
            raise ValueError(f"{', '.join(repeated)} listed twice; list each engine once")
        return value

    @model_validator(mode="after")
    def _releases_of_listed_engines(self) -> SearchSpec:
        releases_of_listed(self.engine_releases, self.engines)
        return self

    @property
    def study_name(self) -> str:
        """search.study_name, or <name>-<spec hash>-<shipped step-cost fit>: a new performance model starts a
        new study instead of mixing its latencies with an earlier model's (study.storage.PERF_MODEL_ATTR)."""
        from recommender.perf.step.calibrated import fit_digest

        return self.search.study_name or f"{self.name}-{self.fingerprint()}-{fit_digest()[:6]}"


def _drop_default_layouts(data: dict[str, Any]) -> None:
    """The layout keys (added later) left out of a fingerprint at their defaults, so a spec that searches only
    aggregated tensor parallelism names the study it named before them; the link too while nothing reads it."""
    space, current = data["space"], data["current"]
    if "disaggregated" not in space["layout"] and space["expert_parallel"] == [1]:
        del space["link"]
    if "disaggregated" not in space["layout"]:
        del space["layout"]
    if space["expert_parallel"] == [1]:
        del space["expert_parallel"]
    for key in ("expert_skew", "redundant_experts", "routing"):  # added later: at their defaults, the old study
        if not space.get(key):
            space.pop(key, None)
    del space["decode_hardware"], space["decode_tensor_parallel"]  # hashed apart (``SearchSpec.fingerprint``)
    for key, default in (
        ("layout", "aggregated"),
        ("expert_parallel", 1),
        ("decode_hardware", ""),
        ("decode_tensor_parallel", 0),
    ):
        if current[key] == default:
            del current[key]


def spec_json_schema() -> dict[str, Any]:
    """The JSON Schema of a spec file (`recommender schema`): for an editor's YAML checks, and what the
    property-based tests generate specs from. What a schema cannot say is checked by `spec_from_mapping`:
    names the catalog and the scheme registry know, paths that exist, a request the model has positions
    for. A trace profile's lengths and peak fill ``traffic``'s three fields, which the schema lists as
    required."""
    schema = schema_with_current_scheme(SearchSpec.model_json_schema(mode="validation"))
    del schema["properties"]["spec_path"]  # set from where the file was read, never written by the user
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", **schema}


def _check_study_name(spec: SearchSpec) -> None:
    """The study name becomes the output folder's name: no traversal, no separators, not too long."""
    from recommender.config.destinations import check_name

    check_name(spec.study_name, field="search.study_name" if spec.search.study_name else "name", what="study name")


def load_spec(path: Path, *, timeout_s: float | None = None) -> SearchSpec:
    """Read a spec file and build it once; any problem becomes one BadInputError naming the file and the field.

    Args:
        path: the spec YAML; relative paths inside it are taken from its folder, whatever the working directory.
        timeout_s: the command line's ``--timeout-s``, which overrides ``search.timeout_s`` (merged before
            validation, so the spec is not copied afterwards).
    """
    raw = _read_mapping(path)
    if timeout_s is not None and isinstance(raw.get("search", {}), dict):
        raw["search"] = {**raw.get("search", {}), "timeout_s": timeout_s}
    spec = spec_from_mapping(raw, spec_path=path.resolve(), label=str(path))
    try:  # a file a user wrote: a key given without the key it needs is refused (a stored study's spec was read)
        check_space(spec.space, spec.current)
    except BadInputError as exc:
        raise BadInputError(f"{path}: {as_written(exc.field, raw)}", exc.problem, exc.fix) from None
    return spec


def spec_from_mapping(raw: dict[str, Any], *, spec_path: Path | None, label: str) -> SearchSpec:
    """The one place a spec is built: paths resolved against the spec's folder, validated, names checked.

    Validators do no I/O; the checks that read the catalog or the scheme registry run here, after the
    paths are resolved, so a relative ``hardware_catalog`` means the same file from any directory.

    Args:
        raw: the spec as written (YAML) or as stored in a study (JSON, paths already absolute).
        spec_path: the spec file, absolute; None for a spec that never had one (then the working directory).
        label: how errors name the spec, e.g. ``recommender/demo/search_space.yaml``.
    """
    if "spec_path" in raw:
        raise BadInputError(f"{label}: spec_path", "unknown key", "remove it; the spec's own path is implied")
    base = spec_path.parent if spec_path is not None else Path.cwd()
    try:
        spec = SearchSpec.model_validate({**_with_absolute_paths(raw, base), "spec_path": spec_path})
        _check_study_name(spec)
        _check_names(spec)
    except BadInputError as exc:
        raise BadInputError(f"{label}: {as_written(exc.field, raw)}", exc.problem, exc.fix) from None
    except ValidationError as exc:
        first = exc.errors()[0]
        raise BadInputError(
            f"{label}: {as_written(pydantic_location(tuple(first['loc'])), raw)}",
            pydantic_message(dict(first)),
            "see recommender/demo/search_space.yaml for a valid spec",
        ) from None
    return spec


def _read_mapping(path: Path) -> dict[str, Any]:
    return load_yaml_mapping(path, field=str(path), what="spec file")


def _with_absolute_paths(raw: dict[str, Any], base: Path) -> dict[str, Any]:
    """The raw spec with its path fields made absolute against `base`; values of the wrong type are left
    for validation to refuse with its usual message."""
    data = dict(raw)
    if "traffic" in data:
        data["traffic"] = with_absolute_trace(data["traffic"], base)
    for key in ("use_case", "hardware_catalog"):
        if isinstance(data.get(key), str):
            data[key] = str((base / expand_user(Path(_plain_path(data[key], key)), field=key)).resolve())
    model = data.get("model")
    if isinstance(model, dict) and isinstance(model.get("source"), str):
        data["model"] = {**model, "source": _absolute_source(_plain_path(model["source"], "model.source"), base)}
    return data


def _plain_path(value: str, field: str) -> str:
    """A path the filesystem can look up: no NUL byte, no name over 255 bytes, 4096 bytes at most (the OS
    raises on each, mid-resolution, instead of answering "not found")."""
    if "\0" in value or len(value.encode()) > 4096 or any(len(p.encode()) > 255 for p in value.split("/")):
        raise BadInputError(
            field,
            "not a usable path (a NUL byte, or a name or path too long for the filesystem)",
            "give the path of an existing file or directory",
        )
    return value


def _absolute_source(source: str, base: Path) -> str:
    """A model directory (existing, or written as a path) made absolute; a hub id such as org/name, which
    names no directory beside the spec, stays as written."""
    candidate = base / expand_user(Path(source), field="model.source")
    if candidate.is_dir() or not looks_like_hub_id(source):
        return str(candidate.resolve())
    return source


def _kv_dtype_apart(name: str, field: str, fix: str) -> None:
    """In a spec the KV cache dtype is its own setting (``kv_cache_dtypes``), so ``x+kv-fp8`` (the `--scheme`
    spelling) is refused: listed beside ``x`` with fp8 among the KV dtypes it would be the same candidate twice."""
    if FP8_KV_SUFFIX in name:
        base = name.split(FP8_KV_SUFFIX, 1)[0]
        raise BadInputError(
            field, f"{name[:80]!r}: in a spec the KV cache dtype is its own setting", f"list {base[:60]!r} and {fix}"
        )


def _check_names(spec: SearchSpec) -> None:
    """Every scheme and accelerator the spec names exists (the catalog read from the resolved path). Fields are
    named in the spec's current spelling; `spec_from_mapping` names them as the file wrote them."""
    for precision, names in spec.space.schemes.items():
        for name in names:
            _kv_dtype_apart(name, f"space.schemes.{precision}", "add fp8 to space.kv_cache_dtypes")
            scheme = get_scheme(name, field=f"space.schemes.{precision}")
            if scheme.precision != precision:
                raise BadInputError(
                    f"space.schemes.{precision}",
                    f"scheme {name!r} is a {scheme.precision} scheme, listed under {precision}",
                    f"move it under {scheme.precision}",
                )
    _kv_dtype_apart(spec.current.method, "current.scheme", "set current.kv_cache_dtype: fp8")
    get_scheme(spec.current.method, field="current.scheme")
    catalog = load_catalog(spec.hardware_catalog, price_set=spec.price_set)
    for i, hw in enumerate([*spec.space.hardware, spec.current.hardware]):
        where = f"space.hardware[{i}]" if i < len(spec.space.hardware) else "current.hardware"
        if hw == LOCAL_DEVICE:
            if spec.local_device is None:
                raise BadInputError(
                    where,
                    "'local' needs a local_device section with its price per hour",
                    "add local_device: {price_per_hour_usd: ..., price_source: ...}",
                )
            continue
        catalog.get(hw, field=where)
    _check_link(spec, catalog)
    check_local_probe(spec.probe, spec.space.hardware)
    check_decode_pools(spec.space, spec.current, catalog)
    check_decode_degrees(spec.space, spec.current, catalog)
    # The baseline every saving is measured against: its degrees fit its nodes, its GPUs priced (as the space's are).
    check_current(spec.current, catalog)


def _check_link(spec: SearchSpec, catalog: Catalog) -> None:
    """``space.link`` is a link the catalog knows and, where disaggregated pools or expert parallelism are searched,
    one every catalog GPU of the space has (NVLink on a PCIe card is refused), as `plan --link` is checked."""
    if spec.space.link not in known_links():
        raise BadInputError("space.link", f"unknown link {spec.space.link!r}", f"use one of {', '.join(known_links())}")
    pools = "disaggregated" in spec.space.layout or spec.current.layout != "aggregated"
    if pools or spec.space.expert_parallel != [1] or spec.current.expert_parallel != 1:
        for hw in dict.fromkeys([*spec.space.hardware, spec.current.hardware]):
            if hw != LOCAL_DEVICE:
                resolve_link(spec.space.link, catalog.get(hw), field="space.link")
