"""The searched space as Optuna parameters: each setting's choices, the grid, a candidate's neighbours.

A candidate is one point of the space; the study stores it as categorical parameters
(precision and method joined as "int8/torchao-int8-wo", so one parameter picks both).
"""

from __future__ import annotations

import itertools
import math
from typing import Any

from recommender.config.candidate import AGGREGATED, Candidate
from recommender.config.spec import SearchSpec
from recommender.engines.batch_limits import batch_ladder
from recommender.speculation.methods import NONE


def method_choice(precision: str, method: str) -> str:
    return f"{precision}/{method}"


def space_choices(spec: SearchSpec) -> dict[str, list[Any]]:
    """Each Optuna parameter and its categorical values (the current deployment's always among them)."""
    current = spec.current
    speculative = set(spec.space.speculative) | {current.speculative}
    # A parameter only where the spec searches it, so a study without speculation samples as it always did.
    searched: dict[str, list[Any]] = {"speculative": sorted(speculative)} if speculative != {NONE} else {}
    layouts = set(spec.space.layout) | {current.layout}
    if layouts != {AGGREGATED}:  # likewise: a parameter only where a spec searches disaggregated pools
        searched["layout"] = sorted(layouts)
    degrees = set(spec.space.expert_parallel) | {current.expert_parallel}
    if degrees != {1}:  # and where it searches expert parallelism
        searched["expert_parallel"] = sorted(degrees)
    choices: dict[str, list[Any]] = {
        "method": sorted(
            {method_choice(p, m) for p, ms in spec.space.schemes.items() for m in ms}
            | {method_choice(current.precision, current.method)}
        ),
        "hardware": sorted(set(spec.space.hardware) | {current.hardware}),
        "batch_size": sorted(set(batch_caps(spec)) | {current.batch_size}),
        "tensor_parallel": sorted(set(spec.space.tensor_parallel) | {current.tensor_parallel}),
        "max_num_batched_tokens": sorted(set(spec.space.max_num_batched_tokens) | {current.max_num_batched_tokens}),
        "kv_cache_dtype": sorted(set(spec.space.kv_cache_dtypes) | {current.kv_cache_dtype}),
    }
    return choices | searched


def batch_caps(spec: SearchSpec) -> list[int]:
    """The spec's batch caps, or (none listed) each of its engines' ladder up to its own maximum at the largest
    token budget searched (the evaluator prunes the caps a candidate's KV cache cannot hold)."""
    return list(spec.space.batch_sizes or []) or batch_ladder(spec.engines, max(spec.space.max_num_batched_tokens))


def candidate_of(params: dict[str, Any]) -> Candidate:
    precision, method = str(params["method"]).split("/", 1)
    return Candidate(
        precision=precision,
        method=method,
        hardware=params["hardware"],
        batch_size=params["batch_size"],
        tensor_parallel=params["tensor_parallel"],
        max_num_batched_tokens=params["max_num_batched_tokens"],
        kv_cache_dtype=params["kv_cache_dtype"],
        speculative=params.get("speculative", NONE),  # studies from before it have no such parameter
        layout=params.get("layout", AGGREGATED),  # likewise
        expert_parallel=params.get("expert_parallel", 1),
    )


def params_of(c: Candidate) -> dict[str, Any]:
    return {
        "method": method_choice(c.precision, c.method),
        "hardware": c.hardware,
        "batch_size": c.batch_size,
        "tensor_parallel": c.tensor_parallel,
        "max_num_batched_tokens": c.max_num_batched_tokens,
        "kv_cache_dtype": c.kv_cache_dtype,
        "speculative": c.speculative,
        "layout": c.layout,
        "expert_parallel": c.expert_parallel,
    }


def trial_params(c: Candidate, choices: dict[str, list[Any]]) -> dict[str, Any]:
    """`c` as the study's parameters: those it searches (`space_choices`), so an enqueued trial matches sampled ones."""
    return {name: value for name, value in params_of(c).items() if name in choices}


def neighbourhood(c: Candidate, choices: dict[str, list[Any]]) -> list[Candidate]:
    """Candidates one setting away from `c` (tensor-parallel degree kept)."""
    here = params_of(c)
    return [
        candidate_of(here | {name: value})
        for name in (
            "method",
            "hardware",
            "batch_size",
            "max_num_batched_tokens",
            "kv_cache_dtype",
            "speculative",
            "layout",
            "expert_parallel",
        )
        for value in choices.get(name, ())
        if value != here[name]
    ]


def grid_size(spec: SearchSpec) -> int:
    """How many candidates the space holds (the product of each setting's choice count), without building
    them: the search asks this to choose its sampler and cap its budget."""
    return math.prod(len(values) for values in space_choices(spec).values())


def grid(spec: SearchSpec) -> list[Candidate]:
    """Every candidate of the space: what an exhaustive search would evaluate."""
    choices = space_choices(spec)
    return [candidate_of(dict(zip(choices, values, strict=True))) for values in itertools.product(*choices.values())]


#: Precisions whose quality is the reference's by construction (no quantization).
UNQUANTIZED = ("bf16", "fp16")


def references(spec: SearchSpec) -> list[Candidate]:
    """The space's unquantized schemes on every GPU at the largest batch and token budget, 16-bit KV.

    Evaluated first: their quality needs no measurement beyond the reference's, so their speed alone
    makes them feasible, and a quantized candidate that only ties one of them on $/month cannot win
    (ties go to the least quantized scheme) — its quality evaluation is then skipped.
    """
    choices = space_choices(spec)
    return [
        candidate_of(
            {
                "method": method,
                "hardware": hardware,
                "batch_size": max(choices["batch_size"]),
                "tensor_parallel": min(choices["tensor_parallel"]),
                "max_num_batched_tokens": max(choices["max_num_batched_tokens"]),
                "kv_cache_dtype": "auto",
            }
        )
        for method in choices["method"]
        if method.split("/", 1)[0] in UNQUANTIZED
        for hardware in choices["hardware"]
    ]
