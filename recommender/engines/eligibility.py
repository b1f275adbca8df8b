"""Which of the spec's engines launch a scheme on a device as it was measured, why the others do not, and the fix.

Read by the search, `plan` and `estimate`; each engine's answer comes from its own `kernels`
(`recommender.engines.kernels` holds the rules they share), and, for a model, from the head sizes its attention
kernels take (`head_sizes`) and the architectures its model registry lists (`architecture_support`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from recommender.engines import DEFAULT_ENGINES, ENGINE_NAMES, ENGINES_BY_NAME
from recommender.engines.architecture_support import architecture_refusal
from recommender.engines.head_sizes import head_size_refusal
from recommender.engines.kernels import BF16_MIN_CAPABILITY, Capability, compute_dtype, describe, version

if TYPE_CHECKING:
    from recommender.device import DeviceInfo
    from recommender.quantize import QuantScheme


def refusal(
    engine: str,
    method: QuantScheme,
    device: DeviceInfo,
    head_size: int | None = None,
    architectures: Sequence[str] = (),
) -> str | None:
    """Why `engine` does not serve `method` on `device` as it was measured (or a model whose config lists
    `architectures`, when given: ``architecture_support``; with attention heads of `head_size`, when given:
    ``head_sizes``), or None when it does."""
    why = architecture_refusal(engine, architectures)
    why = why or (None if head_size is None else head_size_refusal(engine, head_size, device))
    return why or ENGINES_BY_NAME[engine].refusal(method, device)


@dataclass(frozen=True, slots=True)
class Eligibility:
    """Which of the checked engines launch a scheme on a device, and what loading it takes.

    Args:
        method: the scheme's name.
        device: the device as refusals name it.
        checked: the engines asked (the spec's `engines`).
        engines: those of them that launch it there, in `checked` order.
        refusals: why each other checked engine does not.
        elsewhere: engines outside `checked` that launch it there.
        load_bits_per_weight: bits per linear weight held while loading, when above the served ones
            (the least of the launching engines'); None when loading needs no more than serving.
        fix: what would make it launchable (a GPU, another scheme, an engine).
    """

    method: str
    device: str
    checked: tuple[str, ...]
    engines: tuple[str, ...]
    refusals: tuple[tuple[str, str], ...]
    elsewhere: tuple[str, ...]
    load_bits_per_weight: float | None
    fix: str

    @property
    def launchable(self) -> bool:
        return bool(self.engines)

    def reason(self, hardware: str) -> str:
        """One line: no engine in the spec's list launches it on `hardware`, each engine's why, and the fix."""
        why = "; ".join(f"{engine}: {text}" for engine, text in self.refusals)
        return (
            f"no engine in engines: [{', '.join(self.checked)}] launches {self.method} on {hardware} "
            f"({self.device}) — {why} — {self.fix}"
        )


def _lowest_capability(method: QuantScheme, engines: Iterable[str]) -> Capability | None:
    """The lowest NVIDIA compute capability on which one of `engines` launches `method`."""
    floors = [
        row.nvidia
        for engine in engines
        if (row := ENGINES_BY_NAME[engine].row(method.kernel_family)) is not None and row.nvidia is not None
    ]
    if not floors:
        return None
    lowest = min(floors)
    return max(lowest, BF16_MIN_CAPABILITY) if compute_dtype(method) == "bfloat16" else lowest


def _fix(method: QuantScheme, device: DeviceInfo, checked: Sequence[str], elsewhere: Sequence[str]) -> str:
    lowest = _lowest_capability(method, checked)
    if lowest is None:
        gpu = ""
    elif device.kind == "cuda":
        gpu = f"a GPU with compute capability >= {version(lowest)}"
    else:
        gpu = f"an NVIDIA GPU with compute capability >= {version(lowest)}"
    options = [f"add {gpu}" if gpu else "", "pick another scheme"]
    if elsewhere:
        options.append(f"add {' or '.join(elsewhere)} to engines")
    options = [option for option in options if option]
    return ", ".join(options[:-1]) + " or " + options[-1] if len(options) > 1 else options[0]


def eligibility(
    method: QuantScheme,
    device: DeviceInfo,
    engines: Sequence[str] = DEFAULT_ENGINES,
    head_size: int | None = None,
    architectures: Sequence[str] = (),
) -> Eligibility:
    """Which of `engines` launch `method` on `device` with the numerics that were measured (for a model with
    attention heads of `head_size` and a config listing `architectures`, when given)."""
    checked = tuple(engines)
    answers = {engine: refusal(engine, method, device, head_size, architectures) for engine in ENGINE_NAMES}
    launching = tuple(engine for engine in checked if answers[engine] is None)
    elsewhere = tuple(e for e in ENGINE_NAMES if e not in checked and answers[e] is None)
    rows = [ENGINES_BY_NAME[e].row(method.kernel_family) for e in launching]
    loads = [row.load_bits_per_weight for row in rows if row is not None]
    load_bits = None if not loads or None in loads else min(b for b in loads if b is not None)
    return Eligibility(
        method=method.name,
        device=describe(device),
        checked=checked,
        engines=launching,
        refusals=tuple((e, why) for e in checked if (why := answers[e]) is not None),
        elsewhere=elsewhere,
        load_bits_per_weight=load_bits,
        fix=_fix(method, device, checked, elsewhere),
    )
