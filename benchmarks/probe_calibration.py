"""Calibrating the step-time model on measured probes, for the device those probes ran on.

A step's time is modelled as the sum of what it does, each at a rate fitted here:

    linear layers: calls x s/call + weight bytes x s/byte + FLOPs x s/FLOP   (kernel rates)
    everything else: (layers + 1) x s/layer + attention FLOPs x s/FLOP + tokens x layers x s/token
                     + KV-cache bytes touched x s/byte

Why two stages. Probes of one model cannot separate a per-layer overhead from the time
spent streaming that model's weights — both are the same constant for every probe of it —
so a fit on one model size mispredicts another. The linear layers' rates therefore come
from *kernel probes*: one quantized MLP block at two fixed widths and several token
counts, timed alone (model-independent, like the operator profiles Vidur builds). The
model probes then fit only what remains: per-layer overhead (norms, rotary, dispatch),
attention, and per-token elementwise work. Both fits are non-negative least squares on
relative error. ``benchmarks/calibration_fidelity.py`` measures how well a calibration on
one model size predicts another.
"""

from __future__ import annotations

import statistics
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from recommender.device import DeviceInfo
from recommender.perf.model.shape import ModelShape
from recommender.perf.probe import timed
from recommender.provenance import Provenance
from recommender.quantize import QuantScheme, get_scheme

if TYPE_CHECKING:
    from recommender.perf.probe import ProbeResult

#: Linear layers per decoder layer (q, k, v, o, gate, up, down).
LINEARS_PER_LAYER = 7
#: Widths of the kernel probe's MLP block; its intermediate size is 3x the width.
KERNEL_WIDTHS = (512, 1024)
KERNEL_TOKENS = (1, 8, 32, 128)


def _nnls_relative(x: np.ndarray, y: np.ndarray, offset: np.ndarray | None = None) -> np.ndarray:
    """Non-negative coefficients c minimising the relative error of ``offset + x @ c`` against y."""
    from scipy.optimize import nnls

    offset = np.zeros_like(y) if offset is None else offset
    scale = np.where(x.max(axis=0) > 0, x.max(axis=0), 1.0)  # condition the columns; undone below
    coef, _ = nnls((x / scale) / y[:, None], (y - offset) / y)
    return np.asarray(coef / scale)


# -- stage 1: the method's linear-layer kernels ----------------------------------------------


@dataclass(frozen=True, slots=True)
class KernelRates:
    """Seconds per kernel call, per weight byte and per FLOP of one method's linear layers on one device."""

    method: str
    seconds_per_call: float
    seconds_per_byte: float
    seconds_per_flop: float
    points: int
    fit_median_error: float

    def linear_seconds(self, *, calls: int, weight_bytes: float, flops: float) -> float:
        return calls * self.seconds_per_call + weight_bytes * self.seconds_per_byte + flops * self.seconds_per_flop


def fit_kernel_rates(method: str, points: Sequence[tuple[int, float, float, float]]) -> KernelRates:
    """Fit from (calls, weight bytes, FLOPs, seconds) points."""
    if len(points) < 3:
        raise ValueError("kernel rates need at least 3 points")
    x = np.asarray([[c, b, f] for c, b, f, _ in points], dtype=float)
    y = np.asarray([t for *_, t in points], dtype=float)
    coef = _nnls_relative(x, y)
    error = float(np.median(np.abs(x @ coef - y) / y))
    return KernelRates(method, float(coef[0]), float(coef[1]), float(coef[2]), len(points), error)


