"""Launching a disaggregated deployment: each pool's engine command with its role, and the router in front.

Each pool's worker is the engine's own aggregated command for that pool's configuration (``launch.py``) with the
flags that give it its role, cited from the engines' sources:

- vLLM (vllm-project/vllm docs/features/nixl_connector_usage.md @ 029e67cd): ``--kv-transfer-config`` with
  ``{"kv_connector":"NixlConnector","kv_role":"kv_producer"}`` on prefillers and ``"kv_consumer"`` on decoders,
  ``"kv_load_failure_policy":"fail"`` ("recommended": ``recompute``, the default, runs prefill work on the decode
  instance), ``VLLM_NIXL_SIDE_CHANNEL_PORT``/``VLLM_NIXL_SIDE_CHANNEL_HOST`` per instance; the roles are set by
  the proxy in front (the guide's ``tests/v1/kv_connector/nixl_integration/toy_proxy_server.py --prefiller-hosts
  ... --decoder-hosts ...``, a test proxy: production deployments put llm-d or Dynamo's router there).
- SGLang (sgl-project/sglang docs/advanced_features/pd_disaggregation.md @ cccb6546): ``--disaggregation-mode
  prefill|decode`` with ``--disaggregation-transfer-backend nixl`` (Mooncake is the other backend), and
  ``python -m sglang_router.launch_router --pd-disaggregation --prefill URL --decode URL``.

TensorRT-LLM's disaggregated serving (``trtllm-serve disaggregated`` with its YAML) and the Dynamo / llm-d
deployment files are not emitted yet: the launch says so instead of guessing them.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass

__all__ = ["DISAGGREGATED_ENGINES", "DisaggregatedLaunch", "disaggregated_launch"]

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
        router = ("python tests/v1/kv_connector/nixl_integration/toy_proxy_server.py --port 8192 --prefiller-hosts "
                  f"{' '.join(p_hosts)} --prefiller-ports {' '.join(['8000'] * prefill_workers)} --decoder-hosts "
                  f"{' '.join(d_hosts)} --decoder-ports {' '.join(['8000'] * decode_workers)}")  # fmt: skip
        notes = ("set VLLM_NIXL_SIDE_CHANNEL_HOST to each instance's address and VLLM_NIXL_SIDE_CHANNEL_PORT (default "
                 "5600) on every instance; the proxy is vLLM's test proxy: deploy behind llm-d or Dynamo's router",)
        return DisaggregatedLaunch(engine, _vllm_role(prefill_command, "kv_producer"),
                                   _vllm_role(decode_command, "kv_consumer"), router, prefill_workers, decode_workers,
                                   notes)  # fmt: skip
    if engine == "sglang":
        role = "--disaggregation-transfer-backend nixl --disaggregation-mode"
        urls = [f"--prefill http://{h}:8000" for h in _hosts("prefill", prefill_workers)]
        urls += [f"--decode http://{h}:8000" for h in _hosts("decode", decode_workers)]
        router = (f"python -m sglang_router.launch_router --pd-disaggregation {' '.join(urls)} --host 0.0.0.0 "
                  "--port 8000")  # fmt: skip
        note = "each worker serves on port 8000 of its host (--port); fill in the hosts"
        return DisaggregatedLaunch(engine, f"{prefill_command} {role} prefill", f"{decode_command} {role} decode",
                                   router, prefill_workers, decode_workers, (note,))  # fmt: skip
    return None
