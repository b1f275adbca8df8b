"""Shared fixtures: the committed demo model, the demo suite, and offline settings for every test."""

from __future__ import annotations

import copy
import os
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import yaml

if TYPE_CHECKING:
    from recommender.config.spec import SearchSpec
    from recommender.perf.catalog.gpus import Catalog

REPO = Path(__file__).resolve().parents[1]
DEMO_MODEL = REPO / "recommender" / "demo" / "model"
DEMO_SPEC = REPO / "recommender" / "demo" / "search_space.yaml"
DAILY_SPEC = REPO / "search_spaces" / "daily-mix.yaml"
TASKS_DIR = REPO / "recommender" / "demo" / "tasks"

# Nothing in the tests may reach a hub.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TQDM_DISABLE", "1")


def _thread_share() -> int:
    """The cores one pytest-xdist worker may use: the machine's cores shared among the workers (at least one)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return max(1, cores // int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")))


# Under pytest-xdist (`make test` runs `-n auto`) each worker is a process with torch's default of one thread per
# core, so two workers on two cores run four busy OpenMP threads that spin waiting for each other: the quality
# tests took 2.5x as long. And `plan` spreads its rows over one spawned process per core
# (recommender/fleet/row_processes.py), each importing the package and loading the kernel tables again: the plan
# tests used a fifth more CPU. Each worker gets its share of the cores for both, set before torch is imported (the
# test modules import it, after this file) and inherited by the command-line processes the tests start; a value
# already set is kept.
if "PYTEST_XDIST_WORKER_COUNT" in os.environ:
    for _variable in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "RECOMMENDER_PLAN_PROCESSES"):
        os.environ.setdefault(_variable, str(_thread_share()))
    if "torch" in sys.modules:  # a plugin imported it first: too late for the variables
        sys.modules["torch"].set_num_threads(int(os.environ["OMP_NUM_THREADS"]))


def warm_numba_cache() -> None:
    """One small evaluation in this process, so that numba's cache of the compiled simulation loop is in the
    package's `__pycache__` folders: compiled and written here on a fresh clone (20-30 s of CPU), loaded where it is
    there already (about 1 s, with the imports)."""
    from recommender.config.candidate import Candidate
    from recommender.config.spec import LatencySLA, Traffic
    from recommender.evaluation.performance import PerformanceEvaluator
    from recommender.perf.catalog.architectures import load_architecture
    from recommender.perf.catalog.gpus import load_catalog

    evaluator = PerformanceEvaluator(
        load_catalog(),
        load_architecture("llama-3.1-8b")[1],
        Traffic(prompt_tokens=512, output_tokens=128, requests_per_second=2),
        LatencySLA(ttft_p99_ms=3000, tpot_p99_ms=200),
        engines=("vllm",),
    )
    evaluator.evaluate(Candidate("bf16", "baseline", "h100-sxm", 8))


_WARMING: list[Any] = []  # the controller's thread compiling the loop


def pytest_sessionstart(session: pytest.Session) -> None:
    """Under pytest-xdist, the controller compiles the simulation loop once, in a thread, while the workers start
    and collect; the tests are handed out when it is done (`pytest_xdist_node_collection_finished`). On a fresh
    clone each worker's first simulation otherwise compiled it at the same time: twice the CPU for one cache
    (test_compiled and test_gpu_mix on two workers: 52 s of CPU and 62 s wall, 35 s and 44 s with one compile,
    2026-12-06). Should the compile fail, the thread's error is reported and the tests that simulate fail on their
    own."""
    if not session.config.pluginmanager.has_plugin("dsession"):
        return
    import threading

    thread = threading.Thread(target=warm_numba_cache, name="warm-numba-cache", daemon=True)
    thread.start()
    _WARMING.append(thread)


@pytest.hookimpl(optionalhook=True)  # pytest-xdist's hook: absent under -p no:xdist
def pytest_xdist_node_collection_finished(node: Any, ids: list[str]) -> None:
    """The controller waits for its compile before the first test is handed out (a no-op once it is done)."""
    for thread in _WARMING:
        thread.join()


@pytest.fixture(scope="session", autouse=True)
def _private_cache(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Task data and quality results go to a per-session cache, never the user's."""
    os.environ["RECOMMENDER_CACHE_DIR"] = str(tmp_path_factory.mktemp("recommender-cache"))


