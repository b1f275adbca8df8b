"""Each pool's worker gets its engine's role flags (cited in ``deploy/disaggregated.py``), the router names every
worker, and an engine whose roles are not emitted gets no guessed command."""

from __future__ import annotations

import json
import shlex

import yaml

from recommender.deploy.disaggregated import disaggregated_launch, equal_pool_tp_reason

VLLM = "vllm serve m --tensor-parallel-size 2 --port 8000"
SGLANG = "python -m sglang.launch_server --model-path m --tp-size 2 --port 8000"
TRTLLM = "trtllm-serve m --backend pytorch --tp_size 2 --max_batch_size 64 --port 8000"


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
        disaggregated_launch("tgi", prefill_command="x", decode_command="y", prefill_workers=1, decode_workers=1)
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


def test_trtllm_servers_carry_the_cache_transceiver_and_the_router_config_lists_every_server() -> None:
    """TensorRT-LLM's disaggregated README: context servers without the overlap scheduler, both with a
    cache_transceiver_config whose buffer holds the longest input, and `trtllm-serve disaggregated -c FILE`."""
    launch = disaggregated_launch(
        "trtllm",
        prefill_command=TRTLLM,
        decode_command=TRTLLM + " --extra_llm_api_options extra_llm_api_options.yaml",
        prefill_workers=2,
        decode_workers=1,
        decode_options="kv_cache_config:\n  dtype: fp8\n",
        max_prompt_tokens=8192,
    )
    assert launch is not None and launch.router == "trtllm-serve disaggregated -c disagg_config.yaml"
    files = dict(launch.files)
    ctx, gen = (
        yaml.safe_load(files["ctx_extra-llm-api-config.yaml"]),
        yaml.safe_load(files["gen_extra-llm-api-config.yaml"]),
    )
    transceiver = {"backend": "DEFAULT", "max_tokens_in_buffer": 8192}
    assert ctx == {"disable_overlap_scheduler": True, "cache_transceiver_config": transceiver}
    assert gen == {"kv_cache_config": {"dtype": "fp8"}, "cache_transceiver_config": transceiver}  # its own options kept
    for command, file in ((launch.prefill, "ctx"), (launch.decode, "gen")):
        argv = shlex.split(command)
        assert argv.count("--extra_llm_api_options") == 1
        assert argv[argv.index("--extra_llm_api_options") + 1] == f"{file}_extra-llm-api-config.yaml"
        assert argv[argv.index("--host") + 1] == "0.0.0.0"
    router = yaml.safe_load(files["disagg_config.yaml"])
    assert router["backend"] == "pytorch" and router["port"] == 8000
    assert router["context_servers"]["num_instances"] == len(router["context_servers"]["urls"]) == 2
    assert router["generation_servers"]["num_instances"] == len(router["generation_servers"]["urls"]) == 1


def test_llm_d_values_give_each_pool_its_replicas_degree_and_nixl_connector() -> None:
    launch = disaggregated_launch(
        "vllm", prefill_command=VLLM, decode_command=VLLM.replace("2", "4"), prefill_workers=3, decode_workers=2
    )
    assert launch is not None
    values = yaml.safe_load(launch.llm_d)
    assert values["modelArtifacts"] == {"uri": "hf://m", "name": "m"}
    assert values["routing"]["proxy"]["connector"] == "nixlv2"
    for role, replicas, tp in (("prefill", 3, 2), ("decode", 2, 4)):
        pool = values[role]
        assert pool["replicas"] == replicas and pool["parallelism"]["tensor"] == tp
        (container,) = pool["containers"]
        assert container["modelCommand"] == "vllmServe" and container["resources"]["limits"]["nvidia.com/gpu"] == str(
            tp
        )
        args = container["args"]
        assert args[:2] == ["--tensor-parallel-size", str(tp)] and "--port" not in args  # the chart sets the port
        assert json.loads(args[args.index("--kv-transfer-config") + 1])["kv_role"] == "kv_both"
