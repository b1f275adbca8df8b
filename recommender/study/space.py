"""The searched space as Optuna parameters: each setting's choices, the grid, a candidate's neighbours.

A candidate is one point of the space; the study stores it as categorical parameters
(precision and method joined as "int8/torchao-int8-wo", so one parameter picks both). A conditional parameter
(`CONDITIONAL`: a disaggregated candidate's decode GPU and decode degree) is suggested only on the branch that asks
for it, as Optuna's define-by-run spaces do (``config/decode_pools.py`` says why it is a parameter).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from recommender.config.candidate import AGGREGATED, DISAGGREGATED, Candidate
from recommender.config.decode_degrees import decode_degree_choices
from recommender.config.decode_pools import decode_choices
from recommender.config.spec import SearchSpec
from recommender.engines.batch_limits import batch_ladder
from recommender.speculation.methods import NONE

if TYPE_CHECKING:
    import optuna

#: Parameters suggested only for some candidates: name -> (the parameter before it, the value that asks for it).
CONDITIONAL: dict[str, tuple[str, str]] = {
    "decode_hardware": ("layout", DISAGGREGATED),
    "decode_tensor_parallel": ("layout", DISAGGREGATED),
}


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
    if decoders := decode_choices(spec.space, current):  # and decode pools on other GPUs; after `layout`, which asks
        searched["decode_hardware"] = decoders
    if decode_degrees := decode_degree_choices(spec.space, current):  # and decode pools at other degrees
        searched["decode_tensor_parallel"] = decode_degrees
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
        decode_hardware=params.get("decode_hardware", ""),  # absent: both pools on `hardware`
        decode_tensor_parallel=params.get("decode_tensor_parallel", 0),  # absent: both at `tensor_parallel`
    )


def applies(name: str, params: dict[str, Any]) -> bool:
    """Whether parameter `name` is suggested given the parameters before it (`CONDITIONAL`)."""
    condition = CONDITIONAL.get(name)
    return condition is None or params.get(condition[0]) == condition[1]


def suggest(trial: optuna.Trial, choices: dict[str, list[Any]]) -> dict[str, Any]:
    """The trial's parameters, in the order of `choices`, each conditional one only where it applies."""
    params: dict[str, object] = {}
    for name, values in choices.items():
        if applies(name, params):
            params[name] = trial.suggest_categorical(name, values)
    return params


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
        "decode_hardware": c.decode_gpu,
        "decode_tensor_parallel": c.decode_tp,
    }


def _applying(params: dict[str, Any], choices: dict[str, list[Any]]) -> dict[str, Any]:
    """Those of `params` the study searches (`choices`) and that apply on their branch."""
    return {name: value for name, value in params.items() if name in choices and applies(name, params)}


def trial_params(c: Candidate, choices: dict[str, list[Any]]) -> dict[str, Any]:
    """`c` as the study's parameters: those it searches (`space_choices`), so an enqueued trial matches sampled ones."""
    return _applying(params_of(c), choices)


def _within(params: dict[str, Any], choices: dict[str, list[Any]]) -> bool:
    """Every searched parameter of `params` among its choices (a trial can be enqueued with them)."""
    return all(value in choices[name] for name, value in _applying(params, choices).items())


def neighbourhood(c: Candidate, choices: dict[str, list[Any]]) -> list[Candidate]:
    """Candidates one setting away from `c` (tensor-parallel degree kept), those the space holds: a disaggregated
    neighbour keeps `c`'s decode GPU and decode degree where they are among the decode choices, and is left out
    where they are not; the decode degree is one of the settings moved."""
    here = params_of(c)
    moved = [
        here | {name: value}
        for name in (
            "method",
            "hardware",
            "batch_size",
            "max_num_batched_tokens",
            "kv_cache_dtype",
            "speculative",
            "layout",
            "expert_parallel",
            "decode_hardware",
            "decode_tensor_parallel",
        )
        for value in choices.get(name, ())
        if value != here[name]
    ]
    return [candidate_of(_applying(p, choices)) for p in moved if _within(p, choices)]


def grid_size(spec: SearchSpec) -> int:
    """How many candidates the space holds (the product of each setting's choice count, a conditional parameter's
    only on its branch), without building them: the search asks this to choose its sampler and cap its budget."""
    choices = space_choices(spec)
    conditions = {on for on, _ in CONDITIONAL.values()}
    size = math.prod(len(v) for name, v in choices.items() if name not in CONDITIONAL and name not in conditions)
    for on in conditions & set(choices):
        size *= sum(
            math.prod(
                len(choices[n]) for n, (at, want) in CONDITIONAL.items() if n in choices and (at, want) == (on, v)
            )
            for v in choices[on]
        )
    return size


def _points(choices: dict[str, list[Any]]) -> Iterator[dict[str, Any]]:
    """Every parameter set of the space: the plain parameters' product, each conditional one on its branch."""
    plain = {name: values for name, values in choices.items() if name not in CONDITIONAL}
    for values in itertools.product(*plain.values()):
        params = dict(zip(plain, values, strict=True))
        extra = [name for name in choices if name in CONDITIONAL and applies(name, params)]
        for more in itertools.product(*(choices[name] for name in extra)):
            yield params | dict(zip(extra, more, strict=True))


def grid(spec: SearchSpec) -> list[Candidate]:
    """Every candidate of the space: what an exhaustive search would evaluate."""
    return [candidate_of(params) for params in _points(space_choices(spec))]


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
