"""Head sizes per engine: a size none of an engine's attention backends takes refuses that engine, naming the sizes;
a model no listed engine runs is one `error:` line (exit 2, nothing written), through the real CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from recommender.engines.eligibility import eligibility
from recommender.engines.head_sizes import check_runnable, head_size_refusal
from recommender.errors import BadInputError
from recommender.perf.catalog.gpus import load_catalog
from recommender.quantize import get_scheme
from tests.conftest import REPO


def _config(tmp_path: Path, *, hidden: int, heads: int) -> Path:
    """A two-layer Llama config.json whose head size is hidden / heads."""
    path = tmp_path / f"h{hidden // heads}" / "config.json"
    path.parent.mkdir()
    path.write_text(
        json.dumps(
            {
                "architectures": ["LlamaForCausalLM"],
                "model_type": "llama",
                "hidden_size": hidden,
                "num_attention_heads": heads,
                "num_key_value_heads": heads,
                "num_hidden_layers": 2,
                "intermediate_size": 4 * hidden,
                "vocab_size": 1000,
                "max_position_embeddings": 2048,
            }
        )
    )
    return path


def _run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "recommender.cli.main", *args], capture_output=True, text=True, cwd=cwd, timeout=300
    )


def _one_error_line(result: subprocess.CompletedProcess[str], *needles: str) -> str:
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr and result.stdout == ""
    lines = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, result.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def test_vllm_falls_back_past_flash_attention_and_sglang_and_trtllm_do_not() -> None:
    assert head_size_refusal("vllm", 128) is None and head_size_refusal("trtllm", 128) is None
    # 20: not a multiple of 8 (FlashAttention), below 32 (Triton): FlexAttention takes it in vLLM.
    assert head_size_refusal("vllm", 20) is None
    trtllm = head_size_refusal("trtllm", 20)
    assert trtllm is not None and "32, 48, 64, 80" in trtllm
    assert head_size_refusal("sglang", 20) is not None
    h100 = load_catalog().get("h100-sxm").device
    l40s = load_catalog().get("l40s").device
    # SGLang runs FlashAttention 3 on Hopper (80 is a multiple of 8) and FlashInfer elsewhere (64, 128, 256).
    assert head_size_refusal("sglang", 80, h100) is None
    refused = head_size_refusal("sglang", 80, l40s)
    assert refused is not None and "64, 128, 256" in refused


def test_size_seven_is_refused_by_every_engine_with_the_sizes_named() -> None:
    for engine in ("vllm", "sglang", "trtllm"):
        assert head_size_refusal(engine, 7) is not None
    with pytest.raises(BadInputError) as raised:
        check_runnable(7, ("vllm", "sglang", "trtllm"), field="--model")
    text = str(raised.value)
    assert text.startswith("--model:") and "multiples of 8 up to 256" in text and "16 and above" in text
    check_runnable(20, ("vllm", "trtllm"), field="--model")  # vLLM takes it: no error


def test_eligibility_refuses_only_the_engine_without_a_fallback() -> None:
    h100 = load_catalog().get("h100-sxm").device
    served = eligibility(get_scheme("baseline"), h100, ("vllm", "trtllm"), head_size=20)
    assert served.engines == ("vllm",)
    assert [e for e, _ in served.refusals] == ["trtllm"] and "head size 20" in served.refusals[0][1]
    assert eligibility(get_scheme("baseline"), h100, ("vllm", "trtllm"), head_size=128).engines == ("vllm", "trtllm")


def test_plan_and_estimate_refuse_head_size_seven(tmp_path: Path) -> None:
    config = str(_config(tmp_path, hidden=28, heads=4))
    before = sorted(p.name for p in tmp_path.iterdir())
    _one_error_line(
        _run("plan", "--model", config, "--hardware", "h100-sxm", cwd=tmp_path),
        "--model",
        "head size 7",
        "FlexAttention: 16 and above",
        "fix:",
    )
    _one_error_line(
        _run(
            "estimate",
            "--model",
            config,
            "--hardware",
            "h100-sxm",
            "--precision",
            "bf16",
            "--concurrency",
            "4",
            "--prompt-tokens",
            "128",
            "--output-tokens",
            "16",
            cwd=tmp_path,
        ),
        "--model",
        "head size 7",
        "multiples of 8 up to 256",
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # nothing written


def test_head_size_only_flex_attention_takes_plans_on_vllm_not_on_trtllm(tmp_path: Path) -> None:
    config = str(_config(tmp_path, hidden=80, heads=4))  # head size 20
    line = _one_error_line(
        _run(
            "plan",
            "--model",
            config,
            "--hardware",
            "h100-sxm",
            "--engine",
            "trtllm",
            "--precision",
            "bf16",
            "--batch-size",
            "64",
            cwd=tmp_path,
        ),
        "head size 20",
    )
    assert "trtllm" in line and "32, 48, 64" in line
    estimate = _run(
        "estimate",
        "--model",
        config,
        "--hardware",
        "h100-sxm",
        "--engine",
        "trtllm",
        "--precision",
        "bf16",
        "--concurrency",
        "4",
        "--prompt-tokens",
        "128",
        "--output-tokens",
        "16",
        cwd=tmp_path,
    )
    assert "--engine vllm" in _one_error_line(estimate, "--model", "trtllm")
    planned = _run(
        "plan",
        "--model",
        config,
        "--hardware",
        "h100-sxm",
        "--engine",
        "vllm",
        "--precision",
        "bf16",
        "--batch-size",
        "64",
        "--json",
        cwd=REPO,
    )
    assert planned.returncode == 0, planned.stderr
    rows = json.loads(planned.stdout)
    assert rows and all(not r["note"].startswith("refused") for r in rows) and rows[0]["engine"] == "vllm"
