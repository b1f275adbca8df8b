"""`recommender plan`: cost and latency of an architecture without its weights, across GPUs and precisions."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, cast

import typer

from recommender.cli.registry_help import gpu_names, price_set_names
from recommender.engines import ENGINE_NAMES
from recommender.errors import BadInputError
from recommender.quantize.precisions import PLANNED_PRECISIONS
from recommender.report.console import make_console, step_progress

if TYPE_CHECKING:
    from recommender.cli.plan_inputs import PlanTarget, Pointed
    from recommender.config.spec import LatencySLA, Traffic
    from recommender.fleet.layout_compare import LayoutComparison
    from recommender.fleet.parallelism import ParallelismComparison
    from recommender.fleet.plan_row import PlanRow
    from recommender.fleet.pool_workers import ExpertParallelPools

EPILOG = (
    "Latencies and capacities are calibrated (step costs fitted on measured serving runs, their uncertainty from "
    "held-out step residuals, simulated through the traffic); quality is a labelled prior, verdict 'unverified'. "
    "Rows are planned side by side, one process per usable CPU core (RECOMMENDER_PLAN_PROCESSES=N caps them)."
)


HARDWARE_HELP = (
    f"Catalog GPUs (repeat the flag): {gpu_names()}; default: the GPUs --price-set prices, or without it "
    "every catalog GPU (an unpriced one with the price set that lacks it named)."
)


PriceSetName = Annotated[
    str | None,
    typer.Option(
        help=f"Named, dated prices of one provider (recommender/perf/catalog/price_sets.yaml): {price_set_names()}; "
        "without --hardware, the GPUs it prices are planned."
    ),
]
# The flags that point the plan (``plan_inputs.pointed_plan`` validates them), each repeatable.
BatchSizes = Annotated[
    list[int] | None,
    typer.Option(
        min=1,
        help="max_num_seqs values to try (repeat); default: powers of two from 64 to each engine's maximum, the "
        "caps the KV cache cannot hold pruned.",
    ),
]
Engines = Annotated[
    list[str] | None,
    typer.Option(help=f"Serving engines to try (repeat): {', '.join(ENGINE_NAMES)}; default: vllm and sglang."),
]
Precisions = Annotated[
    list[str] | None, typer.Option(help=f"Precisions to plan (repeat): {', '.join(PLANNED_PRECISIONS)}; default: all.")
]
Schemes = Annotated[
    list[str] | None,
    typer.Option(help="Serving schemes to plan by name (repeat), e.g. w4a16-awq-g128; instead of --precision."),
]
Degrees = Annotated[
    list[int] | None,
    typer.Option(help="Tensor-parallel degrees to try (repeat); default: every power of two of the GPU's node."),
]
Layouts = Annotated[
    list[str] | None,
    typer.Option(
        "--layout",
        help="Layouts to compare (repeat): aggregated, disaggregated (a prefill pool and a decode pool, the "
        "KV moved over --link); default: aggregated only. With disaggregated, each GPU and precision shows both side "
        "by side with the reason the winner wins, then the cheapest prefill and decode pools on two GPU types.",
    ),
]
LinkName = Annotated[
    str,
    typer.Option(
        "--link",
        help="The link the KV cache crosses between prefill and decode pools, and (a network link) between "
        "the nodes of an expert-parallel replica (recommender/perf/catalog/links.yaml): nvlink, pcie, infiniband-ndr, "
        "roce-400g.",
    ),
]
DecodeHardware = Annotated[
    list[str] | None,
    typer.Option(
        "--decode-hardware",
        help="With --layout disaggregated: the decode pools' GPUs (repeat) paired with each --hardware prefill GPU "
        "of another type, each pool at its own GPU's price, the KV over a network --link; default: the --hardware "
        "GPUs (every mixed pair, where --link is a network link).",
    ),
]
ExpertParallel = Annotated[
    bool,
    typer.Option(
        "--expert-parallel",
        help="For a mixture-of-experts model: also plan attention data parallelism with expert "
        "parallelism on one node, side by side with tensor parallelism and the reason the winner wins. With "
        "--layout disaggregated: each pool (prefill, decode) may be expert-parallel instead of tensor-parallel, "
        "the cheaper per pool, in the layouts' comparison.",
    ),
]
ExpertSkew = Annotated[
    float,
    typer.Option(
        "--expert-skew",
        min=0.0,
        max=10.0,
        help="Expert popularity as a Zipf exponent (0: uniform routing; 1: the "
        "most popular expert draws ~16%% of DeepSeek-V3's token-expert pairs).",
    ),
]
RedundantExperts = Annotated[
    int,
    typer.Option(
        "--redundant-experts",
        min=0,
        max=1024,
        help="Extra expert replicas per MoE layer placed by EPLB (0: static placement).",
    ),
]
KVDtypes = Annotated[
    list[str] | None,
    typer.Option(
        help="KV cache dtypes to try (repeat): auto (16-bit), fp8; default: both (fp8 where the engine and GPU run it)."
    ),
]


def _plan_with_progress(target: PlanTarget, traffic: Traffic, sla: LatencySLA, pointed: Pointed) -> list[PlanRow]:
    """Every GPU x precision row, with a progress bar on a terminal (each pair simulates its degrees x KV dtypes x
    batch caps)."""
    from recommender.fleet.plan import plan

    pairs = len(target.hardware) * len(pointed.precisions)
    with step_progress(make_console(stderr=True), total=pairs, description="planning") as done:
        return plan(
            target.shape,
            target.catalog,
            hardware=target.hardware,
            precisions=pointed.precisions,
            traffic=traffic,
            sla=sla,
            scope=pointed.scope,
            on_row=done,
            model=target.served,
            engines=pointed.engines,
        )


@dataclass(frozen=True, slots=True)
class _Views:
    """The comparisons `plan` prints instead of its plain table: layouts (--layout disaggregated) or tensor against
    expert parallelism (--expert-parallel)."""

    layouts: list[str]
    link: str
    expert_parallel: bool
    expert_skew: float
    redundant_experts: int
    json_output: bool
    decode_hardware: list[str] | None = None

    def shown(self, target: PlanTarget, traffic: Traffic, sla: LatencySLA, pointed: Pointed) -> bool:
        """Print the comparison asked for, if any (False: the plain plan table answers)."""
        from recommender.fleet.layout_compare import plan_layouts
        from recommender.fleet.parallelism import plan_parallelism

        if "disaggregated" not in self.layouts and not self.expert_parallel:
            return False
        shape, catalog, hardware, p = target.shape, target.catalog, target.hardware, pointed
        with step_progress(
            make_console(stderr=True), total=len(hardware) * len(p.precisions), description="planning"
        ) as done:
            if self._tp_against_ep:
                ep = plan_parallelism(
                    shape,
                    catalog,
                    hardware=hardware,
                    precisions=p.precisions,
                    traffic=traffic,
                    sla=sla,
                    scope=p.scope,
                    engines=p.engines,
                    skew=self.expert_skew,
                    redundant_experts=self.redundant_experts,
                    on_row=done,
                    link=self.link,
                    model=target.served,
                )
            else:
                layouts = plan_layouts(
                    shape,
                    catalog,
                    hardware=hardware,
                    precisions=p.precisions,
                    traffic=traffic,
                    sla=sla,
                    link=self.link,
                    scope=p.scope,
                    engines=p.engines,
                    on_row=done,
                    model=target.served,
                    decode_hardware=self.decode_hardware,
                    expert_parallel=self._pools(),
                )
        found = ep if self._tp_against_ep else layouts
        _refuse_if_empty(found)
        self._print(found, name=target.name, traffic=traffic, sla=sla)
        return True

    @property
    def _tp_against_ep(self) -> bool:
        """The view is tensor against expert parallelism (aggregated replicas), not the layouts' comparison."""
        return self.expert_parallel and "disaggregated" not in self.layouts

    def _pools(self) -> ExpertParallelPools | None:
        """The expert-parallel workers disaggregated pools may take (None: tensor-parallel pools only)."""
        from recommender.fleet.pool_workers import ExpertParallelPools

        if not self.expert_parallel:
            return None
        return ExpertParallelPools(skew=self.expert_skew, redundant_experts=self.redundant_experts)

    def _print(
        self,
        found: list[ParallelismComparison] | list[LayoutComparison],
        *,
        name: str,
        traffic: Traffic,
        sla: LatencySLA,
    ) -> None:
        """The comparison as JSON or as its table."""
        from recommender.report.layout_table import render_layouts, render_parallelism
        from recommender.serialization import dumps, list_to_data

        console = make_console(stderr=False)
        if self.json_output:
            print(dumps(list_to_data(found)))
        elif self._tp_against_ep:
            render_parallelism(
                cast("list[ParallelismComparison]", found), name=name, traffic=traffic, sla=sla, console=console
            )
        else:
            render_layouts(cast("list[LayoutComparison]", found), name=name, traffic=traffic, sla=sla, console=console)


