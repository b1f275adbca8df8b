"""The local device as a serving target: whether a candidate can be measured here, and its measured step times.

A measurement on the machine at hand beats the model for that machine: a local candidate's step cost is
the probe's prefill and decode times measured here (batch 1, every searched batch size up to the candidate's,
and its own), interpolated between them by the simulator. Probes run once per (scheme, batch size) and are
shared by every candidate of a study (`PerformanceEvaluator` holds the cache).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import TYPE_CHECKING

from recommender.config.spec import LOCAL_DEVICE, LocalDevice
from recommender.engines.eligibility import Eligibility, eligibility
from recommender.evaluation.refusal import Refused
from recommender.perf.probe import ProbeResult, probe
from recommender.perf.step.cost import TableStepCost
from recommender.provenance import Provenance
from recommender.quantize import QuantScheme

if TYPE_CHECKING:
    from recommender.config.candidate import Candidate
    from recommender.evaluation.engine_steps import EngineSteps
    from recommender.quantize.model_cache import ModelCache

#: Probes measured here, by (scheme, batch size).
Probes = dict[tuple[str, int], ProbeResult]


@dataclass(frozen=True)
class LocalMeasurement:
    """What measuring the local device needs: its models, the batch sizes probed, its price."""

    models: ModelCache
    batch_sizes: list[int]
    price: LocalDevice
    #: Step times through the serving engine (a spec's ``probe: {engine: vllm}``); None: the in-process probe.
    engine: EngineSteps | None = None


def local_eligibility(
    c: Candidate,
    method: QuantScheme,
    local: LocalMeasurement | None,
    *,
    engines: tuple[str, ...],
    head_dim: int,
    architectures: tuple[str, ...] = (),
) -> Eligibility:
    """Who serves `c` on this machine; `Refused` ("runnable") where it cannot be measured and served here."""
    if local is None:
        raise Refused("runnable", "the local device is not measured in this command (architecture-only projection)")
    device = local.models.device
    reason = method.unavailable_reason(device)
    if reason is None and local.engine is not None:
        reason = local.engine.refusal(method)
    if reason is not None:
        raise Refused("runnable", reason)
    served = eligibility(method, device, engines, head_dim, architectures)
    if not served.launchable:
        raise Refused("runnable", served.reason(f"{LOCAL_DEVICE} ({device.label})"))
    if c.kv_cache_dtype != "auto":
        raise Refused(
            "runnable",
            f"kv_cache_dtype {c.kv_cache_dtype}: the local probe has no fp8 KV storage measured to time; "
            "its quality is measured, its speed only modeled on catalog GPUs",
        )
    if c.tensor_parallel > 1:
        raise Refused("runnable", f"tensor_parallel {c.tensor_parallel} > 1 devices per node")
    return served


def _probe(local: LocalMeasurement, probes: Probes, c: Candidate, batch_size: int, prompt_tokens: int) -> ProbeResult:
    key = (c.method, batch_size)
    if key not in probes:
        model = local.models.get(c.base_scheme)
        probes[key] = probe(model, prompt_tokens=prompt_tokens, batch_size=batch_size)
    return probes[key]


def measured_step_cost(
    c: Candidate, local: LocalMeasurement, probes: Probes, *, prompt_tokens: int
) -> tuple[TableStepCost, ProbeResult | None]:
    """Step times measured here at batch 1, every searched batch size up to the candidate's, and its own: the
    simulator's decode steps run at every batch size up to ``max_num_seqs``, interpolated between them.
    `probes` caches each (scheme, batch size) measured. Through the engine: its calibrated steps (no probe result)."""
    if local.engine is not None:
        return local.engine.step_cost(c.base_scheme), None
    sizes = sorted({1, c.batch_size} | {b for b in local.batch_sizes if b <= c.batch_size})
    measured = [_probe(local, probes, c, b, prompt_tokens) for b in sizes]
    own = measured[-1]
    table = TableStepCost(
        prefill={prompt_tokens: statistics.median(p.prefill_s for p in measured)},
        decode={p.batch_size: p.decode_step_s for p in measured},
        provenance=Provenance(
            "calibrated",
            f"step times measured on {own.provenance.detail}; decode measured at batch sizes {sizes}, "
            "interpolated between them; latency simulated",
        ),
    )
    return table, own
