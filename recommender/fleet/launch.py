"""The launch commands of a recommended candidate, in every serving engine that has its scheme: an aggregated
replica's (`launch_commands`) or an expert-parallel replica's, one command per node (`expert_parallel_launch`)."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from recommender.config.candidate import DEFAULT_MAX_BATCHED_TOKENS
from recommender.deploy.expert_parallel import expert_parallel_deployments
from recommender.deploy.router_config import plain_service_note
from recommender.engines import EngineLaunch, LaunchSettings, emit_all
from recommender.engines.expert_parallel import ExpertParallelLaunch
from recommender.engines.kernels import compute_dtype
from recommender.perf.model.memory import DEFAULT_GPU_MEMORY_UTILIZATION
from recommender.quantize import get_scheme

if TYPE_CHECKING:
    from recommender.config.candidate import Candidate
    from recommender.device import DeviceInfo
    from recommender.fleet.layouts.expert_parallel_plan import ExpertParallelRow
    from recommender.perf.sim.routing import RoutingPolicy


def launch_commands(
    candidate: Candidate,
    *,
    model: str,
    max_model_len: int,
    checkpoint: str | None = None,
    device: DeviceInfo | None = None,
    engine: str = "",
    routing: RoutingPolicy | None = None,
) -> list[EngineLaunch]:
    """Each engine's command (or its plain refusal) for `candidate`, `engine`'s first (the one its estimate is for).

    Args:
        candidate: the recommended configuration.
        model: the original model (hub id or directory).
        max_model_len: the traffic's longest request, prompt + output tokens (`Traffic.max_model_len`) — what
            the memory model sized the KV cache for; a note says to raise it for longer requests.
        checkpoint: the checkpoint directory of a checkpoint scheme; it replaces `model` as the
            served model (engines read the scheme from its config.json).
        device: the GPU it runs on; an engine that does not serve the scheme there as measured refuses.
        engine: the engine the latencies and price were estimated for ('' keeps the engines' order).
        routing: the router policy in front of the replicas the plan counted its prefix-cache hits for; the
            commands come with no router file, so each says what a plain Service in front gives up (None: no note).
    """
    method = candidate.base_scheme
    served = checkpoint if checkpoint is not None and method.checkpoint_format is not None else model
    settings = LaunchSettings(
        model=served,
        method=method,
        dtype=compute_dtype(method),
        tensor_parallel=candidate.tensor_parallel,
        max_num_seqs=candidate.batch_size,
        max_num_batched_tokens=max(candidate.max_num_batched_tokens, candidate.batch_size),
        kv_cache_dtype=candidate.kv_cache_dtype,
        gpu_memory_utilization=DEFAULT_GPU_MEMORY_UTILIZATION,
        max_model_len=max_model_len,
        device=device,
        speculative=candidate.speculative,
    )
    emitted = sorted(emit_all(settings), key=lambda e: e.engine != engine)  # stable: the rest keep their order
    extra = [_length_note(max_model_len), *([plain_service_note(routing)] if routing is not None else [])]
    return [replace(e, notes=[*e.notes, *extra]) if e.supported else e for e in emitted]


def _length_note(max_model_len: int) -> str:
    return (
        f"max_model_len {max_model_len} = the traffic profile's prompt + output tokens; "
        "raise it for longer requests (the KV cache must hold one full request)"
    )


def expert_parallel_launch(
    row: ExpertParallelRow,
    *,
    model: str,
    max_model_len: int,
    gpus_per_node: int,
    checkpoint: str | None = None,
    device: DeviceInfo | None = None,
    routing: RoutingPolicy | None = None,
) -> list[EngineLaunch]:
    """Each engine's commands for the expert-parallel replica `row` priced, `row.engine`'s first; never the
    aggregated tensor-parallel command. A replica spanning nodes has one entry per node, named
    "<engine> node <i> of <n>" (one entry where one command starts them all); an engine that does not launch it
    answers once with its refusal; then the llm-d and Dynamo files deploying `row.replicas` replicas
    (``deploy/expert_parallel.py``). Empty when the row serves nothing. `model`, `checkpoint`, `device`: as
    `launch_commands`; `gpus_per_node`: the node's GPUs; `routing`: the router policy the frameworks' files carry (None:
    their defaults)."""
    if not row.engine or row.ep is None or row.attention_dp is None or row.batch_size_per_rank is None:
        return []
    method = get_scheme(row.method)
    layout = ExpertParallelLaunch(
        ep=row.ep, attention_dp=row.attention_dp, redundant_experts=row.redundant_experts, gpus_per_node=gpus_per_node
    )
    settings = LaunchSettings(
        model=checkpoint if checkpoint is not None and method.checkpoint_format is not None else model,
        method=method,
        dtype=compute_dtype(method),
        tensor_parallel=row.ep,
        max_num_seqs=row.batch_size_per_rank,
        max_num_batched_tokens=max(DEFAULT_MAX_BATCHED_TOKENS, row.batch_size_per_rank),  # as the planner simulated
        kv_cache_dtype=row.kv_cache_dtype,
        gpu_memory_utilization=DEFAULT_GPU_MEMORY_UTILIZATION,
        max_model_len=max_model_len,
        device=device,
        expert_parallel=layout,
    )
    nodes = [emit_all(replace(settings, expert_parallel=replace(layout, node_rank=r))) for r in range(layout.nodes)]
    found: list[EngineLaunch] = []
    for i, first in enumerate(nodes[0]):
        if not first.supported:
            found.append(first)
            continue
        if all(node[i].command == first.command for node in nodes):  # one command starts every node (TensorRT-LLM)
            found.append(replace(first, notes=[*first.notes, _length_note(max_model_len)]))
            continue
        for r, node in enumerate(nodes):
            name = first.engine if layout.nodes == 1 else f"{first.engine} node {r} of {layout.nodes}"
            found.append(replace(node[i], engine=name, notes=[*node[i].notes, _length_note(max_model_len)]))
    found.sort(key=lambda e: e.engine.split(" ")[0] != row.engine)  # stable: the rest keep their order
    # The frameworks' deployment files (llm-d, Dynamo) of the row's engine, from its node-0 command, after it.
    node_zero = next((e for e in found if e.engine.split(" ")[0] == row.engine and e.command), None)
    deployments = expert_parallel_deployments(
        row.engine, node_zero, layout=layout, replicas=row.replicas or 1, routing=routing
    )
    return found + deployments


def launch_text(entries: list[EngineLaunch], engine: str) -> str:
    """`engine`'s command ("" where it has none); for a replica spanning nodes, each node's command under a
    ``# <engine> node <i> of <n>`` line (a shell comment: the text pastes into a script as it is)."""
    mine = [e for e in entries if e.command and e.engine.split(" ")[0] == engine]
    if len(mine) == 1:
        return mine[0].command or ""
    return "\n".join(f"# {e.engine}\n{e.command}" for e in mine)
