"""The deployment files of aggregated (tensor-parallel) replicas behind the router a plan chose: llm-d's InferencePool
values and Dynamo's DynamoGraphDeployment, each carrying the routing policy the fleet's replicas were sized for.

An aggregated plan row is one engine command; N of them behind a plain Kubernetes Service scatter a conversation's
turns over the replicas (``router_config.plain_service_note``). Once ``plan --routing`` has found that a router
saves replicas, the command alone no longer deploys what was priced: the router is part of the answer. So the
winner's engine command (its flags already cited in each engine's module) becomes:

- llm-d, for vLLM: the InferencePool chart's values with the endpoint picker configured for the policy
  (``router_config.llm_d_router_values``), selecting the serving pods by the labels it names; the pods are the
  engine command, one per replica, labelled so (llm-d's guides put vLLM behind the pool on port 8000). Not for
  SGLang, TensorRT-LLM or TGI: the values are written for vLLM's port and ``modelServerType``.
- Dynamo, for vLLM and SGLang: a DynamoGraphDeployment whose ``Frontend`` runs the policy's ``--router-mode``
  (``router_config.routed_graph``) and whose one worker service runs the command's flags under
  ``python3 -m dynamo.<engine>``, ``replicas`` the fleet's count, ``resources.limits.gpu`` the tensor-parallel degree
  (ai-dynamo/dynamo ``examples/backends/vllm/deploy/agg.yaml`` @ c6fcf991, service ``VllmDecodeWorker``;
  ``examples/backends/sglang/deploy/agg.yaml`` @ 4f5cb2ab, service ``decode``). Not for TensorRT-LLM (its worker
  reads an engine-args file this row's command does not write) nor TGI (no Dynamo backend).

Where a framework has no setting for the policy (llm-d and round-robin, Dynamo and sticky), the entry is an
unsupported one carrying the reason, never the nearest setting in its place.
"""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING

from recommender.deploy.dynamo import DYNAMO_IMAGES, DYNAMO_SOURCES, WORKING_DIRS
from recommender.deploy.manifest import Manifest, dump
from recommender.deploy.router_config import (
    DYNAMO_ROUTER_SOURCES,
    LLM_D_ROUTER_SOURCES,
    llm_d_router,
    model_label,
    model_labels,
    routed_graph,
)
from recommender.engines._base import EngineLaunch

if TYPE_CHECKING:
    from recommender.perf.sim.routing import RoutingPolicy

__all__ = ["routed_deployments"]

#: Each engine's worker service in Dynamo's aggregated examples.
_WORKERS = {"vllm": "VllmDecodeWorker", "sglang": "decode"}


def routed_deployments(
    entry: EngineLaunch, *, tensor_parallel: int, replicas: int, routing: RoutingPolicy
) -> list[EngineLaunch]:
    """llm-d's and Dynamo's files putting `replicas` replicas of `entry`'s command (one engine's launch of one
    replica on `tensor_parallel` GPUs) behind `routing`'s router; an unsupported entry saying why where a framework
    writes none. Empty where `entry` has no command."""
    if not entry.supported or entry.command is None:
        return []
    argv = shlex.split(entry.command)
    return [_llm_d(entry.engine, argv, routing), _dynamo(entry.engine, argv, tensor_parallel, replicas, routing)]


def _served_model(engine: str, argv: list[str]) -> str:
    """The model `engine`'s command serves (``vllm serve MODEL``, SGLang's ``--model-path MODEL``)."""
    if engine == "vllm":
        return argv[argv.index("serve") + 1]
    return argv[argv.index("--model-path") + 1]


