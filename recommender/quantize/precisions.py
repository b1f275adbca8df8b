"""The precision families, declared once: their bits, the scheme `plan` projects for each, and its quality prior.

A spec lists methods under a family (``space.methods``), the tie rule prefers more bits per weight
(`recommender.decision.rules`), and `plan` projects each family with one served scheme. Add a family
here (and its schemes to a backend's ``METHODS``); nothing else lists them.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class PrecisionFamily:
    """One precision family.

    Args:
        name: as specs and methods name it ("fp8").
        bits: bits per weight, the "least quantized" order of the tie rule.
        plan_scheme: the served scheme `plan` projects for it (None: `plan` does not project it on its own).
        plan_fallback: the scheme `plan` falls back to where no engine launches `plan_scheme` on a GPU (16-bit:
            fp16 on GPUs without bf16; fp8: itself, so a GPU without FP8 W8A8 kernels is refused, not modelled
            with weight-only FP8 Marlin numerics nobody measured).
        prior: `plan`'s quality label: a labelled prior, not a measurement.
    """

    name: str
    bits: int
    plan_scheme: str | None = None
    plan_fallback: str | None = None
    prior: str = ""


#: Priors summarise "Give Me BF16 or Give Me Death?" (Kurtic et al., arXiv 2411.02355) as quoted in the
#: project's reference notes; not yet checked against the paper's own tables.
PRECISIONS: tuple[PrecisionFamily, ...] = (
    PrecisionFamily("bf16", 16, "baseline", "fp16", "reference"),
    PrecisionFamily("fp16", 16),
    PrecisionFamily("fp8", 8, "fp8-dynamic", "fp8-dynamic", "prior: near-lossless (W8A8 FP8, arXiv 2411.02355)"),
    PrecisionFamily("int8", 8, "int8-w8a8", "int8-w8a8", "prior: 1-3 % loss when tuned (W8A8 INT8, arXiv 2411.02355)"),
    PrecisionFamily("int4", 4, "w4a16-gptq-g128", "w4a16-gptq-g128",
                    "prior: task-dependent loss, competitive with INT8 W8A8 (weight-only, arXiv 2411.02355)"),
)  # fmt: skip

#: Every family's name, in the order above.
PRECISION_NAMES: tuple[str, ...] = tuple(p.name for p in PRECISIONS)
#: The families `plan` projects, in the order above.
PLANNED_PRECISIONS: tuple[str, ...] = tuple(p.name for p in PRECISIONS if p.plan_scheme is not None)
_BY_NAME = {p.name: p for p in PRECISIONS}


def precision_family(name: str) -> PrecisionFamily:
    """The family called `name`; ValueError (with the closest names) for another."""
    if name in _BY_NAME:
        return _BY_NAME[name]
    close = difflib.get_close_matches(name, PRECISION_NAMES, n=2)
    hint = f"did you mean {' or '.join(close)}?" if close else f"known: {', '.join(PRECISION_NAMES)}"
    raise ValueError(f"unknown precision {name!r}; {hint}")


def precision_bits(name: str) -> int:
    """Bits per weight of family `name` (0 for a name that is none: it sorts as most quantized)."""
    family = _BY_NAME.get(name)
    return 0 if family is None else family.bits
