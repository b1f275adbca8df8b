"""Everything a study needs before its first trial, each part checked: bad input is refused here.

Also the spec's round trip through the study (stored by the coordinator, read back by
`recommender worker` on another machine).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from recommender.config.model_limits import check_lengths, searches_speculation
from recommender.config.spec import LOCAL_DEVICE, LatencySLA, SearchSpec, Traffic, spec_from_mapping
from recommender.decision.rules import quality_skip
from recommender.device import local_device, quality_compute_dtype
from recommender.engines.architecture_support import check_served
from recommender.engines.cpu_engine_env import ensure_engine_env
from recommender.engines.head_sizes import check_runnable
from recommender.errors import BadInputError
from recommender.evaluation.engine_quality import EngineQuality
from recommender.evaluation.engine_steps import EngineSteps
from recommender.evaluation.evaluator import CandidateEvaluator
from recommender.evaluation.local_device import LocalMeasurement
from recommender.evaluation.performance import PerformanceEvaluator
from recommender.fleet.layouts.expert_parallel_candidate import ExpertRouting
from recommender.fleet.layouts.layout_candidate import evaluate_layout
from recommender.models.source import ModelSource
from recommender.perf.catalog.architecture_check import check_architecture
from recommender.perf.catalog.gpus import Accelerator, Catalog, load_catalog
from recommender.perf.model.shape import ModelShape
from recommender.perf.step.roofline import project_step_times
from recommender.quality.cache import QualityCache
from recommender.quality.calibration_docs import quantize_context
from recommender.quality.evaluate import QualityEvaluator
from recommender.quality.lm_eval_runner import check_tasks_known, task_manager
from recommender.quality.suite import UseCase, load_use_case
from recommender.quantize import QuantScheme, get_scheme
from recommender.quantize.model_cache import ModelCache
from recommender.speculation.evaluator import AcceptanceEvaluator
from recommender.study.claims import ClaimStore
from recommender.study.layout_checks import check_layouts
from recommender.study.searchable import check_something_to_search, check_speculation_launchable
from recommender.study.storage import SPEC_JSON_ATTR

if TYPE_CHECKING:
    import optuna
    from lm_eval.tasks import TaskManager


@dataclass
class Prepared:
    """What a search needs before its first trial, every part of it checked (bad input is refused here)."""

    spec: SearchSpec
    source: ModelSource
    use_case: UseCase
    manager: TaskManager
    catalog: Catalog
    shape: ModelShape

    def evaluator(self, claims: ClaimStore | None = None) -> CandidateEvaluator:
        models = ModelCache(self.source, local_device(), quantize_context(self.use_case, self.manager, self.source))
        steps = self._engine_steps(models)
        served = None if steps is None else EngineQuality(steps, self.manager, self._positions())
        quality = QualityEvaluator(
            self.use_case, models, cache=QualityCache.default(), manager=self.manager, claims=claims, served=served
        )
        local = None
        if self.spec.local_device is not None:
            local = LocalMeasurement(models, list(self.spec.space.batch_sizes or []), self.spec.local_device, steps)
        speculation = None
        if searches_speculation(self.spec):
            speculation = AcceptanceEvaluator(
                self.use_case, models, self.spec.speculation, self.manager, QualityCache.default()
            )
        performance = PerformanceEvaluator(
            self.catalog,
            self.shape,
            self.spec.traffic,
            self.spec.sla,
            local,
            engines=tuple(self.spec.engines),
            speculation=speculation,
            engine_releases=self.spec.engine_releases,
        )
        other_layouts = None
        if "disaggregated" in self.spec.space.layout or self.spec.space.expert_parallel != [1]:
            space, model = self.spec.space, self.spec.model.source
            experts = ExpertRouting(space.expert_skew, space.redundant_experts)
            other_layouts = partial(evaluate_layout, performance, link=space.link, model=model, experts=experts)
        return CandidateEvaluator(performance, quality, skip_quality=quality_skip, other_layouts=other_layouts)

    def _positions(self) -> int:
        """The model's positions: the context the engine serves it with."""
        config = self.source.load_config(field=f"{self.spec.spec_path}: model.source")
        return int(getattr(config, "max_position_embeddings", 0) or 2048)

    def _engine_steps(self, models: ModelCache) -> EngineSteps | None:
        """The engine that measures the local candidates (its environment made now, before the first trial)."""
        probe, traffic = self.spec.probe, self.spec.traffic
        if probe is None or not probe.through_engine:
            return None
        ensure_engine_env()
        return EngineSteps(probe, self.source, models.context, traffic.prompt_tokens, traffic.output_tokens)


