"""The GPUs a disaggregated candidate's decode pool is searched on, and the spec's checks of them.

`recommender plan --layout disaggregated` pairs each prefill GPU's pools with every other GPU's decode pools where
the link is a network link (``fleet/layouts/layout_compare.py``, ``fleet/layouts/mixed_pools.py``). The search asks
the same with
one more candidate field, `decode_hardware`, an Optuna parameter suggested only for a disaggregated candidate (a
conditional parameter of Optuna's define-by-run space: TPE samples it where the layout is drawn disaggregated, the
brute-force sampler enumerates it under that branch only, ``study/space.py``). A parameter rather than "the cheapest
decode GPU per prefill candidate": each pair is then a candidate with its own result, its own key and its own line
in the report's ties and rejections, the sampler learns which decode GPUs pay, and an aggregated trial costs no
more than before. Its choices:

- `space.decode_hardware` where the spec lists it (every pair of a space GPU and a listed GPU is searched; over a
  node link a pair of two GPU types is bad input naming ``space.link``, as `plan --decode-hardware` refuses it);
- left out, the space's catalog GPUs where `space.link` is a network link and there are two or more, so a search
  over several GPUs compares heterogeneous pools as `plan` does; else none (no parameter: both pools on the
  candidate's GPU, the study's parameters those of a spec written before mixed pools).

A spec whose decode GPUs are searched hashes them into its study name (``SearchSpec.fingerprint``): its studies
hold a parameter older ones lack, and Optuna's brute-force sampler refuses a study whose trials disagree on which
parameters follow a branch, so such a spec starts a new study rather than resume an older one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from recommender.config.candidate import DISAGGREGATED, LOCAL_DEVICE
from recommender.errors import BadInputError
from recommender.perf.catalog.links import check_mixed_link, network_links, resolve_link

if TYPE_CHECKING:
    from recommender.config.candidate import Candidate
    from recommender.config.space import Space
    from recommender.perf.catalog.gpus import Catalog

__all__ = ["check_decode_pools", "decode_choices"]


def decode_choices(space: Space, current: Candidate) -> list[str]:
    """The `decode_hardware` parameter's choices, sorted; [] where it is not searched (no parameter). The current
    deployment's decode GPU is always among them when it runs disaggregated, so it can be enqueued as a trial."""
    if DISAGGREGATED not in {*space.layout, current.layout}:
        return []
    own = {current.decode_gpu} if current.layout == DISAGGREGATED else set()
    if space.decode_hardware is not None:
        return sorted(set(space.decode_hardware) | own)
    gpus = {hw for hw in [*space.hardware, current.hardware] if hw != LOCAL_DEVICE} | own
    if len(gpus) < 2 or (space.link not in network_links() and not current.decode_hardware):
        return []
    return sorted(gpus)


def check_decode_pools(space: Space, current: Candidate, catalog: Catalog) -> None:
    """Refuse the local device or a GPU the catalog does not know
    as a decode pool, and a pair of two GPU types the spec (`space`, `current`) asks for over a node link."""
    named = [(f"space.decode_hardware[{i}]", hw) for i, hw in enumerate(space.decode_hardware or [])]
    if current.decode_hardware:
        named.append(("current.decode_hardware", current.decode_hardware))
    for where, hw in named:
        if hw == LOCAL_DEVICE:
            raise BadInputError(
                where, "disaggregated pools are planned on catalog GPUs; the local device is one replica", "name one"
            )
        resolve_link(space.link, catalog.get(hw, field=where), field="space.link")
    if current.decode_hardware and current.hardware != LOCAL_DEVICE:
        link = resolve_link(space.link, catalog.get(current.hardware), field="space.link")
        check_mixed_link(link, current.hardware, current.decode_hardware, field="space.link")
    prefill = [hw for hw in dict.fromkeys([*space.hardware, current.hardware]) if hw != LOCAL_DEVICE]
    for p in prefill if space.decode_hardware else []:
        link = resolve_link(space.link, catalog.get(p), field="space.link")
        for d in space.decode_hardware or []:
            check_mixed_link(link, p, d, field="space.link", fix="drop space.decode_hardware (both pools on one GPU)")
