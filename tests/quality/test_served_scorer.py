"""The quality evaluation's engine hook (``quality/served_scorer.py``): what goes through it and what stays in process.

The scorer here is a second real scorer, not the engine (the slow `tests/engines/test_search_through_engine_slow.py`
runs vLLM): it scores the documents with lm-eval on the in-process model under another name, so the figures must equal
the in-process evaluation's while the routing is seen: one call per served scheme with every task's whole budget, the
reference scored through it for a served scheme's comparison and in process for another's, separate cache entries,
and the result saying where its tasks were scored.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from recommender.device import DeviceInfo
from recommender.models.source import ModelSource
from recommender.quality.cache import QualityCache
from recommender.quality.evaluate import QualityEvaluator
from recommender.quality.lm_eval_runner import run_docs, task_manager
from recommender.quality.suite import load_use_case
from recommender.quantize import QuantScheme, get_scheme
from recommender.quantize.model_cache import ModelCache
from tests.conftest import write_suite


@dataclass
class OtherScorer:
    """Scores a scheme's documents with lm-eval on its own model cache; serves baseline and int8 only."""

    models: ModelCache
    suite_path: Path
    engine: str = "other-scorer 1.0"
    calls: list[tuple[str, dict[str, int]]] = field(default_factory=list)

    def serves(self, method: QuantScheme) -> bool:
        return method.name in ("baseline", "torchao-int8-wo")

    def score(self, method: QuantScheme, docs: dict[str, tuple[str, list[int]]]) -> dict[str, dict[int, list[float]]]:
        self.calls.append((method.name, {task: len(ids) for task, (_, ids) in docs.items()}))
        manager = task_manager(load_use_case(self.suite_path))
        model = self.models.get(method)
        return {
            task: {
                i: list(v)
                for i, v in run_docs(
                    model, self.models.tokenizer, manager, task=task, metric=metric, doc_ids=ids, batch_size=8
                ).items()
            }
            for task, (metric, ids) in docs.items()
        }


def _models(demo_model_dir: Path) -> ModelCache:
    return ModelCache(ModelSource.resolve(str(demo_model_dir), base_dir=demo_model_dir), DeviceInfo("cpu"))


def test_served_schemes_are_scored_through_the_scorer_and_the_others_in_process(
    demo_model_dir: Path, tmp_path: Path
) -> None:
    suite = write_suite(tmp_path / "suite.yaml", limit=8)
    cache = QualityCache(tmp_path / "cache")
    scorer = OtherScorer(_models(demo_model_dir), suite)
    through = QualityEvaluator(load_use_case(suite), _models(demo_model_dir), cache=cache, served=scorer)
    int8 = through.evaluate(get_scheme("torchao-int8-wo"))
    assert int8.device == "cpu: tasks through other-scorer 1.0, KL in process"
    # One call per served scheme, every task's whole budget: the reference (for int8's comparison) and int8.
    budgets = {t.task: through.budget(t) for t in through.use_case.tasks}
    assert scorer.calls == [("baseline", budgets), ("torchao-int8-wo", budgets)] and sum(budgets.values()) >= 8
    nf4 = through.evaluate(get_scheme("bnb-nf4"))  # not served: in process, its reference in process too
    assert nf4.device == "cpu" and len(scorer.calls) == 2

    # In process on the same cache: the reference's in-process documents are read back (nf4's comparison scored
    # them), int8's are scored again (its served entries are cached apart), and the figures are the same.
    here = QualityEvaluator(load_use_case(suite), _models(demo_model_dir), cache=cache)
    same = here.evaluate(get_scheme("torchao-int8-wo"))
    assert here.models.loads == 1 and 0 < here.docs_evaluated <= sum(budgets.values())  # int8's documents only
    assert [(c.name, c.value, c.baseline, c.delta) for c in int8.checks] == [
        (c.name, c.value, c.baseline, c.delta) for c in same.checks
    ]
