"""The deployment files of an expert-parallel replica: what a wide-EP user applies to Kubernetes, every value the row's.

The engine's own command (``expert_parallel.py`` and each engine's module) runs one node of one replica; a wide-EP
deployment is the framework's file that runs every node of every replica. Each file is built from the node-0 command
the engine emitted for the priced row (its flags already cited there), so its batch caps, KV dtype, DP/EP sizes and
EPLB slots are the row's; the framework adds the replicas, the nodes per replica and the GPUs per node.

- llm-d, for vLLM (llm-d/llm-d ``guides/wide-ep-lws/modelserver/gpu/vllm/base/decode.yaml`` @ bd51f431): a
  ``LeaderWorkerSet`` (``leaderworkerset.x-k8s.io/v1``) whose ``spec.replicas`` are the replicas and
  ``leaderWorkerTemplate.size`` the nodes of one, each pod ``nvidia.com/gpu`` one node's GPUs, running ``exec vllm
  serve MODEL ... --data-parallel-hybrid-lb --enable-expert-parallel --data-parallel-size-local $DP_SIZE_LOCAL
  --data-parallel-address ${LWS_LEADER_ADDRESS} --data-parallel-start-rank $START_RANK`` with the guide's start rank
  of a worker pod (``LWS_WORKER_INDEX``, 0 where unset, times ``DP_SIZE_LOCAL``), the ``dshm`` memory volume ("roughly
  32MB per local DP") and ``IPC_LOCK``/``SYS_RAWIO``; ``HF_TOKEN`` from the ``llm-d-hf-token`` secret (the guide's
  README @ a7c817b8). That guide is prefill/decode; the row is one aggregated replica, so the P/D parts (the routing
  sidecar, ``--kv_transfer_config`` NixlConnector) are left out and the role is ``aggregate``, as llm-d's aggregated
  wide-EP LWS lays it out (``guides/wide-ep-lws/modelserver/gpu/vllm-glm-5.2/base/aggregate.yaml`` @ 366e43cc: vLLM on
  port 8000, ``llm-d.ai/role: aggregate``). Hybrid load balancing: "each node runs its own API server(s) that only
  queue requests to the data-parallel engines colocated on that node", "not compatible with --headless"
  (vllm-project/vllm ``docs/serving/data_parallel_deployment.md`` @ 01e4fce0), so every pod serves and llm-d's router
  spreads requests over them: its InferencePool selects the pods by label (``inferencePool.modelServers
  .matchLabels``, ``guides/wide-ep-lws/manifests/inferencepool.values.yaml`` @ bf917870, whose scheduling profiles are
  prefill/decode; ``guides/recipes/scheduler/base.values.yaml`` @ 955190d9 is the plain scheduler).
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
    without_node_flags,
)
from recommender.deploy.manifest import Manifest, dump
from recommender.deploy.router_config import LLM_D_ROUTER_SOURCES, llm_d_router, model_label, model_labels
from recommender.engines._base import EngineLaunch
from recommender.engines.expert_parallel import ExpertParallelLaunch

if TYPE_CHECKING:
    from recommender.perf.sim.routing import RoutingPolicy

__all__ = ["DEPLOY_FRAMEWORKS", "deployment_entries", "expert_parallel_deployments"]

#: The names a deployment entry's `EngineLaunch.engine` starts with.
DEPLOY_FRAMEWORKS = ("llm-d", "Dynamo")

LLM_D_SOURCES = [
    "llm-d/llm-d guides/wide-ep-lws/modelserver/gpu/vllm/base/decode.yaml @ bd51f431",
    "llm-d/llm-d guides/wide-ep-lws/modelserver/gpu/vllm-glm-5.2/base/aggregate.yaml @ 366e43cc",
    "vllm-project/vllm docs/serving/data_parallel_deployment.md @ 01e4fce0",
    "llm-d/llm-d guides/recipes/scheduler/base.values.yaml @ 955190d9",
    "llm-d/llm-d guides/wide-ep-lws/manifests/inferencepool.values.yaml @ bf917870",
]
#: llm-d's vLLM image; its tag is the user's (the guide pins a release).
LLM_D_IMAGE = "ghcr.io/llm-d/llm-d-cuda:${LLM_D_VERSION}"
#: vLLM's head-node data-parallel RPC port in the llm-d guide.
LLM_D_RPC_PORT = 5555


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
            _llm_d_vllm(argv, layout, replicas),
            *_llm_d_router(argv[2], routing),
            dynamo_vllm(argv, layout, replicas, routing),
        ]
    if engine == "sglang":
        why = "its wide-EP SGLang manifests are prefill/decode DisaggregatedSet pools, not one aggregated replica"
        return [dynamo_sglang(argv, layout, replicas, routing), _not_deployed("llm-d", engine, why)]
    if engine == "trtllm":
        return [
            dynamo_trtllm(argv, node_zero.config_yaml, layout, replicas, routing),
            _not_deployed("llm-d", engine, "no llm-d guide serves TensorRT-LLM"),
        ]
    return []


def _llm_d_router(model: str, routing: RoutingPolicy | None) -> list[EngineLaunch]:
    """llm-d's InferencePool values in front of the LeaderWorkerSet's pods for `routing` (one default profile: each
    pod serves its own ranks, ``--data-parallel-hybrid-lb``), or why not; nothing without a policy."""
    values, notes = llm_d_router(routing, disaggregated=False, labels=model_labels(model))
    if routing is None:
        return []
    if not values:
        return [_not_deployed("llm-d", f"the {routing} router", notes[0])]
    return [
        EngineLaunch(
            engine=f"llm-d InferencePool values ({routing} router in front of the replicas' pods)",
            supported=True,
            command=None,
            config_yaml=values,
            notes=notes,
            sources=list(LLM_D_ROUTER_SOURCES),
        )
    ]


def _not_deployed(framework: str, engine: str, why: str) -> EngineLaunch:
    return EngineLaunch(
        engine=f"{framework} (not emitted for {engine})",
        supported=False,
        command=None,
        notes=[f"no {framework} file for this {engine} replica: {why}"],
    )


def _llm_d_script(model: str, flags: list[str], layout: ExpertParallelLaunch) -> str:
    """The container's shell script: clear /dev/shm, then ``exec vllm serve`` (each pod its ranks, across nodes)."""
    lines = ["find /dev/shm -type f -delete"]
    serve = shlex.join(["vllm", "serve", model, "--port", "8000", *flags])
    if layout.nodes > 1:
        # Shell arithmetic reads an unset variable as 0: the guide's default for LWS_WORKER_INDEX spelled out.
        lines.append("START_RANK=$(( LWS_WORKER_INDEX * DP_SIZE_LOCAL ))")
        serve += (
            f" --data-parallel-hybrid-lb --data-parallel-size-local {layout.ranks_per_node}"
            f' --data-parallel-address "${{LWS_LEADER_ADDRESS}}" --data-parallel-rpc-port {LLM_D_RPC_PORT}'
            ' --data-parallel-start-rank "$START_RANK"'
        )
    return "\n".join([*lines, f"exec {serve}"])


