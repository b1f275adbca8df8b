"""Measured-run rows that cannot be replayed (TTFT 0 or nan, concurrency 0) are skipped and counted, not a
ZeroDivisionError or a nan% table: `gpu_fidelity.py --predict` says how many it left out and why."""

from __future__ import annotations

from pathlib import Path

from recommender.engines import PROFILES
from recommender.perf.fit.serving_runs import read_runs
from recommender.quantize import get_scheme

HEADER = (
    "id,backend,backend_version,model_path,system,precision,gemm_quant_mode,isl,osl,batch_size,tp_size,"
    "pp_size,attention_dp_size,silicon_ttft_ms,silicon_tpot_ms"
)
GOOD = "ok,vllm,0.12,meta-llama/Llama-3.1-8B-Instruct,h100_sxm,,,1024,128,8,1,1,,50,4"


def test_rows_without_positive_finite_figures_are_skipped_and_counted(tmp_path: Path) -> None:
    rows = [
        GOOD,
        GOOD.replace("ok,", "zero_ttft,").replace(",50,4", ",0,4"),
        GOOD.replace("ok,", "nan_ttft,").replace(",50,4", ",nan,4"),
        GOOD.replace("ok,", "no_clients,").replace(",8,1,1,", ",0,1,1,"),
        GOOD.replace("ok,", "inf_tpot,").replace(",50,4", ",50,inf"),
    ]
    path = tmp_path / "runs.csv"
    path.write_text("\n".join([HEADER, *rows]) + "\n", encoding="utf-8")
    loaded = read_runs(path, schemes=get_scheme, profiles=PROFILES)
    assert [r.run_id for r in loaded.runs] == ["ok"]
    assert sum(loaded.skipped.values()) == 4
    reasons = " | ".join(loaded.skipped)
    for column in ("silicon_ttft_ms 0.0", "silicon_ttft_ms nan", "batch_size 0", "silicon_tpot_ms inf"):
        assert column in reasons, reasons
