"""The precision families, declared once: their bits, the scheme `plan` projects for each, and its quality prior.

A spec lists schemes under a family (``space.schemes``), the tie rule prefers more bits per weight
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
        plan_schemes: the served schemes `plan` and `estimate --precision` project for it, in order: the first
            one the engines launch on the GPU (16-bit: fp16 on GPUs without bf16; fp8: FP8 dynamic, else the
            block- or tensor-scaled FP8 an engine runs there; never a weight-only fallback nobody measured, so a
            GPU without FP8 W8A8 kernels is refused; a ModelOpt scheme where the engine launches only ModelOpt's
            checkpoints, as TensorRT-LLM on Ada). Empty: not projected on its own.
        prior: `plan`'s quality label: a labelled prior, not a measurement.
    """

    name: str
    bits: int
    plan_schemes: tuple[str, ...] = ()
    prior: str = ""


#: Priors summarise "Give Me BF16 or Give Me Death?" (Kurtic et al., arXiv 2411.02355) as quoted in the
#: project's reference notes; not yet checked against the paper's own tables.
PRECISIONS: tuple[PrecisionFamily, ...] = (
    PrecisionFamily("bf16", 16, ("baseline", "fp16"), "reference"),
    PrecisionFamily("fp16", 16),
    PrecisionFamily(
        "fp8",
        8,
        ("fp8-dynamic", "fp8-block", "fp8-tensor", "modelopt-fp8"),
        "prior: near-lossless (W8A8 FP8, arXiv 2411.02355)",
    ),
    PrecisionFamily("int8", 8, ("int8-w8a8",), "prior: 1-3 % loss when tuned (W8A8 INT8, arXiv 2411.02355)"),
    PrecisionFamily(
        "int4",
        4,
        ("w4a16-gptq-g128", "modelopt-w4a16-awq"),
        "prior: task-dependent loss, competitive with INT8 W8A8 (weight-only, arXiv 2411.02355)",
    ),
    # FP4: the 4-bit that Blackwell's tensor cores run (NVFP4, MXFP4); refused below Blackwell, not emulated.
    PrecisionFamily(
        "fp4",
        4,
        ("nvfp4", "mxfp4", "modelopt-nvfp4"),
        "prior: not in arXiv 2411.02355; measure it (NVFP4 W4A4 is calibrated like INT8 W8A8)",
    ),
)

#: Every family's name, in the order above.
PRECISION_NAMES: tuple[str, ...] = tuple(p.name for p in PRECISIONS)
#: The families `plan` projects, in the order above.
PLANNED_PRECISIONS: tuple[str, ...] = tuple(p.name for p in PRECISIONS if p.plan_schemes)
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


#: Bits per KV-cache element of each kv_cache_dtype.
KV_BITS = {"auto": 16, "fp8": 8}


def least_quantized(precision: str, kv_cache_dtype: str = "auto") -> tuple[int, int]:
    """The tie rule's "least quantized" order, smaller first: more bits per weight, then per KV-cache element."""
    return -precision_bits(precision), -KV_BITS.get(kv_cache_dtype, 0)
