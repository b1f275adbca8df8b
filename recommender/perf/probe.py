"""The measured probe: real prefill and decode timings of the really quantized model here.

Like optimum-benchmark's latency tracker: warm-up runs first, then repeats; the median
is the figure and the spread (min-max) is reported beside it. On CUDA the timings are
synchronised; on the CPU ``perf_counter`` is exact enough at millisecond scales. Peak
memory on the CPU is the process's resident-set high-water mark (VmHWM), reset before
the probe through /proc/self/clear_refs, minus the resident set before it.
"""

from __future__ import annotations

import contextlib
import platform
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from recommender.provenance import Provenance

if TYPE_CHECKING:
    from torch import nn
    from transformers import PretrainedConfig


@dataclass(frozen=True, slots=True)
class ProbeResult:
    """Measured step times (seconds, medians), their spreads, and memory, with the device named."""

    prompt_tokens: int
    batch_size: int
    prefill_s: float
    prefill_spread_s: tuple[float, float]
    decode_step_s: float
    decode_spread_s: tuple[float, float]
    weights_mb: float
    kv_cache_mb: float
    peak_rss_delta_mb: float | None
    device: str
    repeats: int

    @property
    def provenance(self) -> Provenance:
        return Provenance("measured", f"{self.device}, transformers eager, median of {self.repeats}")


def local_device_label() -> str:
    """A human name for this machine's compute device."""
    import os

    import torch

    if torch.cuda.is_available():
        return torch.cuda.get_device_name(0)
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"cpu: {cpu} x{torch.get_num_threads()} threads ({os.cpu_count()} cores)"


def _rss_mb(field: str) -> float | None:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def _reset_peak_rss() -> None:
    with contextlib.suppress(OSError):
        Path("/proc/self/clear_refs").write_text("5")


def _storage_bytes(tensor: Any) -> int:
    """Bytes really stored: a quantized tensor subclass (torchao) reports its logical dtype's
    size through numel/element_size, so its inner tensors are counted instead."""
    flatten = getattr(tensor, "__tensor_flatten__", None)
    if flatten is not None:
        names, _ = flatten()
        return sum(_storage_bytes(getattr(tensor, name)) for name in names)
    return int(tensor.numel() * tensor.element_size())


def _tensor_mb(model: nn.Module) -> float:
    return sum(_storage_bytes(t) for t in [*model.parameters(), *model.buffers()]) / 2**20


def timed(fn: Callable[..., object], *, warmup: int, repeats: int, sync: Callable[[], object]) -> list[float]:
    """Seconds of `repeats` calls of `fn` after `warmup` calls, each ended by `sync` (CUDA) before the clock stops."""
    for _ in range(warmup):
        fn()
    sync()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - start)
    return times


def probe(
    model: nn.Module,
    *,
    prompt_tokens: int,
    batch_size: int,
    decode_steps: int = 8,
    warmup: int = 1,
    repeats: int = 3,
    seed: int = 0,
) -> ProbeResult:
    """Time one prompt's prefill and `decode_steps` decode steps of a full batch, on the model's device."""
    import torch

    device = next(model.parameters()).device
    sync: Callable[[], None] = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    # nn.Module types unknown attributes as Tensor | Module; a transformers model's `config` is its PretrainedConfig.
    config = cast("PretrainedConfig", model.config)
    vocab = int(config.vocab_size)
    generator = torch.Generator().manual_seed(seed)
    one_prompt = torch.randint(0, vocab, (1, prompt_tokens), generator=generator).to(device)
    batch_prompt = torch.randint(0, vocab, (batch_size, prompt_tokens), generator=generator).to(device)

    rss_before = _rss_mb("VmRSS")
    _reset_peak_rss()
    with torch.inference_mode():
        prefill = timed(lambda: model(one_prompt, use_cache=True), warmup=warmup, repeats=repeats, sync=sync)
        step_times, cache = _decode_step_times(
            model, batch_prompt, decode_steps, warmup=warmup, repeats=repeats, sync=sync
        )
        kv_mb = _cache_mb(cache)
    peak = _rss_mb("VmHWM")
    peak_delta = peak - rss_before if peak is not None and rss_before is not None else None
    if device.type == "cuda":
        peak_delta = torch.cuda.max_memory_allocated() / 2**20
    return ProbeResult(
        prompt_tokens=prompt_tokens,
        batch_size=batch_size,
        prefill_s=statistics.median(prefill),
        prefill_spread_s=(min(prefill), max(prefill)),
        decode_step_s=statistics.median(step_times),
        decode_spread_s=(min(step_times), max(step_times)),
        weights_mb=_tensor_mb(model),
        kv_cache_mb=kv_mb,
        peak_rss_delta_mb=peak_delta,
        device=local_device_label(),
        repeats=repeats,
    )


def _decode_step_times(
    model: nn.Module, batch_prompt: Any, decode_steps: int, *, warmup: int, repeats: int, sync: Callable[[], None]
) -> tuple[list[float], Any]:
    """Seconds per decode step of the full batch, one figure per repeat, and the last repeat's KV cache: each repeat
    builds a fresh KV cache for the batch, then times the decode steps alone (call under inference mode)."""
    step_times: list[float] = []
    for i in range(warmup + repeats):
        out = model(batch_prompt, use_cache=True)
        cache = out.past_key_values
        token = out.logits[:, -1:].argmax(-1)
        sync()
        start = time.perf_counter()
        for _ in range(decode_steps):
            out = model(token, past_key_values=cache, use_cache=True)
            cache = out.past_key_values
            token = out.logits[:, -1:].argmax(-1)
        sync()
        if i >= warmup:
            step_times.append((time.perf_counter() - start) / decode_steps)
    return step_times, cache


def _cache_mb(cache: Any) -> float:
    """Bytes held by a transformers KV cache (DynamicCache or legacy tuples)."""
    import torch

    total = 0
    layers = getattr(cache, "layers", None)
    if layers is not None:
        for layer in layers:
            for name in ("keys", "values"):
                t = getattr(layer, name, None)
                if isinstance(t, torch.Tensor):
                    total += t.numel() * t.element_size()
    else:
        for item in cache or ():
            for t in item:
                total += t.numel() * t.element_size()
    return total / 2**20
