"""The base of the spec's sections: one place that says a spec file is read strictly.

Its own module so that the spec (`config/spec.py`) and the workload it names (`config/workload.py`) share one
rule instead of two copies that could drift apart.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class StrictModel(BaseModel):
    """Unknown keys are errors: a typo in a spec must not silently fall back to a default. NaN and
    infinities are refused everywhere (a price of .inf would run a whole search)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)
