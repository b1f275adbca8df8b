"""The deployment files of an expert-parallel replica: what a wide-EP user applies to Kubernetes, every value the row's.

The engine's own command (``expert_parallel.py`` and each engine's module) runs one node of one replica; a wide-EP
deployment is the framework's file that runs every node of every replica. Each file is built from the node-0 command
the engine emitted for the priced row (its flags already cited there), so its batch caps, KV dtype, DP/EP sizes and
EPLB slots are the row's; the framework adds the replicas, the nodes per replica and the GPUs per node.

- llm-d, for vLLM: a wide-EP ``LeaderWorkerSet`` (``llm_d.py``, its sources cited there).
- Dynamo: a ``DynamoGraphDeployment`` for each engine (``deploy/dynamo.py``, its sources cited there).

Not emitted, with the reason in a note: llm-d for SGLang (its wide-EP SGLang manifests are prefill/decode
``DisaggregatedSet`` pools, ``guides/wide-ep-lws/modelserver/gpu/sglang-deepseek-r1-0528/``, not one aggregated
replica) and for TensorRT-LLM (no llm-d guide serves it); any file where the engine emitted no command.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from typing import TYPE_CHECKING

from recommender.deploy.dynamo import (
    dynamo_sglang,
    dynamo_trtllm,
    dynamo_vllm,
)
from recommender.deploy.llm_d import llm_d_expert_parallel, llm_d_expert_parallel_router, not_deployed
from recommender.engines._base import EngineLaunch
from recommender.engines.expert_parallel import ExpertParallelLaunch

if TYPE_CHECKING:
    from recommender.perf.sim.routing import RoutingPolicy

__all__ = ["DEPLOY_FRAMEWORKS", "deployment_entries", "expert_parallel_deployments"]

#: The names a deployment entry's `EngineLaunch.engine` starts with.
DEPLOY_FRAMEWORKS = ("llm-d", "Dynamo")


def deployment_entries(entries: Sequence[EngineLaunch]) -> list[EngineLaunch]:
    """The framework entries (files and the notes of files not emitted) among a launch's entries."""
    return [e for e in entries if e.engine.startswith(DEPLOY_FRAMEWORKS)]


def expert_parallel_deployments(
    engine: str,
    node_zero: EngineLaunch | None,
    *,
    layout: ExpertParallelLaunch,
    replicas: int,
    routing: RoutingPolicy | None = None,
) -> list[EngineLaunch]:
    """The llm-d and Dynamo files for `replicas` replicas of `layout`, built from `engine`'s node-0 command
    `node_zero`; where a framework does not deploy it, an unsupported entry saying why. Empty without a command.
    `routing`: the router policy the plan counted its hits for, in Dynamo's Frontend and, for vLLM, llm-d's
    InferencePool values after its LeaderWorkerSet (None: the files as the frameworks default them)."""
    if node_zero is None or not node_zero.supported or node_zero.command is None:
        return []
    argv = shlex.split(node_zero.command)
    if engine == "vllm":
        return [
            llm_d_expert_parallel(argv, layout, replicas),
            *llm_d_expert_parallel_router(argv[2], routing),
            dynamo_vllm(argv, layout, replicas, routing),
        ]
    if engine == "sglang":
        why = "its wide-EP SGLang manifests are prefill/decode DisaggregatedSet pools, not one aggregated replica"
        return [dynamo_sglang(argv, layout, replicas, routing), not_deployed("llm-d", engine, why)]
    if engine == "trtllm":
        return [
            dynamo_trtllm(argv, node_zero.config_yaml, layout, replicas, routing),
            not_deployed("llm-d", engine, "no llm-d guide serves TensorRT-LLM"),
        ]
    return []
