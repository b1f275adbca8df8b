"""An expert-parallel replica's deployment files (`deploy/expert_parallel.py`): llm-d's wide-EP
LeaderWorkerSet and Dynamo's DynamoGraphDeployment, each parsed back and checked against the row's values (replicas,
nodes, GPUs per pod, DP/EP sizes, EPLB slots, batch caps); a framework without a path for the engine answers with a
note, never a file."""

from __future__ import annotations

import shlex
from typing import Any

import pytest
import yaml

from recommender.deploy.expert_parallel import deployment_entries, expert_parallel_deployments
from recommender.engines import EngineLaunch, LaunchSettings, get_engine
from recommender.engines.expert_parallel import ExpertParallelLaunch
from recommender.perf.catalog.gpus import load_catalog
from recommender.quantize import get_scheme

DEVICE = load_catalog().get("h200").device
MODEL = "deepseek-ai/DeepSeek-V3"


def _deploy(engine: str, ep: int, attention_dp: int, redundant: int = 0, replicas: int = 3) -> list[EngineLaunch]:
    layout = ExpertParallelLaunch(ep=ep, attention_dp=attention_dp, redundant_experts=redundant)
    settings = LaunchSettings(
        model=MODEL,
        method=get_scheme("fp8-dynamic"),
        dtype="bfloat16",
        tensor_parallel=ep,
        max_num_seqs=64,
        max_num_batched_tokens=8192,
        kv_cache_dtype="fp8",
        gpu_memory_utilization=0.9,
        max_model_len=2500,
        device=DEVICE,
        expert_parallel=layout,
    )
    return expert_parallel_deployments(engine, get_engine(engine).emit(settings), layout=layout, replicas=replicas)


def _file(entries: list[EngineLaunch], prefix: str) -> list[dict[str, Any]]:
    [entry] = [e for e in entries if e.engine.startswith(prefix)]
    assert entry.supported and entry.config_yaml is not None and entry.sources, entry
    return list(yaml.safe_load_all(entry.config_yaml))


def _values(argv: list[str]) -> dict[str, str]:
    return {a: argv[i + 1] for i, a in enumerate(argv[:-1]) if a.startswith("--") and not argv[i + 1].startswith("--")}


@pytest.mark.parametrize(("ep", "nodes"), [(8, 1), (16, 2)])
def test_llm_d_runs_the_rows_replicas_of_its_nodes_with_its_data_parallel_and_eplb(ep: int, nodes: int) -> None:
    [lws] = _file(_deploy("vllm", ep, ep, redundant=32), "llm-d")
    assert lws["kind"] == "LeaderWorkerSet" and lws["apiVersion"] == "leaderworkerset.x-k8s.io/v1"
    assert lws["spec"]["replicas"] == 3 and lws["spec"]["leaderWorkerTemplate"]["size"] == nodes
    pod = lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]
    [container] = pod["containers"]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == "8"  # one node's GPUs per pod
    script = container["args"][0]
    serve = shlex.split(script.splitlines()[-1])
    assert serve[:3] == ["exec", "vllm", "serve"] and serve[3] == MODEL
    values = _values(serve)
    assert values["--data-parallel-size"] == str(ep) and values["--tensor-parallel-size"] == "1"
    assert values["--eplb-config"] == '{"num_redundant_experts": 32}' and "--enable-eplb" in serve
    assert values["--max-num-seqs"] == "64" and values["--kv-cache-dtype"] == "fp8" and values["--port"] == "8000"
    assert "--enable-expert-parallel" in serve and "--headless" not in serve and "${HEAD_NODE_IP}" not in script
    assert "kv_transfer_config" not in script and "kv-transfer-config" not in script  # aggregated: no NIXL roles
    if nodes > 1:  # every pod serves its own ranks (hybrid LB); the ranks start at the pod's index x local ranks
        assert "--data-parallel-hybrid-lb" in serve and values["--data-parallel-size-local"] == "8"
        assert values["--data-parallel-address"] == "${LWS_LEADER_ADDRESS}"
        assert values["--data-parallel-start-rank"] == "$START_RANK"
        assert "START_RANK=$(( LWS_WORKER_INDEX * DP_SIZE_LOCAL ))" in script
        assert {"name": "DP_SIZE_LOCAL", "value": "8"} in container["env"]
    else:
        assert "--data-parallel-hybrid-lb" not in serve and "--data-parallel-address" not in values