def _refuse_if_empty(found: list[ParallelismComparison] | list[LayoutComparison]) -> None:
    """A comparison with no winner anywhere is refused with its rows' reasons (``fleet.empty_plan``)."""
    from recommender.fleet.empty_plan import FLAG_FIELDS, refuse_empty_plan
    from recommender.fleet.layout_compare import LayoutComparison

    rows = [c.aggregated if isinstance(c, LayoutComparison) else c.tensor_parallel for c in found]
    refuse_empty_plan(rows, fields=FLAG_FIELDS, comparisons=found)


# The command's own options (the pointing flags above are shared with their validation in ``plan_inputs``).
Model = Annotated[
    str | None,
    typer.Option(
        help="Shipped architecture (e.g. llama-3.1-8b), a config.json, or a model directory "
        "(default with --spec: the architecture of the spec's model.source)."
    ),
]
SpecPath = Annotated[
    Path | None,
    typer.Option(
        help="A search space: plan its GPUs, precisions, batch sizes, traffic and SLA; with a daily "
        "profile, also autoscaled vs static $/month and the GPU mix (only --model and --json go with it)."
    ),
]
PromptTokens = Annotated[int, typer.Option(min=1, max=10_000_000)]
OutputTokens = Annotated[int, typer.Option(min=1)]
Rps = Annotated[float, typer.Option(min=0.001, help="Target requests per second.")]
TtftMs = Annotated[float, typer.Option(min=0.001, help="P99 TTFT SLA, ms.")]
TpotMs = Annotated[float, typer.Option(min=0.001, help="P99 TPOT SLA, ms.")]
Hardware = Annotated[list[str] | None, typer.Option(help=HARDWARE_HELP)]
JsonOutput = Annotated[bool, typer.Option("--json", help="Print the rows as JSON.")]


