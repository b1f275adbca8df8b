"""Dynamo's deployment files: the ``DynamoGraphDeployment`` of an expert-parallel replica (``expert_parallel.py`` says
what it is for) and of vLLM prefill and decode pools (``dynamo_vllm_graph``, which ``disaggregated.py`` asks for;
its sources cited there and on the function).

The expert-parallel replica:

ai-dynamo/dynamo: a ``DynamoGraphDeployment`` with a ``Frontend`` and one worker service whose
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
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from typing import TYPE_CHECKING

import yaml

from recommender.deploy.manifest import Manifest, dump
from recommender.deploy.router_config import DYNAMO_ROUTER_SOURCES, routed_graph
from recommender.engines._base import EngineLaunch
from recommender.engines.expert_parallel import ExpertParallelLaunch

if TYPE_CHECKING:
    from recommender.perf.sim.routing import RoutingPolicy

__all__ = ["dynamo_sglang", "dynamo_trtllm", "dynamo_vllm", "dynamo_vllm_graph", "without_node_flags"]

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

#: Dynamo's runtime images; their tags are the user's (the recipes pin releases).
DYNAMO_IMAGES = {
    "vllm": "nvcr.io/nvidia/ai-dynamo/vllm-runtime:${DYNAMO_VERSION}",
    "sglang": "nvcr.io/nvidia/ai-dynamo/sglang-runtime:${DYNAMO_VERSION}",
    "trtllm": "nvcr.io/nvidia/ai-dynamo/tensorrtllm-runtime:${DYNAMO_VERSION}",
}
#: The workers' working directories in Dynamo's aggregated examples (the module runs from anywhere).
WORKING_DIRS = {"vllm": "/workspace/examples/backends/vllm", "sglang": "/workspace/examples/backends/sglang"}

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


def without_node_flags(flags: Sequence[str]) -> list[str]:
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


def _dynamo_entry(
    engine: str,
    documents: list[Manifest],
    layout: ExpertParallelLaunch,
    replicas: int,
    routing: RoutingPolicy | None = None,
) -> EngineLaunch:
    """The Dynamo entry of `documents` (the graph last), its Frontend routing `routing` where Dynamo has the mode."""
    graph, routed = routed_graph(documents[-1], routing)
    mapped = graph is not documents[-1]
    documents = [*documents[:-1], graph]
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
    notes += routed
    sources = [*DYNAMO_SOURCES[engine], *([MULTINODE_SOURCE] if layout.nodes > 1 else [])]
    if mapped:
        sources += DYNAMO_ROUTER_SOURCES
    return EngineLaunch(
        engine=f"Dynamo DynamoGraphDeployment ({engine}, {replicas} x {layout.nodes} node(s))",
        supported=True,
        command=None,
        config_yaml=dump(*documents),
        notes=notes,
        sources=sources,
    )


def dynamo_vllm(
    argv: list[str], layout: ExpertParallelLaunch, replicas: int, routing: RoutingPolicy | None = None
) -> EngineLaunch:
    args = ["--model", argv[2], *without_node_flags(argv[3:])]
    if layout.nodes > 1:
        args.append("--data-parallel-hybrid-lb")
    document = _dynamo("vllm", "VllmDecodeWorker", args, layout, replicas)
    return _dynamo_entry("vllm", [document], layout, replicas, routing)


def dynamo_sglang(
    argv: list[str], layout: ExpertParallelLaunch, replicas: int, routing: RoutingPolicy | None = None
) -> EngineLaunch:
    start = argv.index("--model-path")  # after ``python -m sglang.launch_server``
    document = _dynamo("sglang", "decode", without_node_flags(argv[start:]), layout, replicas)
    return _dynamo_entry("sglang", [document], layout, replicas, routing)


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


def dynamo_trtllm(
    argv: list[str],
    options: str | None,
    layout: ExpertParallelLaunch,
    replicas: int,
    routing: RoutingPolicy | None = None,
) -> EngineLaunch:
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
    return _dynamo_entry("trtllm", [configmap, document], layout, replicas, routing)


#: The Dynamo vLLM runtime image; its tag is the user's (the example's "my-tag").
DYNAMO_VLLM_IMAGE = "nvcr.io/nvidia/ai-dynamo/vllm-runtime:${DYNAMO_VERSION}"


def _flag_int(flags: list[str], name: str) -> int:  # a flag's integer value, 1 where absent
    return int(flags[flags.index(name) + 1]) if name in flags else 1


def _dynamo_args(vllm_command: str, role: str) -> tuple[list[str], int]:
    """`vllm serve MODEL flags...` as dynamo.vllm's arguments (``--model MODEL``, no ``--port``) with its role, and
    its GPUs, TP x DP (ai-dynamo/dynamo ``recipes/deepseek-r1/vllm/disagg/deploy_hopper_8gpu.yaml`` @ 58d89df7: DEP8
    workers ``--tensor-parallel-size 1 --data_parallel_size 8`` with ``gpu: "8"``)."""
    argv = shlex.split(vllm_command)
    model, flags = argv[2], argv[3:]
    if "--port" in flags:
        at = flags.index("--port")
        flags = flags[:at] + flags[at + 2 :]
    gpus = _flag_int(flags, "--tensor-parallel-size") * _flag_int(flags, "--data-parallel-size")
    return ["--model", model, *flags, "--disaggregation-mode", role], gpus


def _worker(args: list[str], gpus: int, replicas: int, role: str) -> dict[str, object]:
    return {
        "envFromSecret": "hf-token-secret",
        "componentType": "worker",
        "subComponentType": role,
        "replicas": replicas,
        "resources": {"limits": {"gpu": str(gpus)}},
        "extraPodSpec": {
            "mainContainer": {
                "image": DYNAMO_VLLM_IMAGE,
                "workingDir": "/workspace/examples/backends/vllm",
                "command": ["python3", "-m", "dynamo.vllm"],
                "args": args,
            }
        },
    }


def dynamo_vllm_graph(prefill_command: str, decode_command: str, prefill_workers: int, decode_workers: int) -> Manifest:
    """The DynamoGraphDeployment of vLLM prefill and decode pools (the layout of Dynamo's
    ``examples/backends/vllm/deploy/disagg.yaml``)."""
    prefill_args, prefill_gpus = _dynamo_args(prefill_command, "prefill")
    decode_args, decode_gpus = _dynamo_args(decode_command, "decode")
    document = {
        "apiVersion": "nvidia.com/v1alpha1",
        "kind": "DynamoGraphDeployment",
        "metadata": {"name": "vllm-disagg"},
        "spec": {
            "services": {
                "Frontend": {
                    "componentType": "frontend",
                    "replicas": 1,
                    "extraPodSpec": {"mainContainer": {"image": DYNAMO_VLLM_IMAGE}},
                },
                "VllmDecodeWorker": _worker(decode_args, decode_gpus, decode_workers, "decode"),
                "VllmPrefillWorker": _worker(prefill_args, prefill_gpus, prefill_workers, "prefill"),
            }
        },
    }
    return document
