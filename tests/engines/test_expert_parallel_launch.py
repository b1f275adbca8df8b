"""An expert-parallel replica's launch in each engine: DeepSeek-V3 in FP8 at EP 8 on H200 and H100, with data-parallel
attention (8 ranks) or one tensor-parallel attention rank, as `plan --expert-parallel` prices it. The flags are the
ones cited in each engine's module (vllm_parallel.py, sglang.py, trtllm.py); the values are the row's."""

from __future__ import annotations

import shlex

import pytest
import yaml

from recommender.engines import EngineLaunch, LaunchSettings, get_engine
from recommender.engines.expert_parallel import ExpertParallelLaunch
from recommender.errors import BadInputError
from recommender.perf.catalog.gpus import load_catalog
from recommender.quantize import get_scheme

CATALOG = load_catalog()
MODEL = "/ckpt/DeepSeek-V3-fp8-dynamic"
CAP = 64  # the batch cap of one attention rank


def _emit(engine: str, hardware: str, ep: int = 8, attention_dp: int = 8, **layout: int) -> EngineLaunch:
    settings = LaunchSettings(
        model=MODEL,
        method=get_scheme("fp8-dynamic"),
        dtype="bfloat16",
        tensor_parallel=ep,
        max_num_seqs=CAP,
        max_num_batched_tokens=8192,
        kv_cache_dtype="fp8",
        gpu_memory_utilization=0.9,
        max_model_len=2500,
        device=CATALOG.get(hardware).device,
        expert_parallel=ExpertParallelLaunch(ep=ep, attention_dp=attention_dp, **layout),
    )
    return get_engine(engine).emit(settings)


def _flags(launch: EngineLaunch) -> tuple[dict[str, str], set[str]]:
    """The ``--flag value`` pairs and the switches (flags without a value) of a command."""
    assert launch.supported and launch.argv is not None, launch.notes
    argv = launch.argv
    start = next(i for i, a in enumerate(argv) if a.startswith("--") and a != "--model-path")
    values: dict[str, str] = {}
    switches: set[str] = set()
    i = start
    while i < len(argv):
        if i + 1 < len(argv) and not argv[i + 1].startswith("--"):
            values[argv[i]] = argv[i + 1]
            i += 2
        else:
            switches.add(argv[i])
            i += 1
    return values, switches


