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

from typing import TYPE_CHECKING, Any

from recommender.errors import BadInputError
from recommender.perf.catalog.config_fields import check_config_fields

if TYPE_CHECKING:
    from recommender.perf.catalog.gpus import Accelerator, Catalog
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
    if shape.recurrent is not None and shape.recurrent.n_recurrent:
        mixer = shape.recurrent.mixer
        split = next((n for n in mixer.split_heads if n % tensor_parallel and tensor_parallel % n), None)
        if split is not None:
            return f"its {mixer.name} layers' {split} heads/groups do not split {tensor_parallel} ways"
    for kv in sorted({kv_heads, shape.widths(windowed=True)[0]}):  # Gemma-4: each layer kind's KV heads
        if kv % tensor_parallel and tensor_parallel % kv:
            return f"its {kv} KV heads do not split {tensor_parallel} ways (nor does {tensor_parallel} split by them)"
    return None


def check_request_fits(
    config: Any,
    shape: ModelShape,
    catalog: Catalog,
    *,
    prompt_tokens: int,
    output_tokens: int,
    field: str,
    what: str = "prompt + output tokens",
    fix: str = "shorten the request",
) -> None:
    """A request longer than the model's positions, or whose KV cache (at 1 byte per value) alone exceeds the
    largest catalog node, is refused naming the limit: no candidate could serve it. `what` and `fix` say it in
    the words of the field that set the length (a conversation's last turn, a request)."""
    tokens = prompt_tokens + output_tokens
    check_positions(config, tokens, field=field, what=what, fix=fix)
    largest = max((a.device_memory_gb * a.max_tensor_parallel for a in catalog.accelerators.values()), default=0.0)
    needed_gb = shape.kv_bytes_per_token(1.0) * tokens / 1e9
    if needed_gb > largest:
        raise BadInputError(
            field,
            f"one request's KV cache ({needed_gb:,.0f} GB at fp8) exceeds the largest catalog node ({largest:,.0f} GB)",
            fix,
        )


def check_positions(
    config: Any, tokens: int, *, field: str, what: str = "prompt + output tokens", fix: str = "shorten the request"
) -> None:
    """A sequence longer than the model's positions (max_position_embeddings, where the config has it)."""
    positions = getattr(config, "max_position_embeddings", None)
    if isinstance(positions, int) and not isinstance(positions, bool) and tokens > positions:
        raise BadInputError(
            field, f"{what} ({tokens}) exceed the model's {positions} positions (max_position_embeddings)", fix
        )


def check_traffic_fits(config: Any, shape: ModelShape, catalog: Catalog, traffic: Any, *, field_prefix: str) -> None:
    """The spec's traffic against the model, each value where it is used: the constant request (a conversation's
    last turn, named as ``traffic.conversation``), then every trace row (and, in a conversation, the last turn it
    starts). `traffic` is the spec's ``Traffic`` (config sits above perf, so it is not imported here). With a
    trace the rows are what is served: each is checked by its line, and the means (the constant fields' defaults)
    are not, since a refusal must name what the user wrote, and the mean of the rows is not a request."""
    profile = getattr(traffic, "profile", None)
    if profile is not None and profile.requests is not None:
        check_trace_fits(config, traffic, field_prefix=field_prefix)
        if traffic.conversation is None:  # the longest row's KV cache against the largest node
            longest = max(
                p + o for p, o in zip(profile.requests.prompt_tokens, profile.requests.output_tokens, strict=True)
            )
            check_request_fits(
                config,
                shape,
                catalog,
                prompt_tokens=longest,
                output_tokens=0,
                field=f"{field_prefix}traffic.profile.trace",
                what="the trace's longest request",
                fix="drop or shorten the longest requests",
            )
        return
    if traffic.conversation is None:
        check_request_fits(
            config,
            shape,
            catalog,
            prompt_tokens=traffic.prompt_tokens,
            output_tokens=traffic.output_tokens,
            field=f"{field_prefix}traffic.prompt_tokens",
        )
    else:
        turns = traffic.conversation.turns
        check_request_fits(
            config,
            shape,
            catalog,
            prompt_tokens=traffic.longest_prompt_tokens,
            output_tokens=traffic.output_tokens,
            field=f"{field_prefix}traffic.conversation",
            what=f"turn {turns}'s prompt (its history) + output tokens",
            fix="fewer turns, shorter messages or a shorter first prompt",
        )


