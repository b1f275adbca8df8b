"""A disaggregated row's launch: each pool's engine command on its own GPU, joined into the framework's deployment
(``deploy/disaggregated.py``: TensorRT-LLM's ``trtllm-serve disaggregated`` config, llm-d's ModelService
values). Kept apart from the pool planner (``disaggregated_plan.py``): planning prices pools, this writes what a
user deploys for the row it chose.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from recommender.config.candidate import Candidate
from recommender.deploy.disaggregated import disaggregated_launch
from recommender.fleet.launch import expert_parallel_launch, launch_commands
from recommender.fleet.layouts.expert_parallel_plan import ExpertParallelRow

if TYPE_CHECKING:
    from recommender.config.candidate import KVCacheDtype
    from recommender.engines import EngineLaunch
    from recommender.evaluation.two_pools import PoolChoice
    from recommender.fleet.layouts.disaggregated_plan import DisaggregatedRow
    from recommender.perf.catalog.gpus import Accelerator
    from recommender.perf.sim.routing import RoutingPolicy

__all__ = ["with_launch"]


def with_launch(
    row: DisaggregatedRow,
    *,
    model: str,
    accel: Accelerator,
    max_model_len: int,
    decode_accel: Accelerator | None = None,
    routing: RoutingPolicy | None = None,
) -> DisaggregatedRow:
    """`row` with its pools' commands serving `model` (a checkpoint scheme serves ``<model name>-<scheme>``), each
    pool's command on its own GPU (`accel` the prefill pool's, `decode_accel` the decode pool's, default the same);
    an expert-parallel pool's command carries its engine's EP flags. Where a pool's engine refuses its layout, the
    row is returned without a launch, its note saying why. `routing`: the router policy the plan counted its hits
    for, written into the llm-d and Dynamo files (None: their defaults)."""
    if row.prefill is None or row.decode is None or not row.engine:
        return row
    checkpoint = f"{model.rstrip('/').rsplit('/', 1)[-1]}-{row.method}"  # where `recommender quantize --out` puts it
    commands, options = [], []
    pools = (
        (row.prefill, row.prefill_hardware, accel),
        (row.decode, row.decode_hardware, decode_accel or accel),
    )
    for pool, hardware, pool_accel in pools:
        emitted = _pool_launch(
            row, pool, hardware, pool_accel, model=model, checkpoint=checkpoint, length=max_model_len
        )
        if isinstance(emitted, str):
            return replace(row, note=emitted) if emitted else row
        commands.append(emitted.command or "")
        options.append(emitted.config_yaml)
    launch = disaggregated_launch(
        row.engine,
        prefill_command=commands[0],
        decode_command=commands[1],
        prefill_workers=row.prefill.estimate.workers,
        decode_workers=row.decode.estimate.workers,
        prefill_options=options[0],
        decode_options=options[1],
        max_prompt_tokens=max_model_len,
        routing=routing,
    )
    if (
        launch is not None and row.mixed
    ):  # the engines' commands do not name a GPU: where each pool runs is the deployment's to say
        where = (
            f"prefill workers on {row.prefill_hardware} nodes, decode workers on {row.decode_hardware} nodes "
            f"(two GPU types: the KV crosses {row.link}); schedule each pool on its own GPU type"
        )
        launch = replace(launch, notes=(*launch.notes, where))
    return replace(row, launch=launch)


def _pool_launch(
    row: DisaggregatedRow,
    pool: PoolChoice,
    hardware: str,
    accel: Accelerator,
    *,
    model: str,
    checkpoint: str,
    length: int,
) -> EngineLaunch | str:
    """One pool's aggregated command on `row.engine`: tensor-parallel, or for an expert-parallel pool the engine's
    expert-parallel command (``expert_parallel_launch`` in ``fleet/launch.py``: its EP, attention-DP and EPLB
    flags); or why not ("": the engine emits no command; else the reason, which the row's note carries)."""
    kv: KVCacheDtype = "fp8" if row.kv_cache_dtype == "fp8" else "auto"
    if pool.expert_parallel == 1:
        candidate = Candidate(
            row.precision, row.method, hardware, pool.batch_size, pool.tensor_parallel, kv_cache_dtype=kv
        )
        emitted = launch_commands(
            candidate, model=model, max_model_len=length, checkpoint=checkpoint, device=accel.device, engine=row.engine
        )
    else:
        if pool.expert_parallel > accel.max_tensor_parallel:
            return (
                f"launch not emitted: an expert-parallel pool worker of {pool.expert_parallel} GPUs spans nodes of "
                f"{accel.max_tensor_parallel}; the per-pool commands are emitted for workers of one node"
            )
        replica = ExpertParallelRow(
            hardware,
            row.precision,
            row.method,
            engine=row.engine,
            ep=pool.expert_parallel,
            attention_dp=pool.attention_dp,
            redundant_experts=pool.redundant_experts,
            batch_size_per_rank=pool.batch_size,
            kv_cache_dtype=kv,
        )
        emitted = expert_parallel_launch(
            replica,
            model=model,
            max_model_len=length,
            gpus_per_node=accel.max_tensor_parallel,
            checkpoint=checkpoint,
            device=accel.device,
        )
    if not emitted or emitted[0].engine != row.engine:
        return ""
    if not emitted[0].command:
        return f"launch not emitted: {emitted[0].notes[0] if emitted[0].notes else 'the engine refuses this pool'}"
    return emitted[0]
