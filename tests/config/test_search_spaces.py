"""Every shipped search space and suite validates, and its lm-eval tasks exist (no data is fetched)."""

from __future__ import annotations

import pytest

from recommender.config.spec import load_spec
from recommender.quality.lm_eval_runner import check_tasks_known, task_manager
from recommender.quality.suite import load_use_case
from tests.conftest import REPO

SPACES = sorted((REPO / "search_spaces").glob("*.yaml"))


#: lm-eval's index of its built-in tasks built once in this process (tests/conftest.py), not once per space.
pytestmark = pytest.mark.usefixtures("shared_task_index")


@pytest.mark.parametrize("path", SPACES, ids=[p.stem for p in SPACES])
def test_search_space_validates_and_names_known_tasks(path) -> None:  # type: ignore[no-untyped-def]
    spec = load_spec(path)
    use_case = load_use_case(spec.use_case)
    check_tasks_known(use_case, task_manager(use_case))
