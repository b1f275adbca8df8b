"""llm-d's files: for vLLM prefill and decode pools, the ModelService chart's values and, with a routing policy, the
router's InferencePool values (``router_config.py``) selecting those pools' pods.

- The ModelService values (llm-d/llm-d ``guides/pd-disaggregation/ms-pd/values.yaml`` @ 28719ceb): ``modelArtifacts``
  (``uri``, ``name``), ``routing`` (``servicePort: 8000``, the routing sidecar's ``proxy.connector: nixlv2``), and
  ``prefill``/``decode`` each with ``parallelism.tensor``, ``replicas`` and one ``vllm`` container (``modelCommand:
  vllmServe``, the pool's vLLM flags as ``args``, tensor parallelism first, ``--kv-transfer-config
  {"kv_connector":"NixlConnector", "kv_role":"kv_both"}``, ``VLLM_NIXL_SIDE_CHANNEL_HOST`` from the pod IP,
  ``nvidia.com/gpu`` limits); the chart sets the port, so ``--port`` is dropped.
- With a router, ``modelArtifacts.labels`` labels the pools' pods (``llm-d.ai/inference-serving: "true"`` and
  ``llm-d.ai/model``, as the guide's later values do, ``ms-pd/values.yaml`` @ 0b8cde64) and the InferencePool's
  ``modelServers.matchLabels`` selects them.

For an expert-parallel replica served by vLLM, the wide-EP ``LeaderWorkerSet`` (``expert_parallel.py`` asks for it):

- The LeaderWorkerSet (llm-d/llm-d ``guides/wide-ep-lws/modelserver/gpu/vllm/base/decode.yaml`` @ bd51f431): a
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
"""

from __future__ import annotations

import json
import shlex
from typing import TYPE_CHECKING

import yaml

from recommender.deploy.dynamo import without_node_flags
from recommender.deploy.manifest import Manifest, dump
from recommender.deploy.router_config import LLM_D_ROUTER_SOURCES, llm_d_router, model_label, model_labels
from recommender.engines._base import EngineLaunch
from recommender.engines.expert_parallel import ExpertParallelLaunch

if TYPE_CHECKING:
    from recommender.perf.sim.routing import RoutingPolicy

__all__ = [
    "LLM_D_EXPERT_PARALLEL_NOTE",
    "LLM_D_IMAGE",
    "LLM_D_SOURCE",
    "llm_d_expert_parallel",
    "llm_d_expert_parallel_router",
    "llm_d_pools",
    "llm_d_values",
    "not_deployed",
]

LLM_D_SOURCE = "llm-d/llm-d guides/pd-disaggregation/ms-pd/values.yaml @ 28719ceb"

#: Why llm-d's values are not emitted for expert-parallel pools (a vLLM worker with ``--enable-expert-parallel``).
LLM_D_EXPERT_PARALLEL_NOTE = (
    "llm-d's ModelService values are not emitted for an expert-parallel pool: llm-d deploys those as LeaderWorkerSets "
    "of data-parallel vLLM ranks (llm-d/llm-d guides/wide-ep-lws/manifests/modelserver/base/decode.yaml @ 3318b75d), "
    "not the ms-pd chart's values; deploy the commands above, or the Dynamo file"
)

#: llm-d's vLLM image; its tag is the user's (the guide pins a release).
LLM_D_IMAGE = "ghcr.io/llm-d/llm-d-cuda:${LLM_D_VERSION}"


def _llm_d_pool(vllm_command: str, replicas: int) -> tuple[dict[str, object], str]:
    """One pool of llm-d's ModelService values from its ``vllm serve`` command, and the model it serves."""
    argv = shlex.split(vllm_command)
    model, flags = argv[2], argv[3:]
    for flag in ("--port", "--tensor-parallel-size"):
        if flag in flags:
            at = flags.index(flag)
            flags = flags[:at] + flags[at + 2 :]
    tp = int(argv[argv.index("--tensor-parallel-size") + 1]) if "--tensor-parallel-size" in argv else 1
    connector = json.dumps({"kv_connector": "NixlConnector", "kv_role": "kv_both"})
    container = {
        "name": "vllm",
        "image": LLM_D_IMAGE,
        "modelCommand": "vllmServe",
        "args": ["--tensor-parallel-size", str(tp), *flags, "--kv-transfer-config", connector],
        "env": [{"name": "VLLM_NIXL_SIDE_CHANNEL_HOST", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}],
        "resources": {"limits": {"nvidia.com/gpu": str(tp)}, "requests": {"nvidia.com/gpu": str(tp)}},
        "mountModelVolume": True,
    }
    pool = {"parallelism": {"tensor": tp, "data": 1}, "create": True, "replicas": replicas, "containers": [container]}
    return pool, model


