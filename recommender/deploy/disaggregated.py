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

For vLLM the Dynamo deployment file is emitted too (``dynamo.py``'s ``dynamo_vllm_graph``), as ai-dynamo/dynamo
``examples/backends/vllm/deploy/disagg.yaml`` @ 7893f268 lays it out: a ``DynamoGraphDeployment`` with a
``Frontend``, a ``VllmPrefillWorker`` (``subComponentType: prefill``) and a ``VllmDecodeWorker`` (``decode``),
each ``python3 -m dynamo.vllm`` with ``--disaggregation-mode``, ``replicas`` the pool's workers and ``gpu`` its
tensor-parallel degree; ``dynamo.vllm``
takes every vLLM engine flag (``components/src/dynamo/vllm/args.py`` @ b6d5e487 adds
``AsyncEngineArgs.add_cli_args``) but not the server's ``--port``, which is dropped. TensorRT-LLM's
SGLang's Dynamo file is not emitted yet: the launch says so instead of guessing it.

- TensorRT-LLM (NVIDIA/TensorRT-LLM ``examples/disaggregated/README.md`` @ c3c3d76e): each context (prefill) and
  generation (decode) server is a plain ``trtllm-serve MODEL ... --extra_llm_api_options FILE`` whose YAML adds
  ``cache_transceiver_config`` (``backend``: "DEFAULT (i.e., NIXL), UCX, NIXL"; ``max_tokens_in_buffer``: "Set it
  >= the maximum ISL") and, on context servers, ``disable_overlap_scheduler: True`` ("not yet supported in
  disaggregated context server architectures"); ``trtllm-serve disaggregated -c disagg_config.yaml`` routes between
  them, its file listing ``hostname``, ``port``, ``backend: pytorch``, ``context_servers`` and
  ``generation_servers`` each with ``num_instances`` and ``urls``.
- llm-d, for vLLM: the ModelService chart's values of the two pools and, with a routing policy, the router's
  InferencePool values (``deploy/llm_d.py``, its sources cited there).
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import yaml

from recommender.deploy.dynamo import dynamo_vllm_graph
from recommender.deploy.llm_d import LLM_D_EXPERT_PARALLEL_NOTE, LLM_D_SOURCE, llm_d_pools
from recommender.deploy.router_config import LLM_D_ROUTER_SOURCES, routed_graph
from recommender.engines._base import EngineLaunch

if TYPE_CHECKING:
    from recommender.perf.sim.routing import RoutingPolicy

__all__ = [
    "DISAGGREGATED_ENGINES",
    "DisaggregatedLaunch",
    "disaggregated_launch",
    "engine_launches",
    "equal_pool_tp_reason",
]

#: The engines whose pool roles are emitted here.
DISAGGREGATED_ENGINES = ("vllm", "sglang", "trtllm")


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
    #: llm-d's ModelService values for the two pools (vLLM; "" where not emitted).
    llm_d: str = ""
    #: llm-d's InferencePool values: its router in front of the pools, configured for the routing policy ("" where
    #: not emitted: no policy, or one llm-d has no setting for, which `notes` says).
    llm_d_router: str = ""
    #: Files the commands name, (file name, content): TensorRT-LLM's per-pool options and router config.
    files: tuple[tuple[str, str], ...] = ()


#: Where each engine's pool roles were read (the module docstring has the details).
_SOURCES = {
    "vllm": [
        "vllm-project/vllm docs/features/nixl_connector_usage.md @ 029e67cd",
        "ai-dynamo/dynamo examples/backends/vllm/deploy/disagg.yaml @ 7893f268",
    ],
    "sglang": ["sgl-project/sglang docs/advanced_features/pd_disaggregation.md @ cccb6546"],
    "trtllm": ["NVIDIA/TensorRT-LLM examples/disaggregated/README.md @ c3c3d76e"],
}


def engine_launches(launch: DisaggregatedLaunch) -> list[EngineLaunch]:
    """The pools' launch as the recommendation's launch entries: the prefill worker, the decode worker, then the
    router (carrying the Dynamo deployment file where one is emitted), each named by its role and count."""
    sources = _SOURCES.get(launch.engine, [])
    files = [
        EngineLaunch(engine=f"{launch.engine} {name}", supported=True, command=None, config_yaml=content)
        for name, content in launch.files
    ]
    if launch.llm_d:
        files.append(
            EngineLaunch(
                engine="llm-d ModelService values (the two pools on Kubernetes)",
                supported=True,
                command=None,
                config_yaml=launch.llm_d,
                notes=["modelArtifacts.uri names the checkpoint as hf://; point it where the checkpoint is stored"],
                sources=[LLM_D_SOURCE],
            )
        )
    if launch.llm_d_router:
        files.append(
            EngineLaunch(
                engine="llm-d InferencePool values (the router in front of the two pools)",
                supported=True,
                command=None,
                config_yaml=launch.llm_d_router,
                sources=list(LLM_D_ROUTER_SOURCES),
            )
        )
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
        *files,
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
    engine: str,
    *,
    prefill_command: str,
    decode_command: str,
    prefill_workers: int,
    decode_workers: int,
    prefill_options: str | None = None,
    decode_options: str | None = None,
    max_prompt_tokens: int = 0,
    routing: RoutingPolicy | None = None,
) -> DisaggregatedLaunch | None:
    """The pools' commands for `engine`, from each pool's aggregated command (None: roles not emitted for it).

    `prefill_options`/`decode_options`: the YAML an aggregated TensorRT-LLM command's ``--extra_llm_api_options``
    names (None: none); `max_prompt_tokens`: the longest prompt, the size of TensorRT-LLM's transfer buffer;
    `routing`: the router policy the plan counted its hits for, written into the llm-d and Dynamo files (None: the
    files as the frameworks default them)."""
    if engine == "vllm":
        return _vllm_launch(prefill_command, decode_command, prefill_workers, decode_workers, routing)
    if engine == "trtllm":
        launch: DisaggregatedLaunch | None = trtllm_launch(
            prefill_command,
            decode_command,
            (prefill_workers, decode_workers),
            (prefill_options, decode_options),
            max_prompt_tokens,
        )
    elif engine == "sglang":
        launch = _sglang_launch(prefill_command, decode_command, prefill_workers, decode_workers)
    else:
        return None
    if launch is not None and routing is not None:
        why = f"the {routing} router is written into the llm-d and Dynamo files, not {engine}'s own router's flags"
        launch = replace(launch, notes=(*launch.notes, why))
    return launch


def _vllm_launch(
    prefill_command: str,
    decode_command: str,
    prefill_workers: int,
    decode_workers: int,
    routing: RoutingPolicy | None,
) -> DisaggregatedLaunch:
    """vLLM's NIXL roles behind its test proxy, with the Dynamo and llm-d files."""
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
        "vllm",
        _vllm_role(prefill_command, "kv_producer"),
        _vllm_role(decode_command, "kv_consumer"),
        router,
        prefill_workers,
        decode_workers,
        notes,
    )
    graph, routed = routed_graph(
        dynamo_vllm_graph(prefill_command, decode_command, prefill_workers, decode_workers), routing
    )
    dynamo = yaml.safe_dump(graph, sort_keys=False)
    if "--enable-expert-parallel" in shlex.split(prefill_command) + shlex.split(decode_command):
        return replace(launch, dynamo=dynamo, notes=(*notes, *routed, LLM_D_EXPERT_PARALLEL_NOTE))
    workers = (prefill_workers, decode_workers)
    llm_d, router, router_notes = llm_d_pools(prefill_command, decode_command, workers, routing)
    return replace(launch, dynamo=dynamo, llm_d=llm_d, llm_d_router=router, notes=(*notes, *routed, *router_notes))