def plan_command(
    ctx: typer.Context,
    model: Model = None,
    spec: SpecPath = None,
    prompt_tokens: PromptTokens = 512,
    output_tokens: OutputTokens = 256,
    rps: Rps = 10.0,
    ttft_ms: TtftMs = 1000.0,
    tpot_ms: TpotMs = 50.0,
    hardware: Hardware = None,
    batch_size: BatchSizes = None,
    engine: Engines = None,
    precision: Precisions = None,
    scheme: Schemes = None,
    tensor_parallel: Degrees = None,
    kv_cache_dtype: KVDtypes = None,
    price_set: PriceSetName = None,
    layout: Layouts = None,
    link: LinkName = "infiniband-ndr",
    decode_hardware: DecodeHardware = None,
    expert_parallel: ExpertParallel = False,
    expert_skew: ExpertSkew = 0.0,
    redundant_experts: RedundantExperts = 0,
    json_output: JsonOutput = False,
) -> None:
    """Project cost and latency for an architecture without its weights, across GPUs and precisions."""
    from recommender.cli.plan_inputs import distinct, layouts, plan_target, pointed_plan, traffic_and_sla
    from recommender.config.dependencies import PlanFlags, check_flags

    check_flags(PlanFlags(_typed(ctx), tuple(layouts(layout)), expert_parallel))
    if spec is not None:
        _plan_from_spec(spec, model, json_output)
        return
    if model is None:
        raise BadInputError("--model", "no architecture to plan", "pass --model llama-3.1-8b (or --spec SPACE.yaml)")
    traffic, sla = traffic_and_sla(
        prompt_tokens=prompt_tokens, output_tokens=output_tokens, rps=rps, ttft_ms=ttft_ms, tpot_ms=tpot_ms
    )
    pointed = pointed_plan(
        hardware=hardware,
        engines=engine,
        precisions=precision,
        schemes=scheme,
        tensor_parallel=tensor_parallel,
        kv_cache_dtypes=kv_cache_dtype,
        batch_sizes=batch_size,
    )
    distinct(decode_hardware or [], flag="--decode-hardware")
    target = plan_target(model, pointed, price_set, prompt_tokens, output_tokens)
    views = _Views(layouts(layout), link, expert_parallel, expert_skew, redundant_experts, json_output, decode_hardware)
    if views.shown(target, traffic, sla, pointed):
        return
    _print_rows(
        _plan_with_progress(target, traffic, sla, pointed), target, traffic=traffic, sla=sla, json_output=json_output
    )


def _typed(ctx: typer.Context) -> frozenset[str]:
    """The options given on the command line or in the environment, by their flag spelling (not their defaults)."""
    given = {"COMMANDLINE", "ENVIRONMENT"}  # by name: typer vendors its own click, whose enum is not click's

    def source(name: str) -> str:
        found = ctx.get_parameter_source(name)
        return "" if found is None else found.name

    return frozenset(p.opts[0] for p in ctx.command.params if p.name and p.opts and source(p.name) in given)


def _plan_from_spec(spec: Path, model: str | None, json_output: bool) -> None:
    from recommender.cli.plan_spec import plan_spec

    plan_spec(spec, model, json_output)


def _print_rows(
    rows: list[PlanRow], target: PlanTarget, *, traffic: Traffic, sla: LatencySLA, json_output: bool
) -> None:
    from recommender.fleet.empty_plan import FLAG_FIELDS, refuse_empty_plan
    from recommender.fleet.plan import rows_to_json
    from recommender.report.plan_table import render_cheapest_launch, render_plan

    refuse_empty_plan(rows, fields=FLAG_FIELDS)
    if json_output:
        print(rows_to_json(rows))
        return
    console = make_console(stderr=False)
    render_plan(rows, name=target.name, traffic=traffic, sla=sla, console=console)
    render_cheapest_launch(rows, target.served, console)
