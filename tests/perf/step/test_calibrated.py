"""The calibrated GPU step cost: closed-loop replay, the linearity the fit rests on, the shipped fit, estimate."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from recommender.engines import PROFILES
from recommender.perf.catalog.architectures import load_architecture
from recommender.perf.catalog.gpus import load_catalog
from recommender.perf.fit.serving_runs import DEFAULT_RUNS, load_runs, runs_digest
from recommender.perf.fit.step_fit import BenchmarkProtocol, FitSettings, cross_validate, design_rows
from recommender.perf.model.memory import kv_cache_tokens
from recommender.perf.sim.closed_loop import ClosedLoopBenchmark, replay
from recommender.perf.sim.scheduler_config import SchedulerConfig
from recommender.perf.step.calibrated import FIT_PATH, CalibratedModel, load_fit
from recommender.perf.step.cost import RooflineStepCost
from recommender.perf.step.features import N_FEATURES, FeatureStepCost, StepFeatures
from recommender.provenance import Provenance
from recommender.quantize import get_method

_P = Provenance("modeled", "test")


@pytest.fixture(scope="module")
def qwen() -> StepFeatures:
    return StepFeatures(load_architecture("qwen3-32b")[1], get_method("baseline"), load_catalog().get("h100-sxm"), 2)


def _config(mixed: bool = True) -> SchedulerConfig:
    return SchedulerConfig(kv_cache_tokens=300_000, max_num_seqs=1024, max_num_batched_tokens=8192,
                           mixed_prefill=mixed)  # fmt: skip


def test_closed_loop_keeps_concurrency_in_flight_and_sends_on_completion(qwen: StepFeatures) -> None:
    cost = RooflineStepCost(qwen.shape, qwen.method, qwen.accel, tensor_parallel=2)
    lone = replay(cost, _config(), ClosedLoopBenchmark(concurrency=1, prompt_tokens=512, output_tokens=64, rounds=3))
    # One in flight: no queueing, every request sees the same prefill and decode steps.
    assert lone.ttft_ms.p99 == pytest.approx(lone.ttft_ms.p50, rel=1e-9)
    assert lone.requests == 3
    busy = replay(cost, _config(), ClosedLoopBenchmark(concurrency=32, prompt_tokens=512, output_tokens=64))
    # 32 prompts at once queue behind each other's prefill (16 k tokens > one 8 k step) and decode as a batch.
    assert busy.ttft_ms.mean > 1.5 * lone.ttft_ms.mean
    assert busy.tpot_ms.mean > lone.tpot_ms.mean
    assert busy.output_tokens_per_s > 10 * lone.output_tokens_per_s


def test_prefill_alone_moves_time_from_tpot_to_ttft(qwen: StepFeatures) -> None:
    """SGLang's default runs a prefill batch alone: a wave of new prompts is prefilled whole before any of it
    decodes (long TTFT, as its measured runs show: TTFT is 30-46 % of a request's time at concurrency 64),
    while mixed steps (vLLM) start decoding early and carry prefill chunks in decode steps (longer TPOT)."""
    cost = RooflineStepCost(qwen.shape, qwen.method, qwen.accel, tensor_parallel=2)
    bench = ClosedLoopBenchmark(concurrency=16, prompt_tokens=2048, output_tokens=128)
    mixed, alone = replay(cost, _config(True), bench), replay(cost, _config(False), bench)
    assert alone.ttft_ms.mean > 1.5 * mixed.ttft_ms.mean
    assert alone.tpot_ms.mean < mixed.tpot_ms.mean


def test_benchmark_means_are_linear_in_the_coefficients(qwen: StepFeatures) -> None:
    """What the fit rests on: arrivals sit on step boundaries, so the composition of steps does not move."""
    bench = ClosedLoopBenchmark(concurrency=24, prompt_tokens=1500, output_tokens=100)
    rng = np.random.default_rng(0)
    a, b = rng.uniform(0, 2, N_FEATURES), rng.uniform(0, 2, N_FEATURES)
    a[0] = b[0] = 1e-3  # steps strictly positive
    ra, rb = (replay(FeatureStepCost(qwen, c, _P), _config(), bench) for c in (a, b))
    rab = replay(FeatureStepCost(qwen, a + b, _P), _config(), bench)
    assert rab.ttft_ms.mean == pytest.approx(ra.ttft_ms.mean + rb.ttft_ms.mean, rel=1e-9)
    assert rab.tpot_ms.mean == pytest.approx(ra.tpot_ms.mean + rb.tpot_ms.mean, rel=1e-9)


def test_linear_work_runs_at_the_peak_of_the_schemes_compute_dtype() -> None:
    """FP8 GEMMs count at the FP8 peak (twice BF16's on an H100); weight-only INT4 computes in 16-bit."""
    from recommender.perf.step.cost import PrefillChunks
    from recommender.perf.step.features import FEATURES

    shape, h100 = load_architecture("qwen3-32b")[1], load_catalog().get("h100-sxm")
    prompt, at = PrefillChunks.single(4096), FEATURES.index("linear")
    linear = {s: StepFeatures(shape, get_method(s), h100).of_step(prompt, 0, 0)[at]
              for s in ("baseline", "fp8-dynamic", "w4a16-awq-g128")}  # fmt: skip
    assert linear["fp8-dynamic"] == pytest.approx(linear["baseline"] / 2, rel=0.02)
    assert linear["w4a16-awq-g128"] == pytest.approx(linear["baseline"], rel=0.02)
    # 4096 tokens x 2 x 32 B parameters at 989 TFLOP/s: about 0.27 s of matrix work at the BF16 peak.
    assert 0.2 < linear["baseline"] < 0.35


def test_an_fp8_kv_cache_doubles_capacity_and_its_reads_cost_what_the_release_measured() -> None:
    """The fp8 runs' cache: twice the tokens fit; vLLM's and TensorRT-LLM 1.2's decode attention read half the
    bytes (their runs measured at or below the 16-bit bound), TensorRT-LLM 1.0's costs what a 16-bit read does
    (its 180 FP8 runs; engine_profiles). The tool predicts the current releases."""
    from recommender.perf.model.memory import kv_cache_tokens
    from recommender.perf.step.cost import PrefillChunks
    from recommender.perf.step.features import FEATURES

    shape, h100, fp8 = load_architecture("qwen3-32b")[1], load_catalog().get("h100-sxm"), get_method("fp8-dynamic")
    tokens = {kv: kv_cache_tokens(shape, fp8, h100, kv_cache_dtype=kv) for kv in ("auto", "fp8")}
    assert tokens["fp8"] == pytest.approx(2 * tokens["auto"], rel=0.01)
    kv_at = FEATURES.index("kv")

    def read(kv: str, engine: str, release: str | None = None) -> float:
        width = PROFILES[engine].reads_kv_at_cache_width(release)
        return float(StepFeatures(shape, fp8, h100, 1, kv, width).of_step(PrefillChunks(), 8, 40_000)[kv_at])

    sixteen = read("auto", "vllm")
    assert sixteen > 0 and read("fp8", "vllm", "0.12.0") == pytest.approx(sixteen / 2)
    assert read("fp8", "trtllm", "1.0.0rc3") == read("auto", "trtllm", "1.0.0rc3") == sixteen
    assert read("fp8", "trtllm", "1.2.0rc6.post1") == read("fp8", "trtllm") == pytest.approx(sixteen / 2)
    assert read("fp8", "trtllm", "main") == read("fp8", "trtllm", "2.0") == read("fp8", "trtllm")  # current
    model = CalibratedModel(load_fit())
    assert all(model.step_cost(shape, fp8, h100, e, kv_cache_dtype="fp8").features.kv_read_at_cache_width
               for e in ("vllm", "sglang", "trtllm"))  # fmt: skip


def test_allreduce_uses_the_one_direction_link_bandwidth() -> None:
    from recommender.perf.step.features import link_bandwidth_one_direction

    assert link_bandwidth_one_direction(load_catalog().get("h100-sxm")) == pytest.approx(450e9)  # NVLink 4: 900 bidir


def test_shipped_fit_matches_the_shared_data_and_reports_its_cross_validation() -> None:
    fit = load_fit()
    assert DEFAULT_RUNS.is_file(), "the measured runs ship in the package (recommender/perf/fit/measured_runs)"
    assert fit.data_sha256 == runs_digest(), "refit: benchmarks/gpu_fidelity.py --write"
    assert set(fit.engines) == {"vllm", "sglang", "trtllm"}
    assert sum(fit.engine_runs.values()) == 534
    assert set(fit.cross_validation) >= {"overall", "qwen3-32b/sglang/baseline", "llama-3.1-8b/trtllm/baseline"}
    assert len(fit.residuals_engine_seen.tpot) + len(fit.residuals_engine_unseen.tpot) == 534
    # The coefficients hold only with the batching the replays simulated: a changed profile needs a refit.
    assert fit.engine_batching == {e: p.describe() for e, p in PROFILES.items()}, (
        "an engine profile changed since the fit: benchmarks/gpu_fidelity.py --write"
    )


def test_no_fitted_part_of_a_step_runs_faster_than_the_datasheet() -> None:
    """Left free, the fit read the KV cache at twice the H100's bandwidth; the shipped fit and any refit keep
    every bandwidth and compute coefficient at or above its physical floor."""
    from recommender.perf.fit.step_fit import COEFFICIENTS, PHYSICAL_FLOORS, DesignRow, fit_pooled

    fit = load_fit()
    floors = np.array([PHYSICAL_FLOORS.get(name, 0.0) for name in COEFFICIENTS])
    for coefficients in [fit.pooled, *fit.engines.values()]:
        assert np.all(np.asarray(coefficients) >= floors - 1e-9), coefficients
    # Runs that a KV read at half its datasheet time would fit exactly: the fit stops at the floor instead.
    kv = COEFFICIENTS.index("kv")
    run = load_runs(schemes=get_method, profiles=PROFILES)[0]
    ttft, tpot = np.zeros(len(COEFFICIENTS)), np.zeros(len(COEFFICIENTS))
    ttft[kv], tpot[kv] = 2.0 * run.ttft_ms, 2.0 * run.tpot_ms  # unbounded, NNLS would answer 0.5
    coefficients = fit_pooled([DesignRow(run, ttft, tpot)], FitSettings())
    assert coefficients[kv] == pytest.approx(1.0)
    assert np.all(coefficients >= floors - 1e-9)


def test_vllm_is_simulated_with_at_most_4096_tokens_per_step_whatever_it_is_launched_with() -> None:
    launched = SchedulerConfig(kv_cache_tokens=300_000, max_num_seqs=256, max_num_batched_tokens=8192)
    assert PROFILES["vllm"].batching(launched).max_num_batched_tokens == 4096
    small = SchedulerConfig(kv_cache_tokens=300_000, max_num_seqs=256, max_num_batched_tokens=2048)
    assert PROFILES["vllm"].batching(small).max_num_batched_tokens == 2048
    seats = SchedulerConfig(kv_cache_tokens=300_000, max_num_seqs=6000, max_num_batched_tokens=8192)
    assert PROFILES["vllm"].batching(seats).max_num_batched_tokens == 6000  # never below the seats
    # The other engines keep what they are launched with, also after vLLM's batching was applied once.
    assert PROFILES["sglang"].batching(launched).max_num_batched_tokens == 8192
    assert "simulated with at most 4096" in PROFILES["vllm"].describe()


def test_kv_capacity_comes_from_the_memory_the_device_reports() -> None:
    catalog = load_catalog()
    h100 = catalog.get("h100-sxm")
    assert h100.memory_gb == 80 and h100.device_memory_gb == pytest.approx(81559 * 2**20 / 1e9)  # 85.5 GB
    shape, method = load_architecture("qwen3-32b")[1], get_method("baseline")
    more = kv_cache_tokens(shape, method, h100, tensor_parallel=2)
    less = kv_cache_tokens(shape, method, h100.model_copy(update={"memory_mib": None}), tensor_parallel=2)
    assert more > less * 1.08  # 5.5 GB more per GPU, all of it KV cache
    assert catalog.get("b200").device_memory_gb == pytest.approx(192.3, abs=0.05)  # "180 GB" = 179 GiB to CUDA
    a10g = catalog.get("a10g")
    assert a10g.memory_mib is None and a10g.device_memory_gb == a10g.memory_gb  # unknown: the datasheet figure


def test_intervals_are_wider_for_an_engine_without_runs_and_grow_with_confidence() -> None:
    model = CalibratedModel(load_fit())
    seen, unseen = model.interval(100.0, "tpot", "vllm", 0.9), model.interval(100.0, "tpot", "tgi", 0.9)
    assert seen.low < 100.0 < seen.high
    assert unseen.low <= seen.low and unseen.high >= seen.high
    high, low = model.step_factors("vllm", 0.95), model.step_factors("vllm", 0.8)
    assert high.prefill > low.prefill > 1.0 and high.decode > low.decode >= 1.0


def test_provenance_names_the_calibration_and_the_datasheet_move() -> None:
    model = CalibratedModel(load_fit())
    catalog = load_catalog()
    here = model.provenance(catalog.get("h100-sxm"), "sglang")
    moved = model.provenance(catalog.get("l40s"), "tgi")
    assert here.kind == moved.kind == "calibrated"
    assert "84 measured sglang runs" in here.detail and "leave-one-" in here.detail
    assert "no measured tgi runs" in moved.detail and "datasheet" in moved.detail


def test_cross_validation_predicts_a_held_out_group_better_than_chance() -> None:
    """A small refit from scratch: two groups, each predicted by the other engine's fit alone."""
    runs = [r for r in load_runs(schemes=get_method, profiles=PROFILES)
            if r.model == "qwen3-32b" and r.tensor_parallel == 4 and r.concurrency <= 16]
    shapes = {"qwen3-32b": load_architecture("qwen3-32b")[1]}
    rows = design_rows(runs, shapes, load_catalog(), BenchmarkProtocol())
    predictions = cross_validate(rows, FitSettings())
    errors = np.abs([p.tpot_ms / p.run.tpot_ms - 1 for p in predictions])
    assert len(predictions) == len(runs) and float(np.median(errors)) < 0.5


def _estimate(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "recommender.cli.main", "estimate", *args],
                          capture_output=True, text=True, timeout=300)  # fmt: skip


def test_estimate_json_has_every_figure_with_an_interval() -> None:
    run = _estimate("--model", "qwen3-32b", "--hardware", "h200", "--precision", "fp8", "--concurrency", "32",
                    "--prompt-tokens", "2048", "--output-tokens", "256", "--engine", "sglang", "--json")  # fmt: skip
    assert run.returncode == 0, run.stderr
    doc = json.loads(run.stdout)
    for metric in ("ttft_ms", "tpot_ms"):
        for stat in ("mean", "p50", "p90", "p99"):
            figure = doc[metric][stat]
            assert figure["interval"]["low"] <= figure["value"] <= figure["interval"]["high"]
    assert doc["output_tokens_per_s"]["value"] > 0 and doc["kv_cache_tokens"] > 0
    assert doc["provenance"]["kind"] == "calibrated" and "h200" in doc["provenance"]["detail"]


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (["--precision", "fp8", "--hardware", "a100-80gb"], "--scheme"),
        (["--precision", "fp8", "--hardware", "a100-80gb", "--engine", "trtllm"], "--scheme"),
        (["--precision", "fp7", "--hardware", "h100-sxm"], "--precision"),
        (["--precision", "bf16", "--hardware", "h100-sxm", "--engine", "llamacpp"], "--engine"),
        (["--precision", "bf16", "--hardware", "l4"], "--tensor-parallel"),
        (["--precision", "fp8", "--hardware", "h100-sxm", "--kv-cache-dtype", "fp4"], "--kv-cache-dtype"),
        (["--precision", "bf16", "--hardware", "h100-sxm", "--rounds", "4", "--warmup-rounds", "4"], "--warmup-rounds"),
    ],
)
def test_estimate_refuses_bad_input_in_one_line(args: list[str], field: str) -> None:
    run = _estimate("--model", "qwen3-32b", "--concurrency", "8", "--prompt-tokens", "128", "--output-tokens", "16",
                    *args)  # fmt: skip
    assert run.returncode == 2
    assert run.stderr.count("error:") == 1 and field in run.stderr and "Traceback" not in run.stderr