def _llm_d_container(model: str, flags: list[str], layout: ExpertParallelLaunch) -> Manifest:
    """The LeaderWorkerSet pod's vLLM container: the guide's script, secret, ports, GPUs and /dev/shm."""
    gpus = str(min(layout.ep, layout.gpus_per_node))
    return {
        "name": "vllm",
        "image": LLM_D_IMAGE,
        "securityContext": {"capabilities": {"add": ["IPC_LOCK", "SYS_RAWIO"]}, "runAsGroup": 0, "runAsUser": 0},
        "command": ["/bin/bash", "-c"],
        "args": [_llm_d_script(model, flags, layout)],
        "env": [
            {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "llm-d-hf-token", "key": "HF_TOKEN"}}},
            {"name": "DP_SIZE_LOCAL", "value": str(layout.ranks_per_node)},
        ],
        "ports": [{"containerPort": 8000, "name": "modelserver", "protocol": "TCP"}],
        "readinessProbe": {"httpGet": {"path": "/v1/models", "port": "modelserver"}, "periodSeconds": 10},
        "resources": {"limits": {"nvidia.com/gpu": gpus}, "requests": {"nvidia.com/gpu": gpus}},
        "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"}],
    }


def _llm_d_vllm(argv: list[str], layout: ExpertParallelLaunch, replicas: int) -> EngineLaunch:
    """llm-d's wide-EP LeaderWorkerSet for `replicas` aggregated vLLM replicas of `layout`."""
    model, flags = argv[2], without_node_flags(argv[3:])
    gpus = min(layout.ep, layout.gpus_per_node)
    labels = {"llm-d.ai/model": model_label(model), "llm-d.ai/role": "aggregate"}
    document = {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {"name": f"{model_label(model)}-vllm-ep{layout.ep}", "labels": labels},
        "spec": {
            "replicas": replicas,
            "leaderWorkerTemplate": {
                "size": layout.nodes,
                "workerTemplate": {
                    "metadata": {
                        "labels": {**labels, "llm-d.ai/inference-serving": "true", "llm-d.ai/guide": "wide-ep-lws"}
                    },
                    "spec": {
                        "volumes": [{"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "2Gi"}}],
                        "containers": [_llm_d_container(model, flags, layout)],
                    },
                },
            },
        },
    }
    notes = [
        f"{replicas} replica(s) of {layout.nodes} pod(s) x {gpus} GPUs (EP {layout.ep}, {layout.attention_dp} "
        "attention rank(s)); apply with the LeaderWorkerSet controller installed; put llm-d's router in front (the "
        "Gateway API Inference Extension chart with llm-d's guides/recipes/scheduler/base.values.yaml, its "
        "inferencePool.modelServers.matchLabels llm-d.ai/inference-serving: 'true' and llm-d.ai/model: "
        f"{model_label(model)}, port 8000; the wide-EP guide's own scheduler values route prefill/decode, not this "
        "aggregated replica)",
        "the guide's prefill/decode parts (routing sidecar, NixlConnector) are left out: this is one aggregated "
        "replica; its DeepEP all-to-all (--all2all-backend deepep_low_latency, NVSHMEM over IBGDA) is not what was "
        "priced, and needs all-to-all RDMA between every NIC",
    ]
    if layout.nodes > 1:
        notes.append(
            "every pod serves its own ranks' API (--data-parallel-hybrid-lb); set GLOO_SOCKET_IFNAME and "
            "NCCL_SOCKET_IFNAME to the pods' interface if it is not the default"
        )
    return EngineLaunch(
        engine=f"llm-d wide-EP LeaderWorkerSet (vllm, {replicas} x {layout.nodes} node(s))",
        supported=True,
        command=None,
        config_yaml=dump(document),
        notes=notes,
        sources=list(LLM_D_SOURCES),
    )