@pytest.mark.parametrize("hardware", ["h200", "h100-sxm"])
@pytest.mark.parametrize("attention_dp", [8, 1])
def test_vllm_enables_expert_parallelism_over_data_parallel_or_tensor_parallel_attention(
    hardware: str, attention_dp: int
) -> None:
    values, switches = _flags(_emit("vllm", hardware, attention_dp=attention_dp))
    assert "--enable-expert-parallel" in switches  # EP_SIZE = TP_SIZE x DP_SIZE (expert_parallel_deployment.md)
    assert values["--tensor-parallel-size"] == str(8 // attention_dp)
    assert values.get("--data-parallel-size") == (None if attention_dp == 1 else "8")
    assert values["--max-num-seqs"] == str(CAP) and values["--kv-cache-dtype"] == "fp8"


@pytest.mark.parametrize("hardware", ["h200", "h100-sxm"])
@pytest.mark.parametrize("attention_dp", [8, 1])
def test_sglang_splits_the_experts_with_ep_size_and_scales_its_replica_wide_caps_by_the_ranks(
    hardware: str, attention_dp: int
) -> None:
    values, switches = _flags(_emit("sglang", hardware, attention_dp=attention_dp))
    assert values["--tp-size"] == "8" and values["--ep-size"] == "8"
    assert ("--enable-dp-attention" in switches) == (attention_dp > 1)
    assert values.get("--dp-size") == (None if attention_dp == 1 else "8")
    # tp_worker.py divides --max-running-requests by --dp-size under DP attention; server_args.py the chunk size.
    assert values["--max-running-requests"] == str(CAP * attention_dp)
    assert values["--chunked-prefill-size"] == str(8192 * attention_dp) and values["--max-prefill-tokens"] == "8192"
    assert values["--kv-cache-dtype"] == "fp8_e4m3"


@pytest.mark.parametrize("hardware", ["h200", "h100-sxm"])
@pytest.mark.parametrize("attention_dp", [8, 1])
def test_trtllm_sets_ep_size_and_attention_dp_in_its_options_file(hardware: str, attention_dp: int) -> None:
    launch = _emit("trtllm", hardware, attention_dp=attention_dp)
    values, _ = _flags(launch)
    assert values["--tp_size"] == "8" and values["--ep_size"] == "8" and values["--max_batch_size"] == str(CAP)
    assert launch.config_yaml is not None
    options = yaml.safe_load(launch.config_yaml)
    assert options.get("enable_attention_dp", False) is (attention_dp > 1)
    assert options["kv_cache_config"]["dtype"] == "fp8"


def test_the_aggregated_command_is_unchanged_by_the_expert_parallel_settings() -> None:
    launch = _emit("vllm", "h200")
    settings = LaunchSettings(
        model=MODEL,
        method=get_scheme("fp8-dynamic"),
        dtype="bfloat16",
        tensor_parallel=8,
        max_num_seqs=CAP,
        max_num_batched_tokens=8192,
        kv_cache_dtype="fp8",
        gpu_memory_utilization=0.9,
        max_model_len=2500,
    )
    for name in ("vllm", "sglang", "trtllm"):
        plain = get_engine(name).emit(settings).command or ""
        assert "--enable-expert-parallel" not in plain and "--ep-size" not in plain and "--ep_size" not in plain
    assert launch.command != get_engine("vllm").emit(settings).command


def test_a_replica_of_two_nodes_has_one_command_per_node_with_the_head_address_left_to_the_shell() -> None:
    head, second = (_emit("vllm", "h100-sxm", ep=16, attention_dp=16, node_rank=r) for r in (0, 1))
    head_values, head_switches = _flags(head)
    values, switches = _flags(second)
    assert head_values["--data-parallel-size"] == "16" and head_values["--data-parallel-size-local"] == "8"
    assert "--headless" not in head_switches and "--data-parallel-start-rank" not in head_values
    assert "--headless" in switches and values["--data-parallel-start-rank"] == "8"
    assert values["--data-parallel-address"] == "${HEAD_NODE_IP}"
    assert '"${HEAD_NODE_IP}"' in (second.command or "")  # double quotes: the shell expands the variable
    sglang = [_flags(_emit("sglang", "h100-sxm", ep=16, attention_dp=16, node_rank=r))[0] for r in (0, 1)]
    assert [(v["--nnodes"], v["--node-rank"]) for v in sglang] == [("2", "0"), ("2", "1")]
    assert sglang[0]["--dist-init-addr"] == "${HEAD_NODE_IP}:25000"


@pytest.mark.parametrize(
    ("engine", "layout", "needle"),
    [
        ("trtllm", {"ep": 8, "attention_dp": 8, "redundant_experts": 32}, "Wide-EP"),
        ("vllm", {"ep": 16, "attention_dp": 1}, "Ray cluster"),
        ("tgi", {"ep": 8, "attention_dp": 8}, "expert-parallel flags were not verified"),
    ],
)
def test_an_engine_that_does_not_launch_the_layout_refuses_with_the_reason(
    engine: str, layout: dict[str, int], needle: str
) -> None:
    launch = _emit(engine, "h100-sxm", **layout)
    assert not launch.supported and launch.command is None
    assert needle in launch.notes[0], launch.notes


def test_redundant_experts_turn_on_each_engines_load_balancer() -> None:
    vllm_values, vllm_switches = _flags(_emit("vllm", "h200", redundant_experts=32))
    assert "--enable-eplb" in vllm_switches and vllm_values["--eplb-config"] == '{"num_redundant_experts": 32}'
    sglang_values, sglang_switches = _flags(_emit("sglang", "h200", redundant_experts=32))
    assert "--enable-eplb" in sglang_switches and sglang_values["--ep-num-redundant-experts"] == "32"


def test_vllm_config_yaml_holds_the_expert_parallel_switches() -> None:
    launch = _emit("vllm", "h200")
    assert launch.config_yaml is not None
    document = yaml.safe_load(launch.config_yaml)
    assert document["enable-expert-parallel"] is True and document["data-parallel-size"] == 8
    assert shlex.split(launch.command or "")[:3] == ["vllm", "serve", MODEL]


@pytest.mark.parametrize(
    ("layout", "field"),
    [
        ({"ep": 8, "attention_dp": 3}, "launch.expert_parallel.attention_dp"),
        ({"ep": 12, "attention_dp": 12}, "launch.expert_parallel.gpus_per_node"),
        ({"ep": 1, "attention_dp": 1}, "launch.expert_parallel.ep"),
    ],
)
def test_a_layout_no_engine_can_run_is_refused_naming_the_field(layout: dict[str, int], field: str) -> None:
    with pytest.raises(BadInputError) as info:
        ExpertParallelLaunch(**layout)
    assert info.value.field == field


def test_trtllm_starts_a_replica_of_two_nodes_with_one_srun_of_trtllm_llmapi_launch() -> None:
    launch = _emit("trtllm", "h100-sxm", ep=16, attention_dp=16)
    argv = launch.argv
    assert launch.supported and argv is not None, launch.notes
    # examples/llm-api/llm_mgmn_trtllm_serve.sh: one MPI process per GPU of the model's world, 2 nodes x 8
    assert argv[:5] == ["srun", "--nodes=2", "--ntasks-per-node=8", "--mpi=pmix", "trtllm-llmapi-launch"]
    assert argv[5:7] == ["trtllm-serve", MODEL] and argv[-2:] == ["--host", "0.0.0.0"]
    values, _ = _flags(launch)
    assert values["--tp_size"] == "16" and values["--ep_size"] == "16" and values["--max_batch_size"] == str(CAP)
    assert yaml.safe_load(launch.config_yaml or "")["enable_attention_dp"] is True
    assert _emit("trtllm", "h100-sxm", ep=16, attention_dp=16, node_rank=1).command == launch.command