def test_estimate_leaves_a_warm_up_out_as_the_client_did() -> None:
    """32 prompts of 4,000 tokens at once: the opening burst queues them (16 steps of 8,192 tokens); a client that
    drops its first half measures the steady state, where one prompt arrives as one request finishes."""
    base = ("--model", "qwen3-32b", "--hardware", "h100-sxm", "--precision", "fp8", "--tensor-parallel", "2",
            "--concurrency", "32", "--prompt-tokens", "4000", "--output-tokens", "500", "--engine", "trtllm", "--json")
    burst, steady = (json.loads(_estimate(*base, *extra).stdout) for extra in ((), ("--warmup-rounds", "4")))
    assert steady["ttft_ms"]["mean"]["value"] < 0.7 * burst["ttft_ms"]["mean"]["value"]
    assert "warm-up" in steady["provenance"]["detail"] and "burst counted" in burst["provenance"]["detail"]


def test_fit_file_is_json_the_loader_reads() -> None:
    assert json.loads(FIT_PATH.read_text())["coefficient_names"][-1] == "request"


def test_whole_request_reservation_queues_instead_of_preempting(qwen: StepFeatures) -> None:
    """TensorRT-LLM's GUARANTEED_NO_EVICT: a KV cache for about 4 whole requests runs 4 at a time, never preempts."""
    from recommender.perf.sim.scheduler import ContinuousBatchingSimulation
    from recommender.perf.sim.workload import make_workload

    cost = RooflineStepCost(qwen.shape, qwen.method, qwen.accel, tensor_parallel=2)
    workload = make_workload(prompt=400, output=800, n_requests=16, rate=1e3)
    kv = 4 * 1200  # vLLM admits a dozen short prompts, then must preempt as their outputs grow
    vllm_like = ContinuousBatchingSimulation(cost, workload, SchedulerConfig(kv_cache_tokens=kv)).run()
    reserving = ContinuousBatchingSimulation(
        cost, workload, SchedulerConfig(kv_cache_tokens=kv, reserve_whole_request=True)
    ).run()
    assert vllm_like.preemptions > 0 and reserving.preemptions == 0
    arrivals = workload.arrivals_s
    first_done = float(np.min(arrivals[:4] + reserving.e2e_s[:4]))
    assert float(arrivals[4] + reserving.ttft_s[4]) >= first_done  # the fifth starts only when one has finished
    assert reserving.n_requests == 16 and not np.isnan(reserving.e2e_s).any()


