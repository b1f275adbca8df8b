"""`plan`: shipped architectures, memory fit, modeled cost, priors labelled unverified."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from recommender.config.spec import LatencySLA, Traffic
from recommender.fleet.plan import plan_one
from recommender.fleet.plan_scope import PlanScope
from recommender.perf.catalog.architectures import known_architectures, load_architecture
from recommender.perf.catalog.gpus import load_catalog

#: The batch caps 64 with the 16-bit KV cache: the plan as it was before the ladder.
CAPS_64 = PlanScope(batch_sizes=(64,), kv_cache_dtypes=("auto",))
#: The same on one GPU, where the degree is not what a test checks (each degree is simulated for every engine).
ONE_GPU_64 = PlanScope(batch_sizes=(64,), tensor_parallel=(1,), kv_cache_dtypes=("auto",))

TRAFFIC = Traffic(prompt_tokens=512, output_tokens=128, requests_per_second=5)
SLA = LatencySLA(ttft_p99_ms=2000, tpot_p99_ms=100)
_, LLAMA8 = load_architecture("llama-3.1-8b")


@pytest.mark.parametrize(
    ("name", "billions"),
    [
        ("llama-3.1-8b", 8.03),
        ("llama-3.1-70b", 70.6),
        ("mistral-7b-v0.3", 7.25),
        ("qwen2.5-7b", 7.62),
        ("qwen2.5-72b", 72.7),
        ("mixtral-8x7b", 46.7),
    ],
)
def test_shipped_architectures_have_their_published_sizes(name: str, billions: float) -> None:
    assert name in known_architectures()
    _, shape = load_architecture(name)
    params = shape.body_params + 2 * shape.lm_head_params
    assert params / 1e9 == pytest.approx(billions, rel=0.02)


def test_plan_rows_fit_price_and_label_quality(tmp_path: Path) -> None:
    catalog = load_catalog()
    # The default price set (RunPod Secure Cloud, both dates) lists no T4: planned all the same, no dollars ...
    t4_unpriced = plan_one(LLAMA8, catalog.get("t4"), "bf16", traffic=TRAFFIC, sla=SLA, scope=CAPS_64, catalog=catalog)
    assert t4_unpriced.unpriced.startswith("t4 has no price in price set runpod-secure (")
    assert t4_unpriced.usd_per_month is None and t4_unpriced.ttft_p99_ms is not None
    # ... and a contract price (hardware_catalog) prices it.
    contract = tmp_path / "contract.yaml"
    contract.write_text("accelerators:\n  t4: {price_per_hour_usd: 0.526, price_source: our contract}\n")
    t4 = load_catalog(contract).get("t4")
    assert t4.price_set == "hardware_catalog" and t4.price_note == "contract price from hardware_catalog: our contract"
    _, llama70 = load_architecture("llama-3.1-70b")
    too_big = plan_one(llama70, t4, "bf16", traffic=TRAFFIC, sla=SLA, scope=CAPS_64)
    assert too_big.note.startswith("does not fit") and too_big.usd_per_1m_tokens is None
    assert too_big.method == "fp16"  # a T4 has no bf16: the 16-bit row is fp16

    _, llama8 = load_architecture("llama-3.1-8b")
    h100 = catalog.get("h100-sxm")
    bf16 = plan_one(llama8, h100, "bf16", traffic=TRAFFIC, sla=SLA, scope=CAPS_64)
    int4 = plan_one(llama8, h100, "int4", traffic=TRAFFIC, sla=SLA, scope=ONE_GPU_64)  # per GPU, beside bf16's one
    fp8 = plan_one(llama8, h100, "fp8", traffic=TRAFFIC, sla=SLA, scope=ONE_GPU_64)
    assert bf16.tensor_parallel == 1 and bf16.usd_per_1m_tokens is not None and bf16.quality_verdict == "reference"
    assert int4.weights_gb_per_gpu < bf16.weights_gb_per_gpu / 2.5
    assert fp8.method == "fp8-dynamic" and fp8.usd_per_1m_tokens is not None  # FP8 tensor cores: W8A8
    # No FP8 W8A8 kernel on an A100: refused with the reason, not modeled as the weight-only Marlin fallback.
    a100 = plan_one(llama8, catalog.get("a100-80gb"), "fp8", traffic=TRAFFIC, sla=SLA, scope=CAPS_64)
    assert a100.usd_per_1m_tokens is None and a100.note.startswith("refused: no engine in engines: [vllm, sglang]")
    assert "Marlin" in a100.note and "8.9" in a100.note
    assert int4.quality_verdict == "unverified" and int4.quality.startswith("prior:")
    assert bf16.provenance.kind == "calibrated" and bf16.engine == "vllm"
    assert bf16.provenance.basis in ("measured kernels", "datasheet")  # the H100's kernel tables where installed


def test_plan_cli_unknown_model_lists_known_ones() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "recommender.cli.main", "plan", "--model", "llama-9"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "--model" in result.stderr and "llama-3.1-8b" in result.stderr


# rtx-4090: priced by the default price set (RunPod Secure Cloud).
@pytest.mark.parametrize(("hardware", "batch"), [("rtx-4090", 8), ("h100-sxm", 32), ("l40s", 1)])
def test_plan_and_search_model_a_catalog_candidate_identically(hardware: str, batch: int) -> None:
    """`plan` is the search's evaluator without quality: same memory plan, step cost, simulation and price, and its
    row's P99s are those the search shows for the candidate (settled within ``AT_LOAD_MAX_REQUESTS``)."""
    from recommender.config.candidate import Candidate
    from recommender.config.spec import load_spec
    from recommender.study import prepare

    spec = load_spec(Path(__file__).parents[2] / "recommender" / "demo" / "search_space.yaml")
    prepared = prepare(spec)
    searched = prepared.evaluator().performance.settled(Candidate("bf16", "baseline", hardware, batch))
    planned = plan_one(
        prepared.shape,
        prepared.catalog.get(hardware),
        "bf16",
        traffic=spec.traffic,
        sla=spec.sla,
        scope=PlanScope(batch_sizes=(batch,), kv_cache_dtypes=("auto",)),
    )
    assert searched.serving is not None and searched.cost is not None
    assert planned.tensor_parallel == 1 and planned.batch_size == batch
    assert planned.ttft_p99_ms == searched.serving.ttft_ms.p99
    assert planned.tpot_p99_ms == searched.serving.tpot_ms.p99
    assert planned.usd_per_1m_tokens == searched.cost.usd_per_1m_tokens
    assert planned.usd_per_month == searched.cost.usd_per_month
    assert planned.provenance == searched.serving.provenance and planned.provenance.kind == "calibrated"


