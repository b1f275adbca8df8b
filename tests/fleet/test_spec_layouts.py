"""`recommender plan --spec` on a spec with ``space.layout: [aggregated, disaggregated]``: each GPU and precision's
aggregated row against its pools at the spec's link and degrees, priced, with the pools' launch and the reason (the
same answer `plan --layout ... --link ...` gives: tests/fleet/layouts/test_layout_compare.py)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml

from recommender.cli import main as cli
from tests.conftest import write_spec, write_suite


@pytest.mark.slow  # about 30 s on 2 cores: the spec's plan rows at every degree, then both layouts
def test_plan_spec_compares_the_layouts_the_spec_searches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = write_spec(
        tmp_path / "pd.yaml",
        {
            "use_case": str(write_suite(tmp_path / "suite.yaml")),
            "traffic": {"prompt_tokens": 8000, "output_tokens": 256, "requests_per_second": 20},
            "sla": {"ttft_p99_ms": 2000, "tpot_p99_ms": 15},
            "engines": ["sglang"],
            "space": {
                "schemes": {"fp8": ["fp8-dynamic"]},
                "hardware": ["h100-sxm"],
                "batch_sizes": [128],
                "tensor_parallel": [2],
                "kv_cache_dtypes": ["auto"],
                "layout": ["aggregated", "disaggregated"],
                "link": "nvlink",
            },
            "current": {"precision": "fp8", "scheme": "fp8-dynamic", "hardware": "h100-sxm", "batch_size": 128},
        },
    )
    argv = ["recommender", "plan", "--spec", str(spec), "--model", "llama-3.1-8b", "--json"]
    monkeypatch.setattr(sys, "argv", argv)
    with pytest.raises(SystemExit) as done:
        cli.main()
    assert done.value.code == 0
    plan = json.loads(capsys.readouterr().out)
    [got] = plan["layouts"]
    assert got["winner"] == "disaggregated" and got["reason"].startswith("disaggregated saves"), got["reason"]
    pools = got["disaggregated"]
    assert pools["link"] == "nvlink" and pools["prefill"]["tensor_parallel"] == 2 and pools["usd_per_month"] > 0
    assert "--disaggregation-mode prefill" in pools["launch"]["prefill"]
    assert "--disaggregation-mode decode" in pools["launch"]["decode"]
    assert plan["rows"]  # the plan's own rows are kept


@pytest.mark.slow  # about a minute on 2 cores: DeepSeek-V3's plan rows, then TP 8 against EP 8
def test_plan_spec_compares_tensor_and_expert_parallelism_at_the_spec_degrees(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = write_spec(
        tmp_path / "ep.yaml",
        {
            "use_case": str(write_suite(tmp_path / "suite.yaml")),
            "traffic": {"prompt_tokens": 1000, "output_tokens": 1000, "requests_per_second": 20},
            "sla": {"ttft_p99_ms": 3000, "tpot_p99_ms": 80},
            "engines": ["sglang"],
            "space": {
                "schemes": {"fp8": ["fp8-dynamic"]},
                "hardware": ["h200"],
                "batch_sizes": [64],
                "tensor_parallel": [8],
                "kv_cache_dtypes": ["auto"],
                "expert_parallel": [1, 8],
            },
            "current": {"precision": "fp8", "scheme": "fp8-dynamic", "hardware": "h200", "batch_size": 64},
        },
    )
    monkeypatch.setattr(sys, "argv", ["recommender", "plan", "--spec", str(spec), "--model", "deepseek-v3", "--json"])
    with pytest.raises(SystemExit) as done:
        cli.main()
    assert done.value.code == 0
    [got] = json.loads(capsys.readouterr().out)["parallelism"]
    assert got["winner"] == "expert-parallel" and got["reason"].startswith("expert parallelism saves 78%"), got[
        "reason"
    ]
    # 4 x EP 8 against 18 x TP 8 at steady state (docs/moe-and-disaggregation.md)
    assert got["expert_parallel"]["gpus"] == 32 and got["expert_parallel"]["ep"] == 8
    launch = got["expert_parallel"]["launch"]  # SGLang's expert-parallel command serving the spec's model
    for flag in ("--tp-size 8", "--ep-size 8", "--dp-size 8", "--enable-dp-attention", "--max-running-requests 512"):
        assert flag in launch, launch
    # and Dynamo's file deploying its 4 replicas (deploy/expert_parallel.py)
    [dynamo] = [d for d in got["expert_parallel"]["deployments"] if d["engine"].startswith("Dynamo")]
    assert yaml.safe_load(dynamo["config_yaml"])["spec"]["services"]["decode"]["replicas"] == 4


@pytest.mark.slow  # about 110 s on 2 cores: the plan rows, TP against EP, then the pools with EP workers
def test_plan_spec_gives_the_pools_expert_parallel_workers_at_the_spec_degrees(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = write_spec(
        tmp_path / "pd-ep.yaml",
        {
            "use_case": str(write_suite(tmp_path / "suite.yaml")),
            "traffic": {"prompt_tokens": 2000, "output_tokens": 500, "requests_per_second": 150},
            "sla": {"ttft_p99_ms": 2000, "tpot_p99_ms": 50},
            "engines": ["vllm"],
            "space": {
                "schemes": {"fp8": ["fp8-dynamic"]},
                "hardware": ["h100-sxm"],
                "batch_sizes": [128],
                "tensor_parallel": [1],
                "kv_cache_dtypes": ["auto"],
                "layout": ["aggregated", "disaggregated"],
                "expert_parallel": [1, 8],
                "link": "infiniband-ndr",
            },
            "current": {"precision": "fp8", "scheme": "fp8-dynamic", "hardware": "h100-sxm", "batch_size": 128},
        },
    )
    argv = ["recommender", "plan", "--spec", str(spec), "--model", "qwen3-30b-a3b", "--json"]
    monkeypatch.setattr(sys, "argv", argv)
    with pytest.raises(SystemExit) as done:
        cli.main()
    assert done.value.code == 0
    [got] = json.loads(capsys.readouterr().out)["layouts"]
    # three EP8 workers (24 GPUs) decode what TP1 workers need more GPUs for (docs/moe-and-disaggregation.md)
    decode = got["disaggregated"]["decode"]
    assert (decode["expert_parallel"], decode["attention_dp"], decode["estimate"]["gpus"]) == (8, 8, 24)
    assert "--enable-expert-parallel" in got["disaggregated"]["launch"]["decode"]