_HEADER = ("id,backend,backend_version,model_path,system,precision,gemm_quant_mode,isl,osl,batch_size,tp_size,pp_size,"
           "attention_dp_size,silicon_ttft_ms,silicon_tpot_ms")  # fmt: skip


def _runs_file(tmp_path: Path, *rows: str) -> Path:
    path = tmp_path / "runs.csv"
    path.write_text("\n".join((_HEADER, *rows)) + "\n", encoding="utf-8")
    return path


def test_a_file_of_other_gpus_and_models_loads_and_says_what_it_left_out(tmp_path: Path) -> None:
    from recommender.perf.fit.serving_runs import read_runs

    path = _runs_file(
        tmp_path,
        "a_4000x1000_c_tp2,trtllm,1.2,Qwen/Qwen3-32B,h200_sxm,fp8,fp8,4000,1000,64,2,1,,600,20",
        "b,vllm,0.12,meta-llama/Llama-3.1-8B-Instruct,b200_sxm,,,1024,128,8,1,1,,50,4",
        "c,vllm,0.12,meta-llama/Llama-3.1-8B-Instruct,mi999,,,1024,128,8,1,1,,50,4",
        "d,sglang,0.5,Some/Unknown-Model,h200_sxm,,,1024,128,8,1,1,,50,4",
        "e,trtllm,1.0,Qwen/Qwen3-32B,h200_sxm,fp8,fp8,1024,128,8,2,2,,50,4",
        "f,trtllm,1.0,Qwen/Qwen3-32B,b200_sxm,fp6,fp6,1024,128,8,1,1,,50,4",
        "i,trtllm,1.2,Qwen/Qwen3-32B,b200_sxm,fp4,nvfp4,1024,128,8,1,1,,50,4",
        "g,trtllm,1.0,Qwen/Qwen3-32B,b200_sxm,,,1024,128,,1,1,,50,4",
        "h,vllm,0.12,RedHatAI/Meta-Llama-3.1-70B-Instruct-FP8,h200_sxm,fp8,fp8,1024,128,8,2,1,,50,4",
    )  # fmt: skip
    loaded = read_runs(path, schemes=get_method, profiles=PROFILES)
    assert [(r.hardware, r.model, r.scheme, r.kv_cache_dtype, r.campaign) for r in loaded.runs] == [
        ("h200", "qwen3-32b", "fp8-dynamic", "fp8", "steady"), ("b200", "llama-3.1-8b", "baseline", "auto", "sweep"),
        ("b200", "qwen3-32b", "nvfp4", "auto", "sweep"),  # FP4 rows replay as NVFP4
        ("h200", "llama-3.1-70b", "fp8-dynamic", "fp8", "sweep"),  # a quantized re-upload: the base model's shape
    ]  # fmt: skip
    reasons = " | ".join(loaded.skipped)
    assert sum(loaded.skipped.values()) == 5
    for part in ("'mi999' is not in the GPU catalog", "'Some/Unknown-Model' has no shipped architecture",
                 "pipeline", "'fp6' has no serving scheme", "malformed column"):  # fmt: skip
        assert part in reasons


