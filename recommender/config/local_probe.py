"""How a search measures the machine at hand: a spec's ``probe`` section.

By default a ``local`` candidate's step times are timed by the in-process probe (Hugging Face transformers' eager
forward, ``perf/probe.py``): no engine's scheduler, batching or kernels. ``probe: {engine: vllm}`` measures them
through the serving engine instead: the search starts vLLM (its CPU build on a CPU, ``make engine-env``) on the very
checkpoint each scheme's quality is scored on, sends closed-loop load at each ``concurrency`` level with the
spec's prompt and output lengths (``vllm bench serve``), and calibrates the step times the simulator then replays
the user's traffic on (``calibrate_steps`` in ``engines/engine_prediction.py``, as ``recommender probe`` does). A
scheme the engine does not serve on this device is pruned with the engine's reason.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, field_validator

from recommender.config.candidate import LOCAL_DEVICE
from recommender.config.strict import StrictModel
from recommender.errors import BadInputError

__all__ = ["LocalProbe", "check_local_probe"]

#: The most requests in flight a calibration level may hold (the engine's default ``max_num_seqs`` is 256).
MAX_LEVEL = 256


class LocalProbe(StrictModel):
    """What measures the local device's candidates, and at which closed-loop levels."""

    engine: Literal["transformers", "vllm"] = Field(
        default="transformers",
        description="transformers: the in-process probe (batch timings of the eager forward); vllm: the serving "
        "engine started on each scheme's checkpoint, its step times calibrated from closed-loop load.",
    )
    concurrency: list[Annotated[int, Field(ge=1, le=MAX_LEVEL)]] = Field(
        default=[1, 4, 16],
        min_length=1,
        max_length=8,
        description="Closed-loop levels (requests in flight) the engine is loaded at; one decode step each.",
    )
    prompts: Annotated[int, Field(ge=4, le=2000)] = Field(
        default=32, description="Requests per level (at least two rounds of the level are sent)."
    )

    @field_validator("concurrency")
    @classmethod
    def _distinct_levels(cls, value: list[int]) -> list[int]:
        if len(set(value)) != len(value):
            raise ValueError("a level is listed twice; list each concurrency once")
        return sorted(value)

    @property
    def through_engine(self) -> bool:
        return self.engine != "transformers"


def check_local_probe(probe: LocalProbe | None, hardware: list[str]) -> None:
    """``probe`` measures the local device: refused where the space searches no local candidate."""
    if probe is not None and probe.through_engine and LOCAL_DEVICE not in hardware:
        raise BadInputError(
            "probe.engine",
            f"{probe.engine} measures the local device's candidates and space.hardware has no {LOCAL_DEVICE!r}",
            f"add {LOCAL_DEVICE} to space.hardware (with a local_device section) or remove probe",
        )