def test_plan_prices_every_degree_that_fits_not_only_the_smallest() -> None:
    """Llama-3.1-70B in FP8 fits one 85.5 GB H100 with a sliver of KV cache; two GPUs carry a full batch."""
    catalog = load_catalog()
    _, llama70 = load_architecture("llama-3.1-70b")
    traffic = Traffic(prompt_tokens=512, output_tokens=256, requests_per_second=10)
    sla = LatencySLA(ttft_p99_ms=1000, tpot_p99_ms=50)
    h100 = catalog.get("h100-sxm")
    row = plan_one(llama70, h100, "fp8", traffic=traffic, sla=sla, scope=CAPS_64, catalog=catalog)
    one_gpu = plan_one(
        llama70,
        h100.model_copy(update={"max_tensor_parallel": 1}),
        "fp8",
        traffic=traffic,
        sla=sla,
        scope=CAPS_64,
        catalog=catalog,
    )
    assert one_gpu.tensor_parallel == 1 and one_gpu.usd_per_month is not None  # it does fit one GPU ...
    assert row.tensor_parallel == 2 and row.usd_per_month is not None  # ... and two cost less a month
    assert row.usd_per_month < one_gpu.usd_per_month / 2


def test_plan_progress_shows_on_a_terminal_and_leaves_nothing_behind_elsewhere() -> None:
    import io

    from rich.console import Console

    from recommender.report.console import step_progress

    piped = io.StringIO()
    with step_progress(Console(file=piped), total=2, description="planning") as done:
        done("h100-sxm/bf16")
    assert piped.getvalue() == ""  # a log or a pipe stays clean
    tty = io.StringIO()
    with step_progress(Console(file=tty, force_terminal=True, width=100), total=2, description="planning") as done:
        done("h100-sxm/bf16")
        done("h100-sxm/fp8")
    assert "planning" in tty.getvalue() and "2/2" in tty.getvalue()


