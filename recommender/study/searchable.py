"""Whether a spec's space holds anything to search once pricing and the serving engines have had their say.

Every candidate on a GPU its price set does not price is pruned (the search can never
recommend it), and so is every scheme none of the spec's engines launches on that GPU. When
that leaves nothing, a search would run its trials, prune them all and "recommend" the
current deployment with exit code 0: a typo'd price set or engine list read as "you are
already optimal". Such a space is bad input, refused before any store opens, with the reason
of each GPU. A space with the local device is measured on this machine by its own rules and
is never refused here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from recommender.config.spec import LOCAL_DEVICE
from recommender.engines import ENGINES_BY_NAME, evaluation_only
from recommender.engines.eligibility import eligibility
from recommender.errors import BadInputError
from recommender.quantize import get_scheme
from recommender.speculation.methods import NONE

if TYPE_CHECKING:
    from recommender.config.spec import SearchSpec
    from recommender.perf.catalog.gpus import Catalog


def check_something_to_search(spec: SearchSpec, catalog: Catalog, *, field_prefix: str) -> None:
    """Refuse a space where no GPU is priced, or where no spec engine launches any of its schemes on a priced
    GPU (evaluation-only schemes launch nowhere); the error gives each GPU's reason."""
    hardware = list(spec.space.hardware)
    if LOCAL_DEVICE in hardware:
        return
    priced = [hw for hw in hardware if catalog.price_refusal(hw) is None]
    if not priced:
        named = catalog.prices.label if catalog.prices is not None else "the catalog"
        raise BadInputError(
            f"{field_prefix}space.hardware",
            f"nothing to search: price set {named} prices none of {', '.join(hardware)}",
            "choose a price_set that lists them, add a GPU it prices, or give contract "
            "prices (price_per_hour_usd) in a hardware_catalog file",
        )
    methods = [get_scheme(name) for names in spec.space.schemes.values() for name in names]
    served = [m for m in methods if not evaluation_only(m)]
    reasons = []
    for hw in priced:
        device = catalog.get(hw).device
        verdicts = [eligibility(m, device, tuple(spec.engines)) for m in served]
        if any(v.launchable for v in verdicts):
            return
        reasons.append(verdicts[0].reason(hw) if verdicts else f"{hw}: every scheme is evaluation only")
    raise BadInputError(
        f"{field_prefix}engines",
        f"nothing to search: engines [{', '.join(spec.engines)}] launch none of the "
        f"space's schemes on its priced GPUs ({reasons[0]})",
        "add an engine that launches them, or schemes and GPUs these engines serve",
    )


def check_speculation_launchable(spec: SearchSpec, *, field_prefix: str) -> None:
    """Refuse a speculative method none of the spec's engines launches as it is measured (only vLLM runs the
    n-gram proposer that is replayed): its candidates would all be pruned."""
    wanted = [m for m in dict.fromkeys([*spec.space.speculative, spec.current.speculative]) if m != NONE]
    if not wanted or any(not ENGINES_BY_NAME[e].speculation_refusal for e in spec.engines):
        return
    why = "; ".join(f"{e}: {ENGINES_BY_NAME[e].speculation_refusal}" for e in spec.engines)
    where = "space.speculative" if wanted[0] in spec.space.speculative else "current.speculative"
    raise BadInputError(
        f"{field_prefix}{where}",
        f"{wanted[0]}: no engine in engines: [{', '.join(spec.engines)}] launches it as measured ({why[:300]})",
        f"add vllm to engines, or drop {wanted[0]} from {where}",
    )
