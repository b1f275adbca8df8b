"""An expert-parallel plan row's launch (`fleet/launch.py`): its engine's command first, one entry per node for a
replica spanning nodes, never the aggregated tensor-parallel command; the plan row's text pastes into a script."""

from __future__ import annotations

import json
import shlex
from dataclasses import replace

import yaml

from recommender.config.candidate import Candidate
from recommender.engines import EngineLaunch
from recommender.fleet.launch import expert_parallel_launch, launch_commands, launch_text
from recommender.fleet.layouts.expert_parallel_plan import ExpertParallelRow
from recommender.fleet.layouts.parallelism import with_launch
from recommender.perf.catalog.gpus import load_catalog
from recommender.serialization import dumps, from_data, to_data

CATALOG = load_catalog()


def _row(engine: str, ep: int, attention_dp: int) -> ExpertParallelRow:
    return ExpertParallelRow(
        "h100-sxm", "fp8", "fp8-dynamic", engine=engine, ep=ep, attention_dp=attention_dp, batch_size_per_rank=64
    )


def _launch(row: ExpertParallelRow) -> list[EngineLaunch]:
    return expert_parallel_launch(
        row,
        model="deepseek-ai/DeepSeek-V3",
        max_model_len=2500,
        gpus_per_node=8,
        checkpoint="DeepSeek-V3-fp8-dynamic",
        device=CATALOG.get("h100-sxm").device,
    )


def test_the_rows_engine_comes_first_and_every_command_is_expert_parallel() -> None:
    entries = _launch(_row("sglang", 8, 8))
    assert [e.engine for e in entries][:4] == ["sglang", "vllm", "tgi", "trtllm"]
    # then the row's engine's deployment files, and why llm-d has none for SGLang (deploy/expert_parallel.py)
    assert [e.engine.split(" ")[0] for e in entries[4:]] == ["Dynamo", "llm-d"]
    assert entries[0].command is not None and "--ep-size 8" in entries[0].command
    assert "--enable-expert-parallel" in (entries[1].command or "")  # vLLM's, not its aggregated -tp 8 command
    assert not entries[2].supported  # TGI: refused, not given a tensor-parallel command
    assert all("DeepSeek-V3-fp8-dynamic" in (e.command or "DeepSeek-V3-fp8-dynamic") for e in entries)
    assert launch_text(entries, "sglang") == entries[0].command


def test_a_replica_of_two_nodes_lists_each_nodes_command_and_its_text_names_the_nodes() -> None:
    entries = _launch(_row("vllm", 16, 16))
    vllm = [e for e in entries if e.engine.startswith("vllm")]
    assert [e.engine for e in vllm] == ["vllm node 0 of 2", "vllm node 1 of 2"]
    assert "--headless" not in (vllm[0].command or "") and "--headless" in (vllm[1].command or "")
    text = launch_text(entries, "vllm").splitlines()
    assert text == ["# vllm node 0 of 2", vllm[0].command, "# vllm node 1 of 2", vllm[1].command]
    # TensorRT-LLM: one srun starts both nodes (trtllm_multinode.py), so one entry
    [trtllm] = [e for e in entries if e.engine.startswith("trtllm")]
    assert trtllm.engine == "trtllm" and launch_text(entries, "trtllm") == trtllm.command
    assert (trtllm.command or "").startswith("srun --nodes=2 --ntasks-per-node=8 --mpi=pmix trtllm-llmapi-launch ")


def test_a_row_that_serves_nothing_has_no_launch() -> None:
    assert _launch(ExpertParallelRow("h100-sxm", "fp8", "fp8-dynamic", note="no replica meets the SLA")) == []


def test_a_plan_rows_json_carries_its_llm_d_file_with_the_rows_replicas_and_layout() -> None:
    row = replace(_row("vllm", 16, 16), replicas=3, redundant_experts=32)
    planned = with_launch(row, model="deepseek-ai/DeepSeek-V3", accel=CATALOG.get("h100-sxm"), max_model_len=2500)
    data = json.loads(dumps(to_data(planned)))  # what `plan --expert-parallel --json` prints for the row
    assert data["launch"].startswith("# vllm node 0 of 2\nvllm serve DeepSeek-V3-fp8-dynamic ")
    files = {d["engine"].split(" ")[0]: d for d in data["deployments"]}
    lws = yaml.safe_load(files["llm-d"]["config_yaml"])
    assert lws["spec"]["replicas"] == 3 and lws["spec"]["leaderWorkerTemplate"]["size"] == 2
    [container] = lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == "8"
    serve = shlex.split(container["args"][0].splitlines()[-1])
    assert serve[3] == "DeepSeek-V3-fp8-dynamic"  # the checkpoint `quantize --out` writes, as the command serves
    assert serve[serve.index("--data-parallel-size") + 1] == "16" and "--enable-expert-parallel" in serve
    assert serve[serve.index("--eplb-config") + 1] == '{"num_redundant_experts": 32}'
    worker = yaml.safe_load(files["Dynamo"]["config_yaml"])["spec"]["services"]["VllmDecodeWorker"]
    assert worker["replicas"] == 3 and worker["multinode"] == {"nodeCount": 2}
    assert from_data(ExpertParallelRow, to_data(planned)) == planned  # read back as the same row


def test_the_router_policy_reaches_the_expert_parallel_files_and_the_plain_commands_say_what_a_service_loses() -> None:
    entries = expert_parallel_launch(
        _row("vllm", 8, 8), model="deepseek-ai/DeepSeek-V3", max_model_len=2500, gpus_per_node=8, routing="random"
    )
    [graph] = [e for e in entries if e.engine.startswith("Dynamo")]
    frontend = yaml.safe_load(graph.config_yaml or "")["spec"]["services"]["Frontend"]
    assert frontend["envs"] == [{"name": "DYN_ROUTER_MODE", "value": "random"}]
    assert any(e.engine.startswith("llm-d InferencePool") for e in entries)
    h100 = CATALOG.get("h100-sxm")
    candidate = Candidate("fp8", "fp8-dynamic", "h100-sxm", 64)
    plain = launch_commands(candidate, model="org/m", max_model_len=2500, device=h100.device, routing="prefix-aware")
    [vllm] = [e for e in plain if e.engine == "vllm"]
    assert any(
        n.startswith("the plan counted the hits of a prefix-aware router; a plain Kubernetes") for n in vllm.notes
    )
    default = launch_commands(candidate, model="org/m", max_model_len=2500, device=h100.device)
    assert [e.notes for e in default] == [e.notes[:-1] if e.supported else e.notes for e in plain]
