"""Convert the NVIDIA DLI NIM GenAI-Perf sweep (handed over in ../shared/calibration) to the measured-runs columns.

    .venv/bin/python benchmarks/import_nim_runs.py [--source ../shared/calibration/dli_nim_genaiperf_a100_h100.csv]

Writes recommender/perf/fit/measured_runs/nim_genaiperf_a100_h100.csv: one row per measured run, in the columns
of serving_runs_h100.csv plus `campaign` ("nim-genaiperf"). Mapping (each column of the source named):
model (meta-llama3-8b/70b-instruct -> meta-llama/Meta-Llama-3-8B/70B-Instruct), gpu (A100-SXM4-80GB -> a100_sxm,
H100_80GB_HBM3 -> h100_sxm), tp, precision (fp16 -> float16, bf16 -> bf16, fp8 -> fp8), input_tokens -> isl,
output_tokens -> osl, concurrency -> batch_size, ttft_ms_avg_computed -> silicon_ttft_ms, itl_ms_avg_computed ->
silicon_tpot_ms (GenAI-Perf's mean inter-token latency: the mean over requests of (end - first token) /
(tokens - 1), a TPOT), engine -> backend trtllm (NIM's TensorRT-LLM backend, release unstated).
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "recommender/perf/fit/measured_runs/nim_genaiperf_a100_h100.csv"
MODELS = {
    "meta-llama3-8b-instruct": "meta-llama/Meta-Llama-3-8B-Instruct",
    "meta-llama3-70b-instruct": "meta-llama/Meta-Llama-3-70B-Instruct",
}
GPUS = {"A100-SXM4-80GB": "a100_sxm", "H100_80GB_HBM3": "h100_sxm"}
PRECISIONS = {"fp16": "float16", "bf16": "bf16", "fp8": "fp8"}
COLUMNS = [
    "campaign",
    "id",
    "backend",
    "backend_version",
    "model_path",
    "system",
    "precision",
    "gemm_quant_mode",
    "isl",
    "osl",
    "batch_size",
    "tp_size",
    "pp_size",
    "attention_dp_size",
    "silicon_ttft_ms",
    "silicon_tpot_ms",
]


def convert(source: Path) -> list[dict[str, str]]:
    rows = []
    with source.open(newline="", encoding="utf-8") as f:
        for i, row in enumerate(csv.DictReader(f)):
            system, precision = GPUS[row["gpu"]], PRECISIONS[row["precision"]]
            rows.append(
                {
                    "campaign": "nim-genaiperf",
                    "backend": "trtllm",
                    "backend_version": "",
                    "id": f"nim_{row['model'].removeprefix('meta-').removesuffix('-instruct')}_{system}_{precision}"
                    f"_tp{row['tp']}_{row['input_tokens']}x{row['output_tokens']}_c{row['concurrency']}_{i}",
                    "model_path": MODELS[row["model"]],
                    "system": system,
                    "precision": precision,
                    "gemm_quant_mode": "",
                    "isl": row["input_tokens"],
                    "osl": row["output_tokens"],
                    "batch_size": row["concurrency"],
                    "tp_size": row["tp"],
                    "pp_size": "1",
                    "attention_dp_size": "",
                    "silicon_ttft_ms": f"{float(row['ttft_ms_avg_computed']):.4f}",
                    "silicon_tpot_ms": f"{float(row['itl_ms_avg_computed']):.4f}",
                }
            )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    default = Path(__file__).resolve().parents[2] / "shared/calibration/dli_nim_genaiperf_a100_h100.csv"
    parser.add_argument("--source", type=Path, default=default)
    args = parser.parse_args()
    rows = convert(args.source)
    with OUT.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    print(f"wrote {len(rows)} runs to {OUT}")


if __name__ == "__main__":
    main()