@pytest.fixture(scope="session")
def shared_task_index() -> Iterator[None]:
    """lm-eval's TaskManager built once per set of arguments in this process (each pytest-xdist worker): indexing its
    thousands of built-in task YAMLs takes about 6 s of CPU, and the modules that need the full index (the shipped
    spaces' suites, the corpus's unknown task) would each index them again. The manager is only read (task names,
    task configs), so one serves every test; from the first test that asks, every later one in the process gets it.
    """
    import lm_eval.tasks

    real, built = lm_eval.tasks.TaskManager, dict[tuple[Any, ...], Any]()

    def shared(*args: Any, **settings: Any) -> Any:
        key = (args, tuple(sorted(settings.items())))
        if key not in built:
            built[key] = real(*args, **settings)
        return built[key]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(lm_eval.tasks, "TaskManager", shared)
        yield


@pytest.fixture(scope="session")
def demo_model_dir() -> Path:
    assert (DEMO_MODEL / "model.safetensors").is_file(), "the demo model is committed; run `make train-demo`"
    return DEMO_MODEL


#: The hourly prices these tests were written with (the old catalog's L4, A10G and T4 figures), given as a
#: user gives contract prices, in a hardware_catalog file: the default price set (RunPod Secure Cloud,
#: recommender/perf/catalog/price_sets.yaml) lists none of these GPUs.
CONTRACT_PRICES = "accelerators:\n" + "".join(
    f"  {gpu}: {{price_per_hour_usd: {usd}, price_source: test contract}}\n"
    for gpu, usd in (("l4", 0.44), ("a10g", 1.006), ("t4", 0.526))
)


def write_contract_prices(path: Path) -> Path:
    """A hardware_catalog file pricing the L4, A10G and T4 at the figures the tests were written with."""
    path.write_text(CONTRACT_PRICES, encoding="utf-8")
    return path


@pytest.fixture(scope="session")
def contract_catalog(tmp_path_factory: pytest.TempPathFactory) -> Catalog:
    """The built-in catalog (default price set) with the L4, A10G and T4 at CONTRACT_PRICES."""
    from recommender.perf.catalog.gpus import load_catalog  # here: the offline settings above come first

    return load_catalog(write_contract_prices(tmp_path_factory.mktemp("catalog") / "contract.yaml"))


def write_suite(path: Path, *, limit: int = 8, max_mean_kl: float = 0.02) -> Path:
    """A small copy of the demo suite for fast tests (same tasks, fewer documents)."""
    path.write_text(
        f"""
name: demo-python-code-small
include_path: {TASKS_DIR}
limit: {limit}
batch_size: 8
tasks:
  - task: demo_code_ppl
    metric: bits_per_byte
    higher_is_better: false
    threshold: {{max_relative_drop: 0.02}}
    limit: 4
  - task: demo_code_next_line
    metric: acc
    higher_is_better: true
    threshold: {{max_absolute_drop: 0.03}}
fidelity:
  max_mean_kl: {max_mean_kl}
  text_task: demo_code_ppl
  text_windows: 64
  window_tokens: 16
""",
        encoding="utf-8",
    )
    return path


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[str]:
    """A real PostgreSQL server on loopback for the session (skipped where none is installed): one per pytest-xdist
    worker, each on a port of its own (`benchmarks/many_workers.py:TemporaryPostgres`, which starts it again on
    another port when one is taken between its probe and the server's bind).

    initdb refuses to run as root, so as root the server runs as the `postgres` user.
    """
    import shutil

    from tests.benchmark_scripts import load_benchmark

    # On PATH, or where Debian's postgresql package puts them (.ci/run installs it when absent).
    debian = sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True)
    search = os.pathsep.join([os.environ.get("PATH", ""), *map(str, debian)])
    if shutil.which("initdb", path=search) is None or shutil.which("pg_ctl", path=search) is None:
        pytest.skip("PostgreSQL is not installed (no initdb/pg_ctl on PATH or in /usr/lib/postgresql/*/bin)")
    pytest.importorskip("psycopg")
    if os.geteuid() == 0 and shutil.which("runuser") is None:
        pytest.skip("running as root without runuser: cannot start PostgreSQL as another user")
    # Its folder is directly under the temp dir: pytest's own temp tree is private to root, so the postgres user
    # could not enter it.
    with load_benchmark("many_workers").TemporaryPostgres() as server:
        yield server.url


