"""Fidelity of the calibrated step-time model: calibrate on one model size, predict another.

    .venv/bin/python benchmarks/calibration_fidelity.py [--methods baseline torchao-int8-wo]

Two random-initialised Llama-architecture models (speed does not depend on the weights'
values): a small one (4 layers, width 256) to calibrate on, a larger one (8 layers, width
512) to predict. For each method: kernel probes (the method's quantized MLP block alone,
model-independent), then the small model probed at several prompt lengths and batch
sizes, the calibration fitted (benchmarks/probe_calibration.py), and the large model's
measured prefill and decode step times compared with the predictions. The large model's
measurements are never seen by the fit. Reports median and p90 |error| over all points.
Target: median <= 10 %, p90 <= 25 %. Run it on a quiet machine: timings share the cores.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np
import torch
from probe_calibration import calibrate_kernels, fit, probe_points
from transformers import LlamaConfig, LlamaForCausalLM

from recommender.models.source import ModelSource
from recommender.perf.model.shape import ModelShape
from recommender.perf.probe import local_device_label, probe
from recommender.quantize import DeviceInfo, get_scheme

SIZES = {
    "small": dict(hidden_size=256, intermediate_size=768, num_hidden_layers=4, num_attention_heads=4),
    "large": dict(hidden_size=512, intermediate_size=1536, num_hidden_layers=8, num_attention_heads=8),
}
GRID = [(prompt, batch) for prompt in (32, 128, 256) for batch in (1, 4, 16)]


def _save_random_model(root: Path, size: str) -> Path:
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=2048,
        num_key_value_heads=2,
        head_dim=64,
        max_position_embeddings=1024,
        tie_word_embeddings=False,
        **SIZES[size],
    )
    path = root / size
    LlamaForCausalLM(config).to(torch.bfloat16).save_pretrained(path)
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--methods", nargs="+", default=["baseline", "torchao-int8-wo", "torchao-int4-wo-g32"])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--verbose", action="store_true", help="print every predicted point")
    args = parser.parse_args()
    cpu = DeviceInfo("cpu")
    errors: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        paths = {size: _save_random_model(Path(tmp), size) for size in SIZES}
        for name in args.methods:
            method = get_scheme(name)
            measured = {}
            for size, path in paths.items():
                source = ModelSource.resolve(str(path), base_dir=path)
                model = method.load(source, cpu)
                shape = ModelShape.from_config(source.load_config())
                probes = [probe(model, prompt_tokens=p, batch_size=b, repeats=args.repeats) for p, b in GRID]
                measured[size] = probe_points(shape, method, probes)
            kernels, lm_head = calibrate_kernels(method, cpu)
            calibration = fit(measured["small"], kernels=kernels, lm_head_kernels=lm_head, device=local_device_label())
            method_errors = [abs(calibration.predict(f) - t) / t for f, t in measured["large"]]
            if args.verbose:
                for work, seconds in measured["large"]:
                    print(
                        f"  tokens {work.tokens:4d} attn {work.attention_flops:9.3g}: measured {seconds * 1e3:8.2f} "
                        f"ms, predicted {calibration.predict(work) * 1e3:8.2f} ms"
                    )
            errors += method_errors
            median, p90 = np.median(method_errors), np.quantile(method_errors, 0.9)
            print(
                f"{name:22s} fit on small: median |err| {calibration.fit_median_error:5.1%}; "
                f"predict large: median {median:5.1%}, p90 {p90:5.1%}"
            )
    print(
        f"all methods, {len(errors)} points on {local_device_label()}: "
        f"median |error| {np.median(errors):.1%}, p90 {np.quantile(errors, 0.9):.1%}"
    )


if __name__ == "__main__":
    main()
