"""Links between GPUs, as data: what an expert-parallel all-to-all or a KV transfer between pools crosses.

``links.yaml`` beside this module names each link with its achievable bandwidth per GPU and direction,
a fixed latency per transfer and the source of both. NVLink and PCIe take their bandwidth from the
accelerator's own interconnect (``hardware.yaml``), scaled by the efficiency measured on NVLink; the
network links (InfiniBand, RoCE) are one NIC per GPU. A link the catalog does not know is bad input,
refused naming the field and the links it knows.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from recommender.errors import BadInputError
from recommender.input_files import load_yaml_mapping
from recommender.perf.model.link import Link

if TYPE_CHECKING:
    from recommender.perf.catalog.gpus import Accelerator

__all__ = [
    "LINKS_FILE",
    "Link",
    "LinkRow",
    "check_mixed_link",
    "known_links",
    "mixed_link_reason",
    "network_links",
    "resolve_link",
]

LINKS_FILE = Path(__file__).with_name("links.yaml")


class LinkRow(BaseModel):
    """One row of ``links.yaml``."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    scope: Literal["node", "cluster"]
    bandwidth_gbps: float | None = Field(default=None, gt=0, le=1e6)
    efficiency: float = Field(gt=0, le=1)
    latency_us: float = Field(ge=0, le=1e6)
    source: str = Field(min_length=1)


@cache
def _rows() -> dict[str, LinkRow]:
    raw = load_yaml_mapping(LINKS_FILE, field=str(LINKS_FILE), what="link catalog").get("links", {})
    try:
        return {name: LinkRow.model_validate(row) for name, row in raw.items()}
    except ValidationError as exc:  # the shipped file is checked by the tests; a broken edit names the row
        raise BadInputError(str(LINKS_FILE), f"bad link row: {exc.errors()[0]['msg']}", "fix links.yaml") from None


def known_links() -> list[str]:
    return sorted(_rows())


def network_links() -> list[str]:
    """The links between servers (``scope: cluster``): what pools on different nodes, or GPU types, talk over."""
    return [name for name in known_links() if _rows()[name].scope == "cluster"]


def resolve_link(name: str, accel: Accelerator, *, field: str = "link") -> Link:
    """The link `name` as seen from a GPU of `accel`; a name the catalog does not know, or an NVLink the GPU
    lacks, is bad input naming `field`."""
    row = _rows().get(name)
    if row is None:
        raise BadInputError(field, f"unknown link {name!r}", f"use one of {', '.join(known_links())}")
    kind = accel.interconnect.kind
    if name in ("nvlink", "pcie") and not kind.startswith(name):
        raise BadInputError(
            field,
            f"{accel.key or accel.name} has no {name} (its interconnect is {kind})",
            f"use {'pcie' if name == 'nvlink' else 'nvlink'} or a network link "
            f"({', '.join(n for n in known_links() if _rows()[n].scope == 'cluster')})",
        )
    peak_gbps = row.bandwidth_gbps if row.bandwidth_gbps is not None else accel.interconnect.bandwidth_gbps / 2
    return Link(
        name=name,
        scope=row.scope,
        bytes_per_s=peak_gbps * row.efficiency * 1e9,
        latency_s=row.latency_us * 1e-6,
        source=row.source
        if row.bandwidth_gbps is not None
        else f"{accel.interconnect.kind} "
        f"{accel.interconnect.bandwidth_gbps:g} GB/s bidirectional ({accel.spec_source[:60]}...); {row.source}",
    )


def mixed_link_reason(link: Link, prefill: str, decode: str) -> str | None:
    """Why `link` cannot carry the KV from a prefill pool on `prefill` to a decode pool on `decode` (None: it can).

    Two GPU types are never in one NVLink domain (an NVLink/NVSwitch domain is one system of one GPU type) nor, as
    deployed, on one PCIe host, so a pair of two types talks over a network link (``scope: cluster``)."""
    if prefill == decode or link.scope == "cluster":
        return None
    return (
        f"{link.name} cannot join a prefill pool on {prefill} to a decode pool on {decode}: two GPU types are never "
        f"in one {link.name} domain"
    )


def check_mixed_link(link: Link, prefill: str, decode: str, *, field: str = "--link", fix: str = "") -> None:
    """Refuse a node link (NVLink, PCIe) between pools of two GPU types, naming `field` and the network links
    (`fix`: what else the user may do; default: decode on the prefill GPU)."""
    reason = mixed_link_reason(link, prefill, decode)
    if reason is not None:
        raise BadInputError(
            field, reason, f"use a network link ({', '.join(network_links())}) or {fix or f'decode on {prefill}'}"
        )
