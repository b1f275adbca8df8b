"""Engine eligibility: which engine serves which scheme on which GPU as measured, and what the search does with it.

The table is `recommender.engines.SUPPORT` (every row sourced there); these tests check
the rules on the catalog's real GPUs, and that the search and `plan` prune what no engine in
the spec's list launches before anything is loaded, with the reason and the fix.
"""

from __future__ import annotations

import dataclasses

import pytest

from recommender.config.candidate import Candidate
from recommender.config.spec import LatencySLA, Traffic
from recommender.device import DeviceInfo
from recommender.engines import ENGINE_NAMES, SUPPORT, evaluation_only, launch_flags
from recommender.engines.eligibility import eligibility, refusal
from recommender.evaluation.performance import PerformanceEvaluator
from recommender.evaluation.speed import Setup
from recommender.perf.catalog.architectures import load_architecture
from recommender.perf.catalog.gpus import Catalog, load_catalog
from recommender.perf.model.memory import plan_memory
from recommender.quantize import all_schemes, get_scheme

CATALOG = load_catalog()
METHODS = all_schemes()
_, LLAMA_8B = load_architecture("llama-3.1-8b")
_, LLAMA_70B = load_architecture("llama-3.1-70b")
TRAFFIC = Traffic(prompt_tokens=512, output_tokens=128, requests_per_second=0.5)
SLA = LatencySLA(ttft_p99_ms=2000, tpot_p99_ms=200)


def device(gpu: str) -> DeviceInfo:
    return CATALOG.get(gpu).device


def engines_on(method: str, gpu: str, engines: tuple[str, ...] = ENGINE_NAMES) -> tuple[str, ...]:
    return eligibility(get_scheme(method), device(gpu), engines).engines


def test_every_served_flag_has_a_kernel_row_and_every_row_a_scheme() -> None:
    served = {
        (engine, m.kernel_family)
        for m in METHODS.values()
        for engine, flag in launch_flags(m).items()
        if flag is not None
    }
    assert served == set(SUPPORT)
    assert all(m.kernel_family == "" for m in METHODS.values() if evaluation_only(m))


def test_bf16_needs_ampere_and_fp16_runs_on_a_t4() -> None:
    t4 = eligibility(get_scheme("baseline"), device("t4"))
    assert not t4.launchable
    why = t4.reason("t4")
    assert why.startswith("no engine in engines: [vllm, sglang] launches baseline on t4 (compute capability 7.5)")
    assert (
        "computes in bf16" in why
        and "needs 8.0" in why
        and why.endswith("add a GPU with compute capability >= 8.0 or pick another scheme")
    )
    assert engines_on("fp16", "t4") == ("vllm", "sglang", "tgi")
    assert engines_on("baseline", "a10g") == ("vllm", "sglang", "tgi", "trtllm")


def test_fp8_w8a8_only_where_the_engine_has_fp8_kernels() -> None:
    assert engines_on("fp8-dynamic", "l4") == ("vllm", "sglang")  # 8.9: CUTLASS FP8 W8A8
    # TGI's per-token path and TensorRT-LLM's FP8 rowwise need 9.x.
    assert engines_on("fp8-dynamic", "h100-sxm") == ("vllm", "sglang", "tgi", "trtllm")
    # 8.6 and 8.0: the engines would run FP8 Marlin weight-only, which is not what was measured.
    for gpu in ("a10g", "a100-80gb"):
        a10g = eligibility(get_scheme("fp8-dynamic"), device(gpu), ENGINE_NAMES)
        assert not a10g.launchable, gpu
        assert "falls back to weight-only FP8 Marlin (W8A16)" in a10g.reason(gpu)
    assert engines_on("fp8-online", "l4") == ("vllm",)
    assert engines_on("fp8-online", "a100-80gb") == ()


