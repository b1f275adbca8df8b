"""The one reader of the files a user hands the tool: specs, suites, catalogs, config.json.

Every such file is read here, so every one is refused the same way — one `BadInputError`
naming the file (and the line or key) — whatever is wrong with it: missing, a directory,
too large, not UTF-8 (UTF-16, binary), malformed, nested deeper than any real file, a YAML whose
anchors and aliases expand past `MAX_YAML_NODES` values (counted before expanding), a key
written twice (YAML and JSON loaders keep the last silently: a duplicated ``sla:`` would
loosen the SLA without a word), or the wrong kind at the top (a list where a mapping is
expected). Files the tool wrote itself (caches, evidence) are not read through here.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from recommender.errors import BadInputError

#: Largest input file read (bytes). A spec, suite or catalog is a few KiB, a config.json a few
#: dozen; 4 MiB leaves room for generous comments and refuses a wrong file (weights, a log) at once.
MAX_INPUT_BYTES = 4 * 1024 * 1024
#: Deepest nesting accepted. Real files nest 4-6 levels; a deeper file is generated or hostile, and
#: Python's recursive loaders would otherwise die with RecursionError.
MAX_DEPTH = 32
#: Most values (scalars, lists and mappings, aliases expanded) one YAML file may hold. A spec or catalog holds
#: hundreds; the bound is checked before construction, so an alias bomb is refused in milliseconds.
MAX_YAML_NODES = 200_000


class _UniqueKeyLoader(yaml.SafeLoader):
    """YAML's safe loader, refusing a mapping key written twice instead of keeping the last."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            try:
                duplicate = key in seen
            except TypeError:  # an unhashable key: the base loader reports it with its own mark
                break
            if duplicate:
                raise yaml.constructor.ConstructorError(
                    None, None, f"key {key!r} is written twice", key_node.start_mark
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def usable_path(path: Path, *, field: str) -> Path:
    """`path` if the operating system can look it up; a NUL byte, a name over 255 bytes or a path too long
    makes every stat raise (not answer "missing"), so such a path is refused here, once, naming the field."""
    try:
        if "\0" in str(path):
            raise ValueError("a NUL byte")
        path.exists()
    except (OSError, ValueError) as exc:
        reason = getattr(exc, "strerror", None) or str(exc)
        raise BadInputError(
            field,
            f"{str(path)[:120]!r} is not a usable path ({reason})",
            "give a shorter path without control characters",
        ) from None
    return path


def expand_user(path: Path, *, field: str) -> Path:
    """`path` with ``~`` or ``~user`` expanded; a user this machine does not know is refused, not a RuntimeError."""
    try:
        return path.expanduser()
    except RuntimeError:
        raise BadInputError(
            field, f"{str(path)[:120]!r} starts with ~ but names no user here", "write the path out in full"
        ) from None


def read_text(path: Path, *, field: str, what: str = "file", max_bytes: int = MAX_INPUT_BYTES) -> str:
    """The file's text, refused (naming `field` and the file) when missing, over `max_bytes` or not UTF-8."""
    if not usable_path(path, field=field).exists():
        raise BadInputError(field, f"{what} {path} not found", "give the path of an existing file")
    if not path.is_file():
        raise BadInputError(field, f"{path} is not a regular file", f"give the path of the {what} itself")
    size = path.stat().st_size
    if size > max_bytes:
        raise BadInputError(
            field,
            f"{path} is {size} bytes, larger than any {what} ({max_bytes} at most)",
            "check that the path names the right file",
        )
    data = path.read_bytes()
    if data.startswith((b"\xff\xfe", b"\xfe\xff")) or b"\x00" in data:
        raise BadInputError(field, f"{path} is not UTF-8 text (UTF-16 or binary)", "save it as UTF-8")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise BadInputError(field, f"{path} is not UTF-8 text (byte {exc.start})", "save it as UTF-8") from None


def _depth(value: Any) -> int:
    """How deeply a loaded document nests (iteratively: the check itself must not recurse)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        node, level = stack.pop()
        deepest = max(deepest, level)
        if level > MAX_DEPTH:
            return level
        children = node.values() if isinstance(node, dict) else node if isinstance(node, list) else ()
        stack.extend((child, level + 1) for child in children)
    return deepest


def _checked_structure(value: Any, path: Path, field: str, expect: type | None, fmt: str) -> Any:
    if _depth(value) > MAX_DEPTH:
        raise BadInputError(field, f"{path} nests deeper than {MAX_DEPTH} levels", "flatten the file")
    if expect is not None and not isinstance(value, expect):
        kind = "mapping (key: value)" if expect is dict else expect.__name__
        raise BadInputError(
            field, f"{path} must be a {fmt} {kind}, not {_kind(value)}", "see the shipped examples for the layout"
        )
    return value


def _kind(value: Any) -> str:
    return {dict: "a mapping", list: "a list", str: "a string", type(None): "nothing"}.get(
        type(value), type(value).__name__
    )


def _flow_depth(text: str) -> int:
    """How deeply YAML flow collections ([...], {...}) nest, read without parsing: PyYAML's scanner is
    quadratic in that depth (a 4 MiB file of brackets would take hours), so it is bounded before parsing.
    Quoted strings and comments are skipped; a bracket counts only where a flow collection can start."""
    depth = deepest = 0
    quote, previous, in_comment, closed = "", "\n", False, ""
    for char in text:
        reopened = char == "'" and closed == "'"  # '' inside a single-quoted string is an escaped quote
        closed = ""
        if in_comment:
            in_comment = char != "\n"
        elif quote:
            if char == quote and not (quote == '"' and previous == "\\"):
                quote, closed = "", char
        elif reopened or (char in "'\"" and previous in " \t\n:,[{-"):
            quote = char
        elif char == "#" and previous in " \t\n":
            in_comment = True
        elif char in "[{" and previous in " \t\n:,[{-":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}" and depth:
            depth -= 1
        previous = char
    return deepest


class _TooLarge(Exception):
    """A YAML document whose expanded size or shape is past the limits (the message says which)."""


def _expanded_nodes(root: yaml.Node) -> int:
    """How many nodes `root` holds once every alias is expanded, counted on the composed graph before anything
    is constructed: an alias is one shared node there, so the count is linear in the text even when the
    expansion is exponential (a "billion laughs" file). A cycle (an alias inside its own anchor) is refused."""
    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, finished = stack.pop()
        children = _node_children(node)
        if finished:
            open_nodes.discard(id(node))
            sizes[id(node)] = 1 + sum(sizes[id(child)] for child in children)
            if sizes[id(node)] > MAX_YAML_NODES:
                raise _TooLarge(f"expands to over {MAX_YAML_NODES:,} values (anchors and aliases multiply)")
        elif id(node) not in sizes:
            if id(node) in open_nodes:
                raise _TooLarge("refers to itself (an alias inside its own anchor)")
            open_nodes.add(id(node))
            stack.append((node, True))
            stack.extend((child, False) for child in children if id(child) not in sizes)
    return sizes[id(root)]


def _node_children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return list(node.value) if isinstance(node, yaml.SequenceNode) else []


def _safe_load(text: str) -> Any:
    """One YAML document through the safe loader with the duplicate-key check (what ``yaml.safe_load`` does,
    with ``_UniqueKeyLoader``): python/* tags are refused, never constructed; its expanded size is bounded
    on the composed graph first, so no alias bomb is ever expanded."""
    loader = _UniqueKeyLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _expanded_nodes(node)
        return loader.construct_document(node)
    finally:
        loader.dispose()


def load_yaml(path: Path, *, field: str, what: str = "YAML file", expect: type | None = dict) -> Any:
    """A YAML file parsed safely, with duplicate keys, deep nesting and the wrong top-level kind refused."""
    text = read_text(path, field=field, what=what)
    if _flow_depth(text) > MAX_DEPTH:
        raise BadInputError(field, f"{path} nests deeper than {MAX_DEPTH} levels", "flatten the file")
    try:
        value = _safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise BadInputError(
            f"{field}: {where}" if field != str(path) else where,
            f"malformed YAML: {problem}",
            "fix the YAML at that line",
        ) from None
    except RecursionError:
        raise BadInputError(field, f"{path} nests deeper than {MAX_DEPTH} levels", "flatten the file") from None
    except _TooLarge as exc:
        raise BadInputError(
            field, f"{path} {exc}", "write the values out; a spec or catalog holds a few hundred"
        ) from None
    return _checked_structure(value, path, field, expect, "YAML")


def load_yaml_mapping(path: Path, *, field: str, what: str = "YAML file") -> dict[str, Any]:
    """`load_yaml` of a file whose top level must be a mapping, typed as one."""
    value = load_yaml(path, field=field, what=what, expect=dict)
    return value if isinstance(value, dict) else {}


def _unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [k for k, _ in pairs]
    repeated = sorted({k for k in keys if keys.count(k) > 1})
    if repeated:
        raise ValueError(f"key {repeated[0]!r} is written twice")
    return dict(pairs)


def _no_constant(name: str) -> float:
    raise ValueError(f"{name} is not a JSON number")


def load_json(
    path: Path, *, field: str, what: str = "JSON file", expect: type | None = dict, non_finite: bool = False
) -> Any:
    """A JSON file parsed strictly: duplicate keys, NaN/Infinity, deep nesting and the wrong kind refused.
    `non_finite`: ``Infinity``, ``-Infinity`` and ``NaN`` read as floats, as transformers writes and reads them
    in a config.json (its reader checks the fields it reads: ``config_fields``)."""
    text = read_text(path, field=field, what=what)
    constant = float if non_finite else _no_constant
    try:
        value = json.loads(text, object_pairs_hook=_unique_pairs, parse_constant=constant)
    except json.JSONDecodeError as exc:
        raise BadInputError(field, f"{path}:{exc.lineno} is not valid JSON: {exc.msg}", "fix the JSON") from None
    except ValueError as exc:
        raise BadInputError(field, f"{path}: {exc}", "fix the JSON") from None
    except RecursionError:
        raise BadInputError(field, f"{path} nests deeper than {MAX_DEPTH} levels", "flatten the file") from None
    return _checked_structure(value, path, field, expect, "JSON")
