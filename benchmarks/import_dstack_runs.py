"""Convert dstack's DeepSeek-R1 online serving benchmark to the MoE measured-runs columns (an out-of-sample judge).

    git -C <clone of github.com/dstackai/benchmarks> show \\
        7f37e6697725e58dd09b9ef190b62ce19f01d45e:Deepseek-R1/raw_data/online_results.csv > online_results.csv
    .venv/bin/python benchmarks/import_dstack_runs.py --source online_results.csv

Writes recommender/perf/fit/measured_runs/dstack_deepseek_r1_runs.csv (source and licence in SOURCE.md there). The
MoE fit never reads it: ``gpu_fidelity.py --moe --judge-runs`` predicts it with the shipped fit (``moe_judge.py``).

Source: github.com/dstackai/benchmarks, branch ``deepseek-r1-benchmark``, commit 7f37e669 (2025-03-18, "Add
raw_data"), ``Deepseek-R1/raw_data/online_results.csv``: 54 runs of SGLang's ``bench_serving.py`` (a copy in
``Deepseek-R1/bench_serving.py``) against DeepSeek-R1 on 8 x H200 SXM (33) and 8 x MI300X (21). Its columns:
``GPU`` (h200 / mi300x), ``backend`` (sglang / vllm / trt-llm), ``dataset_name`` (random, or
generated-shared-prefix), ``max_concurrency`` (the client's semaphore: a closed loop), ``random_input_len`` /
``random_output_len`` (fixed lengths, ``random_range_ratio`` 1; unused by the shared-prefix rows), ``completed``
(requests finished of 500 sent), ``total_input_tokens`` / ``total_output_tokens``, ``duration`` (s), throughputs,
mean / median / std / p99 of e2e latency, TTFT, TPOT and ITL (ms), and ``concurrency`` (sum of e2e latencies over
the duration). The TensorRT-LLM rows' ``concurrency`` (111-1,192) disagrees with their own e2e latency x completed /
duration (4.0-116.7, which matches ``max_concurrency``): their client did hold its cap, the column is not used.

Mapping (each output column from the source or from ``Deepseek-R1/README.md`` at that commit, by line):

- ``system``: h200 -> h200_sxm, mi300x -> mi300x (the GPU catalog's names).
- ``backend`` / ``backend_version``: sglang 0.4.3.post2 on H200 (README line 28), 0.4.2.post4 on MI300X (63);
  vllm 0.7.4.dev181+gf35f8e22 on H200 (108), 0.7.3.dev138+g21f6ca217 on MI300X (137); trt-llm -> trtllm
  0.17.post1.dev (96, ``trtllm-serve --backend pytorch``).
- ``model_path`` deepseek-ai/DeepSeek-R1, which the shipped ``deepseek-v3`` architecture lists (DeepSeek-R1 is
  post-trained from DeepSeek-V3-Base: same 671 B / 37 B-active MoE, github.com/deepseek-ai/DeepSeek-R1 README).
- ``precision`` / ``gemm_quant_mode`` / ``moe_quant_mode`` fp8: the checkpoint's own block FP8 (e4m3, 128 x 128),
  served as shipped (no ``--quantization`` flag in any launch line).
- ``kv_cache_dtype`` auto (bf16): no launch line sets ``--kv-cache-dtype``, whose default is "auto" (the model's
  dtype) in SGLang (``server_args.py``: '"auto" will use model data type') and vLLM (``engine/arg_utils.py``:
  ``EngineArgs.kv_cache_dtype = 'auto'``), both read in stored copies of the 0.4.x / 0.6-0.7-era files (tags not
  pinned); TensorRT-LLM's pytorch flow taken the same (unverified).
- layout, ``mode`` agg, one replica on the 8 GPUs: SGLang H200 ``--tp 8 --enable-dp-attention`` (line 160):
  SGLang then sets dp_size = tp_size (``server_args.py`` of the 0.4.x series: ``if self.enable_dp_attention:
  self.dp_size = self.tp_size``; ep_size = tp_size only ``if self.enable_ep_moe``; a stored copy, tag not pinned),
  so attention runs in 8 data-parallel ranks of TP 1 and the MoE layers stay tensor-parallel over 8 -> tp_size 1,
  attention_dp_size 8,
  moe 8 x 1; SGLang MI300X ``--tp 8`` (178), vLLM ``--tensor-parallel-size 8`` (271, 291) -> tp 8, moe 8 x 1;
  TensorRT-LLM ``--tp_size 8 --ep_size 4 --pp_size 1`` (204-206) -> tp 8, moe_tp = tp / moe_ep = 2 (its
  parallel mapping's rule where moe_tp_size is not given; read in a later stored copy, 0.17's not pinned),
  moe_ep 4, no attention data parallelism (no ``enable_attention_dp`` in the launch).
- ``isl`` / ``osl``: total input / output tokens over completed requests (3,200 / 800-6,400 for random rows, exact;
  the shared-prefix rows' mean prompt, ~3,275); ``shared_prefix_tokens``: 2,000 for generated-shared-prefix rows
  (``--gsp-system-prompt-len 2000``, README line 315), else 0 (the replay has no prefix cache: those rows are
  skipped by the reader, counted by reason).
- ``silicon_concurrency=<max_concurrency>`` in ``silicon_data_source``; ``num_requests`` = ``completed``.
- ``silicon_ttft_ms`` = ``mean_ttft_ms``; ``silicon_tpot_ms`` = ``mean_tpot_ms``: bench_serving.py's mean over
  requests of (latency - ttft) / (output_len - 1) (its ``calculate_metrics``), the statistic the AIConfigurator
  file's TPOT is.
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "recommender/perf/fit/measured_runs/dstack_deepseek_r1_runs.csv"
COMMIT = "7f37e6697725e58dd09b9ef190b62ce19f01d45e"
SYSTEMS = {"h200": "h200_sxm", "mi300x": "mi300x"}
BACKENDS = {"sglang": "sglang", "vllm": "vllm", "trt-llm": "trtllm"}
VERSIONS = {
    ("h200", "sglang"): "0.4.3.post2",
    ("mi300x", "sglang"): "0.4.2.post4",
    ("h200", "vllm"): "0.7.4.dev181+gf35f8e22",
    ("mi300x", "vllm"): "0.7.3.dev138+g21f6ca217",
    ("h200", "trt-llm"): "0.17.post1.dev",
}
#: (tp_size, attention_dp_size, moe_tp_size, moe_ep_size) per (GPU, backend): the README's launch lines.
LAYOUTS = {
    ("h200", "sglang"): (1, 8, 8, 1),
    ("mi300x", "sglang"): (8, 1, 8, 1),
    ("h200", "vllm"): (8, 1, 8, 1),
    ("mi300x", "vllm"): (8, 1, 8, 1),
    ("h200", "trt-llm"): (8, 1, 2, 4),
}
SHARED_PREFIX_TOKENS = 2000
COLUMNS = [
    "id",
    "campaign",
    "silicon_data_source",
    "backend",
    "backend_version",
    "model_path",
    "system",
    "precision",
    "mode",
    "isl",
    "osl",
    "shared_prefix_tokens",
    "gemm_quant_mode",
    "moe_quant_mode",
    "kv_cache_dtype",
    "batch_size",
    "num_requests",
    "tp_size",
    "pp_size",
    "attention_dp_size",
    "moe_tp_size",
    "moe_ep_size",
    "silicon_ttft_ms",
    "silicon_tpot_ms",
]


def _row(raw: dict[str, str]) -> dict[str, str]:
    gpu, backend, dataset = raw["GPU"].strip(), raw["backend"].strip(), raw["dataset_name"].strip()
    completed = int(raw["completed"])
    isl = round(float(raw["total_input_tokens"]) / completed)
    osl = round(float(raw["total_output_tokens"]) / completed)
    tp, dp, moe_tp, moe_ep = LAYOUTS[(gpu, backend)]
    shared = SHARED_PREFIX_TOKENS if dataset == "generated-shared-prefix" else 0
    tag = "gsp" if shared else "random"
    return {
        "id": f"dstack_dsr1_{SYSTEMS[gpu]}_{BACKENDS[backend]}_{tag}_{isl}x{osl}_c{raw['max_concurrency']}",
        "campaign": "dstack-deepseek-r1",
        "silicon_data_source": f"github.com/dstackai/benchmarks@{COMMIT[:8]} Deepseek-R1/raw_data/online_results.csv; "
        f"silicon_concurrency={raw['max_concurrency']}; dataset={dataset}",
        "backend": BACKENDS[backend],
        "backend_version": VERSIONS[(gpu, backend)],
        "model_path": "deepseek-ai/DeepSeek-R1",
        "system": SYSTEMS[gpu],
        "precision": "fp8",
        "mode": "agg",
        "isl": str(isl),
        "osl": str(osl),
        "shared_prefix_tokens": str(shared),
        "gemm_quant_mode": "fp8",
        "moe_quant_mode": "fp8",
        "kv_cache_dtype": "auto",
        "batch_size": "",
        "num_requests": str(completed),
        "tp_size": str(tp),
        "pp_size": "1",
        "attention_dp_size": str(dp),
        "moe_tp_size": str(moe_tp),
        "moe_ep_size": str(moe_ep),
        "silicon_ttft_ms": f"{float(raw['mean_ttft_ms']):.4f}",
        "silicon_tpot_ms": f"{float(raw['mean_tpot_ms']):.4f}",
    }


def convert(source: Path) -> list[dict[str, str]]:
    """Every row of the raw CSV in the measured-runs columns (none dropped: the reader skips by reason)."""
    with source.open(newline="", encoding="utf-8-sig") as f:  # the raw file starts with a byte-order mark
        return [_row(raw) for raw in csv.DictReader(f) if (raw.get("GPU") or "").strip()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--source", type=Path, required=True, help="online_results.csv at commit " + COMMIT[:8])
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    rows = convert(args.source)
    with args.out.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    print(f"wrote {len(rows)} runs to {args.out}")


if __name__ == "__main__":
    main()