def llm_d_values(
    prefill_command: str,
    decode_command: str,
    prefill_workers: int,
    decode_workers: int,
    labels: dict[str, str] | None = None,
) -> str:
    """llm-d's ModelService values for vLLM prefill and decode pools (layout of its P/D guide's ``ms-pd``); `labels`
    on the pools' pods (None: the chart's own)."""
    prefill, model = _llm_d_pool(prefill_command, prefill_workers)
    decode, _ = _llm_d_pool(decode_command, decode_workers)
    artifacts: dict[str, object] = {"uri": f"hf://{model}", "name": model}
    if labels is not None:
        artifacts["labels"] = dict(labels)
    document = {
        "multinode": False,
        "modelArtifacts": artifacts,
        "routing": {"servicePort": 8000, "proxy": {"connector": "nixlv2"}},
        "decode": decode,
        "prefill": prefill,
    }
    return yaml.safe_dump(document, sort_keys=False)


def llm_d_pools(
    prefill_command: str,
    decode_command: str,
    workers: tuple[int, int],
    routing: RoutingPolicy | None,
) -> tuple[str, str, list[str]]:
    """The pools' ModelService values, the router's InferencePool values for `routing` ("" where none: no policy, or
    one llm-d has no setting for) and the notes that go with them (why not, where not emitted)."""
    model = shlex.split(prefill_command)[2]
    router, notes = llm_d_router(routing, disaggregated=True, labels=model_labels(model))
    labels = model_labels(model) if router else None
    return llm_d_values(prefill_command, decode_command, workers[0], workers[1], labels), router, notes


# The wide-EP LeaderWorkerSet of an expert-parallel replica.

#: The wide-EP LeaderWorkerSet's sources.
LLM_D_EP_SOURCES = [
    "llm-d/llm-d guides/wide-ep-lws/modelserver/gpu/vllm/base/decode.yaml @ bd51f431",
    "llm-d/llm-d guides/wide-ep-lws/modelserver/gpu/vllm-glm-5.2/base/aggregate.yaml @ 366e43cc",
    "vllm-project/vllm docs/serving/data_parallel_deployment.md @ 01e4fce0",
    "llm-d/llm-d guides/recipes/scheduler/base.values.yaml @ 955190d9",
    "llm-d/llm-d guides/wide-ep-lws/manifests/inferencepool.values.yaml @ bf917870",
]
#: vLLM's head-node data-parallel RPC port in the llm-d guide.
LLM_D_RPC_PORT = 5555


def not_deployed(framework: str, engine: str, why: str) -> EngineLaunch:
    """The entry of a file `framework` does not emit for `engine`, saying why."""
    return EngineLaunch(
        engine=f"{framework} (not emitted for {engine})",
        supported=False,
        command=None,
        notes=[f"no {framework} file for this {engine} replica: {why}"],
    )


def llm_d_expert_parallel_router(model: str, routing: RoutingPolicy | None) -> list[EngineLaunch]:
    """llm-d's InferencePool values in front of the LeaderWorkerSet's pods for `routing` (one default profile: each
    pod serves its own ranks, ``--data-parallel-hybrid-lb``), or why not; nothing without a policy."""
    values, notes = llm_d_router(routing, disaggregated=False, labels=model_labels(model))
    if routing is None:
        return []
    if not values:
        return [not_deployed("llm-d", f"the {routing} router", notes[0])]
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


def llm_d_expert_parallel(argv: list[str], layout: ExpertParallelLaunch, replicas: int) -> EngineLaunch:
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
        sources=list(LLM_D_EP_SOURCES),
    )
