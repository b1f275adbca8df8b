"""The kernel-table step cost: aiconfigurator-core's measured kernels sampled, interpolated and labelled.

Every figure here comes from the real package (pinned in pyproject.toml); where it is not installed (a platform
without its wheel) these tests skip, and the fallback test checks the datasheet answers instead.
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from recommender.perf.catalog.architectures import load_architecture
from recommender.perf.catalog.gpus import load_catalog
from recommender.perf.step.calibrated import CalibratedModel, load_fit, load_kernel_calibration
from recommender.perf.step.cost import PrefillChunks
from recommender.perf.step.kernel_features import KernelStepFeatures
from recommender.perf.step.kernel_tables import (
    AIC_VERSION,
    KernelTables,
    KernelTablesUnavailable,
    gemm_mode,
    kernel_package_version,
)
from recommender.quantize import get_scheme

needs_package = pytest.mark.skipif(
    kernel_package_version() != AIC_VERSION, reason=f"aiconfigurator-core {AIC_VERSION} is not installed here"
)


@pytest.fixture(scope="module")
def tables() -> KernelTables:
    return KernelTables()


@pytest.fixture(scope="module")
def llama8b():  # type: ignore[no-untyped-def]
    return load_architecture("llama-3.1-8b")[1]


@needs_package
def test_table_reads_the_sdk_and_interpolates_between_its_points(tables: KernelTables, llama8b) -> None:  # type: ignore[no-untyped-def]
    from aiconfigurator_core.sdk import EngineHandle  # the package itself, to check the grid against off-grid calls

    from recommender.perf.step.kernel_tables import _config_json, _is_collective

    table = tables.get(llama8b, get_scheme("baseline"), "h100-sxm", "vllm", 1, "auto")
    assert "aiconfigurator-core 0.12.0" in table.source and "h100_sxm" in table.source and "vllm" in table.source
    assert 0.5 < table.measured_share <= 1.0
    import json
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as folder:
        (Path(folder) / "config.json").write_text(json.dumps(_config_json(llama8b)))
        handle = EngineHandle.compile(folder, "h100_sxm", "vllm", tp_size=1, gemm_quant_mode="bfloat16")
        for tokens in (3, 100, 777, 3000, 20_000):  # off the grid
            ops = handle.mixed_step_breakdown_per_op(tokens, 0, tokens, 2)[0]
            direct = sum(op[1] for op in ops if not _is_collective(op[0])) / 1e3
            assert table.linear(tokens) == pytest.approx(direct, rel=0.08), tokens
        for seqs, context in ((5, 700), (48, 3000), (300, 1500)):
            direct = handle.mixed_step_breakdown(0, seqs, context, 2)[3] / 1e3
            assert float(table.decode_attention(seqs, float(seqs * context))) == pytest.approx(direct, rel=0.1)


@needs_package
def test_more_work_costs_more_time(tables: KernelTables, llama8b) -> None:  # type: ignore[no-untyped-def]
    table = tables.get(llama8b, get_scheme("fp8-dynamic"), "l40s", "vllm", 1, "fp8")
    linear = [table.linear(t) for t in (1, 64, 512, 4096, 16_384)]
    assert all(a <= b for a, b in zip(linear, linear[1:], strict=False)) and linear[-1] > 10 * linear[0]
    decode = table.decode_attention(32, np.array([32 * 512.0, 32 * 4096.0, 32 * 32_768.0]))
    assert np.all(np.diff(decode) > 0)
    assert table.context_attention(8192**2, 0) > 4 * table.context_attention(2048**2, 0)


@needs_package
def test_fp8_kernels_beat_bf16_on_the_same_gpu(tables: KernelTables, llama8b) -> None:  # type: ignore[no-untyped-def]
    bf16 = tables.get(llama8b, get_scheme("baseline"), "h100-sxm", "trtllm", 1, "auto")
    fp8 = tables.get(llama8b, get_scheme("fp8-dynamic"), "h100-sxm", "trtllm", 1, "auto")
    assert fp8.linear(4096) < 0.85 * bf16.linear(4096)  # prefill: FP8 tensor cores
    # decode: half the linear weights' bytes (the bf16 lm_head and embeddings in both): x0.81 (x0.80 before each op
    # took its fastest row at as many tokens or more, which lowered bf16's one-token step 1.3 %)
    assert fp8.linear(1) < 0.85 * bf16.linear(1)


@needs_package
@pytest.mark.parametrize(
    ("gpu", "scheme", "model", "why"),
    [
        ("h100-pcie", "baseline", "llama-3.1-8b", "no kernel tables for h100-pcie"),
        ("mi300x", "baseline", "llama-3.1-8b", "no kernel tables for mi300x"),
        ("h100-sxm", "bnb-nf4", "llama-3.1-8b", "not in the kernel tables"),
        ("h100-sxm", "baseline", "mixtral-8x7b", "MoE"),
        ("h100-sxm", "w4a16-awq-g128", "llama-3.1-8b", "int4_wo"),
    ],
)
def test_unavailable_configurations_say_why(tables: KernelTables, gpu: str, scheme: str, model: str, why: str) -> None:
    shape = load_architecture(model)[1]
    with pytest.raises(KernelTablesUnavailable, match=why):
        tables.get(shape, get_scheme(scheme), gpu, "vllm" if "awq" not in scheme else "trtllm", 1, "auto")


@needs_package
def test_a_refusal_after_a_compile_is_recorded_for_the_next_process(tmp_path, llama8b) -> None:  # type: ignore[no-untyped-def]
    """The package refuses W4A16 on the H100 only after compiling the configuration (seconds); a second process
    reads the recorded reason instead, and a different configuration is asked afresh."""
    awq = get_scheme("w4a16-awq-g128")
    with pytest.raises(KernelTablesUnavailable, match="int4_wo") as first:
        KernelTables(cache_dir=tmp_path).get(llama8b, awq, "h100-sxm", "trtllm", 1, "auto")
    [recorded] = tmp_path.glob("*.unavailable")
    assert recorded.read_text(encoding="utf-8") == str(first.value)
    recorded.write_text("recorded: " + str(first.value), encoding="utf-8")  # the next process reads this file
    with pytest.raises(KernelTablesUnavailable, match="^recorded: "):
        KernelTables(cache_dir=tmp_path).get(llama8b, awq, "h100-sxm", "trtllm", 1, "auto")
    with pytest.raises(KernelTablesUnavailable, match="int4_wo") as other:
        KernelTables(cache_dir=tmp_path).get(llama8b, awq, "h100-sxm", "trtllm", 2, "auto")
    assert not str(other.value).startswith("recorded")


def test_schemes_map_to_the_packages_gemm_modes() -> None:
    assert gemm_mode(get_scheme("baseline")) == "bfloat16"
    assert gemm_mode(get_scheme("fp8-dynamic")) == "fp8"
    assert gemm_mode(get_scheme("fp8-block")) == "fp8_block"
    assert gemm_mode(get_scheme("int8-w8a8")) == "sq"
    assert gemm_mode(get_scheme("w4a16-gptq-g128")) == "int4_wo"
    assert gemm_mode(get_scheme("nvfp4")) == "nvfp4"
    with pytest.raises(KernelTablesUnavailable):
        gemm_mode(get_scheme("bnb-llm-int8"))


@needs_package
def test_calibrated_model_answers_on_kernels_where_there_are_tables() -> None:
    kernels = load_kernel_calibration()
    assert kernels is not None, "ship recommender/perf/step/step_cost_fit_kernels.json (gpu_fidelity.py --kernels)"
    model, catalog = CalibratedModel(load_fit(), kernels), load_catalog()
    shape = load_architecture("llama-3.1-70b")[1]
    l40s = model.step_cost(shape, get_scheme("fp8-dynamic"), catalog.get("l40s"), "vllm", tensor_parallel=2)
    assert isinstance(l40s.features, KernelStepFeatures)
    assert l40s.provenance.basis == "measured kernels" and "l40s, vllm" in l40s.provenance.detail
    pcie = model.step_cost(shape, get_scheme("fp8-dynamic"), catalog.get("h100-pcie"), "vllm", tensor_parallel=2)
    assert pcie.provenance.basis == "datasheet" and "no kernel tables for h100-pcie" in pcie.provenance.detail
    # one 70B decode step of 32 sequences at 2k context on 2 x L40S: tens of milliseconds, as its bandwidth says
    step = l40s.step_seconds(0, 32, 32 * 2048)
    assert 0.02 < step < 0.2
    prefill = l40s.prefill_step_seconds(PrefillChunks.single(2048), 0, 0)
    assert prefill > 3 * step
    upper = model.upper_step_cost(l40s, "vllm", 0.9)
    assert upper.step_seconds(0, 32, 32 * 2048) >= step


def test_without_the_package_the_datasheet_answers_and_says_so() -> None:
    """An install without aiconfigurator-core (no wheel for the platform or Python): the import is blocked in a
    fresh interpreter, and the step cost falls back with the reason in its provenance."""
    code = (
        "import sys; sys.modules['aiconfigurator_core'] = None\n"
        "from recommender.perf.step.calibrated import CalibratedModel, load_fit, load_kernel_calibration\n"
        "from recommender.perf.catalog.architectures import load_architecture\n"
        "from recommender.perf.catalog.gpus import load_catalog\n"
        "from recommender.quantize import get_scheme\n"
        "m = CalibratedModel(load_fit(), load_kernel_calibration())\n"
        "c = m.step_cost(load_architecture('llama-3.1-8b')[1], get_scheme('baseline'), load_catalog().get('l40s'), "
        "'vllm')\n"
        "print(c.provenance.basis, '|', c.provenance.detail, '|', c.step_seconds(0, 8, 8000))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    basis, detail, seconds = out.stdout.strip().split(" | ")
    assert basis == "datasheet"
    assert "aiconfigurator-core is not installed" in detail
    assert 0 < float(seconds) < 1


@needs_package
@pytest.mark.parametrize(("engine", "scheme_word"), [("vllm", "fp8-dynamic"), ("trtllm", "modelopt-fp8")])
def test_plan_of_a_70b_fp8_on_two_l40s_stands_on_measured_kernels(engine: str, scheme_word: str) -> None:
    """The seeds' question: Llama-3.1-70B FP8 on L40S at TP2, vLLM (llm-compressor checkpoint) and TensorRT-LLM
    (ModelOpt checkpoint), planned on the L40S's measured kernels."""
    import json

    plan = [
        sys.executable,
        "-m",
        "recommender.cli.main",
        "plan",
        "--model",
        "llama-3.1-70b",
        "--hardware",
        "l40s",
        "--engine",
        engine,
        "--precision",
        "fp8",
        "--tensor-parallel",
        "2",
        "--rps",
        "2",
        # An SLA a lone request meets (the default TPOT is under what two L40S stream a 70B at): a plan that serves
        # nothing is refused (exit 2) and prints no row.
        "--ttft-ms",
        "5000",
        "--tpot-ms",
        "300",
        "--json",
    ]
    out = subprocess.run(plan, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    (row,) = json.loads(out.stdout)
    assert (row["engine"], row["method"], row["tensor_parallel"]) == (engine, scheme_word, 2)
    assert row["provenance"]["basis"] == "measured kernels"
    assert "aiconfigurator-core 0.12.0 kernel tables: l40s" in row["provenance"]["detail"]


@needs_package
@pytest.mark.parametrize(("gpu", "tp"), [("l40s", 2), ("h100-sxm", 1)])
def test_a_decode_stretchs_stepper_prices_each_step_as_the_step_path_does(gpu: str, tp: int) -> None:
    """The simulator prices a kernel-table decode stretch with ``decode_stepper`` (the batch's row interpolated
    once): each step must equal ``step_seconds`` to the last bit, or the plans would move with the shortcut."""
    kernels = load_kernel_calibration()
    assert kernels is not None
    model, catalog = CalibratedModel(load_fit(), kernels), load_catalog()
    shape = load_architecture("llama-3.1-70b")[1]
    point = model.step_cost(shape, get_scheme("fp8-dynamic"), catalog.get(gpu), "vllm", tensor_parallel=tp)
    upper = model.upper_step_cost(point, "vllm", 0.9)
    assert isinstance(point.features, KernelStepFeatures) and upper.factors.decode != 1.0
    rng = np.random.default_rng(7)
    for cost in (point, upper):
        for seqs in (1, 3, 64, 255, 1024, 5000):
            step = cost.decode_stepper(seqs)
            assert step is not None
            # below the grid, inside it and past its longest context (the proportional tail)
            for per_seq in (*rng.integers(1, 300_000, size=40).tolist(), 0, 1, 16, 131_072):
                context = seqs * per_seq + int(rng.integers(0, seqs))
                assert step(context) == cost.step_seconds(0, seqs, context)
    assert point.decode_stepper(0) is None
