"""Adaptive evaluation against full evaluation on the demo suite: documents used and verdict agreement.

    .venv/bin/python benchmarks/adaptive_eval.py [--suite recommender/demo/use_case.yaml] [--limit N]

For every CPU method of the demo spec, the suite is evaluated twice from empty caches:
once on each task's whole document budget, once adaptively (a quarter, a half, the
whole budget; stop when the paired interval decides). Counts the variants' documents
(the bf16 reference is evaluated in full by both and is left out), and checks that both
runs reach the same verdict per check. Target: >= 50 % fewer documents, same verdicts.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from recommender.config.spec import load_spec
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
    parser.add_argument("--spec", type=Path, default=REPO / "recommender" / "demo" / "search_space.yaml")
    parser.add_argument("--limit", type=int, default=None, help="Documents per task (default: the suite's).")
    args = parser.parse_args()
    spec = load_spec(args.spec)
    use_case = load_use_case(spec.use_case)  # load_spec made the spec's paths absolute
    source = ModelSource.resolve(spec.model.source, base_dir=args.spec.resolve().parent)
    manager = task_manager(use_case)
    methods = [get_scheme(m) for ms in spec.space.schemes.values() for m in ms if m != "baseline"]

    runs = {}
    for adaptive in (False, True):
        with tempfile.TemporaryDirectory() as tmp:
            evaluator = QualityEvaluator(
                use_case,
                ModelCache(source, DeviceInfo("cpu")),
                cache=QualityCache(Path(tmp)),
                limit=args.limit,
                manager=manager,
                adaptive=adaptive,
            )
            evaluator.evaluate(get_scheme("baseline"))
            started, docs_before = time.perf_counter(), evaluator.docs_evaluated
            verdicts = {m.name: {c.name: c.verdict for c in evaluator.evaluate(m).checks} for m in methods}
            runs[adaptive] = (evaluator.docs_evaluated - docs_before, time.perf_counter() - started, verdicts)

    (full_docs, full_s, full_v), (ad_docs, ad_s, ad_v) = runs[False], runs[True]
    print(f"methods: {', '.join(m.name for m in methods)}; suite {use_case.name}, limit {args.limit or 'suite'}")
    print(f"full evaluation:     {full_docs} documents, {full_s:.0f} s")
    print(f"adaptive evaluation: {ad_docs} documents, {ad_s:.0f} s  ({100 * (1 - ad_docs / full_docs):.0f} % fewer)")
    agree = sum(full_v[m][c] == ad_v[m][c] for m in full_v for c in full_v[m])
    total = sum(len(v) for v in full_v.values())
    print(f"verdicts that agree: {agree}/{total}")
    for m in full_v:
        if full_v[m] != ad_v[m]:
            print(f"  {m}: full {full_v[m]} adaptive {ad_v[m]}")


if __name__ == "__main__":
    main()