def check_trace_fits(config: Any, traffic: Any, *, field_prefix: str) -> None:
    """A trace request (``traffic.profile.trace``) longer than the model's positions is refused naming its line:
    the engine would reject that request, so no fleet sized on the trace could serve it. In a conversation each
    row is a first turn and its last turn is checked, answers as long as the trace's longest output."""
    import numpy as np

    profile = getattr(traffic, "profile", None)
    positions = getattr(config, "max_position_embeddings", None)
    if profile is None or profile.requests is None or not isinstance(positions, int) or isinstance(positions, bool):
        return
    requests, conversation = profile.requests, getattr(traffic, "conversation", None)
    prompts = np.asarray(requests.prompt_tokens, dtype=np.int64)
    outputs = np.asarray(requests.output_tokens, dtype=np.int64)
    what = "prompt + output tokens"
    if conversation is not None:  # each row starts a conversation; its answers are drawn from the trace's outputs
        longest = int(outputs.max())
        prompts = prompts + (conversation.turns - 1) * (longest + conversation.message_tokens)
        outputs = np.full_like(outputs, longest)
        what = f"the last turn's prompt + output tokens (after {conversation.turns - 1} answers and messages)"
    totals = prompts + outputs
    over = np.flatnonzero(totals > positions)
    if over.size:
        first = int(over[0])
        row = f"{profile.trace.name} line {requests.line_of(first)}"
        where = f"{field_prefix}traffic.profile.trace: {row}"
        if conversation is not None:
            where = f"{field_prefix}traffic.conversation (started by {row})"
        raise BadInputError(
            where,
            f"{what} ({int(totals[first])}) exceed the model's {positions} positions "
            f"(max_position_embeddings; {over.size} such requests in the trace)",
            "drop or shorten those requests, or plan a model with a longer context",
        )


def check_speculation_fits(config: Any, prompt_tokens: int, new_tokens: int, *, field_prefix: str) -> None:
    """The speculation measurement's prompt + generated tokens within the model's positions: past them the
    acceptance would be measured where the model has no position embeddings, not on text it can serve."""
    positions = getattr(config, "max_position_embeddings", None)
    if isinstance(positions, int) and not isinstance(positions, bool) and prompt_tokens + new_tokens > positions:
        raise BadInputError(
            f"{field_prefix}speculation",
            f"prompt_tokens + new_tokens ({prompt_tokens} + "
            f"{new_tokens}) exceed the model's {positions} positions (max_position_embeddings)",
            f"make prompt_tokens + new_tokens at most {positions}",
        )


def check_tensor_parallel(shape: ModelShape, accel: Accelerator, tp: int, *, field: str = "--tensor-parallel") -> None:
    """BadInputError unless degree `tp` fits a node of `accel` and splits `shape`'s heads (the fix names the degrees
    that do): what `plan` and `estimate` both check before simulating."""

    if tp > accel.max_tensor_parallel:
        raise BadInputError(
            field, f"{tp} > {accel.max_tensor_parallel} GPUs per node on {accel.key}", "pick a smaller degree"
        )
    if (split := tensor_parallel_refusal(shape, tp)) is not None:
        fits = [d for d in range(1, accel.max_tensor_parallel + 1) if tensor_parallel_refusal(shape, d) is None]
        raise BadInputError(field, f"{tp}: {split}", f"pick a degree that splits them: {', '.join(map(str, fits))}")
