"""The deployment files of an expert-parallel replica: what a wide-EP user applies to Kubernetes, every value the row's.

The engine's own command (``expert_parallel.py`` and each engine's module) runs one node of one replica; a wide-EP
deployment is the framework's file that runs every node of every replica. Each file is built from the node-0 command
the engine emitted for the priced row (its flags already cited there), so its batch caps, KV dtype, DP/EP sizes and
EPLB slots are the row's; the framework adds the replicas, the nodes per replica and the GPUs per node.

- llm-d, for vLLM (llm-d/llm-d ``guides/wide-ep-lws/modelserver/gpu/vllm/base/decode.yaml`` @ bd51f431): a
  ``LeaderWorkerSet`` (``leaderworkerset.x-k8s.io/v1``) whose ``spec.replicas`` are the replicas and
  ``leaderWorkerTemplate.size`` the nodes of one, each pod ``nvidia.com/gpu`` one node's GPUs, running
  ``exec vllm serve MODEL ... --data-parallel-hybrid-lb --enable-expert-parallel --data-parallel-size-local
  $DP_SIZE_LOCAL --data-parallel-address ${LWS_LEADER_ADDRESS} --data-parallel-start-rank $START_RANK`` with
  ``START_RANK=$(( ${LWS_WORKER_INDEX:-0} * DP_SIZE_LOCAL ))``, the ``dshm`` memory volume ("roughly 32MB per local
  DP") and ``IPC_LOCK``/``SYS_RAWIO``; ``HF_TOKEN`` from the ``llm-d-hf-token`` secret (the guide's README @
  a7c817b8). That guide is prefill/decode; the row is one aggregated replica, so the P/D parts (the routing sidecar,
  ``--kv_transfer_config`` NixlConnector) are left out and the role is ``aggregate``, as llm-d's aggregated wide-EP
  LWS lays it out (``guides/wide-ep-lws/modelserver/gpu/vllm-glm-5.2/base/aggregate.yaml`` @ 366e43cc: vLLM on
  port 8000, ``llm-d.ai/role: aggregate``). Hybrid load balancing: "each node runs its own API server(s) that only
  queue requests to the data-parallel engines colocated on that node", "not compatible with --headless"
  (vllm-project/vllm ``docs/serving/data_parallel_deployment.md`` @ 01e4fce0), so every pod serves and llm-d's
  router spreads requests over them.
- Dynamo (ai-dynamo/dynamo): a ``DynamoGraphDeployment`` with a ``Frontend`` and one worker service whose
  ``replicas`` are the replicas, ``multinode.nodeCount`` the nodes of one (beyond one node) and
  ``resources.limits.gpu`` one node's GPUs ("Total GPUs: multinode.nodeCount x gpu",
  ``docs/kubernetes/deployment/multinode-deployment.md`` @ 429f4b22). Across nodes the operator injects vLLM's
  ``--data-parallel-address/-size-local/-rpc-port/-start-rank`` and SGLang's ``--dist-init-addr --nnodes
  --node-rank`` (same file), so those are left out, and TensorRT-LLM runs under the operator's ``mpirun``.
  vLLM: ``python3 -m dynamo.vllm --model MODEL`` with the engine flags (``examples/backends/vllm/deploy/agg.yaml``
  @ c6fcf991, service ``VllmDecodeWorker``), ``--data-parallel-hybrid-lb`` across nodes as the DeepSeek-R1 recipe
  (``recipes/deepseek-r1/vllm/disagg/deploy_hopper_16gpu.yaml`` @ ecd29799: ``multinode.nodeCount: 2``, ``gpu: "8"``,
  ``--data-parallel-size 16 --enable-expert-parallel --enable-eplb``). SGLang: ``python3 -m dynamo.sglang`` takes
  every SGLang server flag (``components/src/dynamo/sglang/args.py`` @ d3aac630: ``ServerArgs.add_cli_args``;
  ``recipes/deepseek-r1/sglang-wideep/tep16p-dep16d-disagg.yaml`` @ 1cc36a62: ``--tp 16 --dp 16
  --enable-dp-attention --ep-size 16`` over ``nodeCount: 2``; ``examples/backends/sglang/deploy/agg.yaml`` @
  4f5cb2ab, service ``decode``). TensorRT-LLM: a ConfigMap ``config.yaml`` mounted at ``/config`` and
  ``python3 -m dynamo.trtllm --model-path MODEL --served-model-name MODEL --extra-engine-args /config/config.yaml``
  (``recipes/deepseek-r1/trtllm/agg/b200/deploy.yaml`` @ d9247523: DeepSeek-R1 "TP=8 EP=8 ADP",
  ``tensor_parallel_size``, ``moe_expert_parallel_size``, ``enable_attention_dp``, ``max_batch_size``,
  ``max_num_tokens``, ``kv_cache_config``); trtllm-serve's flags become those LLM-API keys as ``get_llm_args``
  builds them (NVIDIA/TensorRT-LLM ``tensorrt_llm/commands/serve.py`` @ 4c05a74: ``--tp_size`` ->
  ``tensor_parallel_size``, ``--ep_size`` -> ``moe_expert_parallel_size``, ``--max_seq_len`` -> ``max_seq_len``,
  ``--kv_cache_free_gpu_memory_fraction`` -> ``kv_cache_config.free_gpu_memory_fraction``).

Not emitted, with the reason in a note: llm-d for SGLang (its wide-EP SGLang manifests are prefill/decode
``DisaggregatedSet`` pools, ``guides/wide-ep-lws/modelserver/gpu/sglang-deepseek-r1-0528/``, not one aggregated
replica) and for TensorRT-LLM (no llm-d guide serves it); any file where the engine emitted no command.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from typing import Any

import yaml

from recommender.engines._base import EngineLaunch
from recommender.engines.expert_parallel import ExpertParallelLaunch

__all__ = ["DEPLOY_FRAMEWORKS", "deployment_entries", "expert_parallel_deployments"]

#: A Kubernetes manifest (or a part of one) as YAML-ready data.
Manifest = dict[str, Any]

#: The names a deployment entry's `EngineLaunch.engine` starts with.
DEPLOY_FRAMEWORKS = ("llm-d", "Dynamo")

LLM_D_SOURCES = [
    "llm-d/llm-d guides/wide-ep-lws/modelserver/gpu/vllm/base/decode.yaml @ bd51f431",
    "llm-d/llm-d guides/wide-ep-lws/modelserver/gpu/vllm-glm-5.2/base/aggregate.yaml @ 366e43cc",
    "vllm-project/vllm docs/serving/data_parallel_deployment.md @ 01e4fce0",
]
DYNAMO_SOURCES = {
    "vllm": [
        "ai-dynamo/dynamo examples/backends/vllm/deploy/agg.yaml @ c6fcf991",
        "ai-dynamo/dynamo recipes/deepseek-r1/vllm/disagg/deploy_hopper_16gpu.yaml @ ecd29799",
    ],
    "sglang": [
        "ai-dynamo/dynamo examples/backends/sglang/deploy/agg.yaml @ 4f5cb2ab",
        "ai-dynamo/dynamo recipes/deepseek-r1/sglang-wideep/tep16p-dep16d-disagg.yaml @ 1cc36a62",
        "ai-dynamo/dynamo components/src/dynamo/sglang/args.py @ d3aac630",
    ],
    "trtllm": [
        "ai-dynamo/dynamo recipes/deepseek-r1/trtllm/agg/b200/deploy.yaml @ d9247523",
        "NVIDIA/TensorRT-LLM tensorrt_llm/commands/serve.py @ 4c05a74",
    ],
}
MULTINODE_SOURCE = "ai-dynamo/dynamo docs/kubernetes/deployment/multinode-deployment.md @ 429f4b22"

#: Container images; their tags are the user's (the guides pin releases).
LLM_D_IMAGE = "ghcr.io/llm-d/llm-d-cuda:${LLM_D_VERSION}"
DYNAMO_IMAGES = {
    "vllm": "nvcr.io/nvidia/ai-dynamo/vllm-runtime:${DYNAMO_VERSION}",
    "sglang": "nvcr.io/nvidia/ai-dynamo/sglang-runtime:${DYNAMO_VERSION}",
    "trtllm": "nvcr.io/nvidia/ai-dynamo/tensorrtllm-runtime:${DYNAMO_VERSION}",
}
#: The workers' working directories in Dynamo's aggregated examples (the module runs from anywhere).
WORKING_DIRS = {"vllm": "/workspace/examples/backends/vllm", "sglang": "/workspace/examples/backends/sglang"}
#: vLLM's head-node data-parallel RPC port in the llm-d guide.
LLM_D_RPC_PORT = 5555

#: Flags of the engines' multi-node commands the frameworks set themselves (value-taking, then switches).
_NODE_FLAGS = (
    "--port",
    "--data-parallel-address",
    "--data-parallel-size-local",
    "--data-parallel-rpc-port",
    "--data-parallel-start-rank",
    "--nnodes",
    "--node-rank",
    "--dist-init-addr",
)
_NODE_SWITCHES = ("--headless",)


class _Dumper(yaml.SafeDumper):
    """Writes a multi-line string (a container's script) as a literal block, as the guides write it."""


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|" if "\n" in value else None)


_Dumper.add_representer(str, _str)


def _dump(*documents: Manifest) -> str:
    return yaml.dump_all(documents, Dumper=_Dumper, sort_keys=False)


def deployment_entries(entries: Sequence[EngineLaunch]) -> list[EngineLaunch]:
    """The framework entries (files and the notes of files not emitted) among a launch's entries."""
    return [e for e in entries if e.engine.startswith(DEPLOY_FRAMEWORKS)]


def expert_parallel_deployments(
    engine: str, node_zero: EngineLaunch | None, *, layout: ExpertParallelLaunch, replicas: int
) -> list[EngineLaunch]:
    """The llm-d and Dynamo files for `replicas` replicas of `layout`, built from `engine`'s node-0 command
    `node_zero`; where a framework does not deploy it, an unsupported entry saying why. Empty without a command."""
    if node_zero is None or not node_zero.supported or node_zero.command is None:
        return []
    argv = shlex.split(node_zero.command)
    if engine == "vllm":
        return [_llm_d_vllm(argv, layout, replicas), _dynamo_vllm(argv, layout, replicas)]
    if engine == "sglang":
        why = "its wide-EP SGLang manifests are prefill/decode DisaggregatedSet pools, not one aggregated replica"
        return [_dynamo_sglang(argv, layout, replicas), _not_deployed("llm-d", engine, why)]
    if engine == "trtllm":
        return [
            _dynamo_trtllm(argv, node_zero.config_yaml, layout, replicas),
            _not_deployed("llm-d", engine, "no llm-d guide serves TensorRT-LLM"),
        ]
    return []


def _not_deployed(framework: str, engine: str, why: str) -> EngineLaunch:
    return EngineLaunch(
        engine=f"{framework} (not emitted for {engine})",
        supported=False,
        command=None,
        notes=[f"no {framework} file for this {engine} replica: {why}"],
    )


def _without_node_flags(flags: Sequence[str]) -> list[str]:
    """`flags` less the per-node ones (``_NODE_FLAGS`` with their values, ``_NODE_SWITCHES``)."""
    kept: list[str] = []
    skip = False
    for flag in flags:
        if skip:
            skip = False
        elif flag in _NODE_FLAGS:
            skip = True
        elif flag not in _NODE_SWITCHES:
            kept.append(flag)
    return kept


def _stem(model: str) -> str:
    """The model's last path part as a Kubernetes name (lower-case, dashes): a label value and a name's stem."""
    stem = model.rstrip("/").rsplit("/", 1)[-1].lower()
    return "".join(c if c.isalnum() else "-" for c in stem).strip("-")[:40].strip("-") or "model"


def _llm_d_script(model: str, flags: list[str], layout: ExpertParallelLaunch) -> str:
    """The container's shell script: clear /dev/shm, then ``exec vllm serve`` (each pod its ranks, across nodes)."""
    lines = ["find /dev/shm -type f -delete"]
    serve = shlex.join(["vllm", "serve", model, "--port", "8000", *flags])
    if layout.nodes > 1:
        lines.append("START_RANK=$(( ${LWS_WORKER_INDEX:-0} * DP_SIZE_LOCAL ))")
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
    model, flags = argv[2], _without_node_flags(argv[3:])
    gpus = min(layout.ep, layout.gpus_per_node)
    labels = {"llm-d.ai/model": _stem(model), "llm-d.ai/role": "aggregate"}
    document = {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {"name": f"{_stem(model)}-vllm-ep{layout.ep}", "labels": labels},
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
        "attention rank(s)); apply with the LeaderWorkerSet controller installed and put llm-d's router (the wide-EP "
        "guide's scheduler chart) in front, selecting llm-d.ai/inference-serving=true on port 8000",
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
        config_yaml=_dump(document),
        notes=notes,
        sources=list(LLM_D_SOURCES),
    )


def _dynamo(
    engine: str,
    worker: str,
    args: list[str],
    layout: ExpertParallelLaunch,
    replicas: int,
    *,
    container: Manifest | None = None,
    pod: Manifest | None = None,
) -> Manifest:
    """A DynamoGraphDeployment of one worker service running ``python3 -m dynamo.<engine>`` with `args`; `container`
    and `pod` add to the worker's main container and pod spec."""
    image = DYNAMO_IMAGES[engine]
    workdir = {"workingDir": WORKING_DIRS[engine]} if engine in WORKING_DIRS else {}
    service: Manifest = {
        "envFromSecret": "hf-token-secret",
        "componentType": "worker",
        "replicas": replicas,
        **({"multinode": {"nodeCount": layout.nodes}} if layout.nodes > 1 else {}),
        "resources": {"limits": {"gpu": str(min(layout.ep, layout.gpus_per_node))}},
        "extraPodSpec": {
            "mainContainer": {
                "image": image,
                **workdir,
                "command": ["python3", "-m", f"dynamo.{engine}"],
                "args": args,
                **(container or {}),
            },
            **(pod or {}),
        },
    }
    return {
        "apiVersion": "nvidia.com/v1alpha1",
        "kind": "DynamoGraphDeployment",
        "metadata": {"name": f"{engine}-ep{layout.ep}"},
        "spec": {
            "backendFramework": engine,
            "services": {
                "Frontend": {
                    "componentType": "frontend",
                    "replicas": 1,
                    "extraPodSpec": {"mainContainer": {"image": image}},
                },
                worker: service,
            },
        },
    }


def _dynamo_entry(engine: str, documents: list[Manifest], layout: ExpertParallelLaunch, replicas: int) -> EngineLaunch:
    notes = [
        f"{replicas} replica(s) of {layout.nodes} node(s) x {min(layout.ep, layout.gpus_per_node)} GPUs "
        f"(EP {layout.ep}, {layout.attention_dp} attention rank(s)); the image tag is your Dynamo release",
    ]
    if layout.nodes > 1:
        notes.append(
            "across nodes Dynamo's operator adds each node's distributed flags (Grove or LeaderWorkerSet installed)"
        )
    if engine == "trtllm" and layout.nodes > 1:
        notes.append(
            "the operator wraps the TensorRT-LLM worker in mpirun over the nodes: create the SSH keypair secret "
            "(mpirun-ssh-key-<component-name>) before deploying"
        )
    sources = [*DYNAMO_SOURCES[engine], *([MULTINODE_SOURCE] if layout.nodes > 1 else [])]
    return EngineLaunch(
        engine=f"Dynamo DynamoGraphDeployment ({engine}, {replicas} x {layout.nodes} node(s))",
        supported=True,
        command=None,
        config_yaml=_dump(*documents),
        notes=notes,
        sources=sources,
    )


def _dynamo_vllm(argv: list[str], layout: ExpertParallelLaunch, replicas: int) -> EngineLaunch:
    args = ["--model", argv[2], *_without_node_flags(argv[3:])]
    if layout.nodes > 1:
        args.append("--data-parallel-hybrid-lb")
    document = _dynamo("vllm", "VllmDecodeWorker", args, layout, replicas)
    return _dynamo_entry("vllm", [document], layout, replicas)


def _dynamo_sglang(argv: list[str], layout: ExpertParallelLaunch, replicas: int) -> EngineLaunch:
    start = argv.index("--model-path")  # after ``python -m sglang.launch_server``
    document = _dynamo("sglang", "decode", _without_node_flags(argv[start:]), layout, replicas)
    return _dynamo_entry("sglang", [document], layout, replicas)


#: trtllm-serve's flags as the LLM-API keys ``get_llm_args`` passes them under.
_TRTLLM_KEYS = {
    "--backend": "backend",
    "--tp_size": "tensor_parallel_size",
    "--ep_size": "moe_expert_parallel_size",
    "--max_batch_size": "max_batch_size",
    "--max_num_tokens": "max_num_tokens",
    "--max_seq_len": "max_seq_len",
}


def _trtllm_config(argv: list[str], options: str | None) -> Manifest:
    """The engine's options file with trtllm-serve's flags folded in (the file's values win, as in trtllm-serve)."""
    config: Manifest = {}
    for flag, key in _TRTLLM_KEYS.items():
        if flag in argv:
            value = argv[argv.index(flag) + 1]
            config[key] = int(value) if value.isdigit() else value
    fraction = float(argv[argv.index("--kv_cache_free_gpu_memory_fraction") + 1])
    extra = yaml.safe_load(options) if options else {}
    kv = {"free_gpu_memory_fraction": fraction, **extra.pop("kv_cache_config", {})}
    return {**config, "kv_cache_config": kv, **extra}


def _dynamo_trtllm(argv: list[str], options: str | None, layout: ExpertParallelLaunch, replicas: int) -> EngineLaunch:
    model = argv[argv.index("trtllm-serve") + 1]  # after ``srun ... trtllm-llmapi-launch`` past one node
    config_map = f"trtllm-ep{layout.ep}-config"
    args = ["--model-path", model, "--served-model-name", model, "--extra-engine-args", "/config/config.yaml"]
    configmap = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": config_map},
        "data": {"config.yaml": yaml.safe_dump(_trtllm_config(argv, options), sort_keys=False)},
    }
    document = _dynamo(
        "trtllm",
        "TrtllmWorker",
        args,
        layout,
        replicas,
        container={"volumeMounts": [{"name": "engine-config", "mountPath": "/config", "readOnly": True}]},
        pod={"volumes": [{"name": "engine-config", "configMap": {"name": config_map}}]},
    )
    return _dynamo_entry("trtllm", [configmap, document], layout, replicas)