def test_predicting_a_run_replays_what_the_fit_computed_for_it() -> None:
    """Out-of-sample prediction (a full replay with the shipped coefficients) agrees with the fit's own
    in-sample figure for the same run (a design row times the same coefficients): one model, two paths."""
    from recommender.perf.fit.step_fit import in_sample, predict_run

    fit = load_fit()
    runs = [r for r in load_runs(schemes=get_method, profiles=PROFILES)
            if r.tensor_parallel == 4 and r.concurrency == 16 and r.output_tokens == 128]
    shapes = {m: load_architecture(m)[1] for m in {r.model for r in runs}}
    protocol = BenchmarkProtocol(rounds=fit.protocol_rounds, warmup_rounds=fit.protocol_warmup_rounds)
    rows = design_rows(runs, shapes, load_catalog(), protocol)
    settings = FitSettings(fit.tpot_weight, fit.shrinkage, fit.min_engine_runs)
    for row in rows:
        coef = np.array(fit.engines.get(row.run.engine, fit.pooled))
        direct = predict_run(row.run, shapes[row.run.model], load_catalog(), fit, protocol)
        # The shipped step cost keeps every step >= 1 us (calibrated.py): at most that much per step apart.
        assert direct.tpot_ms == pytest.approx(float(row.tpot @ coef), abs=2e-3)
        assert direct.ttft_ms == pytest.approx(float(row.ttft @ coef), rel=1e-3)
    assert len(in_sample(rows, settings)) == len(runs) > 5


