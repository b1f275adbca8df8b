"""The search: an Optuna study with one trial per candidate, thresholds as constraints, $/month at the traffic as
the objective.
Each trial's candidate is evaluated by `recommender.evaluation`.

- `storage.py`: Optuna's RDB storage (heartbeats, retries) and what the study stores;
- `claims.py`: work done once across workers, claimed in the study's own database;
- `prepare.py`: every check of the spec before the first trial, and the spec's round trip through the study;
- `preflight.py`: `check_search` — every check `search` makes before it writes (`--dry-run` runs it too);
- `space.py`: the categorical space, candidates from trial parameters and back, the neighbourhood;
- `worker.py`: the trial loop every process runs (`StudyWorker`);
- `coordinator.py`: `run_search` — open, work, drain, refine, finish;
- `join.py`: `run_worker` — `recommender worker` joining a study on another machine.
"""

from recommender.study.coordinator import SearchOutcome, run_search
from recommender.study.join import Joined, WorkerOutcome, join_study, run_worker
from recommender.study.preflight import check_search
from recommender.study.prepare import Prepared, prepare
from recommender.study.space import grid, grid_size
from recommender.study.storage import DEFAULT_STORAGE

__all__ = [
    "DEFAULT_STORAGE",
    "Joined",
    "Prepared",
    "SearchOutcome",
    "WorkerOutcome",
    "check_search",
    "grid",
    "grid_size",
    "join_study",
    "prepare",
    "run_search",
    "run_worker",
]
