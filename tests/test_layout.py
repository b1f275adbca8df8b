"""The tree shows the design: packages import only the layers below them, and a scheme or an engine is added in its
own folder.

The layer order is written once, as import-linter contracts in pyproject.toml ([tool.importlinter]; read in
docs/architecture.md). The tree keeps them, and an upward import planted in a copy of the package (at module level,
inside a function, for a type only, in a shared leaf) or a package the order does not place is refused.

The extension test copies the package, adds a toy scheme (a new file in `quantize/` and its line in
`quantize/__init__.py`) and a toy engine (a new file in `engines/` and its line in `engines/__init__.py`),
and runs the copy: the spec, eligibility, the launch command, the search's performance evaluation and
`recommender estimate` all take them, with no other file touched.

The tests mirror the package: every folder of tests/ that holds tests is the folder of a package of recommender/
(tests/perf/sim/ tests recommender/perf/sim/), or one of the few named in `TESTS_WITHOUT_A_PACKAGE`.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Collection
from pathlib import Path

import pytest

from tests.conftest import DEMO_SPEC, warm_numba_cache

ROOT = Path(__file__).parents[1]
PACKAGE = ROOT / "recommender"
#: import-linter's command; `make lint` runs it on the contracts in pyproject.toml ([tool.importlinter]).
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")

#: Imports that break the layer order, each planted in a copy of the package: the file it is added to (appended to
#: an existing one), the text, and the edge the refusal names.
PLANTED = (
    (
        "perf/planted.py",
        "from recommender.quantize import get_scheme\n",
        "recommender.perf.planted -> recommender.quantize",
    ),
    (
        "quality/planted.py",
        "def claims() -> object:\n    from recommender.study import claims\n\n    return claims\n",
        "recommender.quality.planted -> recommender.study.claims",
    ),
    (
        "engines/planted.py",
        "from typing import TYPE_CHECKING\n\n"
        "if TYPE_CHECKING:\n    from recommender.config.candidate import Candidate\n",
        "recommender.engines.planted -> recommender.config.candidate",
    ),
    (
        "decision/rules.py",
        "\n\ndef _plant() -> None:\n    import recommender.report.render  # noqa: F401\n",
        "recommender.decision.rules -> recommender.report.render",
    ),
    (
        "provenance.py",
        "\n\ndef _plant() -> None:\n    from recommender.paths import cache_root  # noqa: F401\n",
        "recommender.provenance -> recommender.paths",
    ),
    ("planted/__init__.py", "", "recommender.planted"),  # a package the order does not place: refused (exhaustive)
)


def _copy_package(root: Path, *, numba_cache: bool = False) -> Path:
    """The package copied to `root/recommender` (caches and the demo's weights left out: nothing here reads them).

    With `numba_cache`, numba's compiled functions (the `.nbi`/`.nbc` files in `__pycache__`) come too: a copy that
    runs the simulation then loads them instead of compiling the loop again (30-40 s of CPU). numba checks each
    against its source file's modification time and size, which the copy keeps, so a stale one is compiled anew.
    """
    package = root / "recommender"

    def skipped(folder: str, names: list[str]) -> set[str]:
        if Path(folder).name == "__pycache__":
            return {n for n in names if not (numba_cache and n.endswith((".nbi", ".nbc")))}
        demo = Path(folder).name == "demo"
        return {n for n in names if (n == "__pycache__" and not numba_cache) or (demo and n in ("model", "model-v2"))}

    shutil.copytree(PACKAGE, package, ignore=skipped)
    return package


def _lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    """import-linter on the package under `root`, with the contracts of this checkout's pyproject.toml."""
    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache", "--no-logo", str(ROOT / "pyproject.toml")],
        capture_output=True,
        text=True,
        env=env,
        cwd=root,
        timeout=300,
    )


def test_the_tree_keeps_its_layers() -> None:
    run = _lint_imports(ROOT)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "0 broken" in run.stdout


@pytest.mark.parametrize("path,text,edge", PLANTED, ids=[edge for _, _, edge in PLANTED])
def test_an_upward_import_anywhere_is_refused(tmp_path: Path, path: str, text: str, edge: str) -> None:
    """At module level, inside a function, for a type only, in a leaf, or a package the order leaves out: refused,
    in a copy that passes before it is planted."""
    package = _copy_package(tmp_path)
    clean = _lint_imports(tmp_path)
    assert clean.returncode == 0, clean.stdout + clean.stderr
    target = package / path
    target.parent.mkdir(exist_ok=True)
    with target.open("a") as f:
        f.write(text)
    run = _lint_imports(tmp_path)
    assert run.returncode == 1 and edge in run.stdout, run.stdout + run.stderr