def _llm_d(engine: str, argv: list[str], routing: RoutingPolicy) -> EngineLaunch:
    if engine != "vllm":
        why = f"its InferencePool values are written for vLLM's port and model-server type, not {engine}'s"
        return _not_written("llm-d", engine, why)
    model = _served_model(engine, argv)
    values, notes = llm_d_router(routing, disaggregated=False, labels=model_labels(model))
    if not values:
        return _not_written("llm-d", f"the {routing} router", notes[0])
    labels = ", ".join(f"{k}: {v!r}" for k, v in model_labels(model).items())
    pods = f"run the vllm command as the pool's pods (one per replica, port 8000) labelled {labels}"
    return EngineLaunch(
        engine=f"llm-d InferencePool values ({routing} router in front of the replicas)",
        supported=True,
        command=None,
        config_yaml=values,
        notes=[*notes, pods],
        sources=list(LLM_D_ROUTER_SOURCES),
    )


def _graph(engine: str, args: list[str], tensor_parallel: int, replicas: int, name: str) -> Manifest:
    """Dynamo's aggregated example graph: a Frontend and one worker service of `replicas` replicas."""
    image = DYNAMO_IMAGES[engine]
    workdir = {"workingDir": WORKING_DIRS[engine]} if engine in WORKING_DIRS else {}
    worker: Manifest = {
        "envFromSecret": "hf-token-secret",
        "componentType": "worker",
        "replicas": replicas,
        "resources": {"limits": {"gpu": str(tensor_parallel)}},
        "extraPodSpec": {
            "mainContainer": {"image": image, **workdir, "command": ["python3", "-m", f"dynamo.{engine}"], "args": args}
        },
    }
    frontend: Manifest = {
        "componentType": "frontend",
        "replicas": 1,
        "extraPodSpec": {"mainContainer": {"image": image}},
    }
    return {
        "apiVersion": "nvidia.com/v1alpha1",
        "kind": "DynamoGraphDeployment",
        "metadata": {"name": f"{name}-{engine}-agg"[:63]},
        "spec": {"backendFramework": engine, "services": {"Frontend": frontend, _WORKERS[engine]: worker}},
    }


def _dynamo(engine: str, argv: list[str], tensor_parallel: int, replicas: int, routing: RoutingPolicy) -> EngineLaunch:
    if engine not in _WORKERS:
        why = (
            "its worker reads an engine-args file this command does not write"
            if engine == "trtllm"
            else "Dynamo has no backend for it"
        )
        return _not_written("Dynamo", engine, why)
    model = _served_model(engine, argv)
    if engine == "vllm":  # ``vllm serve MODEL FLAGS`` -> ``--model MODEL FLAGS`` (Dynamo's vLLM worker)
        args = ["--model", model, *argv[argv.index("serve") + 2 :]]
    else:  # ``python -m sglang.launch_server --model-path MODEL FLAGS``: every SGLang flag, as Dynamo's worker takes
        args = argv[argv.index("--model-path") :]
    args = _without_port(args)
    graph = _graph(engine, args, tensor_parallel, replicas, model_label(model))
    routed, notes = routed_graph(graph, routing)
    mapped = routed is not graph
    return EngineLaunch(
        engine=f"Dynamo DynamoGraphDeployment ({engine}, {replicas} aggregated replica(s), {routing} router)",
        supported=True,
        command=None,
        config_yaml=dump(routed),
        notes=[f"{replicas} replica(s) of {tensor_parallel} GPU(s); the image tag is your Dynamo release", *notes],
        sources=[*DYNAMO_SOURCES[engine][:1], *(DYNAMO_ROUTER_SOURCES if mapped else [])],
    )


def _without_port(args: list[str]) -> list[str]:
    """`args` less ``--port`` and ``--host`` with their values: Dynamo's worker serves through its runtime."""
    kept: list[str] = []
    skip = False
    for arg in args:
        if skip:
            skip = False
        elif arg in ("--port", "--host"):
            skip = True
        else:
            kept.append(arg)
    return kept


def _not_written(framework: str, what: str, why: str) -> EngineLaunch:
    return EngineLaunch(
        engine=f"{framework} (not written for {what})",
        supported=False,
        command=None,
        notes=[f"no {framework} file for {what}: {why}"],
    )