def test_w4a16_kernel_floors_and_zero_points() -> None:
    # The measured W4A16 schemes compute in bf16, so a T4 is refused for the dtype before any kernel.
    t4 = eligibility(get_scheme("w4a16-awq-g128"), device("t4")).reason("t4")
    assert "w4a16-awq-g128 computes in bf16 as measured, which needs 8.0" in t4
    # The kernels' own floors, seen through an fp16-computing variant: vLLM's Marlin runs on Turing
    # (PR #29901), SGLang's and TGI's Marlin need Ampere.
    fp16_gptq = dataclasses.replace(get_scheme("w4a16-gptq-g128"), name="gptq-fp16", precision="fp16")
    turing = DeviceInfo("cuda", (7, 5))
    assert refusal("vllm", fp16_gptq, turing) is None
    assert refusal("sglang", fp16_gptq, turing) == "SGLang's Marlin W4A16 needs 8.0"
    assert refusal("tgi", fp16_gptq, turing) == "TGI's GPTQ-Marlin W4A16 needs 8.0"
    # Zero points (AWQ): vLLM and SGLang; TGI takes them only from AWQ-format checkpoints.
    assert engines_on("w4a16-awq-g128", "l4") == ("vllm", "sglang")
    assert engines_on("w4a16-gptq-g128", "l4") == ("vllm", "sglang", "tgi")


def test_int8_w8a8_per_engine() -> None:
    assert engines_on("int8-w8a8", "t4") == ()  # bf16 compute; vLLM's INT8 itself runs on 7.5
    assert engines_on("int8-w8a8", "a10g") == ("vllm", "tgi")  # SGLang's sgl-kernel INT8 needs 8.9
    assert engines_on("int8-w8a8", "l4") == ("vllm", "sglang", "tgi")
    assert "runs only below 10.0" in (refusal("vllm", get_scheme("int8-w8a8"), device("b200")) or "")


def test_amd_only_what_rocm_builds_run() -> None:
    assert engines_on("baseline", "mi300x") == ("vllm", "sglang")
    assert engines_on("fp8-dynamic", "mi300x") == ("vllm", "sglang")
    assert engines_on("int8-w8a8", "mi300x") == ("vllm",)
    for method in ("w4a16-gptq-g128", "w4a16-awq-g128", "bnb-nf4"):
        mi300x = eligibility(get_scheme(method), device("mi300x"))
        assert not mi300x.launchable and "does not run on ROCm" in mi300x.reason("mi300x"), method
        assert "(AMD ROCm gfx942)" in mi300x.reason("mi300x")


def test_the_spec_engines_decide() -> None:
    assert engines_on("w4a16-awq-g128", "l4", ("tgi",)) == ()
    awq = eligibility(get_scheme("w4a16-awq-g128"), device("l4"), ("tgi",))
    assert awq.reason("l4").startswith("no engine in engines: [tgi] launches w4a16-awq-g128 on l4")
    assert awq.fix.endswith("add vllm or sglang to engines")
    assert engines_on("int8-w8a8", "a10g", ("sglang",)) == ()
    assert engines_on("int8-w8a8", "a10g", ("tgi",)) == ("tgi",)
    assert engines_on("bnb-llm-int8", "l4", ("vllm", "sglang")) == ()
    assert engines_on("bnb-llm-int8", "l4", ("tgi",)) == ("tgi",)


def test_evaluation_only_schemes_have_no_engine() -> None:
    for name in (n for n in METHODS if n.startswith("torchao-")):
        assert evaluation_only(METHODS[name])
        assert engines_on(name, "h100-sxm") == ()


def _evaluator(
    catalog: Catalog, engines: tuple[str, ...] = ("vllm", "sglang"), shape: object = LLAMA_8B
) -> PerformanceEvaluator:
    return PerformanceEvaluator(catalog, shape, TRAFFIC, SLA, engines=engines)  # type: ignore[arg-type]


