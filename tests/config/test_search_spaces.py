"""Every shipped search space and suite validates, and its lm-eval tasks exist (no data is fetched)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from recommender.config.spec import load_spec
from recommender.quality.lm_eval_runner import check_tasks_known, task_manager
from recommender.quality.suite import load_use_case
from tests.conftest import REPO

SPACES = sorted((REPO / "search_spaces").glob("*.yaml"))


@pytest.fixture(scope="module", autouse=True)
def _one_index_per_module() -> Iterator[None]:
    """lm-eval's TaskManager indexes its thousands of built-in task YAMLs (about 7 s of CPU): the spaces whose suites
    name built-in tasks share the one `task_manager` builds, instead of each indexing them again."""
    import lm_eval.tasks

    real, built = lm_eval.tasks.TaskManager, dict[tuple[tuple[str, Any], ...], Any]()

    def shared(**settings: Any) -> Any:
        key = tuple(sorted(settings.items()))
        if key not in built:
            built[key] = real(**settings)
        return built[key]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(lm_eval.tasks, "TaskManager", shared)
        yield


@pytest.mark.parametrize("path", SPACES, ids=[p.stem for p in SPACES])
def test_search_space_validates_and_names_known_tasks(path) -> None:  # type: ignore[no-untyped-def]
    spec = load_spec(path)
    use_case = load_use_case(spec.use_case)
    check_tasks_known(use_case, task_manager(use_case))
