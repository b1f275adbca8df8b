"""Each pool's worker gets its engine's role flags (cited in ``disaggregated_launch.py``), the router names every
worker, and an engine whose roles are not emitted gets no guessed command."""

from __future__ import annotations

import json
import shlex

import yaml

from recommender.engines.disaggregated_launch import disaggregated_launch, equal_pool_tp_reason

VLLM = "vllm serve m --tensor-parallel-size 2 --port 8000"
SGLANG = "python -m sglang.launch_server --model-path m --tp-size 2 --port 8000"


def test_vllm_pools_get_nixl_producer_and_consumer_roles_that_fail_rather_than_recompute() -> None:
    launch = disaggregated_launch(
        "vllm", prefill_command=VLLM, decode_command=VLLM, prefill_workers=3, decode_workers=2
    )
    assert launch is not None
    for command, role in ((launch.prefill, "kv_producer"), (launch.decode, "kv_consumer")):
        argv = shlex.split(command)
        config = json.loads(argv[argv.index("--kv-transfer-config") + 1])
        assert config == {"kv_connector": "NixlConnector", "kv_role": role, "kv_load_failure_policy": "fail"}
    router = shlex.split(launch.router.replace("${", "").replace("}", ""))
    assert router[router.index("--prefiller-ports") + 1 : router.index("--decoder-hosts")] == ["8000"] * 3
    assert router[router.index("--decoder-ports") + 1 :] == ["8000"] * 2


def test_sglang_pools_get_disaggregation_modes_and_the_router_lists_every_worker() -> None:
    launch = disaggregated_launch(
        "sglang", prefill_command=SGLANG, decode_command=SGLANG, prefill_workers=1, decode_workers=4
    )
    assert launch is not None
    assert launch.prefill.endswith("--disaggregation-transfer-backend nixl --disaggregation-mode prefill")
    assert launch.decode.endswith("--disaggregation-mode decode")
    assert launch.router.count("--prefill http://") == 1 and launch.router.count("--decode http://") == 4
    assert "--pd-disaggregation" in launch.router


def test_an_engine_without_emitted_roles_gets_no_command() -> None:
    assert (
        disaggregated_launch("trtllm", prefill_command="x", decode_command="y", prefill_workers=1, decode_workers=1)
        is None
    )


def test_the_dynamo_deployment_runs_each_pool_as_dynamo_vllm_with_its_role_replicas_and_gpus() -> None:
    launch = disaggregated_launch(
        "vllm", prefill_command=VLLM, decode_command=VLLM.replace("2", "4"), prefill_workers=3, decode_workers=2
    )
    assert launch is not None
    services = yaml.safe_load(launch.dynamo)["spec"]["services"]
    prefill, decode = services["VllmPrefillWorker"], services["VllmDecodeWorker"]
    for service, expected in ((prefill, (3, "2", "prefill")), (decode, (2, "4", "decode"))):
        assert (service["replicas"], service["resources"]["limits"]["gpu"], service["subComponentType"]) == expected
    args = prefill["extraPodSpec"]["mainContainer"]["args"]
    assert args[:2] == ["--model", "m"] and args[-2:] == ["--disaggregation-mode", "prefill"]
    assert "--port" not in args
    assert prefill["extraPodSpec"]["mainContainer"]["command"] == ["python3", "-m", "dynamo.vllm"]


def test_sglang_needs_equal_pool_degrees_only_for_a_non_mla_model_with_window_layers() -> None:
    assert equal_pool_tp_reason("sglang", window_layers=True, latent_kv=False) is not None  # gpt-oss
    assert equal_pool_tp_reason("sglang", window_layers=False, latent_kv=True) is None  # DeepSeek-V3
    assert equal_pool_tp_reason("sglang", window_layers=False, latent_kv=False) is None  # Llama
    assert equal_pool_tp_reason("vllm", window_layers=True, latent_kv=False) is None