def kernel_probe(
    method: QuantScheme,
    device: DeviceInfo,
    *,
    widths: Sequence[int] = KERNEL_WIDTHS,
    tokens: Sequence[int] = KERNEL_TOKENS,
    repeats: int = 5,
) -> KernelRates:
    """Time `method`'s quantized MLP block (3 linear layers) alone, at each width and token count."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from recommender.models.source import ModelSource

    sync = torch.cuda.synchronize if device.kind == "cuda" else (lambda: None)
    points: list[tuple[int, float, float, float]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for width in widths:
            torch.manual_seed(0)
            config = LlamaConfig(
                hidden_size=width,
                intermediate_size=3 * width,
                num_hidden_layers=1,
                num_attention_heads=width // 64,
                num_key_value_heads=width // 64,
                head_dim=64,
                vocab_size=256,
                tie_word_embeddings=False,
            )
            path = Path(tmp) / str(width)
            LlamaForCausalLM(config).to(torch.bfloat16).save_pretrained(path)  # type: ignore[arg-type,no-untyped-call]  # transformers 5.17: untyped __init__, wrapper hides .to(dtype)
            model = method.load(ModelSource.resolve(str(path), base_dir=path), device)
            mlp = model.model.layers[0].mlp  # type: ignore[union-attr,index]  # a Llama model's decoder layers
            params = 3 * width * 3 * width
            model_device = next(model.parameters()).device
            for n in tokens:
                x = torch.randn(1, n, width, dtype=torch.bfloat16, device=model_device)
                with torch.inference_mode():
                    runs = timed(lambda x=x, mlp=mlp: mlp(x), warmup=1, repeats=repeats, sync=sync)
                points.append((3, params * method.bits_per_weight / 8.0, 2.0 * n * params, statistics.median(runs)))
    return fit_kernel_rates(method.name, points)


# -- stage 2: the rest of a step, fitted on model probes ---------------------------------------


@dataclass(frozen=True, slots=True)
class StepWork:
    """What one step does, in the units the calibration prices."""

    layers: int
    tokens: int
    body_weight_bytes: float
    body_flops: float
    lm_head_bytes: float
    lm_head_flops: float
    attention_flops: float
    kv_bytes: float

    @classmethod
    def of(
        cls, shape: ModelShape, method: QuantScheme, *, query_tokens: int, context_tokens: int, kv_bytes: float
    ) -> StepWork:
        """A step computing `query_tokens` new tokens against `context_tokens` of context, touching `kv_bytes`."""
        return cls(
            layers=shape.n_layers,
            tokens=query_tokens,
            body_weight_bytes=shape.body_params * method.bits_per_weight / 8.0,
            body_flops=2.0 * query_tokens * shape.active_body_params,
            lm_head_bytes=shape.lm_head_params * 2.0,
            lm_head_flops=2.0 * query_tokens * shape.lm_head_params,
            attention_flops=shape.attention_flops(query_tokens, context_tokens),
            kv_bytes=kv_bytes,
        )

    def rest_features(self) -> list[float]:
        return [self.layers + 1.0, self.attention_flops, float(self.tokens * self.layers), self.kv_bytes]


def prefill_work(shape: ModelShape, method: QuantScheme, prompt_tokens: int) -> StepWork:
    """One prompt: attention over itself; its KV is written once."""
    kv = prompt_tokens * shape.kv_bytes_per_token()
    return StepWork.of(shape, method, query_tokens=prompt_tokens, context_tokens=prompt_tokens, kv_bytes=kv)


def decode_work(shape: ModelShape, method: QuantScheme, batch_size: int, context_tokens: int) -> StepWork:
    """One token per sequence: every sequence reads its whole KV cache."""
    kv = batch_size * context_tokens * shape.kv_bytes_per_token()
    return StepWork.of(shape, method, query_tokens=batch_size, context_tokens=context_tokens, kv_bytes=kv)


@dataclass(frozen=True, slots=True)
class CalibratedStepTime:
    """Kernel rates of the method and of the 16-bit lm_head, plus the fitted rest of a step."""

    kernels: KernelRates
    lm_head_kernels: KernelRates
    seconds_per_layer: float
    seconds_per_attention_flop: float
    seconds_per_token_layer: float
    seconds_per_kv_byte: float
    points: int
    fit_median_error: float
    device: str

    def linear_seconds(self, work: StepWork) -> float:
        body = self.kernels.linear_seconds(
            calls=LINEARS_PER_LAYER * work.layers, weight_bytes=work.body_weight_bytes, flops=work.body_flops
        )
        head = self.lm_head_kernels.linear_seconds(calls=1, weight_bytes=work.lm_head_bytes, flops=work.lm_head_flops)
        return body + head

    def predict(self, work: StepWork) -> float:
        rates = [
            self.seconds_per_layer,
            self.seconds_per_attention_flop,
            self.seconds_per_token_layer,
            self.seconds_per_kv_byte,
        ]
        rest = np.dot(rates, work.rest_features())
        return self.linear_seconds(work) + float(rest)

    @property
    def provenance(self) -> Provenance:
        return Provenance(
            "calibrated",
            f"calibrated on {self.points} probe points and {self.kernels.method} kernel probes on "
            f"{self.device} (fit median |error| {self.fit_median_error:.1%})",
        )


def probe_points(shape: ModelShape, method: QuantScheme, probes: Sequence[ProbeResult]) -> list[tuple[StepWork, float]]:
    """Each probe gives two points: one prompt's prefill, and one decode step of its batch."""
    points: list[tuple[StepWork, float]] = []
    for p in probes:
        points.append((prefill_work(shape, method, p.prompt_tokens), p.prefill_s))
        points.append((decode_work(shape, method, p.batch_size, p.prompt_tokens), p.decode_step_s))
    return points


def fit(
    points: Sequence[tuple[StepWork, float]],
    *,
    kernels: KernelRates,
    lm_head_kernels: KernelRates,
    device: str,
) -> CalibratedStepTime:
    """Fit the rest of a step to what the kernel rates leave of each measured time."""
    if len(points) < 3:
        raise ValueError("calibration needs at least 3 probe points")
    partial = CalibratedStepTime(kernels, lm_head_kernels, 0.0, 0.0, 0.0, 0.0, 0, 0.0, device)
    x = np.asarray([w.rest_features() for w, _ in points], dtype=float)
    y = np.asarray([t for _, t in points], dtype=float)
    linear = np.asarray([partial.linear_seconds(w) for w, _ in points])
    coef = _nnls_relative(x, y, offset=linear)
    predicted = linear + x @ coef
    return CalibratedStepTime(
        kernels=kernels,
        lm_head_kernels=lm_head_kernels,
        seconds_per_layer=float(coef[0]),
        seconds_per_attention_flop=float(coef[1]),
        seconds_per_token_layer=float(coef[2]),
        seconds_per_kv_byte=float(coef[3]),
        points=len(points),
        fit_median_error=float(np.median(np.abs(predicted - y) / y)),
        device=device,
    )


def calibrate_kernels(method: QuantScheme, device: DeviceInfo) -> tuple[KernelRates, KernelRates]:
    """Kernel rates of `method` and of the 16-bit baseline (for the lm_head every method keeps)."""
    kernels = kernel_probe(method, device)
    baseline = get_scheme("baseline")
    lm_head = kernels if method.name == baseline.name else kernel_probe(baseline, device)
    return kernels, lm_head
