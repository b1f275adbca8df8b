"""README.md and docs/*.md name paths that exist and command lines the CLI takes; the generated reference tables
build from the code; and the checker catches a renamed path (run on a copy of the repository)."""

from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path
from types import ModuleType
from typing import Annotated

import pytest
import typer

from recommender.cli.main import app
from tests.conftest import REPO
from tests.docs.claims import (
    CommandLine,
    command_problem,
    command_problems,
    missing_code_paths,
    missing_paths,
    path_claims,
)

#: What a copy of the checkout leaves out: not the repository's files, or too large to copy for a file name.
_NOT_COPIED = shutil.ignore_patterns(
    ".git",
    ".venv",
    "mlruns",
    "site",
    "__pycache__",
    "*.egg-info",
    "*.safetensors",
    ".pytest_cache",
    ".ruff_cache",
    ".mypy_cache",
    ".hypothesis",
    "build",
    "dist",
)


def _references() -> ModuleType:
    """docs/references.py, the generators the site's hook runs (docs/ is not a package)."""
    spec = importlib.util.spec_from_file_location("docs_references", REPO / "docs" / "references.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_every_path_the_docs_name_exists() -> None:
    assert missing_paths(REPO) == []


def test_every_path_the_package_docstrings_and_comments_name_exists() -> None:
    assert missing_code_paths(REPO) == []


def test_every_command_line_the_docs_show_parses() -> None:
    assert command_problems(REPO, typer.main.get_command(app)) == []


def test_a_renamed_path_is_caught_on_a_copy(tmp_path: Path) -> None:
    copy = tmp_path / "repo"
    shutil.copytree(REPO, copy, ignore=_NOT_COPIED)
    assert missing_paths(copy) == []
    named = "recommender/engines/eligibility.py"
    assert named in set(path_claims(copy, copy / "docs" / "support-matrix.md"))
    (copy / named).rename(copy / "recommender/engines/who_launches.py")
    assert f"docs/support-matrix.md: `{named}` does not exist" in missing_paths(copy)
    (copy / "recommender/perf/model/memory.py").rename(copy / "recommender/perf/model/bytes.py")
    assert "recommender/config/candidate.py: `perf/model/memory.py` does not exist" in missing_code_paths(copy)


def test_a_missing_symbol_and_a_moved_module_are_caught(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "recommender" / "perf" / "catalog").mkdir(parents=True)
    (tmp_path / "recommender" / "perf" / "catalog" / "gpus.py").write_text("def load_catalog():\n    pass\n")
    (tmp_path / "README.md").write_text("`perf/catalog/gpus.py:load_catalog` and [plan](docs/plan.md)\n")
    cited = "`docs/source/quantization.md` @ 09d4c79"  # another project's file at a commit: not ours
    claims = "`perf/catalog.py`, `perf/catalog/gpus.py:load_prices`, `vllm/x.py`"
    (tmp_path / "docs" / "plan.md").write_text(f"{claims}, {cited}\n")
    assert missing_paths(tmp_path) == [
        "docs/plan.md: `perf/catalog.py` does not exist",
        "docs/plan.md: `perf/catalog/gpus.py:load_prices` does not exist",
    ]


@pytest.mark.parametrize(
    ("args", "whole", "problem"),
    [
        (("serch", "spec.yaml"), True, "no subcommand 'serch'"),
        (("quantize", "--model", "m", "--method", "fp8", "--out", "o"), False, "quantize has no option --method"),
        (("plan", "--model", "llama-3.1-70b", "--rps", "ten"), True, "Invalid value for '--rps'"),
        (("--loud", "search"), False, "unknown option before the subcommand"),
    ],
)
def test_a_command_the_cli_does_not_take_is_caught(args: tuple[str, ...], whole: bool, problem: str) -> None:
    found = command_problem(typer.main.get_command(app), CommandLine("docs/x.md", args, whole))
    assert found is not None and problem in found


def test_the_generated_references_come_from_the_code() -> None:
    from recommender.config.spec import spec_json_schema
    from recommender.engines import ENGINE_NAMES
    from recommender.quantize import all_schemes

    references = _references()
    keys = references.spec_keys_table()
    assert all(f"| `{key}` |" in keys for key in spec_json_schema()["properties"])
    assert "| `sla.ttft_p99_ms` |" in keys and "| `current.hardware` |" in keys
    fields = references.recommendation_fields()
    assert "| `winner` | [CandidateResult](#candidateresult) or null |" in fields and "### CandidateResult" in fields
    matrix = references.support_matrix()
    assert all(f"| `{name}` |" in matrix for name in all_schemes())
    fp8 = next(line for line in matrix.splitlines() if line.startswith("| `fp8-dynamic` |"))
    cells = [cell.strip() for cell in fp8.strip("|").split("|")][1:]
    header = [cell.strip() for cell in matrix.splitlines()[0].strip("|").split("|")][1:]
    assert cells[header.index(next(h for h in header if "a100-80gb" in h))] == "—"  # FP8 W8A8 needs 8.9
    assert set(cells[header.index(next(h for h in header if "h100-sxm" in h))].split(", ")) <= set(ENGINE_NAMES)
    page = references.fill("before\n<!-- generated: support-matrix -->\nafter")
    assert "<!-- generated" not in page and "| `fp8-dynamic` |" in page


def test_the_architecture_table_asks_the_shipped_registries() -> None:
    table = _references().architecture_support()
    qwen = next(line for line in table.splitlines() if "`Qwen3_5MoeForConditionalGeneration`" in line)
    assert qwen.endswith("| yes | yes | not checked | yes |")  # vllm, sglang, tgi (not read), trtllm
    assert "vllm-project/vllm `vllm/model_executor/models/registry.py` @ 62d4bc3c7" in table


def test_the_cli_reference_lists_every_command_and_option_of_the_app() -> None:
    from recommender.cli.main import app

    page = _references().cli_reference()
    group = typer.main.get_command(app)
    assert isinstance(group, typer.core.TyperGroup)
    for name, command in group.commands.items():
        section = page.split(f"## recommender {name}\n", 1)[1].split("\n## ", 1)[0]
        assert command.help is not None and " ".join(command.help.split()).split("\n")[0][:40] in section
        for param in command.params:
            if param.param_type_name == "option":
                assert f"| `{param.opts[0]}`" in section, (name, param.opts)
    assert "| `--verbose`, `-v` | flag | off |" in page and "`RECOMMENDER_VERBOSE`" in page
    plan = page.split("## recommender plan\n", 1)[1]
    assert "| `--prompt-tokens` | integer, ≥ 1, ≤ 10,000,000 | `512` |" in plan
    assert "| `--hardware` | text, repeatable | — |" in plan
    assert "| `--use-case` | path | `recommender/demo/use_case.yaml` |" in page  # a checkout path, not this machine's
    assert "<!-- generated" not in _references().fill("<!-- generated: cli-reference -->")


def test_the_cli_reference_renders_each_kind_of_parameter_of_a_toy_app() -> None:
    toy = typer.Typer(help="A toy.")

    @toy.command("run")
    def run(
        target: Annotated[Path, typer.Argument(help="What to run.")],
        rate: Annotated[float, typer.Option(min=0.5, help="Per second.")] = 2.0,
        size: Annotated[list[int] | None, typer.Option(help="Sizes (repeat).")] = None,
        name: Annotated[str, typer.Option("--name", help="The | name.")] = "x",
        resume: Annotated[bool, typer.Option(help="Go on.")] = True,
    ) -> None:
        """Run it.

        Second paragraph."""

    @toy.command("stop")
    def stop() -> None:
        """Stop it."""

    page = _references().cli_reference(toy)
    assert page.index("## recommender run") < page.index("## recommender stop")
    assert "Run it.\n\nSecond paragraph." in page and "`recommender run [OPTIONS] TARGET`" in page
    assert "| `TARGET` (argument) | path | required | What to run. |" in page
    assert "| `--rate` | number, ≥ 0.5 | `2.0` | Per second. |" in page
    assert "| `--size` | integer, repeatable | — | Sizes (repeat). |" in page
    assert '| `--name` | text | `"x"` | The \\| name. |' in page
    assert "| `--resume`, `--no-resume` | flag | `--resume` | Go on. |" in page
    assert "## recommender stop\n\nStop it.\n\n`recommender stop [OPTIONS]`\n\nNo options." in page


def test_the_cli_reference_page_is_in_the_site_nav() -> None:
    assert "cli.md" in (REPO / "mkdocs.yml").read_text(encoding="utf-8")
    assert "<!-- generated: cli-reference -->" in (REPO / "docs" / "cli.md").read_text(encoding="utf-8")
