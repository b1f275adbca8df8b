"""Bad input through the real CLI entry point: one line naming the field and the fix, exit code 2, no traceback.

The refusals run `main` in process (`run_cli_in_process`); the missing and malformed spec and `--help` run
`python -m recommender.cli.main` in a subprocess, for the exit code and the streams end to end.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO, run_cli_in_process, write_spec

SUITE = str(REPO / "recommender" / "demo" / "use_case.yaml")


def _subprocess(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    """`python -m recommender.cli.main ARGS`: the exit code and the streams end to end (a few tests below)."""
    return subprocess.run(
        [sys.executable, "-m", "recommender.cli.main", *args], capture_output=True, text=True, cwd=cwd, timeout=300
    )


#: The refusals run the entry point in this process (tests/conftest.py says why); `_subprocess` for the end to end.
_run = run_cli_in_process


def _spec_with(tmp_path: Path, **changes: object) -> Path:
    """The demo spec with dotted keys replaced, written with its paths made absolute."""
    return write_spec(tmp_path / "spec.yaml", changes)


def _assert_one_line_error(result: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, result.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]


def test_missing_spec_file(tmp_path: Path) -> None:
    _assert_one_line_error(_subprocess("search", str(tmp_path / "nope.yaml")), "nope.yaml", "not found")


def test_malformed_yaml_names_the_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: demo\nspace: [unclosed\n")
    _assert_one_line_error(_subprocess("search", str(bad)), "bad.yaml:", "malformed YAML")


@pytest.mark.parametrize(
    ("changes", "needles"),
    [
        (
            {"space.hardware": ["h100-sxm", "h1000"]},
            ("space.hardware[1]", "unknown accelerator 'h1000'", "did you mean"),
        ),
        ({"space.schemes": {"int4": ["bnb-nf5"]}}, ("space.schemes.int4", "unknown quantization scheme 'bnb-nf5'")),
        ({"space.schemes": {"int8": ["bnb-nf4"]}}, ("is a int4 scheme, listed under int8",)),
        ({"space.schemes": {"int3": ["bnb-nf4"]}}, ("space.schemes.int3",)),
        ({"traffic.prompt_tokens": -5}, ("traffic.prompt_tokens", "greater than 0")),
        ({"sla.tpot_p99_ms": "fast"}, ("sla.tpot_p99_ms",)),
        ({"speed": 3}, ("speed", "unknown key")),
        ({"current": None}, ("current", "required key is missing")),
        ({"model.source": "./no/such/dir"}, ("model.source", "not found")),
        ({"traffic.requests_per_second": -1}, ("traffic.requests_per_second", "greater than or equal to")),
        ({"sla.tpot_p99_ms": 0.01}, ("sla.tpot_p99_ms", "below one decode step on every searched GPU", "unit")),
        ({"space.kv_cache_dtypes": ["fp4"]}, ("space.kv_cache_dtypes[0]", "'auto' or 'fp8'")),
        (
            {"space.routing": ["round-robin", "load-aware"]},
            ("space.routing", "does not size the fleet behind a router", "recommender plan --spec"),
        ),
    ],
)
def test_bad_spec_fields(tmp_path: Path, changes: dict[str, object], needles: tuple[str, ...]) -> None:
    _assert_one_line_error(_run("search", str(_spec_with(tmp_path, **changes))), *needles)


@pytest.mark.parametrize(
    ("changes", "needles"),
    [
        (
            {"space.methods": {"bf16": ["baseline"]}},
            ("spec.yaml: space.schemes: given twice, as schemes and as methods (its old spelling)", "keep one"),
        ),
        (
            {"current.method": "baseline"},
            ("spec.yaml: current.scheme: given twice, as scheme and as method (its old spelling)", "keep one"),
        ),
    ],
    ids=["space.schemes", "current.scheme"],
)
def test_a_key_given_in_both_spellings_is_refused(
    tmp_path: Path, changes: dict[str, object], needles: tuple[str, ...]
) -> None:
    """The demo spec writes the new spellings; adding the old one beside them is one line, exit 2."""
    _assert_one_line_error(_run("search", str(_spec_with(tmp_path, **changes))), *needles)


def test_threshold_out_of_range_in_suite(tmp_path: Path) -> None:
    suite = yaml.safe_load((REPO / "recommender" / "demo" / "use_case.yaml").read_text())
    suite["include_path"] = str(REPO / "recommender" / "demo" / "tasks")
    suite["tasks"][0]["threshold"] = {"max_relative_drop": 1.5}
    suite_path = tmp_path / "suite.yaml"
    suite_path.write_text(yaml.safe_dump(suite))
    spec = _spec_with(tmp_path, use_case=str(suite_path))
    _assert_one_line_error(_run("search", str(spec)), "tasks[0].threshold.max_relative_drop", "less than or equal to 1")


@pytest.mark.slow  # minutes of plan or search on 2 cores: make test-slow
def test_unknown_lm_eval_task_suggests_names(tmp_path: Path) -> None:
    suite = yaml.safe_load((REPO / "recommender" / "demo" / "use_case.yaml").read_text())
    suite["include_path"] = str(REPO / "recommender" / "demo" / "tasks")
    suite["tasks"][1]["task"] = "demo_code_next_lines"
    suite_path = tmp_path / "suite.yaml"
    suite_path.write_text(yaml.safe_dump(suite))
    spec = _spec_with(tmp_path, use_case=str(suite_path))
    _assert_one_line_error(_run("search", str(spec)), "tasks[1].task", "demo_code_next_lines", "demo_code_next_line")


def test_help_explains_exit_codes() -> None:
    result = _subprocess("search", "--help")
    assert result.returncode == 0
    text = " ".join(result.stdout.split())  # rich wraps at the terminal width
    assert "Exit codes: 0 recommendation found, 1 no candidate met every threshold, 2 bad input" in text


def test_remote_code_needs_opt_in(tmp_path: Path, demo_model_dir: Path) -> None:
    import json
    import shutil

    model = tmp_path / "custom"
    shutil.copytree(demo_model_dir, model)
    config = json.loads((model / "config.json").read_text())
    config["auto_map"] = {"AutoConfig": "configuration_custom.CustomConfig"}
    config["model_type"] = "custom-remote"
    (model / "config.json").write_text(json.dumps(config))
    result = _run("eval", "--model", str(model), "--method", "bnb-nf4", "--use-case", SUITE)
    _assert_one_line_error(result, "--model", "trust_remote_code")


def test_eval_refuses_method_without_kernels_here(demo_model_dir: Path) -> None:
    result = _run("eval", "--model", str(demo_model_dir), "--method", "torchao-float8-dynamic", "--use-case", SUITE)
    _assert_one_line_error(result, "--method", "no cpu kernels")


def test_eval_refuses_pickle_weights_without_opt_in(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text("{}")
    (tmp_path / "pytorch_model.bin").write_bytes(b"\0")
    result = _run("eval", "--model", str(tmp_path), "--method", "bnb-nf4", "--use-case", SUITE)
    _assert_one_line_error(result, "--model", "pickle", "allow_pickle")


def test_catalog_entry_missing_a_field(tmp_path: Path) -> None:
    catalog = tmp_path / "catalog.yaml"
    catalog.write_text("accelerators:\n  my-gpu:\n    name: My GPU\n    vendor: nvidia\n    memory_gb: 24\n")
    spec = _spec_with(tmp_path, hardware_catalog=str(catalog))
    _assert_one_line_error(_run("search", str(spec)), "accelerators.my-gpu.", "required key is missing")


def test_unreachable_stores(tmp_path: Path) -> None:
    spec = str(_spec_with(tmp_path))
    no_server = _run("search", spec, "--tracking-uri", "http://127.0.0.1:9", cwd=tmp_path)
    _assert_one_line_error(no_server, "--tracking-uri", "http://127.0.0.1:9", "cannot be used")
    no_storage = _run("search", spec, "--storage", "sqlite:////proc/no/such/dir/optuna.db", cwd=tmp_path)
    _assert_one_line_error(no_storage, "--storage", "directory /proc/no/such/dir does not exist")
    assert not list(tmp_path.glob("mlruns/studies/*"))  # nothing half-written
    assert not (tmp_path / "mlruns").exists()  # refused before the tracking store was created
    assert no_server.stdout == "" and no_storage.stdout == ""  # no progress line before either refusal


def test_resume_needs_an_existing_study(tmp_path: Path) -> None:
    result = _run(
        "search",
        str(_spec_with(tmp_path)),
        "--resume",
        "--storage",
        f"sqlite:///{tmp_path}/o.db",
        "--tracking-uri",
        f"sqlite:///{tmp_path}/m.db",
        cwd=tmp_path,
    )
    _assert_one_line_error(result, "--resume", "no study", "drop --resume")


def test_a_model_name_no_filesystem_holds_is_bad_input() -> None:
    """A --model over 255 bytes was an OSError traceback (File name too long); it is one line naming the field."""
    result = _run(
        "plan",
        "--model",
        "a" * 400,
        "--prompt-tokens",
        "512",
        "--output-tokens",
        "256",
        "--rps",
        "10",
        "--ttft-ms",
        "1000",
        "--tpot-ms",
        "50",
        "--hardware",
        "l40s",
    )
    _assert_one_line_error(result, "--model", "no architecture")
