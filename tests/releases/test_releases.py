"""Two real releases of the demo model through two real short studies, then compare and gate from MLflow alone."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from recommender.config.spec import load_spec
from recommender.quality.statistics import MIN_CONTINUOUS_DOCS
from recommender.study import run_search
from tests.conftest import REPO, write_suite

# Two real studies and a dozen CLI subprocesses: about seven minutes on two cores.
pytestmark = pytest.mark.slow

DEMO_V2 = REPO / "recommender" / "demo" / "model-v2"


def _run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "recommender.cli.main", *args], capture_output=True, text=True, cwd=cwd, timeout=300
    )


def _study(tmp_path: Path, *, model_dir: Path, release: str, hardware: list[str], suite: Path) -> Path:
    spec = {
        "name": f"release-{release}",
        "model": {"source": str(model_dir), "name": "demo-code-llama", "release": release},
        "use_case": str(suite),
        "traffic": {"prompt_tokens": 32, "output_tokens": 16, "requests_per_second": 5},
        "sla": {"ttft_p99_ms": 5000, "tpot_p99_ms": 1000},
        "space": {
            "methods": {"bf16": ["baseline"], "fp16": ["fp16"]},
            "hardware": hardware,
            "batch_sizes": [4],
        },
        "current": {"precision": "bf16", "method": "baseline", "hardware": "h100-sxm", "batch_size": 4},
        "search": {"n_trials": 4, "seed": 0},
    }
    path = tmp_path / f"{release}.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


@pytest.fixture(scope="module")
def tracked(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """v1 may serve on an L40S or an H100 (the default price set has no L4); v2 (v1 trained further) only on an
    H100, so it costs more."""
    tmp = tmp_path_factory.mktemp("releases")
    suite = write_suite(tmp / "suite.yaml", limit=6)
    # The gate compares bf16 across releases on a paired interval: bits_per_byte needs MIN_CONTINUOUS_DOCS documents.
    suite.write_text(suite.read_text().replace("limit: 4\n", f"limit: {MIN_CONTINUOUS_DOCS}\n"))
    tracking = f"sqlite:///{tmp}/mlflow.db"
    for release, model_dir, hardware in (
        ("v1", REPO / "recommender" / "demo" / "model", ["l40s", "h100-sxm"]),
        ("v2", DEMO_V2, ["h100-sxm"]),
    ):
        spec = load_spec(_study(tmp, model_dir=model_dir, release=release, hardware=hardware, suite=suite))
        run_search(spec, storage=f"sqlite:///{tmp}/optuna.db", tracking_uri=tracking, output_root=tmp / "out")
    return tmp, tracking


def test_compare_reads_both_releases_from_mlflow(tracked: tuple[Path, str]) -> None:
    tmp, tracking = tracked
    result = _run_cli(
        "compare",
        "--model",
        "demo-code-llama",
        "--tracking-uri",
        tracking,
        "--format",
        "json",
        "--plot",
        str(tmp / "compare.png"),
        cwd=tmp,
    )
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert [r["release"] for r in data["releases"]] == ["v1", "v2"]
    v1, v2 = data["releases"]
    assert v1["recommended"].endswith("@l40sx1/bs4") and v2["recommended"].endswith("@h100-sxmx1/bs4")
    assert v2["usd_per_1m_tokens"] > v1["usd_per_1m_tokens"]
    assert v1["model_fingerprint"] != v2["model_fingerprint"]
    # Quality per method, measured against each release's own bf16: v2's weights differ, so do its scores.
    assert v1["methods"]["bf16/baseline"]["checks"] != v2["methods"]["bf16/baseline"]["checks"]
    assert {"bf16/baseline", "fp16/fp16"} <= set(v1["methods"])
    assert (tmp / "compare.png").read_bytes()[:4] == b"\x89PNG"
    table = _run_cli("compare", "--model", "demo-code-llama", "--tracking-uri", tracking, cwd=tmp)
    assert table.returncode == 0 and "v1" in table.stdout and "v2" in table.stdout


def test_gate_fails_a_costlier_release_and_passes_a_cheaper_one(tracked: tuple[Path, str]) -> None:
    tmp, tracking = tracked
    base = ("gate", "--model", "demo-code-llama", "--tracking-uri", tracking, "--max-quality-drop", "100")
    worse = _run_cli(*base, "--candidate", "v2", "--against", "v1", cwd=tmp)
    assert worse.returncode == 1, worse.stdout + worse.stderr
    assert "gate FAILED" in worse.stdout and "cost:" in worse.stdout and "> +5 %" in worse.stdout
    better = _run_cli(*base, "--candidate", "v1", "--against", "v2", cwd=tmp)
    assert better.returncode == 0, better.stdout + better.stderr
    assert better.stdout.startswith("gate passed")
    # A required verdict the candidate never measured is a regression, not a pass.
    required = _run_cli(*base, "--candidate", "v1", "--against", "v2", "--require-pass", "int4/bnb-nf4", cwd=tmp)
    assert required.returncode == 1 and "int4/bnb-nf4: quality unverified" in required.stdout


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("--model", "no-such-model", "--candidate", "v2", "--against", "v1"), "known models: demo-code-llama"),
        (("--model", "demo-code-llama", "--candidate", "v9", "--against", "v1"), "known releases: v1, v2"),
        (("--model", "demo-code-llama", "--candidate", "v2", "--against", "v1", "--max-cost-increase", "-3"), "range"),
    ],
)
def test_gate_bad_input(tracked: tuple[Path, str], args: tuple[str, ...], needle: str) -> None:
    tmp, tracking = tracked
    result = _run_cli("gate", *args, "--tracking-uri", tracking, cwd=tmp)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert needle in result.stderr, result.stderr
