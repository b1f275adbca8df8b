"""Tensor or expert parallelism: `plan --expert-parallel`'s answer for each GPU and precision of a MoE model.

For every (GPU, precision) the tensor-parallel plan row (``plan.py``) is set against the cheapest expert-parallel
replica (``expert_parallel_plan.py``); fewer GPUs of the same type wins, ties go to tensor parallelism, and the
reason says by how much. Apart from the expert-parallel planner because it composes the two planners and states
the verdict, which neither of them decides.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from recommender.deploy.expert_parallel import deployment_entries
from recommender.errors import BadInputError
from recommender.evaluation.performance import PerformanceEvaluator
from recommender.fleet.launch import expert_parallel_launch, launch_text
from recommender.fleet.layouts.expert_parallel_plan import ExpertParallelRow, plan_expert_parallel, require_moe
from recommender.fleet.plan import plan_one
from recommender.fleet.plan_row import PlanRow
from recommender.perf.catalog.links import resolve_link
from recommender.perf.model.expert_load import check_expert_split
from recommender.quantize import get_scheme

if TYPE_CHECKING:
    from recommender.fleet.plan_request import PlanRequest
    from recommender.perf.catalog.gpus import Accelerator
    from recommender.perf.model.link import Link

__all__ = ["ParallelismComparison", "compare_parallelism", "plan_parallelism", "with_launch"]


@dataclass(frozen=True, slots=True)
class ParallelismComparison:
    """One GPU and precision: the tensor-parallel plan row against the expert-parallel one, the winner and why."""

    hardware: str
    precision: str
    tensor_parallel: PlanRow
    expert_parallel: ExpertParallelRow
    #: "tensor-parallel", "expert-parallel", or "" when neither meets the SLA.
    winner: str
    reason: str


def compare_parallelism(tp: PlanRow, ep: ExpertParallelRow, *, latent_kv: bool) -> ParallelismComparison:
    """Fewer GPUs of the same type wins (ties to tensor parallelism: one engine process group, no all-to-all)."""
    a = None if tp.replicas is None or tp.tensor_parallel is None else tp.replicas * tp.tensor_parallel
    n = ep.gpus
    if a is None and n is None:
        return ParallelismComparison(tp.hardware, tp.precision, tp, ep, "", "neither layout meets the SLA")
    tp_text = (
        "no tensor-parallel replica meets the SLA"
        if a is None
        else (f"tensor parallelism needs {a} ({tp.replicas} x TP{tp.tensor_parallel}, batch {tp.batch_size})")
    )
    if n is None:
        return ParallelismComparison(
            tp.hardware, tp.precision, tp, ep, "tensor-parallel", f"tensor-parallel only: {ep.note}"
        )
    ep_text = (
        f"{ep.replicas} x EP{ep.ep} with {ep.attention_dp} attention rank(s), batch {ep.batch_size_per_rank} "
        f"per rank, busiest GPU at {ep.imbalance:.2f}x the mean expert load = {n} GPUs"
    )
    if a is None or n < a:
        why = "" if a is None else f"expert parallelism saves {1 - n / a:.0%}: "
        mla = (
            "; MLA's latent is whole on every GPU of a tensor-parallel group, so attention ranks of one GPU hold "
            "that many times the sequences"
            if latent_kv and (ep.attention_dp or 1) > 1
            else ""
        )
        return ParallelismComparison(
            tp.hardware, tp.precision, tp, ep, "expert-parallel", f"{why}{ep_text}; {tp_text}{mla}"
        )
    return ParallelismComparison(
        tp.hardware, tp.precision, tp, ep, "tensor-parallel", f"tensor parallelism wins: {tp_text} against {ep_text}"
    )


def with_launch(row: ExpertParallelRow, *, model: str, accel: Accelerator, max_model_len: int) -> ExpertParallelRow:
    """`row` with its engine's expert-parallel command and its llm-d/Dynamo files serving `model` (a checkpoint
    scheme serves ``<model name>-<scheme>``, the directory `recommender quantize --out` writes, as `plan`'s rows
    do)."""
    checkpoint = f"{model.rstrip('/').rsplit('/', 1)[-1]}-{row.method}"
    entries = expert_parallel_launch(
        row,
        model=model,
        max_model_len=max_model_len,
        gpus_per_node=accel.max_tensor_parallel,
        checkpoint=checkpoint,
        device=accel.device,
    )
    return replace(row, launch=launch_text(entries, row.engine), deployments=deployment_entries(entries))


def _network_link(link: str, accel: Accelerator) -> Link:
    """The link between the nodes a replica spans: a cluster network, not a link within a node."""
    network = resolve_link(link, accel, field="--link")
    if network.scope != "cluster":
        raise BadInputError(
            "--link",
            f"{link} is a link within a node, not between the nodes an expert-parallel replica spans",
            "use infiniband-ndr or roce-400g",
        )
    return network


def plan_parallelism(
    request: PlanRequest, *, skew: float = 0.0, redundant_experts: int = 0
) -> list[ParallelismComparison]:
    """Every (GPU, precision) of the request: the tensor-parallel plan row, the expert-parallel replica (over the
    request's link between nodes, its busiest GPU's expert load from the Zipf `skew` and EPLB's `redundant_experts`),
    the winner and why; with the request's `model` (what the commands serve), each expert-parallel row's launch."""
    shape, catalog, traffic, sla, scope, engines = (
        request.shape,
        request.catalog,
        request.traffic,
        request.sla,
        request.scope,
        request.engines,
    )
    moe = require_moe(shape)
    for degree in scope.tensor_parallel:
        check_expert_split(moe.n_experts, degree, redundant_experts, field="--tensor-parallel")
    found = []
    for hw in request.hardware:
        accel = catalog.get(hw, field="--hardware")
        network = _network_link(request.link, accel)
        performance = PerformanceEvaluator(catalog, shape, traffic, sla, engines=engines, require_price=False)
        for precision in request.precisions:
            tp = plan_one(
                shape, accel, precision, traffic=traffic, sla=sla, scope=scope, catalog=catalog, engines=engines
            )
            ep = (
                ExpertParallelRow(accel.key, precision, tp.method, note=tp.note)
                if tp.note.startswith("refused")
                else plan_expert_parallel(
                    performance,
                    accel,
                    get_scheme(tp.method),
                    skew=skew,
                    redundant_experts=redundant_experts,
                    scope=scope,
                    network=network,
                )
            )
            if request.model:
                ep = with_launch(ep, model=request.model, accel=accel, max_model_len=traffic.max_model_len)
            found.append(compare_parallelism(tp, ep, latent_kv=shape.latent_kv))
            request.heard(hw, precision)
    return found
