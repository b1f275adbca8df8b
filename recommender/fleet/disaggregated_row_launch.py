"""A disaggregated row's launch: each pool's engine command on its own GPU, joined into the framework's deployment
(``engines/disaggregated_launch.py``: TensorRT-LLM's ``trtllm-serve disaggregated`` config, llm-d's ModelService
values). Kept apart from the pool planner (``disaggregated_plan.py``): planning prices pools, this writes what a
user deploys for the row it chose.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from recommender.config.candidate import Candidate
from recommender.engines.disaggregated_launch import disaggregated_launch
from recommender.fleet.launch import launch_commands

if TYPE_CHECKING:
    from recommender.fleet.disaggregated_plan import DisaggregatedRow
    from recommender.perf.catalog.gpus import Accelerator

__all__ = ["with_launch"]


def with_launch(
    row: DisaggregatedRow,
    *,
    model: str,
    accel: Accelerator,
    max_model_len: int,
    decode_accel: Accelerator | None = None,
) -> DisaggregatedRow:
    """`row` with its pools' commands serving `model` (a checkpoint scheme serves ``<model name>-<scheme>``), each
    pool's command on its own GPU (`accel` the prefill pool's, `decode_accel` the decode pool's, default the same)."""
    if row.prefill is None or row.decode is None or not row.engine:
        return row
    checkpoint = f"{model.rstrip('/').rsplit('/', 1)[-1]}-{row.method}"  # where `recommender quantize --out` puts it
    commands, options = [], []
    pools = (
        (row.prefill, row.prefill_hardware, accel),
        (row.decode, row.decode_hardware, decode_accel or accel),
    )
    for pool, hardware, pool_accel in pools:
        candidate = Candidate(
            row.precision,
            row.method,
            hardware,
            pool.batch_size,
            pool.tensor_parallel,
            kv_cache_dtype="fp8" if row.kv_cache_dtype == "fp8" else "auto",
        )
        emitted = launch_commands(
            candidate,
            model=model,
            max_model_len=max_model_len,
            checkpoint=checkpoint,
            device=pool_accel.device,
            engine=row.engine,
        )
        if not emitted or emitted[0].engine != row.engine or not emitted[0].command:
            return row
        commands.append(emitted[0].command)
        options.append(emitted[0].config_yaml)
    launch = disaggregated_launch(
        row.engine,
        prefill_command=commands[0],
        decode_command=commands[1],
        prefill_workers=row.prefill.estimate.workers,
        decode_workers=row.decode.estimate.workers,
        prefill_options=options[0],
        decode_options=options[1],
        max_prompt_tokens=max_model_len,
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
