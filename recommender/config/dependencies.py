"""Settings that only mean something beside another: the one table of them, for `plan`'s flags and the spec's keys.

A setting given where nothing reads it was silently ignored: ``plan --redundant-experts 32`` without
``--expert-parallel`` planned tensor-parallel replicas as if it had not been typed, and ``space.redundant_experts``
in a spec with no expert-parallel degree searched as if it were 0. Each such pair is one `Requirement` here; a
setting given without what it needs is one line naming the setting, what it needs and the fix (exit 2), before any
work. `plan --spec` reads its settings from the spec, so the flags that point a plan are refused beside it
(`SPEC_FLAG_EXCLUSIONS`) rather than ignored.

"Given" is typed on the command line for a flag (``click``'s parameter source, so ``--link infiniband-ndr`` typed
beside an aggregated plan is refused as ``--link pcie`` is), and a value other than the key's default for a spec key
(a spec written before a key existed holds its default, which changes nothing).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, TypeVar

from recommender.config.candidate import DISAGGREGATED
from recommender.errors import BadInputError

if TYPE_CHECKING:
    from recommender.config.candidate import Candidate
    from recommender.config.space import Space

__all__ = [
    "FLAG_REQUIREMENTS",
    "SPACE_REQUIREMENTS",
    "SPEC_FLAG_EXCLUSIONS",
    "PlanFlags",
    "Requirement",
    "SpecSettings",
    "check_flags",
    "check_space",
]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Requirement(Generic[T]):
    """`setting` means something only where `needs` holds: given (`given`) without it (`met`), it is refused."""

    setting: str
    needs: str
    given: Callable[[T], bool]
    met: Callable[[T], bool]
    fix: str

    def check(self, settings: T, *, prefix: str = "") -> None:
        if self.given(settings) and not self.met(settings):
            raise BadInputError(f"{prefix}{self.setting}", f"applies only with {self.needs}", self.fix)


@dataclass(frozen=True, slots=True)
class PlanFlags:
    """`plan`'s flags as typed: `typed` holds the options given on the command line (their flag spellings)."""

    typed: frozenset[str]
    layouts: tuple[str, ...]
    expert_parallel: bool


def _typed(flag: str) -> Callable[[PlanFlags], bool]:
    return lambda flags: flag in flags.typed


def _disaggregated(flags: PlanFlags) -> bool:
    return DISAGGREGATED in flags.layouts


def _pools_or_ep(flags: PlanFlags) -> bool:
    return _disaggregated(flags) or flags.expert_parallel


#: The flags of `plan` that only apply beside another flag.
FLAG_REQUIREMENTS: tuple[Requirement[PlanFlags], ...] = (
    Requirement(
        "--redundant-experts",
        "--expert-parallel (extra expert replicas are placed in expert-parallel replicas only)",
        _typed("--redundant-experts"),
        lambda f: f.expert_parallel,
        "add --expert-parallel, or drop --redundant-experts",
    ),
    Requirement(
        "--expert-skew",
        "--expert-parallel (the routing skew loads expert-parallel GPUs only)",
        _typed("--expert-skew"),
        lambda f: f.expert_parallel,
        "add --expert-parallel, or drop --expert-skew",
    ),
    Requirement(
        "--decode-hardware",
        "--layout disaggregated (decode pools are planned only there)",
        _typed("--decode-hardware"),
        _disaggregated,
        "add --layout disaggregated, or drop --decode-hardware",
    ),
    Requirement(
        "--link",
        "--layout disaggregated or --expert-parallel (nothing else crosses a link)",
        _typed("--link"),
        _pools_or_ep,
        "add --layout disaggregated or --expert-parallel, or drop --link",
    ),
    Requirement(
        "--routing",
        "the plain plan's aggregated replicas (the layout and expert-parallel comparisons size their own pools)",
        _typed("--routing"),
        lambda f: not _pools_or_ep(f),
        "drop --routing, or --layout disaggregated / --expert-parallel",
    ),
    Requirement(
        "--engine-release",
        "the plain plan (the layout and expert-parallel comparisons price the current releases)",
        _typed("--engine-release"),
        lambda f: not _pools_or_ep(f),
        "drop --engine-release, or --layout disaggregated / --expert-parallel",
    ),
)

