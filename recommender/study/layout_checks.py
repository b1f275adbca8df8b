"""Whether a spec's disaggregated pools can hold its model at all, checked before any store opens.

A pool's worker is a replica of the space's scheme, GPU and tensor-parallel degree; where no such worker holds
the model's weights and one request's KV cache, every disaggregated candidate would be pruned for memory and the
search would answer as if the layout had been tried. That is bad input, said with the shortfall and the fix.
The link is checked with the spec (``config/spec.py``); expert-parallel degrees against the model's experts here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from recommender.config.candidate import Candidate
from recommender.config.spec import LOCAL_DEVICE
from recommender.errors import BadInputError
from recommender.evaluation.performance import PerformanceEvaluator
from recommender.evaluation.refusal import Refused
from recommender.perf.model.expert_parallel import ExpertParallelLayout
from recommender.study.space import batch_caps

if TYPE_CHECKING:
    from recommender.config.spec import SearchSpec
    from recommender.perf.catalog.gpus import Catalog
    from recommender.perf.model.shape import ModelShape

__all__ = ["check_expert_parallel", "check_layouts"]


def check_layouts(spec: SearchSpec, catalog: Catalog, shape: ModelShape, *, field_prefix: str) -> None:
    """Refuse expert-parallel degrees a model cannot take (a dense model, a degree not dividing the experts, as
    `plan --expert-parallel` refuses them), and a space with disaggregated pools none of whose workers (scheme x GPU x
    degree x KV dtype) fits."""
    check_expert_parallel(spec, shape, field_prefix=field_prefix)
    if "disaggregated" not in spec.space.layout:
        return
    _check_pools_fit(spec, catalog, shape, field_prefix=field_prefix)


def check_expert_parallel(spec: SearchSpec, shape: ModelShape, *, field_prefix: str) -> None:
    """Every expert-parallel degree the spec names, in `space` and in `current` alike, checked against the model's
    experts (a dense model has none), with the space's redundant experts where it has them: `current` is
    evaluated as the first trial, so a degree refused in the space is refused there too, before any work."""
    named = [("space.expert_parallel", d) for d in spec.space.expert_parallel]
    named.append(("current.expert_parallel", spec.current.expert_parallel))
    for where, degree in named:
        if degree > 1:
            ExpertParallelLayout(degree).check(shape, field=f"{field_prefix}{where}")
            if redundant := spec.space.redundant_experts:
                ExpertParallelLayout(degree, redundant_experts=redundant).check(
                    shape, field=f"{field_prefix}space.redundant_experts"
                )


def _check_pools_fit(spec: SearchSpec, catalog: Catalog, shape: ModelShape, *, field_prefix: str) -> None:
    """Bad input where no disaggregated pool worker of the space fits the model (or no catalog GPU is listed)."""
    hardware = [hw for hw in spec.space.hardware if hw != LOCAL_DEVICE]
    if not hardware:
        raise BadInputError(
            f"{field_prefix}space.layout",
            "disaggregated pools are planned on catalog GPUs; space.hardware lists only the local device",
            "add a catalog GPU to space.hardware, or drop disaggregated from space.layout",
        )
    performance = PerformanceEvaluator(
        catalog,
        shape,
        spec.traffic,
        spec.sla,
        engines=tuple(spec.engines),
        require_price=False,
        engine_releases=spec.engine_releases,
    )
    cap = min(batch_caps(spec))
    shortfall = ""
    for hw in hardware:
        for precision, names in spec.space.schemes.items():
            for name in names:
                for tp in spec.space.tensor_parallel:
                    for kv in spec.space.kv_cache_dtypes:
                        try:
                            performance.setup(Candidate(precision, name, hw, cap, tp, kv_cache_dtype=kv))
                        except Refused as refused:
                            if refused.key == "memory" and not shortfall:
                                shortfall = f"{name} on {hw} x TP{tp}: {refused.reason}"
                            continue
                        return
    if shortfall:
        raise BadInputError(
            f"{field_prefix}space.layout",
            f"no disaggregated pool worker fits the model ({shortfall[:300]})",
            "add a larger space.tensor_parallel degree, a GPU with more memory or a lower precision, "
            "or drop disaggregated from space.layout",
        )
