"""Launching a disaggregated deployment: each pool's engine command with its role, and the router in front.

Each pool's worker is the engine's own aggregated command for that pool's configuration (``launch.py``) with the
flags that give it its role, cited from the engines' sources:

- vLLM (vllm-project/vllm docs/features/nixl_connector_usage.md @ 029e67cd): ``--kv-transfer-config`` with
  ``{"kv_connector":"NixlConnector","kv_role":"kv_producer"}`` on prefillers and ``"kv_consumer"`` on decoders,
  ``"kv_load_failure_policy":"fail"`` ("recommended": ``recompute``, the default, runs prefill work on the decode
  instance), ``VLLM_NIXL_SIDE_CHANNEL_PORT``/``VLLM_NIXL_SIDE_CHANNEL_HOST`` per instance; the roles are set by
  the proxy in front (the guide's ``toy_proxy_server.py --prefiller-hosts ... --decoder-hosts ...``,
  vLLM's tests/v1/kv_connector/nixl_integration/toy_proxy_server.py @ 029e67cd, a test proxy: production
  deployments put llm-d or Dynamo's router there).
- SGLang (sgl-project/sglang docs/advanced_features/pd_disaggregation.md @ cccb6546): ``--disaggregation-mode
  prefill|decode`` with ``--disaggregation-transfer-backend nixl`` (Mooncake is the other backend), and
  ``python -m sglang_router.launch_router --pd-disaggregation --prefill URL --decode URL``.

For vLLM the Dynamo deployment file is emitted too, as ai-dynamo/dynamo ``examples/backends/vllm/deploy/disagg.yaml``
@ 7893f268 lays it out: a ``DynamoGraphDeployment`` with a ``Frontend``, a ``VllmPrefillWorker``
(``subComponentType: prefill``) and a ``VllmDecodeWorker`` (``decode``), each ``python3 -m dynamo.vllm`` with
``--disaggregation-mode``, ``replicas`` the pool's workers and ``gpu`` its tensor-parallel degree; ``dynamo.vllm``
takes every vLLM engine flag (``components/src/dynamo/vllm/args.py`` @ b6d5e487 adds
``AsyncEngineArgs.add_cli_args``) but not the server's ``--port``, which is dropped. TensorRT-LLM's
disaggregated serving (``trtllm-serve disaggregated``), SGLang's Dynamo file and llm-d's are not emitted yet:
the launch says so instead of guessing them.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass, replace

import yaml

from recommender.engines._base import EngineLaunch

__all__ = [
    "DISAGGREGATED_ENGINES",
    "DisaggregatedLaunch",
    "disaggregated_launch",
    "engine_launches",
    "equal_pool_tp_reason",
]

#: The engines whose pool roles are emitted here.
DISAGGREGATED_ENGINES = ("vllm", "sglang")


@dataclass(frozen=True, slots=True)
class DisaggregatedLaunch:
    """Each pool's worker command (run once per worker), the router's, and what the user must fill in."""

    engine: str
    prefill: str
    decode: str
    router: str
    prefill_workers: int
    decode_workers: int
    notes: tuple[str, ...]
    #: The Dynamo deployment file (a DynamoGraphDeployment; "" where not emitted).
    dynamo: str = ""


#: Where each engine's pool roles were read (the module docstring has the details).
_SOURCES = {
    "vllm": [
        "vllm-project/vllm docs/features/nixl_connector_usage.md @ 029e67cd",
        "ai-dynamo/dynamo examples/backends/vllm/deploy/disagg.yaml @ 7893f268",
    ],
    "sglang": ["sgl-project/sglang docs/advanced_features/pd_disaggregation.md @ cccb6546"],
}


def engine_launches(launch: DisaggregatedLaunch) -> list[EngineLaunch]:
    """The pools' launch as the recommendation's launch entries: the prefill worker, the decode worker, then the
    router (carrying the Dynamo deployment file where one is emitted), each named by its role and count."""
    sources = _SOURCES.get(launch.engine, [])
    return [
        EngineLaunch(
            engine=f"{launch.engine} prefill pool ({launch.prefill_workers} workers)",
            supported=True,
            command=launch.prefill,
        ),
        EngineLaunch(
            engine=f"{launch.engine} decode pool ({launch.decode_workers} workers)",
            supported=True,
            command=launch.decode,
        ),
        EngineLaunch(
            engine=f"{launch.engine} router",
            supported=True,
            command=launch.router,
            config_yaml=launch.dynamo or None,
            notes=list(launch.notes),
            sources=list(sources),
        ),
    ]


def equal_pool_tp_reason(engine: str, *, window_layers: bool, latent_kv: bool) -> str | None:
    """Why `engine` needs the prefill and decode pools at one tensor-parallel degree for this model (None: it does
    not). SGLang refuses a KV transfer between different TP sizes for a non-MLA model with sliding-window layers:
    "PD Disaggregation does NOT support PD different TP sizes for non-MLA SWA hybrid models yet" (SGLang v0.5.16
    python/sglang/srt/disaggregation/nixl/conn.py ``maybe_send_extra``, as raised in llm-d/llm-d issue 2433;
    the same check guards the Mooncake backend). Different TP sizes are supported otherwise (sgl-project/sglang
    PR 5922: MLA; PR 15675's maintainers: non-MLA)."""
    if engine == "sglang" and window_layers and not latent_kv:
        return "SGLang transfers the KV of a sliding-window hybrid model only between equal TP sizes"
    return None


def _vllm_role(command: str, role: str) -> str:
    config = {"kv_connector": "NixlConnector", "kv_role": role, "kv_load_failure_policy": "fail"}
    return f"{command} --kv-transfer-config {shlex.quote(json.dumps(config, separators=(',', ':')))}"


def _hosts(kind: str, count: int) -> list[str]:
    return [f"${{{kind.upper()}_HOST_{i}}}" for i in range(count)]


def disaggregated_launch(
    engine: str, *, prefill_command: str, decode_command: str, prefill_workers: int, decode_workers: int
) -> DisaggregatedLaunch | None:
    """The pools' commands for `engine`, from each pool's aggregated command (None: roles not emitted for it)."""
    if engine == "vllm":
        p_hosts, d_hosts = _hosts("prefill", prefill_workers), _hosts("decode", decode_workers)
        router = (
            "python toy_proxy_server.py --port 8192 --prefiller-hosts "
            f"{' '.join(p_hosts)} --prefiller-ports {' '.join(['8000'] * prefill_workers)} --decoder-hosts "
            f"{' '.join(d_hosts)} --decoder-ports {' '.join(['8000'] * decode_workers)}"
        )
        proxy = "tests/v1/kv_connector/nixl_integration/toy_proxy_server.py @ 029e67cd"
        notes = (
            "set VLLM_NIXL_SIDE_CHANNEL_HOST to each instance's address and VLLM_NIXL_SIDE_CHANNEL_PORT (default "
            f"5600) on every instance; the proxy is vLLM's test proxy ({proxy}): deploy behind llm-d or Dynamo's "
            "router",
        )
        launch = DisaggregatedLaunch(
            engine,
            _vllm_role(prefill_command, "kv_producer"),
            _vllm_role(decode_command, "kv_consumer"),
            router,
            prefill_workers,
            decode_workers,
            notes,
        )
        return replace(
            launch, dynamo=dynamo_vllm_deployment(prefill_command, decode_command, prefill_workers, decode_workers)
        )
    if engine == "sglang":
        role = "--disaggregation-transfer-backend nixl --disaggregation-mode"
        urls = [f"--prefill http://{h}:8000" for h in _hosts("prefill", prefill_workers)]
        urls += [f"--decode http://{h}:8000" for h in _hosts("decode", decode_workers)]
        router = (
            f"python -m sglang_router.launch_router --pd-disaggregation {' '.join(urls)} --host 0.0.0.0 --port 8000"
        )
        note = "each worker serves on port 8000 of its host (--port); fill in the hosts"
        return DisaggregatedLaunch(
            engine,
            f"{prefill_command} {role} prefill",
            f"{decode_command} {role} decode",
            router,
            prefill_workers,
            decode_workers,
            (note,),
        )
    return None


#: The Dynamo vLLM runtime image; its tag is the user's (the example's "my-tag").
DYNAMO_VLLM_IMAGE = "nvcr.io/nvidia/ai-dynamo/vllm-runtime:${DYNAMO_VERSION}"


def _dynamo_args(vllm_command: str, role: str) -> tuple[list[str], int]:
    """`vllm serve MODEL flags...` as dynamo.vllm's arguments (``--model MODEL``, no ``--port``) with its role, and
    the tensor-parallel degree (its GPUs)."""
    argv = shlex.split(vllm_command)
    model, flags = argv[2], argv[3:]
    if "--port" in flags:
        at = flags.index("--port")
        flags = flags[:at] + flags[at + 2 :]
    tp = int(flags[flags.index("--tensor-parallel-size") + 1]) if "--tensor-parallel-size" in flags else 1
    return ["--model", model, *flags, "--disaggregation-mode", role], tp


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


def dynamo_vllm_deployment(prefill_command: str, decode_command: str, prefill_workers: int, decode_workers: int) -> str:
    """The DynamoGraphDeployment of vLLM prefill and decode pools (layout of Dynamo's ``deploy/disagg.yaml``)."""
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
    return yaml.safe_dump(document, sort_keys=False)
