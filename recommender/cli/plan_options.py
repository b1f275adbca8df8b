"""`recommender plan`'s options: each flag's type, bounds and help, declared once (the command's signature uses
them; `docs/cli.md` is generated from them).

Apart from `plan.py` so that the command module reads as parse, call, print. The flags that point the plan are
validated in ``plan_inputs``; the settings that need another (``--link`` without a comparison) in
``config/dependencies.py``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from recommender.cli.registry_help import gpu_names, price_set_names
from recommender.engines import ENGINE_NAMES
from recommender.quantize.precisions import PLANNED_PRECISIONS

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
        "most popular expert draws ~16% of DeepSeek-V3's token-expert pairs).",
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
EngineReleases = Annotated[
    list[str] | None,
    typer.Option(
        help="ENGINE=RELEASE (repeat), e.g. vllm=0.12.0: price that engine's rows for that release (its host time "
        "where the fit calibrated the release line, else over all measured releases, said in the provenance; how it "
        "reads an fp8 KV cache); default: the current releases."
    ),
]

Routings = Annotated[
    str | None,
    typer.Option(
        "--routing",
        metavar="POLICY[,POLICY]",
        help="Router policies to compare in front of each row's replicas, comma-separated: round-robin, random, "
        "sticky, prefix-aware, load-aware. Each row that serves the traffic is sized again as a fleet behind each "
        "policy (every replica with its own prefix cache, P99s over the fleet), with the hit rates, the winner, why, "
        "and its "
        "llm-d / Dynamo router settings; default: one replica's capacity into the traffic.",
    ),
]


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
