"""GPU cross-check of the kernel tables: time real layer GEMMs and attention, compare with aiconfigurator-core.

    # here (CPU, aiconfigurator-core installed): the tables' per-layer figures for the GPUs to check
    .venv/bin/python benchmarks/kernel_check.py expected [--out benchmarks/kernel_check_expected.json]
    # on the GPU machine (only PyTorch needed; at most ~10 minutes on one H100 or H200)
    python benchmarks/kernel_check.py run [--expected benchmarks/kernel_check_expected.json] [--json OUT]

`expected` writes, for Llama-3.1-8B (TP1) and Llama-3.1-70B (TP2 shapes), each GPU in ``GPUS`` and each token
count the simulator steps at, the tables' time of one layer's QKV, output-projection, gate/up and down GEMMs
(bf16 and FP8), of prefill attention over one prompt and of decode attention over a batch, as
``kernel_tables.py`` reads them (the SDK's per-op times over all layers, divided by the layer count).

`run` detects the GPU (H100 SXM or H200 by name), times the same shapes with PyTorch (bf16 ``torch.matmul``,
FP8 ``torch._scaled_mm`` with per-tensor scales, ``scaled_dot_product_attention`` causal for prefill and with
one query per sequence for decode; CUDA events, warm-up then the median of repeats) and prints measured /
table per op. Without a CUDA device it says so and exits 0 (nothing to check). The docs quote its output with
the command.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

EXPECTED = Path(__file__).with_name("kernel_check_expected.json")
#: Catalog key -> (aiconfigurator-core system, a substring of torch.cuda.get_device_name()).
GPUS = {"h100-sxm": ("h100_sxm", "H100"), "h200": ("h200_sxm", "H200")}
MODELS = {"llama-3.1-8b": 1, "llama-3.1-70b": 2}  # model -> the tensor-parallel degree whose per-GPU shapes are timed
TOKENS = [1, 8, 32, 128, 512, 2048, 8192]
PROMPTS = [512, 2048, 8192]
DECODE = [(8, 2048), (64, 2048), (256, 1024)]
GEMMS = ("qkv_gemm", "proj_gemm", "gate_ffn1_gemm", "ffn2_gemm")


def _expected(out: Path) -> None:
    """The tables' per-layer figures (needs aiconfigurator-core; runs on the CPU)."""
    from aiconfigurator_core.sdk import EngineHandle

    from recommender.perf.catalog.architectures import load_architecture
    from recommender.perf.step.kernel_tables import _config_json

    doc: dict[str, Any] = {"source": "aiconfigurator-core 0.12.0 per-op times / layers", "gpus": {}}
    for gpu, (system, _) in GPUS.items():
        for model, tp in MODELS.items():
            shape = load_architecture(model)[1]
            with tempfile.TemporaryDirectory() as folder:
                (Path(folder) / "config.json").write_text(json.dumps(_config_json(shape)))
                for mode in ("bfloat16", "fp8"):
                    handle = EngineHandle.compile(folder, system, "vllm", tp_size=tp, gemm_quant_mode=mode)
                    rows = doc["gpus"].setdefault(gpu, {}).setdefault(f"{model}/tp{tp}/{mode}", {})
                    rows["_shapes"] = {
                        "gemm_k_n": _gemm_dims(shape, tp),
                        "heads": shape.n_heads // tp,
                        "kv_heads": max(shape.n_kv_heads // tp, 1),
                        "head_dim": shape.head_dim,
                    }
                    for t in TOKENS:
                        per_op = handle.mixed_step_breakdown_per_op(t, 0, t, 2)[0]
                        ops = {op[0]: op[1] / shape.n_layers for op in per_op}
                        rows[f"tokens={t}"] = {g: ops[f"context_{g}"] for g in GEMMS}
                    if mode == "bfloat16":
                        for s in PROMPTS:
                            rows[f"prefill_attention={s}"] = handle.mixed_step_breakdown(s, 0, s, 2)[2] / shape.n_layers
                        for b, ctx in DECODE:
                            ms = handle.mixed_step_breakdown(0, b, ctx, 2)[3]
                            rows[f"decode_attention={b}x{ctx}"] = ms / shape.n_layers
    out.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {out}")


def _time_ms(fn: Any, torch: Any, repeats: int = 20) -> float:
    for _ in range(3):
        fn()
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def _gemm_dims(s: Any, tp: int) -> dict[str, tuple[int, int]]:
    """(K, N) of one layer's GEMMs per GPU at tensor-parallel degree `tp` (column-parallel QKV and gate/up,
    row-parallel output projection and down)."""
    qkv = (s.n_heads + 2 * s.n_kv_heads) * s.head_dim // tp
    return {
        "qkv_gemm": (s.hidden, qkv),
        "proj_gemm": (s.n_heads * s.head_dim // tp, s.hidden),
        "gate_ffn1_gemm": (s.hidden, 2 * s.intermediate // tp),
        "ffn2_gemm": (s.intermediate // tp, s.hidden),
    }


def _gemm_ms(torch: Any, m: int, k: int, n: int, fp8: bool) -> float:
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
    if not fp8:
        return _time_ms(lambda: torch.matmul(a, b.t()), torch)
    a8, b8 = a.to(torch.float8_e4m3fn), b.to(torch.float8_e4m3fn)
    one = torch.ones((), device="cuda", dtype=torch.float32)
    return _time_ms(lambda: torch._scaled_mm(a8, b8.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16), torch)


def _attention_ms(torch: Any, shapes: dict[str, Any], queries: int, context: int, batch: int) -> float:
    heads, kv_heads, head_dim = shapes["heads"], shapes["kv_heads"], shapes["head_dim"]
    q = torch.randn(batch, heads, queries, head_dim, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(batch, kv_heads, context, head_dim, device="cuda", dtype=torch.bfloat16)
    v = torch.randn_like(k)
    sdpa = torch.nn.functional.scaled_dot_product_attention
    return _time_ms(lambda: sdpa(q, k, v, is_causal=queries > 1, enable_gqa=True), torch)


def _run(expected: Path, json_out: Path | None) -> int:
    import torch

    if not torch.cuda.is_available():
        print("no CUDA device: nothing to check (run this on an H100 or H200)")
        return 0
    name = torch.cuda.get_device_name()
    gpu = next((g for g, (_, marker) in GPUS.items() if marker in name), None)
    if gpu is None:
        print(f"{name}: the expected figures cover {', '.join(GPUS)} only")
        return 0
    tables = json.loads(expected.read_text())["gpus"][gpu]
    rows = []
    for key, figures in tables.items():
        mode, shapes = key.split("/")[2], figures["_shapes"]
        dims = shapes["gemm_k_n"]
        for point, value in figures.items():
            if point == "_shapes":
                continue
            kind, _, arg = point.partition("=")
            if kind == "tokens":
                for gemm, table_ms in value.items():
                    k, n = dims[gemm]
                    got = _gemm_ms(torch, int(arg), k, n, mode == "fp8")
                    rows.append((key, f"{gemm} M={arg}", table_ms, got))
            elif kind == "prefill_attention":
                rows.append((key, point, value, _attention_ms(torch, shapes, int(arg), int(arg), 1)))
            else:
                b, ctx = (int(x) for x in arg.split("x"))
                rows.append((key, point, value, _attention_ms(torch, shapes, 1, ctx, b)))
    print(f"{name}, torch {torch.__version__}: measured / kernel table per op (one layer)")
    for key, point, table_ms, got in rows:
        print(f"  {key:28s} {point:32s} table {table_ms:8.4f} ms  measured {got:8.4f} ms  x{got / table_ms:5.2f}")
    ratios = [got / table for _, _, table, got in rows if table > 0]
    print(f"median measured / table {statistics.median(ratios):.2f} over {len(ratios)} ops")
    if json_out:
        json_out.write_text(
            json.dumps([dict(zip(("config", "op", "table_ms", "measured_ms"), r, strict=True)) for r in rows], indent=1)
        )
    return 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("expected").add_argument("--out", type=Path, default=EXPECTED)
    run = sub.add_parser("run")
    run.add_argument("--expected", type=Path, default=EXPECTED)
    run.add_argument("--json", type=Path)
    args = parser.parse_args()
    if args.command == "expected":
        _expected(args.out)
    else:
        sys.exit(_run(args.expected, args.json))


if __name__ == "__main__":
    main()
