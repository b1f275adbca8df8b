"""`recommender search --dry-run`: every check, every candidate priced and simulated, nothing loaded or written."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest


@pytest.mark.slow  # minutes of plan or search on 2 cores: make test-slow
def test_the_demo_dry_run_says_what_the_search_would_do_and_writes_nothing(tmp_path: Path) -> None:
    env = {**os.environ, "RECOMMENDER_CACHE_DIR": str(tmp_path / "cache")}
    done = subprocess.run(
        [sys.executable, "-m", "recommender.cli.main", "search", "--dry-run", "--json"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert answer["candidates"] == 80 and answer["n_trials"] == 80 and not answer["measured_here"]
    assert len(answer["speculative"]) == 40 and "16 demo_code_ppl documents" in answer["speculation_basis"]
    assert [key for key, _ in answer["pruned"]] == [
        "fp8/fp8-dynamic@a100-80gbx1/bs64",
        "fp8/fp8-dynamic@a100-80gbx1/bs256",
    ]
    assert all("needs 8.9" in why for _, why in answer["pruned"])
    assert set(answer["schemes_scored"]) == {"baseline", "fp8-dynamic", "int8-w8a8", "w4a16-gptq-g128", "bnb-nf4"}
    assert set(answer["checkpoints_made"]) == {"fp8-dynamic", "int8-w8a8", "w4a16-gptq-g128"}
    assert answer["documents_per_scheme"] == {"demo_code_ppl": 64, "demo_code_next_line": 300}
    assert answer["seconds_per_scheme"] > 0 and "assumed" in answer["estimate_basis"]
    assert not (tmp_path / "mlruns").exists()