#: The flags `plan --spec` would ignore (the spec holds their settings): every option but these.
SPEC_FLAG_EXCLUSIONS: frozenset[str] = frozenset({"--spec", "--model", "--json"})


def check_flags(flags: PlanFlags) -> None:
    """Refuse a `plan` flag typed without the flag it needs, and (with --spec) a flag the spec overrides."""
    if "--spec" in flags.typed:
        ignored = sorted(flags.typed - SPEC_FLAG_EXCLUSIONS)
        if ignored:
            raise BadInputError(
                ignored[0],
                "ignored with --spec (the spec's own settings are planned)",
                f"set it in the spec, or drop {ignored[0]}",
            )
    for requirement in FLAG_REQUIREMENTS:
        requirement.check(flags)


@dataclass(frozen=True, slots=True)
class SpecSettings:
    """The spec's space and current deployment: what a space key's requirement reads."""

    space: Space
    current: Candidate

    @property
    def expert_parallel(self) -> bool:
        """Expert-parallel candidates are searched (a degree above 1 in the space, or the current deployment's)."""
        return any(d > 1 for d in self.space.expert_parallel) or self.current.expert_parallel > 1

    @property
    def disaggregated(self) -> bool:
        return DISAGGREGATED in self.space.layout


def _off_default(name: str) -> Callable[[SpecSettings], bool]:
    """The space key `name` holds something other than its default."""

    def given(spec: SpecSettings) -> bool:
        default = type(spec.space).model_fields[name].get_default(call_default_factory=True)
        return bool(getattr(spec.space, name) != default)

    return given


#: The space keys that only apply beside another key (``current.decode_*`` are checked by `Candidate` itself).
SPACE_REQUIREMENTS: tuple[Requirement[SpecSettings], ...] = (
    Requirement(
        "space.redundant_experts",
        "an expert-parallel degree above 1 in space.expert_parallel (EPLB's extra replicas live in those replicas)",
        _off_default("redundant_experts"),
        lambda s: s.expert_parallel,
        "add a degree above 1 to space.expert_parallel, or drop space.redundant_experts",
    ),
    Requirement(
        "space.expert_skew",
        "an expert-parallel degree above 1 in space.expert_parallel (the skew loads expert-parallel GPUs only)",
        _off_default("expert_skew"),
        lambda s: s.expert_parallel,
        "add a degree above 1 to space.expert_parallel, or drop space.expert_skew",
    ),
    Requirement(
        "space.decode_hardware",
        "disaggregated in space.layout (decode pools are searched only for disaggregated candidates)",
        _off_default("decode_hardware"),
        lambda s: s.disaggregated,
        "add disaggregated to space.layout, or drop space.decode_hardware",
    ),
    Requirement(
        "space.decode_tensor_parallel",
        "disaggregated in space.layout (decode pools' degrees are searched only for disaggregated candidates)",
        _off_default("decode_tensor_parallel"),
        lambda s: s.disaggregated,
        "add disaggregated to space.layout, or drop space.decode_tensor_parallel",
    ),
    Requirement(
        "space.link",
        "disaggregated in space.layout or an expert-parallel degree above 1 (nothing else crosses a link)",
        _off_default("link"),
        lambda s: s.disaggregated or s.expert_parallel or s.current.layout == DISAGGREGATED,
        "add disaggregated to space.layout or a degree above 1 to space.expert_parallel, or drop space.link",
    ),
)


def check_space(space: Space, current: Candidate) -> None:
    """Refuse a space key given without the key it needs (every entry of `SPACE_REQUIREMENTS`)."""
    for requirement in SPACE_REQUIREMENTS:
        requirement.check(SpecSettings(space, current))
