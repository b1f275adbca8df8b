"""The demo search space with TensorRT-LLM: on an L40S it keeps ModelOpt's FP8 and prunes llm-compressor's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import DEMO_SPEC


@pytest.mark.slow  # minutes of plan or search on 2 cores: make test-slow
def test_the_demo_space_on_tensorrt_llm_chooses_the_modelopt_checkpoint_on_an_l40s(tmp_path: Path) -> None:
    spec = yaml.safe_load(DEMO_SPEC.read_text())
    spec["model"]["source"] = str(DEMO_SPEC.parent / spec["model"]["source"])
    spec["use_case"] = str(DEMO_SPEC.parent / spec["use_case"])
    spec["engines"] = ["trtllm"]
    spec["space"] |= {
        "schemes": {"bf16": ["baseline"], "fp8": ["fp8-dynamic", "modelopt-fp8"]},
        "hardware": ["l40s"],
        "speculative": ["none"],
    }
    path = tmp_path / "trtllm.yaml"
    path.write_text(yaml.safe_dump(spec), encoding="utf-8")
    env = {**os.environ, "RECOMMENDER_CACHE_DIR": str(tmp_path / "cache")}
    done = subprocess.run(
        [sys.executable, "-m", "recommender.cli.main", "search", str(path), "--dry-run", "--json"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    pruned = dict(answer["pruned"])
    assert set(pruned) == {"fp8/fp8-dynamic@l40sx1/bs64", "fp8/fp8-dynamic@l40sx1/bs256"}
    assert all("9.0" in why for why in pruned.values())  # TensorRT-LLM's FP8 rowwise is Hopper-only
    assert "modelopt-fp8" in answer["schemes_scored"] and "modelopt-fp8" in answer["checkpoints_made"]