def test_a_candidates_performance_is_computed_once_per_evaluator() -> None:
    """The search, its GPU mix and the load curve all ask for a candidate's performance; each answer simulates
    every launching engine, so it is kept: the second ask returns the same object."""
    from recommender.config.candidate import Candidate
    from recommender.config.spec import LatencySLA, Traffic
    from recommender.evaluation.performance import PerformanceEvaluator
    from recommender.perf.catalog.architectures import load_architecture
    from recommender.perf.catalog.gpus import load_catalog

    evaluator = PerformanceEvaluator(
        load_catalog(),
        load_architecture("llama-3.1-8b")[1],
        Traffic(prompt_tokens=512, output_tokens=128, requests_per_second=5),
        LatencySLA(ttft_p99_ms=2000, tpot_p99_ms=100),
    )
    c = Candidate(precision="fp8", method="fp8-dynamic", hardware="h100-sxm", batch_size=64)
    first = evaluator.performance(c)
    assert evaluator.performance(c) is first
    assert (
        evaluator.performance(Candidate(precision="fp8", method="fp8-dynamic", hardware="h100-sxm", batch_size=256))
        is not first
    )


def test_plan_rows_are_served_by_the_engines_given() -> None:
    """`plan --spec` passes the spec's engines to its rows as to its GPU mix: a row is never served by an engine
    the spec left out."""
    from recommender.config.spec import LatencySLA, Traffic
    from recommender.fleet.plan import plan_one
    from recommender.perf.catalog.architectures import load_architecture
    from recommender.perf.catalog.gpus import load_catalog

    catalog = load_catalog()
    args = {
        "traffic": Traffic(prompt_tokens=512, output_tokens=128, requests_per_second=5),
        "sla": LatencySLA(ttft_p99_ms=2000, tpot_p99_ms=100),
        "catalog": catalog,
        "scope": ONE_GPU_64,
    }
    shape, h100 = load_architecture("llama-3.1-8b")[1], catalog.get("h100-sxm")
    for engines in (("sglang",), ("vllm",)):
        row = plan_one(shape, h100, "fp8", engines=engines, **args)  # type: ignore[arg-type]
        assert row.engine == engines[0], row


def test_a_plan_row_launches_with_room_for_the_longest_conversation_turn() -> None:
    """The launch's --max-model-len is the traffic's longest request (a conversation's last turn carries its
    history), the length the memory check sized the KV cache for; prompt_tokens + output_tokens would make the
    engine refuse every later turn."""
    from recommender.fleet.plan import launch_of

    catalog = load_catalog()
    traffic = Traffic(
        prompt_tokens=1500,
        output_tokens=150,
        requests_per_second=5,
        conversation={"turns": 4, "think_time_s": 30, "message_tokens": 200},
    )
    assert traffic.max_model_len == traffic.longest_prompt_tokens + 150 == 2700
    # One degree: the launch's length is under test, not the ranking of degrees.
    row = plan_one(LLAMA8, catalog.get("h100-sxm"), "bf16", traffic=traffic, sla=SLA, scope=ONE_GPU_64, catalog=catalog)
    launch = launch_of(row, "meta-llama/Llama-3.1-8B-Instruct", catalog, traffic)
    # vLLM's --max-model-len, SGLang's --context-length, TGI's --max-total-tokens, TensorRT-LLM's --max_seq_len
    lengths = re.findall(r"--(?:max-model-len|context-length|max-total-tokens|max_seq_len)[ =](\d+)", launch)
    assert row.engine and lengths == [str(traffic.max_model_len)]
