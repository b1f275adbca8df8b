"""Whether a model config describes a transformer that can exist, checked before it is priced.

`ModelShape.from_config` trusts its config: zero heads divide by zero, a negative vocabulary
prices a negative lm_head, a hidden size the heads do not divide gives a fractional head
width. A config.json is user input (a file, a model directory, a hub download), so it is
checked here first (every field read, dense and mixture-of-experts, is typed in ``config_fields``),
and each problem refused naming the config field. Layouts the shape model does not cover are for
it to refuse. A valid shape may still not split across GPUs: ``tensor_parallel_refusal`` says why.

Also the work bound: a request that cannot fit the model's positions, or whose KV cache
alone cannot fit the largest catalog node, is refused before any model is loaded.
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import TYPE_CHECKING, Any

from recommender.errors import BadInputError
from recommender.perf.catalog.config_fields import check_config_fields

if TYPE_CHECKING:
    from recommender.perf.catalog.gpus import Catalog
    from recommender.perf.model.shape import ModelShape


def check_architecture(config: Any, *, field: str) -> None:
    """Refuse a config whose read fields are missing, of the wrong kind, non-positive, absurd, or inconsistent
    with each other (the typed declaration of every field read: ``config_fields.ConfigFields``)."""
    check_config_fields(config, field=field, required=True)


def tensor_parallel_refusal(shape: ModelShape, tensor_parallel: int) -> str | None:
    """Why `shape` cannot be split `tensor_parallel` ways, or None: every engine here shards attention by heads,
    so the query heads must divide by the degree, and the KV heads must divide by it or it by them (a KV head
    is then replicated, as vLLM and SGLang do)."""
    heads, kv_heads = shape.n_heads, shape.n_kv_heads
    if heads % tensor_parallel:
        return f"its {heads} attention heads do not split {tensor_parallel} ways"
    if kv_heads % tensor_parallel and tensor_parallel % kv_heads:
        return f"its {kv_heads} KV heads do not split {tensor_parallel} ways (nor does {tensor_parallel} split by them)"
    return None


def check_request_fits(
    config: Any, shape: ModelShape, catalog: Catalog, *, prompt_tokens: int, output_tokens: int, field: str
) -> None:
    """A request longer than the model's positions, or whose KV cache (at 1 byte per value) alone exceeds the
    largest catalog node, is refused naming the limit: no candidate could serve it."""
    tokens = prompt_tokens + output_tokens
    check_positions(config, tokens, field=field)
    largest = max((a.device_memory_gb * a.max_tensor_parallel for a in catalog.accelerators.values()), default=0.0)
    needed_gb = shape.kv_bytes_per_token(1.0) * tokens / 1e9
    if needed_gb > largest:
        raise BadInputError(field, f"one request's KV cache ({needed_gb:,.0f} GB at fp8) exceeds the largest catalog "
                            f"node ({largest:,.0f} GB)", "shorten the request")  # fmt: skip


def check_positions(config: Any, tokens: int, *, field: str) -> None:
    """A sequence longer than the model's positions (max_position_embeddings, where the config has it)."""
    positions = getattr(config, "max_position_embeddings", None)
    if isinstance(positions, int) and not isinstance(positions, bool) and tokens > positions:
        raise BadInputError(field, f"prompt + output tokens ({tokens}) exceed the model's {positions} positions "
                            "(max_position_embeddings)", "shorten the request")  # fmt: skip


def check_trace_fits(config: Any, traffic: Any, *, field_prefix: str) -> None:
    """A trace request (``traffic.profile.trace``) longer than the model's positions is refused naming its line:
    the engine would reject that request, so no fleet sized on the trace could serve it."""
    import numpy as np

    profile = getattr(traffic, "profile", None)
    positions = getattr(config, "max_position_embeddings", None)
    if profile is None or profile.requests is None or not isinstance(positions, int) or isinstance(positions, bool):
        return
    requests = profile.requests
    totals = np.asarray(requests.prompt_tokens, dtype=np.int64) + np.asarray(requests.output_tokens, dtype=np.int64)
    over = np.flatnonzero(totals > positions)
    if over.size:
        first = int(over[0])
        line = first + 1 + _header_lines(profile.trace)
        raise BadInputError(f"{field_prefix}traffic.profile.trace: {profile.trace.name} line {line}",
                            f"prompt + output tokens ({int(totals[first])}) exceed the model's {positions} positions "
                            f"(max_position_embeddings; {over.size} such requests in the trace)",
                            "drop or shorten those requests, or plan a model with a longer context")  # fmt: skip


def _header_lines(path: Path) -> int:
    """1 when the trace's first row is a header (its first field is not a number), else 0."""
    with path.open(encoding="utf-8-sig", newline="") as handle:
        first = next(csv.reader(handle), [""])
    try:
        float(first[0])
    except (ValueError, IndexError):
        return 1
    return 0
