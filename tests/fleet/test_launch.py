"""An expert-parallel plan row's launch (`fleet/launch.py`): its engine's command first, one entry per node for a
replica spanning nodes, never the aggregated tensor-parallel command; the plan row's text pastes into a script."""

from __future__ import annotations

from recommender.engines import EngineLaunch
from recommender.fleet.expert_parallel_plan import ExpertParallelRow
from recommender.fleet.launch import expert_parallel_launch, launch_text
from recommender.perf.catalog.gpus import load_catalog

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
    assert [e.engine for e in entries] == ["sglang", "vllm", "tgi", "trtllm"]
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
    trtllm = next(e for e in entries if e.engine == "trtllm")
    assert not trtllm.supported and launch_text(entries, "trtllm") == ""


def test_a_row_that_serves_nothing_has_no_launch() -> None:
    assert _launch(ExpertParallelRow("h100-sxm", "fp8", "fp8-dynamic", note="no replica meets the SLA")) == []