def test_the_search_prunes_what_no_listed_engine_launches_before_loading_anything(contract_catalog: Catalog) -> None:
    evaluator = _evaluator(contract_catalog)  # L4 and T4 at contract prices: the default price set lists neither
    bf16_t4 = evaluator.evaluate(Candidate("bf16", "baseline", "t4", 8))
    assert bf16_t4.status == "pruned" and bf16_t4.constraints.runnable == 1.0
    (why,) = bf16_t4.broken
    assert why.startswith("runnable: no engine in engines: [vllm, sglang] launches baseline on t4")
    torchao = evaluator.evaluate(Candidate("int8", "torchao-int8-wo", "l4", 8))
    assert torchao.status == "pruned" and "evaluation only" in torchao.broken[0]
    served = evaluator.evaluate(Candidate("int8", "int8-w8a8", "l4", 8))
    # Both launch it; the engine whose calibrated replica carries the most comes first, and the estimate names it.
    assert served.status == "evaluated" and set(served.engines) == {"vllm", "sglang"}
    assert served.serving is not None and served.engines[0] == served.serving.engine
    # The same candidate with TGI the only engine: launched by TGI alone.
    assert _evaluator(contract_catalog, ("tgi",)).evaluate(Candidate("int8", "int8-w8a8", "l4", 8)).engines == ("tgi",)
    awq_tgi = _evaluator(contract_catalog, ("tgi",)).evaluate(Candidate("int4", "w4a16-awq-g128", "l4", 8))
    assert awq_tgi.status == "pruned" and "add vllm or sglang to engines" in awq_tgi.broken[0]


def test_online_fp8_loads_16_bit_weights_first_and_is_refused_where_they_do_not_fit() -> None:
    assert eligibility(get_scheme("fp8-online"), device("l40s")).load_bits_per_weight == 16.0
    assert eligibility(get_scheme("fp8-dynamic"), device("l40s")).load_bits_per_weight is None
    l40s = CATALOG.get("l40s")  # 48 GB: 70B at fp8 over two GPUs is ~35 GB each, at 16 bits ~70 GB each
    online = plan_memory(
        LLAMA_70B, get_scheme("fp8-online"), device_gb=l40s.memory_gb, tensor_parallel=2, load_bits_per_weight=16.0
    )
    checkpoint = plan_memory(LLAMA_70B, get_scheme("fp8-dynamic"), device_gb=l40s.memory_gb, tensor_parallel=2)
    assert online.weights_gb == pytest.approx(checkpoint.weights_gb)  # served at the same bits
    assert online.load_peak_gb > online.usable_gb > checkpoint.load_peak_gb
    why = online.shortfall(1, 640)
    assert why is not None and "while loading" in why and f"{online.load_gb:.2f} GB before quantizing" in why
    assert checkpoint.shortfall(1, 640) is None
    evaluator = _evaluator(CATALOG, shape=LLAMA_70B)
    refused = evaluator.evaluate(Candidate("fp8", "fp8-online", "l40s", 8, tensor_parallel=2))
    assert refused.status == "pruned" and refused.broken[0].startswith("memory: needs")
    assert refused.memory is not None and refused.memory.constraint > 0
    fits = evaluator.evaluate(Candidate("fp8", "fp8-dynamic", "l40s", 8, tensor_parallel=2))
    assert fits.status == "evaluated"


def test_each_engine_is_simulated_with_its_own_batching_of_the_launched_budget() -> None:
    """vLLM's simulated step is capped (engine_profiles.py); SGLang, tried after it, keeps the launched budget."""
    evaluator = _evaluator(CATALOG)
    c = Candidate("bf16", "baseline", "h100-sxm", 64)
    setup = evaluator.setup(c)
    assert isinstance(setup, Setup) and setup.engine == "vllm"
    assert setup.scheduler.max_num_batched_tokens == 4096 and c.max_num_batched_tokens == 8192
    sglang = evaluator._for_engine(c, setup, CATALOG.get("h100-sxm"), "sglang")
    assert sglang.scheduler.max_num_batched_tokens == 8192 and not sglang.scheduler.mixed_prefill
