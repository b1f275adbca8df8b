"""The serving levers as the performance model predicts them, beside published measurements (README quotes it).

    PYTHONPATH=. .venv/bin/python benchmarks/lever_speedups.py

Speculative decoding: the vLLM blog (2024-10-17, https://blog.vllm.ai/2024/10/17/spec-decode.html) measured
Llama-3-70B on 4x H100 with n-gram speculation on CNN/DailyMail: up to 2.8x faster at QPS 1, 1.8x slower
at a high QPS; vLLM issue #19254 (Qwen3-32B-FP8, vLLM 0.9) logged mean acceptance lengths of 2.16-2.83 with
k=3 at 337-629 running requests and n-gram slower than without. Neither publishes the acceptance of the
blog's runs, so the model is run over a range of it: the speed-up at QPS 1 (P50 TPOT without / with) and
at a high load (output tokens per second of a full batch, with / without), on the calibrated vLLM step
cost of Llama-3.1-70B on 4x H100 (prompt 1,024 tokens, output 128).

Prefix caching: the TGI v3 overview (https://huggingface.co/docs/text-generation-inference/conceptual/chunking)
re-ran a long conversation with its prefix cached: 12.1 s cold, 2 s warm (Llama-3.1-70B, 8x H100, about
200k tokens of conversation, end to end). The model is run on the same shape as far as the architecture
allows (120k tokens, Llama-3.1-70B's context is 131,072): TTFT cold (nothing cached) and warm (all but the
last block cached), and 3,000-token prompts whose 2,048 first tokens are a system prompt, at 3 req/s.
"""

from __future__ import annotations

import numpy as np

from recommender.perf.catalog.architectures import load_architecture
from recommender.perf.catalog.gpus import load_catalog
from recommender.perf.model.memory import plan_memory
from recommender.perf.sim.scheduler import SchedulerConfig
from recommender.perf.sim.simulate import simulate
from recommender.perf.sim.speculative import SpeculativeDecoding
from recommender.perf.sim.workload import SharedPrefix, make_workload
from recommender.perf.step.calibrated import CalibratedModel, load_fit
from recommender.perf.step.cost import StepCostModel
from recommender.quantize import get_scheme

PROMPT, OUTPUT = 1024, 128
#: Tokens per step spanning vLLM issue #19254's mean acceptance lengths (2.16-2.83) and beyond.
ACCEPTANCE = (1.5, 2.0, 2.5, 2.83, 3.5)
K = 4


def _setup(gpu: str, tp: int, context: int) -> tuple[StepCostModel, SchedulerConfig]:
    _, shape = load_architecture("llama-3.1-70b")
    accel = load_catalog().get(gpu)
    method = get_scheme("baseline")
    cost = CalibratedModel(load_fit()).step_cost(shape, method, accel, "vllm", tensor_parallel=tp)
    memory = plan_memory(
        shape,
        method,
        device_gb=accel.device_memory_gb,
        memory_utilization=0.9,
        tensor_parallel=tp,
        max_num_batched_tokens=8192,
        max_num_seqs=256,
    )
    assert memory.kv_cache_tokens > context
    return cost, SchedulerConfig(kv_cache_tokens=memory.kv_cache_tokens, max_num_seqs=256)


def speculation_table() -> None:
    cost, config = _setup("h100-sxm", 4, PROMPT + OUTPUT)
    trickle = make_workload(prompt=PROMPT, output=OUTPUT, n_requests=60, rate=0.2)
    busy = make_workload(prompt=PROMPT, output=OUTPUT, n_requests=1500, rate=60.0)
    plain_lone = simulate(cost, trickle, config)
    plain_busy = simulate(cost, busy, config)
    print("n-gram speculation, Llama-3.1-70B bf16, 4x H100, vLLM calibrated step cost, k=4 drafts per step")
    print(f"{'tokens/step':>11} {'drafts/step':>11} {'QPS-1 speed-up':>15} {'full-batch speed-up':>20}")
    for tokens in ACCEPTANCE:
        drafted = min(K, (tokens - 1) * 1.6)  # steps that match draft k; misses draft none (demo ratio 1.46/0.36)
        spec = SpeculativeDecoding("ngram", K, tokens, drafted)
        lone = simulate(cost, trickle, config, speculation=spec)
        full = simulate(cost, busy, config, speculation=spec)
        print(
            f"{tokens:>11.2f} {drafted:>11.2f} {plain_lone.tpot_ms.p50 / lone.tpot_ms.p50:>14.2f}x "
            f"{full.output_tokens_per_s / plain_busy.output_tokens_per_s:>19.2f}x"
        )
    print("published: up to 2.8x at QPS 1 (acceptance not published); 1.8x slower (0.56x) at high QPS")


def prefix_table() -> None:
    long_prompt = 120_000
    cost, config = _setup("h100-sxm", 8, long_prompt + 16)
    cold = make_workload(prompt=long_prompt, output=16, arrivals=[0.0, 600.0])
    warm = make_workload(prompt=long_prompt, output=16, arrivals=[0.0, 600.0], prefix=SharedPrefix(long_prompt - 1))
    first, again = simulate(cost, cold, config), simulate(cost, warm, config)
    print("\nprefix caching, Llama-3.1-70B bf16, 8x H100, vLLM calibrated step cost")
    print(
        f"a 120,000-token conversation sent twice (16 tokens out): TTFT cold {first.ttft_s[1]:.2f} s, warm "
        f"{again.ttft_s[1]:.3f} s; end to end cold {first.e2e_s[1]:.2f} s, warm {again.e2e_s[1]:.2f} s "
        f"({first.e2e_s[1] / again.e2e_s[1]:.1f}x); published (TGI v3, ~200k tokens, end to end): 12.1 s -> 2 s "
        "(6x)"
    )
    cost4, config4 = _setup("h100-sxm", 4, 3000 + 128)
    for fraction in (0.0, 1.0):
        w = make_workload(prompt=3000, output=128, n_requests=600, rate=3.0, prefix=SharedPrefix(2048, fraction))
        r = simulate(cost4, w, config4)
        print(
            f"3,000-token prompts at 3 req/s on 4x H100, 2,048-token system prompt on {fraction:.0%}: hit rate "
            f"{r.prefix_hit_rate:.0%}, P50 TTFT {r.ttft_ms.p50:.0f} ms, P99 TTFT {r.ttft_ms.p99:.0f} ms, "
            f"prompt tokens computed {r.prefill_tokens:,}"
        )


if __name__ == "__main__":
    np.set_printoptions(precision=3)
    speculation_table()
    prefix_table()
