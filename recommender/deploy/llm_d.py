"""llm-d's files for vLLM prefill and decode pools: the ModelService chart's values and, with a routing policy, the
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
"""

from __future__ import annotations

import json
import shlex
from typing import TYPE_CHECKING

import yaml

from recommender.deploy.router_config import llm_d_router, model_labels

if TYPE_CHECKING:
    from recommender.perf.sim.routing import RoutingPolicy

__all__ = ["LLM_D_EXPERT_PARALLEL_NOTE", "LLM_D_IMAGE", "LLM_D_SOURCE", "llm_d_pools", "llm_d_values"]

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
