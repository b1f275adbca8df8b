"""vLLM's parallel flags: tensor parallelism, or an expert-parallel replica with data-parallel attention.

Apart from ``vllm.py`` (as ``vllm_notes.py`` is) to keep that module to one screenful of logic per concern.
Verified against vllm-project/vllm:

- vllm/engine/arg_utils.py @ 99d7eb5 — the ParallelConfig group: ``--tensor-parallel-size/-tp``,
  ``--data-parallel-size/-dp``, ``--data-parallel-size-local`` ("Number of data parallel replicas to run on this
  node"), ``--data-parallel-start-rank`` ("Starting data parallel rank for secondary nodes"),
  ``--data-parallel-address`` ("Address of data parallel cluster head-node"), ``--data-parallel-rpc-port``,
  ``--enable-expert-parallel``, ``--enable-eplb``, ``--eplb-config``.
- docs/serving/expert_parallel_deployment.md @ 13642f1 — "EP_SIZE = TP_SIZE × DP_SIZE": with
  ``--enable-expert-parallel`` the MoE layers use expert parallelism over all the ranks' GPUs while attention keeps
  tensor parallelism within each rank (DeepSeek-V3 on 8 H200s: ``--tensor-parallel-size 1 --data-parallel-size 8
  --enable-expert-parallel``); several nodes run one command each, the first serving requests, the others
  ``--headless`` with ``--data-parallel-start-rank`` "the cumulative local DP size of previous nodes", all naming
  the head's ``--data-parallel-address`` and ``--data-parallel-rpc-port`` (the guide's 13345); EPLB:
  ``--enable-eplb --eplb-config '{"num_redundant_experts": N}'``; the all-to-all backend (``--all2all-backend``)
  defaults to ``allgather_reducescatter`` (DeepEP / pplx need their kernels installed).
- docs/serving/data_parallel_deployment.md @ 624b7af — "each DP rank is deployed as a separate 'core engine'
  process": each rank schedules its own batch, so ``--max-num-seqs`` is the batch cap of one attention rank.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from recommender.engines.expert_parallel import HEAD_NODE_ADDRESS

if TYPE_CHECKING:
    from recommender.engines._base import LaunchSettings, Option

__all__ = ["RPC_PORT", "expert_parallel_notes", "parallel_options", "parallel_refusal"]

#: The head node's data-parallel RPC port (the expert-parallel guide's example; any port every node reaches).
RPC_PORT = 13345


def parallel_refusal(settings: LaunchSettings) -> str:
    """Why vLLM's command is not emitted for this layout ('' when it is): one attention rank spanning nodes."""
    ep = settings.expert_parallel
    if ep is not None and ep.nodes > 1 and ep.attention_dp < ep.nodes:
        return (
            f"a tensor-parallel attention rank of {ep.attention_tp} GPUs spans nodes, which vLLM runs on a Ray cluster "
            "(--distributed-executor-backend ray), not emitted here; plan attention ranks of one node or fewer"
        )
    return ""


def parallel_options(settings: LaunchSettings) -> tuple[list[Option], list[str]]:
    """The parallel options and the switches (flags without a value) for `settings`."""
    ep = settings.expert_parallel
    if ep is None:
        return [("--tensor-parallel-size", settings.tensor_parallel)], []
    options: list[Option] = [("--tensor-parallel-size", ep.attention_tp)]
    if ep.attention_dp > 1:
        options.append(("--data-parallel-size", ep.attention_dp))
    switches = ["--enable-expert-parallel"]
    if ep.redundant_experts:
        switches.append("--enable-eplb")
        options.append(("--eplb-config", json.dumps({"num_redundant_experts": ep.redundant_experts})))
    if ep.nodes > 1:
        options += [
            ("--data-parallel-size-local", ep.ranks_per_node),
            ("--data-parallel-address", HEAD_NODE_ADDRESS),
            ("--data-parallel-rpc-port", RPC_PORT),
        ]
        if ep.node_rank:
            options.append(("--data-parallel-start-rank", ep.node_rank * ep.ranks_per_node))
            switches.append("--headless")
    return options, switches


def expert_parallel_notes(settings: LaunchSettings) -> list[str]:
    """What the command cannot say about an expert-parallel replica (none for tensor parallelism)."""
    ep = settings.expert_parallel
    if ep is None:
        return []
    notes = [
        f"--enable-expert-parallel splits the experts over all {ep.ep} GPUs (EP = TP {ep.attention_tp} x DP "
        f"{ep.attention_dp}); --max-num-seqs and --max-num-batched-tokens hold for each of the {ep.attention_dp} "
        "attention rank(s), each its own engine core. The all-to-all is vLLM's default --all2all-backend "
        "(allgather_reducescatter); DeepEP or pplx kernels, installed, may be faster.",
    ]
    if ep.nodes > 1:
        notes.append(
            f"node {ep.node_rank} of {ep.nodes}: run one command per node; set {HEAD_NODE_ADDRESS} to the first "
            f"node's address (port {RPC_PORT} reachable from every node); the first node serves the API, the others "
            "run --headless."
        )
    return notes