def test_dynamo_vllm_leaves_the_per_node_flags_to_its_operator() -> None:
    [dgd] = _file(_deploy("vllm", 16, 16), "Dynamo")
    assert dgd["kind"] == "DynamoGraphDeployment" and dgd["spec"]["backendFramework"] == "vllm"
    worker = dgd["spec"]["services"]["VllmDecodeWorker"]
    assert (
        worker["replicas"] == 3
        and worker["multinode"] == {"nodeCount": 2}
        and worker["resources"]["limits"]["gpu"] == "8"
    )
    args = worker["extraPodSpec"]["mainContainer"]["args"]
    assert args[:2] == ["--model", MODEL] and _values(args)["--data-parallel-size"] == "16"
    assert "--data-parallel-hybrid-lb" in args and "--enable-expert-parallel" in args
    for injected in ("--data-parallel-address", "--data-parallel-size-local", "--data-parallel-start-rank", "--port"):
        assert injected not in args, args


def test_dynamo_sglang_keeps_ep_and_dp_attention_and_drops_the_node_flags() -> None:
    entries = _deploy("sglang", 16, 16, redundant=32, replicas=2)
    [dgd] = _file(entries, "Dynamo")
    worker = dgd["spec"]["services"]["decode"]
    assert worker["replicas"] == 2 and worker["multinode"] == {"nodeCount": 2}
    container = worker["extraPodSpec"]["mainContainer"]
    assert container["command"] == ["python3", "-m", "dynamo.sglang"]
    values = _values(container["args"])
    assert values["--model-path"] == MODEL and values["--tp-size"] == "16" and values["--ep-size"] == "16"
    assert values["--dp-size"] == "16" and values["--ep-num-redundant-experts"] == "32"
    assert "--enable-dp-attention" in container["args"] and "--enable-eplb" in container["args"]
    assert not {"--nnodes", "--node-rank", "--dist-init-addr", "--port"} & set(container["args"])
    [llm_d] = [e for e in entries if e.engine.startswith("llm-d")]  # no aggregated SGLang wide-EP guide in llm-d
    assert not llm_d.supported and llm_d.config_yaml is None and "DisaggregatedSet" in llm_d.notes[0]


def test_dynamo_trtllm_mounts_the_engine_options_with_the_serve_flags_folded_in() -> None:
    entries = _deploy("trtllm", 8, 8)
    configmap, dgd = _file(entries, "Dynamo")
    config = yaml.safe_load(configmap["data"]["config.yaml"])
    assert config["tensor_parallel_size"] == 8 and config["moe_expert_parallel_size"] == 8
    assert config["enable_attention_dp"] is True and config["max_batch_size"] == 64 and config["max_seq_len"] == 2500
    assert config["kv_cache_config"] == {"free_gpu_memory_fraction": 0.9, "dtype": "fp8"}
    worker = dgd["spec"]["services"]["TrtllmWorker"]
    assert worker["replicas"] == 3 and "multinode" not in worker
    assert worker["extraPodSpec"]["volumes"][0]["configMap"]["name"] == configmap["metadata"]["name"]
    assert worker["extraPodSpec"]["mainContainer"]["args"][-2:] == ["--extra-engine-args", "/config/config.yaml"]
    assert [e.supported for e in deployment_entries(entries)] == [True, False]  # llm-d has no TensorRT-LLM guide


def test_dynamo_runs_a_trtllm_replica_of_two_nodes_under_its_operator() -> None:
    entries = _deploy("trtllm", 16, 16)
    configmap, dgd = _file(entries, "Dynamo")
    config = yaml.safe_load(configmap["data"]["config.yaml"])
    assert config["tensor_parallel_size"] == 16 and config["moe_expert_parallel_size"] == 16
    worker = dgd["spec"]["services"]["TrtllmWorker"]
    assert worker["multinode"] == {"nodeCount": 2} and worker["resources"]["limits"]["gpu"] == "8"
    args = worker["extraPodSpec"]["mainContainer"]["args"]
    assert args[:2] == ["--model-path", MODEL] and "srun" not in args  # the operator wraps it in mpirun
    [dynamo] = [e for e in entries if e.engine.startswith("Dynamo")]
    assert any("mpirun-ssh-key" in n for n in dynamo.notes)


def test_no_file_where_the_engine_emitted_no_command() -> None:
    assert _deploy("trtllm", 8, 8, redundant=32) == []  # TensorRT-LLM's command refuses redundant expert slots
    assert _deploy("tgi", 8, 8) == []
