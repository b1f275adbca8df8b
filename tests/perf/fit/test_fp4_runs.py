"""FP4 measured runs replay: the reader maps precision fp4 / gemm mode nvfp4 to the NVFP4 scheme, and
`benchmarks/gpu_fidelity.py --predict` judges the datasheet FP4 step cost on such a file.

The file here is a small made-up one in the measured-runs columns (no measured FP4 run ships with the
project): the test is that the replay runs end to end and reports the FP4 group, not what error it finds.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from recommender.engines import PROFILES
from recommender.perf.fit.serving_runs import read_runs
from recommender.quantize import get_scheme
from tests.conftest import REPO

HEADER = (
    "campaign,id,backend,backend_version,model_path,system,precision,gemm_quant_mode,isl,osl,batch_size,"
    "tp_size,pp_size,attention_dp_size,silicon_ttft_ms,silicon_tpot_ms"
)
ROWS = [
    "made-up-fp4,fp4_a,trtllm,1.2.0,meta-llama/Llama-3.1-8B-Instruct,b200_sxm,fp4,nvfp4,1024,128,8,1,1,,60.0,4.0",
    "made-up-fp4,fp4_b,trtllm,1.2.0,meta-llama/Llama-3.1-8B-Instruct,b200_sxm,fp4,nvfp4,1024,128,32,1,1,,120.0,6.0",
    "made-up-fp4,fp4_c,vllm,0.12.0,meta-llama/Llama-3.1-8B-Instruct,b200_sxm,,nvfp4,2048,256,16,1,1,,150.0,5.0",
]


def _file(tmp_path: Path) -> Path:
    path = tmp_path / "fp4_runs.csv"
    path.write_text("\n".join([HEADER, *ROWS]) + "\n", encoding="utf-8")
    return path


def test_fp4_rows_read_as_the_nvfp4_scheme(tmp_path: Path) -> None:
    loaded = read_runs(_file(tmp_path), schemes=get_scheme, profiles=PROFILES)
    assert not loaded.skipped and {r.scheme for r in loaded.runs} == {"nvfp4"}
    assert {r.numerics.precision for r in loaded.runs} == {"fp4"} and {r.hardware for r in loaded.runs} == {"b200"}


def test_gpu_fidelity_predicts_a_small_fp4_file(tmp_path: Path) -> None:
    out = tmp_path / "predict.json"
    done = subprocess.run(
        [
            sys.executable,
            str(REPO / "benchmarks" / "gpu_fidelity.py"),
            "--predict",
            str(_file(tmp_path)),
            "--json",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert "3 runs of" in done.stdout
    by_basis = json.loads(out.read_text())["out_of_sample"]  # each run replayed on the basis plan gives it
    groups = [group for groups in by_basis.values() for group in groups]
    assert any("nvfp4" in group and "b200" in group for group in groups), by_basis
