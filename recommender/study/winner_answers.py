"""What a finished search works out for its winner before the recommendation is built.

The winner's checkpoint placed under the study (or the recipe and command that make it), its launch commands,
its latency against load, the levers on it, and with a daily traffic profile the autoscaling schedule and the
GPU mix. The coordinator picks the winner once (`decision.pick`) and hands the same result here and to
`decision.recommendation.build`, so the answers and the recommendation cannot speak of different winners.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from recommender.config.candidate import Candidate
from recommender.deploy.disaggregated import engine_launches
from recommender.evaluation.levers import LeverEffect, lever_effects
from recommender.fleet.daily.winner import daily_answers
from recommender.fleet.launch import launch_commands
from recommender.fleet.layouts.expert_parallel_candidate import ExpertRouting, expert_parallel_winner_launch
from recommender.fleet.layouts.search_layouts import layout_verdict
from recommender.quality.calibration_docs import quantize_context
from recommender.study.winner_checkpoint import WinnerCheckpoint, place_checkpoint

if TYPE_CHECKING:
    from recommender.engines import EngineLaunch
    from recommender.evaluation.candidate import CandidateResult
    from recommender.evaluation.evaluator import CandidateEvaluator
    from recommender.evaluation.load_curve import LoadCurve
    from recommender.evaluation.two_pools import LayoutVerdict
    from recommender.fleet.daily.autoscale import AutoscaleSchedule
    from recommender.fleet.daily.mix_plan import GpuMix
    from recommender.quantize.checkpoint import QuantizeContext
    from recommender.study.prepare import Prepared


@dataclass(frozen=True)
class WinnerAnswers:
    """What is worked out for the winner before the recommendation is built: its checkpoint's files, launch
    commands and load curve, and with a daily profile the autoscaling schedule and the GPU mix."""

    placed: list[Path] = field(default_factory=list)
    launch: list[EngineLaunch] = field(default_factory=list)
    load_curve: LoadCurve | None = None
    autoscale: AutoscaleSchedule | None = None
    gpu_mix: GpuMix | None = None
    levers: list[LeverEffect] = field(default_factory=list)
    #: The winner's scheme and GPU in both layouts, where the search priced both.
    layouts: LayoutVerdict | None = None


def winner_answers(
    prepared: Prepared,
    evaluator: CandidateEvaluator,
    results: list[CandidateResult],
    winner: CandidateResult | None,
    output_dir: Path,
    status: Callable[[str], None],
) -> WinnerAnswers:
    """The answers for `winner` (`decision.pick(results)`); none when nothing won."""
    if winner is None:
        return WinnerAnswers()
    spec = prepared.spec
    checkpoint = _place_checkpoint(prepared, evaluator.quality.models.context, winner.candidate, output_dir)
    status(checkpoint.note)
    layouts = layout_verdict(results, winner, target_rps=spec.traffic.requests_per_second, sla=spec.sla)
    placed = [p for p in checkpoint.written if p.is_file()]
    if winner.candidate.expert_parallel != 1:
        # Its engine's expert-parallel commands as the search priced them (never the aggregated tensor-parallel one).
        # The load curve, the levers and the daily profile model one tensor-parallel replica: not answered for it.
        status("expert-parallel winner: its launch; no load curve, levers or daily schedule")
        launch = expert_parallel_winner_launch(
            evaluator.performance,
            winner,
            link=spec.space.link,
            model=checkpoint.model,
            experts=ExpertRouting(spec.space.expert_skew, spec.space.redundant_experts),
        )
        return WinnerAnswers(placed, launch, layouts=layouts)
    if winner.pools is not None:
        # Both pools' workers and the router, as the search priced them. The load curve, the levers and the daily
        # profile's schedule and mix model one replica: not answered for pools rather than for another layout.
        status("disaggregated winner: no load curve, levers or daily schedule (they model aggregated replicas)")
        launch = engine_launches(winner.pools.launch) if winner.pools.launch is not None else []
        return WinnerAnswers(placed, launch, layouts=layouts)
    launch = launch_commands(
        winner.candidate,
        model=checkpoint.model,
        max_model_len=spec.traffic.max_model_len,
        device=evaluator.performance.device_of(winner.candidate),
        engine=winner.serving.engine if winner.serving is not None else "",
    )
    status("latency against load of the winner")
    load_curve = evaluator.load_curve(winner.candidate)
    autoscale, gpu_mix = None, None
    if spec.traffic.profile is not None:
        status("the daily profile: autoscaling and the GPU mix")
        autoscale, gpu_mix = daily_answers(spec, evaluator.performance, results, winner)
    levers = lever_effects(evaluator.performance, spec, winner)
    return WinnerAnswers(placed, launch, load_curve, autoscale, gpu_mix, levers, layouts)


def _place_checkpoint(
    prepared: Prepared, context: QuantizeContext | None, candidate: Candidate, output_dir: Path
) -> WinnerCheckpoint:
    """The winner's checkpoint under the study (or the recipe and command that make it)."""
    source = prepared.source
    context = context or quantize_context(prepared.use_case, prepared.manager, source)
    # The scheme as scored: a ModelOpt scheme with an FP8 KV cache is its own checkpoint (it carries the KV scales).
    return place_checkpoint(
        candidate.scheme,
        source,
        context,
        output_dir,
        use_case=prepared.spec.use_case,
        calibration_samples=prepared.use_case.calibration.samples,
    )
