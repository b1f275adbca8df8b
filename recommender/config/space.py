"""The spec's search space: the categorical choices of every setting a candidate takes.

Each list names its choices once (a repeat is refused: it is usually a typo for another entry); the
study turns them into Optuna parameters (``recommender/study/space.py``).
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, field_validator, model_validator

from recommender.config.candidate import (
    MAX_BATCH,
    MAX_EXPERT_PARALLEL,
    MAX_TENSOR_PARALLEL,
    KVCacheDtype,
    Layout,
    Precision,
    Speculative,
    TokenCount,
)
from recommender.config.spellings import refuse_both_spellings
from recommender.perf.sim.routing import RoutingPolicy

__all__ = ["DEFAULT_LINK", "Space"]

#: The link the KV cache crosses between pools when a spec names none: `recommender plan --link`'s default.
DEFAULT_LINK = "infiniband-ndr"


class Space(BaseModel):
    """The categorical search space."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    schemes: dict[Precision, list[str]] = Field(
        validation_alias=AliasChoices("schemes", "methods"),
        description="Precision -> quantization schemes to try (`recommender quantize --help` lists them); "
        "`methods`, the old spelling of this key, is read too.",
    )
    hardware: list[str] = Field(min_length=1, description="Catalog accelerator names, or 'local'.")
    batch_sizes: list[Annotated[int, Field(gt=0, le=MAX_BATCH)]] | None = Field(
        default=None,
        min_length=1,
        description="max_num_seqs values (concurrent sequences); left out: powers of two from 64 up to each "
        "engine's own maximum (recommender/engines/batch_limits.py), the caps the KV cache cannot hold pruned.",
    )
    tensor_parallel: list[Annotated[int, Field(gt=0, le=MAX_TENSOR_PARALLEL)]] = Field(default=[1], min_length=1)
    max_num_batched_tokens: list[TokenCount] = Field(
        default=[8192], min_length=1, description="Token budgets per engine step (chunked prefill)."
    )
    kv_cache_dtypes: list[KVCacheDtype] = Field(
        default=["auto"], min_length=1, description="'auto' (the model's 16-bit dtype) and/or 'fp8'."
    )
    speculative: list[Speculative] = Field(
        default=["none"], min_length=1, description="Speculative decoding to try: none, ngram, ngram:K (K drafts)."
    )
    layout: list[Layout] = Field(
        default=["aggregated"],
        min_length=1,
        description="Layouts to try, as `recommender plan --layout` names them: aggregated (every replica prefills "
        "and decodes) and/or disaggregated (a prefill pool and a decode pool, at the candidate's tensor-parallel "
        "degree or the decode pool at `decode_tensor_parallel`, the KV cache moved over `link`; "
        "docs/moe-and-disaggregation.md).",
    )
    expert_parallel: list[Annotated[int, Field(gt=0, le=MAX_EXPERT_PARALLEL)]] = Field(
        default=[1],
        min_length=1,
        description="For a mixture-of-experts model, expert-parallel degrees to try, as `recommender plan "
        "--expert-parallel` plans them: 1 is tensor parallelism only; N > 1 is one replica of N GPUs with the experts "
        "split over them and N attention ranks (each degree must divide the experts; beyond one node the all-to-all "
        "crosses `link`).",
    )
    expert_skew: float = Field(
        default=0.0,
        ge=0.0,
        le=10.0,
        description="For expert-parallel candidates, how unevenly the router spreads tokens over the experts, as "
        "`recommender plan --expert-skew` takes it: expert i (by popularity) draws a share proportional to "
        "(i + 1)^-skew; 0 is uniform, about 1 a realistic chat mix, 2 very skewed. The busiest GPU sets the step.",
    )
    redundant_experts: int = Field(
        default=0,
        ge=0,
        le=1024,
        description="For expert-parallel candidates, extra expert slots the engine's load balancer (EPLB) places "
        "the most popular experts in, as `recommender plan --redundant-experts` takes them (vLLM --eplb-config "
        "num_redundant_experts, SGLang --ep-num-redundant-experts); experts + redundant must split over every "
        "expert-parallel degree.",
    )
    decode_hardware: list[str] | None = Field(
        default=None,
        min_length=1,
        description="With disaggregated in `layout`, the GPUs a disaggregated candidate's decode pool is sampled from "
        "(a conditional Optuna parameter; a GPU other than the candidate's own prefill GPU is a pair of two GPU types, "
        "each pool at its own GPU's price, the KV over a network `link`), as `recommender plan --decode-hardware` "
        "pairs them. Left out: the space's catalog GPUs where `link` is a network link and it lists two or more, "
        "else the candidate's own GPU only (docs/search-layouts.md).",
    )
    decode_tensor_parallel: list[Annotated[int, Field(gt=0, le=MAX_TENSOR_PARALLEL)]] | None = Field(
        default=None,
        min_length=1,
        description="With disaggregated in `layout`, the tensor-parallel degrees a disaggregated candidate's decode "
        "pool is sampled at (a conditional Optuna parameter; the prefill pool runs the candidate's "
        "`tensor_parallel`), as `recommender plan` chooses each pool's degree. Left out: the `tensor_parallel` "
        "degrees where it lists two or more, else the candidate's own degree only. Engines that move the KV only "
        "between equal degrees (SGLang for a sliding-window model) prune the unequal pairs "
        "(docs/search-layouts.md).",
    )
    link: str = Field(
        default=DEFAULT_LINK,
        min_length=1,
        max_length=64,
        description="The link the KV cache crosses between a disaggregated candidate's pools, as `recommender plan "
        "--link` names it (recommender/perf/catalog/links.yaml): nvlink, pcie, infiniband-ndr, roce-400g.",
    )

    routing: list[RoutingPolicy] | None = Field(
        default=None,
        min_length=1,
        description="Router policies in front of the replicas to compare, as `recommender plan --routing` names them: "
        "round-robin (a plain load balancer), random, sticky (session affinity), prefix-aware (the longest cached "
        "prefix, SGLang's cache-aware router), load-aware (llm-d's default endpoint picker: queue depth, KV-cache "
        "usage and a prefix bonus, weighted 2/2/3; Dynamo's KV router). Each plan row is sized again as a "
        "fleet behind each policy, every replica with its own prefix cache (docs/levers.md). Left out: one replica's "
        "capacity into the traffic, its cache seeing every turn of every conversation.",
    )

    @model_validator(mode="before")
    @classmethod
    def _one_spelling(cls, data: Any) -> Any:
        refuse_both_spellings(data, "space", "schemes", "methods")
        return data

    @field_validator("schemes")
    @classmethod
    def _non_empty(cls, value: dict[str, list[str]]) -> dict[str, list[str]]:
        if not value or not any(value.values()):
            raise ValueError("no schemes to search; list at least one, e.g. bf16: [baseline]")
        for names in value.values():
            _refuse_repeats(names)
        return value

    @field_validator(
        "hardware",
        "batch_sizes",
        "tensor_parallel",
        "max_num_batched_tokens",
        "kv_cache_dtypes",
        "speculative",
        "layout",
        "decode_hardware",
        "decode_tensor_parallel",
        "routing",
    )
    @classmethod
    def _distinct(cls, value: list[Any] | None) -> list[Any] | None:
        return None if value is None else _refuse_repeats(value)


def _refuse_repeats(value: list[Any]) -> list[Any]:
    """A list of choices names each once. Refused rather than deduplicated: a repeat is usually a typo
    for another entry (h100-sxm twice where h100-pcie was meant), which dropping it would hide."""
    repeated = [str(v) for i, v in enumerate(value) if v in value[:i]]
    if repeated:
        raise ValueError(f"{repeated[0]} listed twice; list each choice once")
    return value