def prepare(spec: SearchSpec) -> Prepared:
    """Check everything that can be refused before a model is loaded (the spec's paths are absolute already)."""
    use_case = load_use_case(spec.use_case, field=f"{spec.spec_path}: use_case")
    source = ModelSource.resolve(
        spec.model.source,
        base_dir=spec.spec_path.parent if spec.spec_path else Path.cwd(),  # only a hub id is still relative
        revision=spec.model.revision,
        allow_pickle=spec.model.allow_pickle,
        trust_remote_code=spec.model.trust_remote_code,
        field=f"{spec.spec_path}: model.source",
        name=spec.model.name,
    )
    quality_compute_dtype(local_device())  # a bad RECOMMENDER_CPU_COMPUTE_DTYPE is refused before any store opens
    config = source.load_config(field=f"{spec.spec_path}: model.source")  # before lm-eval's task index: fails fast
    catalog, shape = _check_against_model(spec, config)
    manager = task_manager(use_case)
    check_tasks_known(use_case, manager)
    if spec.speculation.task is not None and spec.speculation.task not in manager.all_tasks:
        raise BadInputError(
            f"{spec.spec_path}: speculation.task",
            f"lm-eval knows no task {spec.speculation.task!r}",
            "name a task of the use case's include_path or of lm-eval (lm-eval ls tasks)",
        )
    return Prepared(spec, source, use_case, manager, catalog, shape)


def _check_against_model(spec: SearchSpec, config: Any) -> tuple[Catalog, ModelShape]:
    """The checks that need the model's config and the catalog, not lm-eval's task index (which takes seconds):
    the space, the architecture, the traffic and the speculation settings against the model's positions, the SLA."""
    catalog = load_catalog(spec.hardware_catalog, price_set=spec.price_set)
    check_something_to_search(spec, catalog, field_prefix=f"{spec.spec_path}: ")
    check_speculation_launchable(spec, field_prefix=f"{spec.spec_path}: ")
    check_architecture(config, field=f"{spec.spec_path}: model.source config")
    shape = ModelShape.from_config(config)
    check_served(shape.architectures, spec.engines, field=f"{spec.spec_path}: model.source")
    check_runnable(shape.head_dim, spec.engines, field=f"{spec.spec_path}: model.source")
    check_lengths(spec, config, shape, catalog)
    check_layouts(spec, catalog, shape, field_prefix=f"{spec.spec_path}: ")
    check_sla_reachable(
        shape,
        [
            (catalog.get(hw), get_scheme(m))
            for hw in {*spec.space.hardware, spec.current.hardware} - {LOCAL_DEVICE}
            for ms in spec.space.schemes.values()
            for m in ms
        ],
        traffic=spec.traffic,
        sla=spec.sla,
        field_prefix=f"{spec.spec_path}: sla",
    )
    return catalog, shape


def check_sla_reachable(
    shape: ModelShape,
    options: list[tuple[Accelerator, QuantScheme]],
    *,
    traffic: Traffic,
    sla: LatencySLA,
    field_prefix: str = "sla",
) -> None:
    """Refuse an SLA that no searched (GPU, method) pair meets even with one request and no queue.

    A limit below one roofline step on every option is a typo or a unit slip (seconds for
    milliseconds), not a search result: it is bad input, said before any model is loaded.
    """
    runnable = [(a, m) for a, m in options if m.unavailable_reason(a.device) is None]
    if not runnable:
        return
    steps = {
        (a.key, m.name): project_step_times(
            shape, m, a, prompt_tokens=traffic.prompt_tokens, batch_size=1, context_tokens=traffic.prompt_tokens
        )
        for a, m in runnable
    }
    for limit_name, limit_ms, attr, what in (
        ("tpot_p99_ms", sla.tpot_p99_ms, "decode_step_s", "one decode step"),
        ("ttft_p99_ms", sla.ttft_p99_ms, "prefill_s", f"the prefill of one {traffic.prompt_tokens}-token prompt"),
    ):
        (hw, method), fastest = min(steps.items(), key=lambda kv: getattr(kv[1], attr))
        best_ms = getattr(fastest, attr) * 1e3
        if limit_ms < best_ms:
            raise BadInputError(
                f"{field_prefix}.{limit_name}",
                f"{limit_ms:g} ms is below {what} on every searched GPU (fastest: {best_ms:.2f} ms on {hw} "
                f"with {method}, roofline)",
                "check the unit (milliseconds) or add faster hardware / a lower precision to the space",
            )


def portable_spec(spec: SearchSpec, study_name: str) -> dict[str, Any]:
    """The spec as JSON with the study named, for workers on other machines (its paths are absolute since
    load_spec; other machines see them through a shared filesystem or an identical checkout)."""
    data = spec.model_dump(mode="json")
    data["search"]["study_name"] = study_name
    return {"spec": data, "spec_path": str(spec.spec_path or "")}


def spec_from_study(study: optuna.Study, study_name: str, storage: str) -> SearchSpec:
    """The spec the coordinator stored, built (validated) once like a spec file."""
    stored = study.user_attrs.get(SPEC_JSON_ATTR)
    if stored is None:
        raise BadInputError(
            "--study",
            f"study {study_name!r} in {storage} was not started by this version (no spec stored)",
            "start it with `recommender search SPEC --storage URL`",
        )
    spec_path = Path(stored["spec_path"]) if stored["spec_path"] else None
    return spec_from_mapping(stored["spec"], spec_path=spec_path, label=f"study {study_name!r}: spec")
