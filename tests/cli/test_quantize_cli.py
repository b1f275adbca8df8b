"""`recommender quantize` writes what `vllm serve DIR` loads; `recommender eval --checkpoint` scores that directory.

FP8 dynamic runs in `make test`; the calibrating schemes (SmoothQuant + GPTQ, AWQ) take minutes on
two CPU cores and run with `pytest -m slow`.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, write_suite


def _recommender(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "recommender.cli.main", *args], capture_output=True, text=True, cwd=REPO, timeout=1800
    )


def _quantize(demo_model_dir: Path, scheme: str, out: Path, *extra: str) -> None:
    result = _recommender("quantize", "--model", str(demo_model_dir), "--scheme", scheme, "--out", str(out), *extra)
    assert result.returncode == 0, result.stderr
    assert f"wrote {scheme} checkpoint" in result.stdout and f"vllm serve {out}" in result.stdout
    quant = json.loads((out / "config.json").read_text())["quantization_config"]
    assert quant["quant_method"] == "compressed-tensors" and quant["config_groups"]
    assert list(out.glob("*.safetensors")) and (out / "recipe.yaml").is_file() and (out / "tokenizer.json").is_file()


def test_quantize_fp8_dynamic_writes_a_compressed_tensors_checkpoint(tmp_path: Path, demo_model_dir: Path) -> None:
    _quantize(demo_model_dir, "fp8-dynamic", tmp_path / "fp8")


@pytest.mark.slow  # minutes of plan or search on 2 cores: make test-slow
def test_quantize_gptq_through_the_quiet_command_line(tmp_path: Path, demo_model_dir: Path) -> None:
    """GPTQ logs its timings at llm-compressor's METRIC level: quieting the library must not remove that level."""
    out = tmp_path / "gptq"
    _quantize(demo_model_dir, "w4a16-gptq-g128", out, "--calibration-docs", "2")
    result = _recommender(
        "quantize",
        "--model",
        str(demo_model_dir),
        "--scheme",
        "w4a16-gptq-g128",
        "--out",
        str(tmp_path / "again"),
        "--calibration-docs",
        "2",
    )
    assert result.returncode == 0 and result.stderr == ""
    assert result.stdout.count("\n") == 2  # our two lines: nothing from llm-compressor, compressed-tensors, tqdm


def test_quantize_refuses_what_has_no_checkpoint_and_existing_output(tmp_path: Path, demo_model_dir: Path) -> None:
    nf4 = _recommender("quantize", "--model", str(demo_model_dir), "--scheme", "bnb-nf4", "--out", str(tmp_path / "x"))
    assert nf4.returncode == 2 and nf4.stderr.count("\n") == 1 and "--quantization bitsandbytes" in nf4.stderr
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "file").write_text("keep me")
    busy = _recommender(
        "quantize", "--model", str(demo_model_dir), "--scheme", "fp8-dynamic", "--out", str(tmp_path / "busy")
    )
    assert busy.returncode == 2 and "--out" in busy.stderr and (tmp_path / "busy" / "file").read_text() == "keep me"


@pytest.mark.slow
@pytest.mark.parametrize("scheme", ["int8-w8a8", "w4a16-awq-g128", "w4a16-gptq-g128", "w4a16-rtn-g128"])
def test_each_scheme_quantized_then_scored_from_its_directory(
    tmp_path: Path, demo_model_dir: Path, scheme: str
) -> None:
    out = tmp_path / scheme
    _quantize(demo_model_dir, scheme, out, "--calibration-docs", "8")
    suite = write_suite(tmp_path / "suite.yaml", limit=8)
    result = _recommender(
        "eval",
        "--model",
        str(demo_model_dir),
        "--scheme",
        scheme,
        "--checkpoint",
        str(out),
        "--use-case",
        str(suite),
        "--json",
    )
    assert result.returncode in (0, 1, 3), result.stderr
    scored = json.loads(result.stdout)
    assert scored["method"] == scheme and scored["fidelity"]["mean_kl"] > 0


def test_quantize_help_lists_every_scheme_it_accepts() -> None:
    """The --scheme help is generated from the registry: every scheme that writes a checkpoint is listed, and
    every scheme the help leaves out is one `quantize` refuses (the help and the command agree)."""
    import re

    from typer.testing import CliRunner

    from recommender.cli.checkpoint_export import checkpoint_scheme
    from recommender.cli.main import app
    from recommender.errors import BadInputError
    from recommender.quantize import all_schemes

    result = CliRunner().invoke(app, ["quantize", "--help"], env={"COLUMNS": "400"})
    assert result.exit_code == 0, result.output
    listed = set(re.findall(r"[a-z0-9][a-z0-9+-]*", result.output))
    writers = {name for name, method in all_schemes().items() if method.checkpoint_format is not None}
    assert len(writers) >= 13 and writers <= listed, writers - listed
    for name, method in all_schemes().items():
        if name not in writers:
            with pytest.raises(BadInputError):
                checkpoint_scheme(method)