TOY_SCHEME = '''"""A toy scheme: the model cast to fp16, served through its own kernel family."""

from recommender.quantize.baseline import CastScheme

METHODS = (
    CastScheme(
        name="toy-fp16", precision="fp16", library="torch", bits_per_weight=16.0, weight_only=False,
        devices=frozenset({"cpu", "cuda"}), kernel_family="toy-16", dtype_name="float16",
        description="fp16 through the toy kernel family",
    ),
)
'''

TOY_ENGINE = '''"""A toy engine: its launch command, where it runs each family, and how it batches, in one module."""

from recommender.engines._base import EngineLaunch, Engine, LaunchSettings
from recommender.engines.kernels import Kernel
from recommender.perf.sim.engine_profiles import EngineProfile


class ToyEmitter(Engine):
    name = "toy"
    label = "Toy"
    sources = ("https://example.invalid/toy-serve",)
    kernels = (Kernel("bf16", "Toy bf16", (8, 0)), Kernel("toy-16", "Toy fp16", (7, 0), flag="toy16"))
    profile = EngineProfile("toy", max_num_batched_tokens=2048, mixed_prefill=True, max_num_seqs=128)

    def _emit(self, settings: LaunchSettings, flag: str) -> EngineLaunch:
        command = ["toy-serve", settings.model, "--max-seqs", str(settings.max_num_seqs)]
        return self._config(command=[*command, *(["--quant", flag] if flag else [])], notes=[])
'''

CHECK = """
import json
import yaml
from pathlib import Path
from recommender.config.spec import LatencySLA, Traffic, spec_from_mapping
from recommender.engines import ENGINE_NAMES, PROFILES, get_engine
from recommender.engines.eligibility import eligibility
from recommender.config.candidate import Candidate
from recommender.evaluation.performance import PerformanceEvaluator
from recommender.perf.catalog.architectures import load_architecture
from recommender.perf.catalog.gpus import load_catalog
from recommender.quantize import get_scheme

toy = get_scheme("toy-fp16")
h100 = load_catalog().get("h100-sxm")
demo = Path(DEMO_SPEC)
raw = yaml.safe_load(demo.read_text())
raw["space"]["schemes"] = {"fp16": ["toy-fp16"]}
raw["engines"] = ["toy"]
spec = spec_from_mapping(raw, spec_path=demo, label=str(demo))
answer = eligibility(toy, h100.device, ("vllm", "toy"))
evaluator = PerformanceEvaluator(load_catalog(), load_architecture("llama-3.1-8b")[1],
                                 Traffic(prompt_tokens=512, output_tokens=128, requests_per_second=2),
                                 LatencySLA(ttft_p99_ms=3000, tpot_p99_ms=200), engines=("toy",))
result = evaluator.evaluate(Candidate("fp16", "toy-fp16", "h100-sxm", 8))
print(json.dumps({
    "engines": list(ENGINE_NAMES), "spec_engines": spec.engines, "profile": PROFILES["toy"].max_num_batched_tokens,
    "launching": list(answer.engines), "refusals": dict(answer.refusals),
    "command": get_engine("toy").emit(__import__("recommender.engines", fromlist=["x"]).LaunchSettings(
        model="/m", method=toy, dtype="float16", tensor_parallel=1, max_num_seqs=8, max_num_batched_tokens=2048,
        kv_cache_dtype="auto", gpu_memory_utilization=0.9, max_model_len=640, device=h100.device)).command,
    "status": result.status, "result_engines": list(result.engines), "rps": result.serving.requests_per_s,
    "provenance": result.serving.provenance.detail,
}))
"""


def _copy_with_toys(root: Path) -> Path:
    """The package copied under `root` (with numba's cache), with the toy scheme and the toy engine added in their
    folders only."""
    warm_numba_cache()
    package = _copy_package(root, numba_cache=True)
    (package / "quantize" / "toy.py").write_text(TOY_SCHEME)
    init = package / "quantize" / "__init__.py"
    text = init.read_text().replace("_BACKENDS = (", "_BACKENDS = (toy, ", 1)
    init.write_text(text.replace("from recommender.quantize import ", "from recommender.quantize import toy, ", 1))
    (package / "engines" / "toy.py").write_text(TOY_ENGINE)
    init = package / "engines" / "__init__.py"
    text = init.read_text().replace("    TrtllmEngine(),\n", "    TrtllmEngine(),\n    ToyEmitter(),\n", 1)
    init.write_text(
        text.replace(
            "from recommender.engines.tgi",
            "from recommender.engines.toy import ToyEmitter\nfrom recommender.engines.tgi",
            1,
        )
    )
    changed = {
        p.relative_to(package).parts[0]
        for p in package.rglob("*.py")
        if not (PACKAGE / p.relative_to(package)).is_file()
        or (PACKAGE / p.relative_to(package)).read_bytes() != p.read_bytes()
    }
    assert changed == {"quantize", "engines"}, changed
    return root


