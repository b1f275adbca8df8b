"""Overhead of our evaluation path against a plain lm-eval run: same model, task and documents.

    .venv/bin/python benchmarks/eval_overhead.py [--task demo_code_next_line] [--limit 60] [--repeats 3]

Plain: ``lm_eval.simple_evaluate(HFLM(loaded model), tasks=[task], limit=N)``. Ours:
QualityEvaluator.doc_pairs on an empty cache (task fingerprint, ``samples=`` selection,
per-document parsing, the cache write). Runs alternate; medians are compared.
Target: ratio <= 1.10.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from recommender.models.source import ModelSource
from recommender.quality.cache import QualityCache
from recommender.quality.evaluate import QualityEvaluator
from recommender.quality.lm_eval_runner import task_manager
from recommender.quality.suite import load_use_case
from recommender.quantize import DeviceInfo, get_scheme
from recommender.quantize.model_cache import ModelCache

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--suite", type=Path, default=REPO / "recommender" / "demo" / "use_case.yaml")
    parser.add_argument("--task", default="demo_code_next_line")
    parser.add_argument("--limit", type=int, default=60)
    parser.add_argument("--method", default="torchao-int8-wo")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    import lm_eval
    from lm_eval.models.huggingface import HFLM

    use_case = load_use_case(args.suite)
    spec = next(t for t in use_case.tasks if t.task == args.task)
    manager = task_manager(use_case)
    models = ModelCache(
        ModelSource.resolve(str(REPO / "recommender" / "demo" / "model"), base_dir=REPO), DeviceInfo("cpu")
    )
    method = get_scheme(args.method)
    model = models.get(method)

    plain, ours = [], []
    for _ in range(args.repeats):
        started = time.perf_counter()
        lm = HFLM(pretrained=model, tokenizer=models.tokenizer, batch_size=use_case.batch_size)
        lm_eval.simple_evaluate(
            model=lm,
            tasks=[args.task],
            task_manager=manager,
            limit=args.limit,
            bootstrap_iters=0,
            log_samples=True,
            cache_requests=False,
        )
        plain.append(time.perf_counter() - started)
        with tempfile.TemporaryDirectory() as tmp:
            evaluator = QualityEvaluator(use_case, models, cache=QualityCache(Path(tmp)), manager=manager)
            started = time.perf_counter()
            evaluator.doc_pairs(method, spec, args.limit)
            ours.append(time.perf_counter() - started)
    p, o = statistics.median(plain), statistics.median(ours)
    print(f"{args.task}, {args.limit} documents, {args.method} on cpu, median of {args.repeats}:")
    print(f"plain lm-eval {p:.2f} s, ours {o:.2f} s, ratio {o / p:.3f}")


if __name__ == "__main__":
    main()