def test_fidelity_benchmark_predicts_another_file_out_of_sample(tmp_path: Path) -> None:
    path = _runs_file(
        tmp_path,
        "a,sglang,0.5.1,Qwen/Qwen3-32B,h200_sxm,,,2048,256,16,4,1,,500,11",
        "b,vllm,0.12,meta-llama/Llama-3.1-8B-Instruct,a100_sxm,,,1024,128,8,1,1,,60,9",
        "c,vllm,0.12,Some/Unknown-Model,a100_sxm,,,1024,128,8,1,1,,60,9",
    )  # fmt: skip
    out = tmp_path / "errors.json"
    run = subprocess.run([sys.executable, "benchmarks/gpu_fidelity.py", "--predict", str(path), "--json", str(out)],
                         capture_output=True, text=True, timeout=300)  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert "skipped 1 rows" in run.stdout and "h200/qwen3-32b/sglang/baseline" in run.stdout
    doc = json.loads(out.read_text())
    assert doc["out_of_sample"]["overall"]["runs"] == 2
    llama = doc["out_of_sample"]["sweep/a100-80gb/llama-3.1-8b/vllm/baseline"]
    assert 0 <= llama["tpot_median"] < 10
    assert 0 <= llama["explained_ttft"] <= 1 and llama["coverage_ttft"] in (0.0, 1.0)  # one run: in or out


