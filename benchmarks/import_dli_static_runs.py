"""Convert the NVIDIA DLI TensorRT-LLM 0.9 static-batch sweep (handed over in ../shared/calibration) to runs.

    .venv/bin/python benchmarks/import_dli_static_runs.py [--source FILE]   (default: the hand-off's CSV)

Writes recommender/perf/fit/measured_runs/dli_trtllm090_static.csv in the columns of serving_runs_h100.csv plus
`campaign` ("dli-trtllm090-static") and `client` ("static": a static batch of identical requests, all present at
t = 0, prefilled in one context phase, then decoded together; no arrivals). Kept: the Llama-2 rows (7B, 13B, 70B;
``recommender/perf/catalog/architectures/llama-2-*.json``) on the GPUs the catalog has (L40S, H100 SXM, H200, A100
SXM). Left out, with the reason: GPT-J, Falcon-180B (other attention and MLP layouts), Mistral-7B (v0.1's
vocabulary is not shipped), Mixtral (MoE), and the L40, H100 NVL and GH200 rows (not in the GPU catalog).
Mapping: precision FP8 -> fp8 (FP8 GEMMs; the KV cache as for the other files' fp8 runs), Mixed -> float16;
batch_size_static -> batch_size; ttft_ms (the whole batch's context phase) -> silicon_ttft_ms; tpot_ms
((latency - first token) / (output - 1)) -> silicon_tpot_ms; engine TensorRT-LLM 0.9.0.
"""

from __future__ import annotations

import argparse
import csv
from collections import Counter
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "recommender/perf/fit/measured_runs/dli_trtllm090_static.csv"
MODELS = {
    "LLaMA v2 7B": "meta-llama/Llama-2-7b-hf",
    "LLaMA v2 13B": "meta-llama/Llama-2-13b-hf",
    "LLaMA v2 70B": "meta-llama/Llama-2-70b-hf",
}
GPUS = {"L40S": "l40s", "H100 80GB HBM3": "h100_sxm", "H200 141GB HBM3": "h200_sxm", "A100-SXM4-80GB": "a100_sxm"}
PRECISIONS = {"FP8": "fp8", "Mixed": "float16"}
COLUMNS = [
    "campaign",
    "client",
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


def convert(source: Path) -> tuple[list[dict[str, str]], Counter[str]]:
    rows, skipped = [], Counter[str]()
    with source.open(newline="", encoding="utf-8") as f:
        for i, row in enumerate(csv.DictReader(f)):
            if row["model"] not in MODELS:
                skipped[f"model {row['model']}"] += 1
                continue
            if row["gpu"] not in GPUS:
                skipped[f"gpu {row['gpu']}"] += 1
                continue
            system, precision = GPUS[row["gpu"]], PRECISIONS[row["precision"]]
            rows.append(
                {
                    "campaign": "dli-trtllm090-static",
                    "client": "static",
                    "backend": "trtllm",
                    "backend_version": "0.9.0",
                    "id": f"dli_{row['model'].split()[-1].lower()}_{system}_{precision}"
                    f"_tp{row['tp']}_{row['input_tokens']}"
                    f"x{row['output_tokens']}_b{row['batch_size_static']}_{i}",
                    "model_path": MODELS[row["model"]],
                    "system": system,
                    "precision": precision,
                    "gemm_quant_mode": "",
                    "isl": row["input_tokens"],
                    "osl": row["output_tokens"],
                    "batch_size": row["batch_size_static"],
                    "tp_size": row["tp"],
                    "pp_size": row["pp"] or "1",
                    "attention_dp_size": "",
                    "silicon_ttft_ms": row["ttft_ms"],
                    "silicon_tpot_ms": f"{float(row['tpot_ms']):.4f}",
                }
            )
    return rows, skipped


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    default = Path(__file__).resolve().parents[2] / "shared/calibration/dli_trtllm090_static_batch.csv"
    parser.add_argument("--source", type=Path, default=default)
    args = parser.parse_args()
    rows, skipped = convert(args.source)
    with OUT.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    print(f"wrote {len(rows)} runs to {OUT}; left out: " + ", ".join(f"{k} ({v})" for k, v in sorted(skipped.items())))


if __name__ == "__main__":
    main()