def test_a_toy_scheme_and_a_toy_engine_are_added_in_their_folders(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(_copy_with_toys(tmp_path))}
    check = f"DEMO_SPEC = {str(DEMO_SPEC)!r}\n{CHECK}"
    run = subprocess.run(
        [sys.executable, "-c", check], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300
    )
    assert run.returncode == 0, run.stderr
    got = json.loads(run.stdout.strip().splitlines()[-1])
    assert got["engines"][-1] == "toy" and got["spec_engines"] == ["toy"] and got["profile"] == 2048
    assert got["launching"] == ["toy"] and got["refusals"]["vllm"] == "no toy-fp16 scheme"
    assert got["command"] == "toy-serve /m --max-seqs 8 --quant toy16"
    assert got["status"] != "pruned" and got["result_engines"] == ["toy"] and got["rps"] > 0
    assert "engine-agnostic step cost (no measured toy runs" in got["provenance"]
    estimate = subprocess.run(
        [
            sys.executable,
            "-m",
            "recommender.cli.main",
            "estimate",
            "--model",
            "llama-3.1-8b",
            "--hardware",
            "h100-sxm",
            "--scheme",
            "toy-fp16",
            "--engine",
            "toy",
            "--concurrency",
            "8",
            "--prompt-tokens",
            "512",
            "--output-tokens",
            "128",
            "--json",
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=300,
    )
    assert estimate.returncode == 0, estimate.stderr
    assert json.loads(estimate.stdout)["engine"] == "toy"


#: Folders of tests/ that test something other than a package of recommender/, each with why.
TESTS_WITHOUT_A_PACKAGE = {
    "docs": "README.md and docs/: the paths and command lines they quote, the references generated from the code",
}


def unmirrored(tests: Path, package: Path, allowed: Collection[str] = TESTS_WITHOUT_A_PACKAGE) -> list[str]:
    """The folders under `tests` (as paths relative to it) that hold tests but are no package under `package`.

    A folder holds tests when it is a Python package or has a test file; a data folder beside the tests (the
    bad-input corpus in tests/cli/bad_inputs/) is not one. A folder allowed keeps its whole subtree.
    """
    found = []
    for folder in sorted(p for p in tests.rglob("*") if p.is_dir() and p.name != "__pycache__"):
        relative = folder.relative_to(tests)
        if relative.parts[0] in allowed:
            continue
        holds_tests = (folder / "__init__.py").is_file() or any(folder.glob("test_*.py"))
        if holds_tests and not (package / relative / "__init__.py").is_file():
            found.append(relative.as_posix())
    return found


def test_every_tests_folder_is_a_package_of_the_tree() -> None:
    assert unmirrored(ROOT / "tests", PACKAGE) == [], "move the tests to the folder of the package they specify"


def test_a_tests_folder_without_its_package_is_named(tmp_path: Path) -> None:
    """A copy of tests/'s folders plus a folder for no package, one for a module rather than a package, and a data
    folder: the first two are named, nothing else."""
    tests = tmp_path / "tests"
    for folder in sorted(p for p in (ROOT / "tests").rglob("*") if p.is_dir() and p.name != "__pycache__"):
        copy = tests / folder.relative_to(ROOT / "tests")
        copy.mkdir(parents=True)
        for name in ("__init__.py", *(f.name for f in folder.glob("test_*.py"))):
            if (folder / name).is_file():
                (copy / name).touch()
    assert unmirrored(tests, PACKAGE) == []
    (tests / "foo").mkdir()
    (tests / "foo" / "test_foo.py").touch()
    (tests / "perf" / "pricing").mkdir()  # recommender/perf/pricing.py is a module: its tests sit in tests/perf/
    (tests / "perf" / "pricing" / "__init__.py").touch()
    (tests / "perf" / "sim" / "traces").mkdir()  # data beside the tests, no test in it
    (tests / "perf" / "sim" / "traces" / "rows.csv").touch()
    assert unmirrored(tests, PACKAGE) == ["foo", "perf/pricing"]