def _sglang_launch(
    prefill_command: str, decode_command: str, prefill_workers: int, decode_workers: int
) -> DisaggregatedLaunch:
    """SGLang's disaggregation modes behind its router."""
    role = "--disaggregation-transfer-backend nixl --disaggregation-mode"
    urls = [f"--prefill http://{h}:8000" for h in _hosts("prefill", prefill_workers)]
    urls += [f"--decode http://{h}:8000" for h in _hosts("decode", decode_workers)]
    router = f"python -m sglang_router.launch_router --pd-disaggregation {' '.join(urls)} --host 0.0.0.0 --port 8000"
    note = "each worker serves on port 8000 of its host (--port); fill in the hosts"
    return DisaggregatedLaunch(
        "sglang",
        f"{prefill_command} {role} prefill",
        f"{decode_command} {role} decode",
        router,
        prefill_workers,
        decode_workers,
        (note,),
    )


#: TensorRT-LLM's per-pool option files and router config, named as its disaggregated README names them.
TRTLLM_FILES = ("ctx_extra-llm-api-config.yaml", "gen_extra-llm-api-config.yaml", "disagg_config.yaml")


def _trtllm_pool(command: str, options: str | None, file: str, extra: dict[str, object]) -> tuple[str, str]:
    """A pool's ``trtllm-serve`` command naming `file`, and that file: the aggregated options plus `extra`."""
    merged = {**(yaml.safe_load(options) or {}), **extra} if options else dict(extra)
    argv = shlex.split(command)
    if "--extra_llm_api_options" in argv:
        argv[argv.index("--extra_llm_api_options") + 1] = file
    else:
        argv += ["--extra_llm_api_options", file]
    argv += ["--host", "0.0.0.0"]  # trtllm-serve listens on localhost by default; the router reaches it by address
    return shlex.join(argv), yaml.safe_dump(merged, sort_keys=False)


def trtllm_launch(
    prefill_command: str,
    decode_command: str,
    workers: tuple[int, int],
    options: tuple[str | None, str | None],
    max_prompt_tokens: int,
) -> DisaggregatedLaunch:
    """TensorRT-LLM's context and generation servers with their option files, and its disaggregated router."""
    transceiver: dict[str, object] = {
        "cache_transceiver_config": {"backend": "DEFAULT", "max_tokens_in_buffer": max_prompt_tokens}
    }
    ctx_file, gen_file, router_file = TRTLLM_FILES
    prefill, ctx = _trtllm_pool(
        prefill_command, options[0], ctx_file, {"disable_overlap_scheduler": True, **transceiver}
    )
    decode, gen = _trtllm_pool(decode_command, options[1], gen_file, transceiver)
    config = {
        "hostname": "0.0.0.0",
        "port": 8000,
        "backend": "pytorch",
        "context_servers": {"num_instances": workers[0], "urls": [f"{h}:8000" for h in _hosts("prefill", workers[0])]},
        "generation_servers": {
            "num_instances": workers[1],
            "urls": [f"{h}:8000" for h in _hosts("decode", workers[1])],
        },
    }
    notes = (
        f"save {ctx_file} beside each context server, {gen_file} beside each generation server and {router_file} "
        "beside the router; fill in the hosts (each server listens on port 8000 of its own)",
        "backend DEFAULT is NIXL; max_tokens_in_buffer is the longest context (the README: at least the longest input)",
    )
    files = ((ctx_file, ctx), (gen_file, gen), (router_file, yaml.safe_dump(config, sort_keys=False)))
    router = f"trtllm-serve disaggregated -c {router_file}"
    return DisaggregatedLaunch("trtllm", prefill, decode, router, workers[0], workers[1], notes, files=files)
