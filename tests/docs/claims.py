"""What README.md and docs/*.md claim about the repository, checked: the paths they name exist, and the
`recommender ...` command lines they show name a real subcommand whose options parse.

A checker over a repository root (not over this checkout only), so a test can run it on a copy with a
path renamed and see the claim caught. The command lines are parsed by the real command-line app (click's
`make_context`, no command runs), so an option renamed in the code fails here too. Typer vendors its own click,
so the app's objects are typed loosely here and its errors are `typer.TyperException`.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import typer

#: Folders of the repository a backticked path may start with; anything else (`vllm/...`, `Qwen/...`) is
#: another project's path or a hub id.
TOP_LEVEL = ("recommender/", "benchmarks/", "tests/", "evals/", "search_spaces/", "docs/", ".ci/")
#: Files at the root a page may name.
ROOT_FILES = ("Makefile", "pyproject.toml", "README.md", "CHANGELOG.md", "mkdocs.yml")
#: Pages the site generates (docs/hooks.py): linked, never in the tree.
GENERATED = ("docs/changelog.md",)
_BACKTICKED = re.compile(r"`([^`\s]+)`(\s*@)?")
_LINKED = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")
_PATH_CHARS = re.compile(r"^[A-Za-z0-9_./<>*-]+(?::[A-Za-z_][A-Za-z0-9_]*)?$")
_FENCE = re.compile(r"^```.*?$(.*?)^```", re.M | re.S)


def pages(root: Path) -> list[Path]:
    """README.md and every docs page (CHANGELOG.md is history: it may name what no longer exists)."""
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


def _package_dirs(root: Path) -> tuple[str, ...]:
    """Subfolders of the package one or two levels down (`perf/`, `sim/`): a page may name a module relative to
    the package (`config/spec.py`) or to its layer (`sim/settle.py`)."""
    package = root / "recommender"
    return tuple(f"{d.name}/" for d in [*package.iterdir(), *package.glob("*/*")] if d.is_dir())


def _is_repo_path(text: str, package_dirs: tuple[str, ...]) -> bool:
    if not _PATH_CHARS.match(text) or "//" in text:
        return False
    return text in ROOT_FILES or text.startswith(TOP_LEVEL) or text.startswith(package_dirs)


def _exists(root: Path, path: str) -> bool:
    """The file or folder at `path` (a `<placeholder>` matches any name), and the `file.py:name` it defines."""
    if path in GENERATED:
        return True
    path, _, symbol = path.partition(":")
    pattern = re.sub(r"<[^>]+>", "*", path.rstrip("/"))
    bases = (
        [root]
        if path.startswith(TOP_LEVEL) or path in ROOT_FILES
        else [root / "recommender", *(root / "recommender").glob("*")]
    )
    found = [hit for base in bases for hit in base.glob(pattern)] if pattern else []
    if not symbol:
        return bool(found)
    defines = re.compile(rf"^\s*(?:def|class|async def)\s+{re.escape(symbol)}\b|^\s*{re.escape(symbol)}\s*[:=]", re.M)
    return any(hit.is_file() and defines.search(hit.read_text(encoding="utf-8")) for hit in found)


def path_claims(root: Path, page: Path) -> Iterator[str]:
    """The repository paths `page` names: backticked (not a cited `path @ commit` of another project) and linked."""
    text = page.read_text(encoding="utf-8")
    package_dirs = _package_dirs(root)
    for match in _BACKTICKED.finditer(text):
        if match.group(2) is None and _is_repo_path(match.group(1), package_dirs):
            yield match.group(1)
    for fence in _FENCE.finditer(text):
        for token in re.findall(r"[A-Za-z0-9_./-]+", fence.group(1)):
            if token.startswith(TOP_LEVEL) and _PATH_CHARS.match(token):
                yield token.rstrip(".")
    for link in _LINKED.finditer(text):
        target = link.group(1)
        if "://" not in target and not target.startswith("mailto:"):
            resolved = (page.parent / target).resolve()
            yield str(resolved.relative_to(root.resolve())) if resolved.is_relative_to(root.resolve()) else target


def missing_paths(root: Path) -> list[str]:
    """One line per path a page names that the repository at `root` does not hold."""
    return [
        f"{page.relative_to(root)}: `{path}` does not exist"
        for page in pages(root)
        for path in dict.fromkeys(path_claims(root, page))
        if not _exists(root, path)
    ]


_CODE_PATH = re.compile(r"(?<![\w/.<>-])([A-Za-z0-9_.<>-]+/[A-Za-z0-9_./<>-]*[A-Za-z0-9_>/])(?![\w/])(\s*@)?")


def missing_code_paths(root: Path) -> list[str]:
    """One line per repository path a docstring or comment in the package names that does not exist (`docs/...`
    in the package is always another project's documentation, cited beside the engine facts it supports)."""
    package_dirs = _package_dirs(root)
    problems = []
    for module in sorted((root / "recommender").rglob("*.py")):
        for match in _CODE_PATH.finditer(module.read_text(encoding="utf-8")):
            path = match.group(1)
            cited = match.group(2) is not None or path.startswith("docs/")
            if not cited and _is_repo_path(path, package_dirs) and not _exists(root, path):
                problems.append(f"{module.relative_to(root)}: `{path}` does not exist")
    return problems


@dataclass(frozen=True)
class CommandLine:
    """A `recommender ...` line a page shows: its arguments, and whether it is whole (a code block's line, which
    must parse) or a fragment of prose (whose subcommand and option names must exist)."""

    page: str
    args: tuple[str, ...]
    whole: bool


_SHELL_END = {"|", "||", "&&", ";", ">", "2>", ">>", "2>&1", "&"}


def _after_recommender(line: str) -> tuple[str, ...] | None:
    try:
        tokens = shlex.split(line.replace("\\\n", " "), comments=True)
    except ValueError:
        return None
    for i, token in enumerate(tokens):
        if token == "recommender" or token.endswith("/recommender"):
            args = []
            for arg in tokens[i + 1 :]:
                if arg in _SHELL_END:
                    break
                if arg.endswith(";"):  # `recommender gate ... v1; echo "exit $?"`
                    args.append(arg.rstrip(";"))
                    break
                args.append(arg[1:-1] if arg.startswith("[") and arg.endswith("]") else arg)  # [--json]: optional
            return tuple(args)
    return None


def command_lines(page: Path, root: Path) -> Iterator[CommandLine]:
    text = page.read_text(encoding="utf-8")
    name = str(page.relative_to(root))
    for fence in _FENCE.finditer(text):
        for line in fence.group(1).replace("\\\n", " ").splitlines():
            if re.search(r"(^|[\s/])recommender\s+-{0,2}[a-z]", line) and (args := _after_recommender(line)):
                yield CommandLine(name, args, whole=True)
    for match in re.finditer(r"`((?:[^`\s]*/)?recommender\s+[^`\n]+)`", _FENCE.sub("", text)):
        if (args := _after_recommender(match.group(1))) is not None:
            yield CommandLine(name, args, whole=False)


def _option_names(command: Any) -> set[str]:
    """The options `command` takes, both spellings of a flag, and the `--help` every command adds."""
    return {"--help"} | {opt for param in command.params for opt in (*param.opts, *param.secondary_opts)}


def command_problem(app: Any, line: CommandLine) -> str | None:
    """Why `line` is not a command the app takes (None when it is)."""
    args = list(line.args)
    while args and args[0].startswith("-"):  # the app's own options (--verbose) come before the subcommand
        if args.pop(0) not in _option_names(app):
            return f"{line.page}: `recommender {' '.join(line.args)}`: unknown option before the subcommand"
    if not args:
        return None
    command = app.commands.get(args[0])
    if command is None:
        return f"{line.page}: `recommender {' '.join(line.args)}`: no subcommand {args[0]!r}"
    rest = [a for a in args[1:] if not re.fullmatch(r"<[^>]*>|\.\.\.|[A-Z_]{3,}", a)]
    unknown = [a.split("=")[0] for a in rest if a.startswith("--") and a.split("=")[0] not in _option_names(command)]
    if unknown:
        return f"{line.page}: `recommender {' '.join(line.args)}`: {args[0]} has no option {unknown[0]}"
    if line.whole and "--help" not in rest:
        try:
            command.make_context(args[0], list(args[1:]))
        except typer.TyperException as exc:
            return f"{line.page}: `recommender {' '.join(line.args)}`: {exc.format_message()}"
    return None


def command_problems(root: Path, app: Any) -> list[str]:
    """One line per command line in the pages that the app refuses."""
    problems = (command_problem(app, line) for page in pages(root) for line in command_lines(page, root))
    return [problem for problem in problems if problem is not None]