@pytest.fixture()
def postgres_url(postgres_server: str, request: pytest.FixtureRequest) -> str:
    """A fresh database on the session's server, named after the test."""
    import re

    import psycopg

    name = re.sub(r"[^a-z0-9_]", "_", request.node.name.lower())[:60]
    with psycopg.connect(f"{postgres_server}/postgres", autocommit=True) as connection:
        connection.execute(f'DROP DATABASE IF EXISTS "{name}"')
        connection.execute(f'CREATE DATABASE "{name}"')
    return f"{postgres_server}/{name}"


def spec_mapping(changes: Mapping[str, Any] | None = None, *, base: Path = DEMO_SPEC) -> dict[str, Any]:
    """The one spec factory: a shipped spec (`base`) as a mapping, its relative paths (model, use case, catalog)
    made absolute so it can be written anywhere, with each dotted key of `changes` set ("space.schemes"; a
    value of None removes the key)."""
    data: dict[str, Any] = yaml.safe_load(base.read_text(encoding="utf-8"))
    for section, key in (("model", "source"), (None, "use_case"), (None, "hardware_catalog")):
        node = data[section] if section else data
        value = node.get(key) if isinstance(node, dict) else None
        if isinstance(value, str) and (base.parent / value).exists():
            node[key] = str((base.parent / value).resolve())
    for dotted, value in (changes or {}).items():
        node = data
        *parents, leaf = dotted.split(".")
        for key in parents:
            node = node.setdefault(key, {})
        if value is None:
            node.pop(leaf, None)
        else:
            node[leaf] = value
    return data


def write_spec(path: Path, changes: Mapping[str, Any] | None = None, *, base: Path = DEMO_SPEC) -> Path:
    """`spec_mapping(changes, base=base)` written to `path` (a YAML file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(spec_mapping(changes, base=base)), encoding="utf-8")
    return path


def build_spec(changes: Mapping[str, Any] | None = None, *, base: Path = DEMO_SPEC) -> SearchSpec:
    """`spec_mapping(changes, base=base)` validated as the search reads it (paths from `base`'s folder)."""
    from recommender.config.spec import spec_from_mapping

    return spec_from_mapping(spec_mapping(changes, base=base), spec_path=base.resolve(), label=base.name)


def with_value(raw: dict[str, Any], path: tuple[str, ...], value: Any) -> dict[str, Any]:
    """A deep copy of the spec mapping `raw` with the field at `path` set to `value` (mutation tests)."""
    data = copy.deepcopy(raw)
    node = data
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return data


def run_cli_in_process(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    """`recommender ARGS` run in this process from `cwd`: the real entry point (`recommender.cli.main.main`), its
    stdout, stderr and exit status as `subprocess.run` gives them.

    For refusals, which end before any work: a subprocess adds a second import of the package (0.7 s for a spec
    check, 3-5 s where the command imports torch, MLflow or the simulation) and checks nothing more. A few tests
    per command still run `python -m recommender.cli.main` to check the exit code end to end. An exception that
    escapes `main` is raised here (the test fails with its traceback) rather than printed.
    """
    import contextlib
    import io

    from recommender.cli import main as cli

    out, err, home = io.StringIO(), io.StringIO(), os.getcwd()
    code: int | str | None = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        old_argv, sys.argv = sys.argv, ["recommender", *args]
        os.chdir(cwd)
        try:
            cli.main()
        except SystemExit as exc:
            code = exc.code
        finally:
            os.chdir(home)
            sys.argv = old_argv
    returncode = code if isinstance(code, int) else (0 if code is None else 1)
    return subprocess.CompletedProcess(["recommender", *args], returncode, out.getvalue(), err.getvalue())
