"""The local device's step times measured through a serving engine (a spec's ``probe: {engine: vllm}``).

Once per scheme: the engine is started on the checkpoint that scheme's quality is scored on (the bf16 weights as
they are; the quantizer's saved directory, made or found in the checkpoint store), loaded closed-loop at each of the
spec's concurrency levels with the traffic's prompt and output lengths (``vllm bench serve``), and stopped; the levels'
median TTFT and TPOT calibrate one prefill step and a decode step per level (``calibrate_steps``, the closed-loop
replay corrected until it reproduces them). The search then simulates the user's traffic on those steps as it does on
the in-process probe's, so the local candidate's capacity and P99s stand on the engine's own scheduler, batching and
kernels as its client sees them. Every candidate of a scheme (any batch size) shares the calibration.

What it is not: a measurement at the user's rate (the simulation replays the traffic on the calibrated steps; the
probe command's Poisson levels judge that replay: docs/measure-on-your-engine.md); nor shared between the workers of a
distributed search (each calibrates the schemes it meets, minutes each).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from recommender.engines.cpu_engine_schemes import cpu_engine_refusal
from recommender.errors import BadInputError
from recommender.evaluation.refusal import Refused
from recommender.provenance import Provenance
from recommender.quantize.checkpoint_scheme import CheckpointScheme

if TYPE_CHECKING:
    from recommender.config.local_probe import LocalProbe
    from recommender.engines.load_run import MeasuredLoad
    from recommender.models.source import ModelSource
    from recommender.perf.step.cost import TableStepCost
    from recommender.quantize import QuantScheme
    from recommender.quantize.checkpoint import QuantizeContext

__all__ = ["EngineSteps"]


@dataclass
class EngineSteps:
    """Each scheme's step times on this device through the engine, calibrated once per scheme (or its refusal)."""

    settings: LocalProbe
    source: ModelSource
    context: QuantizeContext | None
    prompt_tokens: int
    output_tokens: int
    _tables: dict[str, TableStepCost | Refused] = field(default_factory=dict, init=False, repr=False)

    def refusal(self, method: QuantScheme) -> str | None:
        """Why the engine does not serve `method` on this device (None: it does)."""
        return cpu_engine_refusal(method.name, method.precision)

    def step_cost(self, method: QuantScheme) -> TableStepCost:
        """`method`'s calibrated step times; `Refused` ("runnable") where the engine did not serve it."""
        if method.name not in self._tables:
            try:
                self._tables[method.name] = self._calibrate(method)
            except Refused as refused:
                self._tables[method.name] = refused
        found = self._tables[method.name]
        if isinstance(found, Refused):
            raise found.with_traceback(None)
        return found

    def checkpoint(self, method: QuantScheme) -> str:
        """What the engine loads: the scheme's saved checkpoint, or the original weights (bf16)."""
        if isinstance(method, CheckpointScheme) and method.checkpoint_format is not None:
            if self.context is None:
                raise Refused("runnable", f"{method.name}: no checkpoint store to write its checkpoint to")
            return str(method.checkpoint(self.source, self.context))
        return self.source.location

    def _calibrate(self, method: QuantScheme) -> TableStepCost:
        from recommender.engines.cpu_engine_env import bench_command, ensure_engine_env
        from recommender.engines.endpoint import engine_release
        from recommender.engines.engine_prediction import calibrate_steps
        from recommender.engines.local_server import serve

        if (why := self.refusal(method)) is not None:
            raise Refused("runnable", why)
        model = self.checkpoint(method)
        env = ensure_engine_env()
        levels = self.settings.concurrency
        print(f"measuring {method.name} through {env.release} at concurrency {levels} ...", file=sys.stderr)
        try:
            with serve(env, model=model) as server:
                release = engine_release(server.base_url)
                points = [self._load(bench_command(env), server.base_url, model, level) for level in levels]
        except BadInputError as failed:  # the server or its client failed on this scheme: the others still count
            raise Refused("runnable", f"{env.release} did not serve {method.name} here: {failed}") from failed
        provenance = Provenance(
            "calibrated",
            f"step times measured through {release} ({env.release}) on this device, closed loop at concurrency "
            f"{', '.join(map(str, levels))} with {self.prompt_tokens}+{self.output_tokens} tokens; latency simulated",
        )
        return calibrate_steps(points, provenance=provenance)

    def _load(self, bench: list[str], base_url: str, model: str, level: int) -> MeasuredLoad:
        from recommender.engines.load_run import LoadShape, run_load

        shape = LoadShape(
            concurrency=level,
            prompts=max(self.settings.prompts, 2 * level),
            input_len=self.prompt_tokens,
            output_len=self.output_tokens,
        )
        return run_load(bench, base_url=base_url, model=model, tokenizer=model, shape=shape)