def test_fidelity_benchmark_refuses_a_file_it_cannot_replay_in_one_line(tmp_path: Path) -> None:
    nothing = _runs_file(tmp_path, "c,vllm,0.12,Some/Unknown-Model,a100_sxm,,,1024,128,8,1,1,,60,9")
    for path, needle in ((tmp_path / "missing.csv", "no file"), (nothing, "none of the 1 rows")):
        run = subprocess.run([sys.executable, "benchmarks/gpu_fidelity.py", "--predict", str(path)],
                             capture_output=True, text=True, timeout=120)  # fmt: skip
        assert run.returncode == 2 and run.stderr.count("error:") == 1 and needle in run.stderr
        assert "--predict" in run.stderr and "Traceback" not in run.stderr


def test_a_quantized_re_upload_resolves_to_its_base_models_shape_only_when_unambiguous() -> None:
    from recommender.perf.catalog.architectures import shipped_for_hub_id

    assert shipped_for_hub_id("Qwen/Qwen3-32B") == "qwen3-32b"  # listed
    assert shipped_for_hub_id("Qwen/Qwen3-32B-FP8") == "qwen3-32b"
    assert shipped_for_hub_id("nvidia/Qwen3-235B-A22B-FP8") == "qwen3-235b-a22b"
    assert shipped_for_hub_id("RedHatAI/Meta-Llama-3.1-8B-Instruct-quantized.w8a8") == "llama-3.1-8b"
    assert shipped_for_hub_id("Qwen/Qwen3-30B-A3B-GPTQ-Int4") == "qwen3-30b-a3b"
    assert shipped_for_hub_id("Some/Unknown-Model-FP8") is None
    assert shipped_for_hub_id("Qwen3-32B-FP8") is None  # not a hub id: no organisation
    assert load_architecture("nvidia/Llama-3.1-70B-Instruct-FP8")[0] == load_architecture("llama-3.1-70b")[0]
