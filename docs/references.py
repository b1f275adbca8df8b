"""The reference tables the docs would otherwise copy by hand, generated from the code at doc-build time.

The tables that drift when written by hand: the spec's keys (from the JSON Schema `recommender schema` prints),
recommendation.json's fields (from the `Recommendation` type through the same pydantic adapter `serialization.to_data`
writes it with), which engine launches which scheme on which GPU generation (from the engines' `KERNELS` rows, asked
through `engines.eligibility.refusal`, the function the search itself asks), and which engine release serves which
2026 architecture (from the engines' shipped model registries, asked through
`engines.architecture_support.architecture_refusal`), and every command and option of `recommender` (from the Typer
app the command line parses with). `docs/hooks.py` puts them into the pages; `tests/docs/` checks them.
"""

from __future__ import annotations

import json
import typing
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

Schema = Mapping[str, Any]

#: The marker a page writes where a generated table goes, e.g. ``<!-- generated: spec-keys -->``.
MARKER = "<!-- generated: {name} -->"


def _cell(text: str) -> str:
    """Text safe inside one Markdown table cell: one line, pipes escaped, `<name>` shown rather than read as HTML."""
    return " ".join(text.split()).replace("|", "\\|").replace("<", "&lt;")


def _ref_name(ref: str) -> str:
    return ref.rsplit("/", 1)[-1]


def type_text(schema: Schema, *, link_defs: bool = False) -> str:
    """A JSON Schema's type in a few words: ``string``, ``array of number``, ``Candidate or null``."""
    if "$ref" in schema:
        name = _ref_name(schema["$ref"])
        return f"[{name}](#{name.lower()})" if link_defs else name
    if "anyOf" in schema:
        return " or ".join(type_text(option, link_defs=link_defs) for option in schema["anyOf"])
    if "enum" in schema:
        return " | ".join(json.dumps(value) for value in schema["enum"])
    if "const" in schema:
        return json.dumps(schema["const"])
    kind = schema.get("type", "any")
    if kind == "array":
        items = schema.get("prefixItems") or [schema.get("items", {})]
        return "array of " + ", ".join(type_text(item, link_defs=link_defs) for item in items)
    if kind == "object" and "additionalProperties" in schema:
        values = schema["additionalProperties"]
        return "map of " + (type_text(values, link_defs=link_defs) if isinstance(values, Mapping) else "any")
    return str(kind)


_BOUNDS = (("exclusiveMinimum", ">"), ("minimum", "≥"), ("exclusiveMaximum", "<"), ("maximum", "≤"))


def _number(value: float) -> str:
    return f"{value:,.0f}" if float(value).is_integer() and abs(value) < 1e9 else f"{value:g}"


def bounds_text(schema: Schema) -> str:
    """The numeric bounds a key holds to (", > 0, ≤ 10,000,000"), from it or from the non-null option of an anyOf."""
    options = [o for o in schema.get("anyOf", [schema]) if o.get("type") != "null"]
    found = [f"{sign} {_number(options[0][key])}" for key, sign in _BOUNDS if options and key in options[0]]
    return "".join(f", {bound}" for bound in found)


def _object_ref(schema: Schema) -> str | None:
    """The $defs name of the object a key holds (directly, optionally, or as a list of them), else None."""
    options = schema.get("anyOf", [schema])
    for option in options:
        if "$ref" in option:
            return _ref_name(option["$ref"])
        if option.get("type") == "array" and "$ref" in option.get("items", {}):
            return _ref_name(option["items"]["$ref"])
    return None


def _spec_rows(schema: Schema, defs: Schema, prefix: str, seen: frozenset[str]) -> Iterator[str]:
    required = set(schema.get("required", ()))
    for key, prop in schema.get("properties", {}).items():
        path = f"{prefix}{key}"
        default = f"`{json.dumps(prop['default'])}`" if "default" in prop and not _object_ref(prop) else ""
        need = "required" if key in required else default or "optional"
        kind = type_text(prop) + bounds_text(prop)
        yield f"| `{path}` | {_cell(kind)} | {_cell(need)} | {_cell(prop.get('description', ''))} |"
        nested = _object_ref(prop)
        if nested is not None and nested not in seen:
            is_list = prop.get("type") == "array" or any(o.get("type") == "array" for o in prop.get("anyOf", []))
            inner = f"{path}[]." if is_list else f"{path}."
            yield from _spec_rows(defs[nested], defs, inner, seen | {nested})


def spec_keys_table() -> str:
    """Every key of a spec file, nested keys dotted, with its type, default and the schema's description."""
    from recommender.config.spec import spec_json_schema

    schema = spec_json_schema()
    head = ["| key | type | required / default | what it is |", "|---|---|---|---|"]
    return "\n".join(head + list(_spec_rows(schema, schema.get("$defs", {}), "", frozenset()))) + "\n"


def _first_paragraph(text: str) -> str:
    return _cell(text.strip().split("\n\n", 1)[0]) if text else ""


def _fields_table(schema: Schema) -> list[str]:
    """A type's fields: every one is written; those with a default may be left out of a file read back."""
    rows = ["| field | type | when read back without it |", "|---|---|---|"]
    for key, prop in schema.get("properties", {}).items():
        absent = f"`{json.dumps(prop['default'])}`" if "default" in prop else "refused"
        rows.append(f"| `{key}` | {_cell(type_text(prop, link_defs=True))} | {_cell(absent)} |")
    return rows


def recommendation_fields() -> str:
    """recommendation.json's fields, one table per type it nests, from the schema pydantic serialises it with."""
    from pydantic import TypeAdapter

    from recommender.decision.recommendation import Recommendation

    schema = TypeAdapter(Recommendation).json_schema(mode="serialization")
    parts = ["### Recommendation", "", _first_paragraph(schema.get("description", "")), "", *_fields_table(schema)]
    for name, definition in sorted(schema.get("$defs", {}).items()):
        parts += ["", f"### {name}", "", _first_paragraph(definition.get("description", ""))]
        parts += ["", *(_fields_table(definition) if "properties" in definition else [f"`{type_text(definition)}`"])]
    return "\n".join(parts) + "\n"


def support_matrix() -> str:
    """Scheme x GPU generation: the engines that launch the scheme there as it was measured (— where none does)."""
    from recommender.engines import ENGINE_NAMES
    from recommender.engines.eligibility import refusal
    from recommender.perf.catalog.gpus import load_catalog
    from recommender.quantize import all_schemes

    catalog = load_catalog()
    by_device: dict[str, list[str]] = {}
    devices = {}
    for key, gpu in catalog.accelerators.items():
        by_device.setdefault(gpu.device.label, []).append(key)
        devices[gpu.device.label] = gpu.device
    labels = sorted(by_device, key=lambda label: (devices[label].kind, devices[label].compute_capability or (0, 0)))
    head = "| scheme | " + " | ".join(f"{label}: {', '.join(by_device[label])}" for label in labels) + " |"
    rows = [head, "|---|" + "---|" * len(labels)]
    for method in all_schemes().values():
        cells = []
        for label in labels:
            engines = [e for e in ENGINE_NAMES if refusal(e, method, devices[label]) is None]
            cells.append(", ".join(engines) or "—")
        rows.append(f"| `{method.name}` | " + " | ".join(cells) + " |")
    return "\n".join(rows) + "\n"


#: 2026 models and the ``architectures`` their config.json lists (read in aiconfigurator-core 0.12.0's
#: ``model_configs/<org>--<name>_config.json``, the hub configs it ships).
MODELS_2026 = (
    ("DeepSeek-V3.2", "DeepseekV32ForCausalLM"),
    ("DeepSeek-V4-Flash / -Pro", "DeepseekV4ForCausalLM"),
    ("Kimi-K2.5 / K2.6", "KimiK25ForConditionalGeneration"),
    ("Kimi-K3", "KimiK3ForConditionalGeneration"),
    ("GLM-5 / 5.1", "GlmMoeDsaForCausalLM"),
    ("MiniMax-M2.5 / M2.7", "MiniMaxM2ForCausalLM"),
    ("MiniMax-M3", "MiniMaxM3ForCausalLM"),
    ("MiniMax-M3 (nvidia NVFP4)", "MiniMaxM3SparseForConditionalGeneration"),
    ("Qwen3.5-27B / Qwen3.6-27B", "Qwen3_5ForConditionalGeneration"),
    ("Qwen3.5-35B-A3B / 122B-A10B / 397B-A17B", "Qwen3_5MoeForConditionalGeneration"),
    ("Llama-4-Scout / -Maverick", "Llama4ForConditionalGeneration"),
    ("Gemma-4-26B-A4B / 31B", "Gemma4ForConditionalGeneration"),
    ("Nemotron-3 Nano / Super / Ultra", "NemotronHForCausalLM"),
    ("gpt-oss-20b / -120b", "GptOssForCausalLM"),
    ("MiMo-V2-Flash", "MiMoV2FlashForCausalLM"),
    ("Step-3.7-Flash", "Step3p7FlashForCausalLM"),
)


def architecture_support() -> str:
    """2026 model x engine: whether the engine release's model registry lists the model's architecture, then where
    each registry was read (``recommender/engines/registries/``, through the function eligibility asks)."""
    from recommender.engines import ENGINE_NAMES
    from recommender.engines.architecture_support import architecture_refusal, registry

    registries = {engine: registry(engine) for engine in ENGINE_NAMES}
    head = "| model | architecture | " + " | ".join(
        engine if (known := registries[engine]) is None else f"{engine} {known.version}" for engine in ENGINE_NAMES
    )
    rows = [head + " |", "|---|---|" + "---|" * len(ENGINE_NAMES)]
    for model, architecture in MODELS_2026:
        cells = [
            "not checked"
            if registries[engine] is None
            else ("yes" if architecture_refusal(engine, [architecture]) is None else "no")
            for engine in ENGINE_NAMES
        ]
        rows.append(f"| {_cell(model)} | `{architecture}` | " + " | ".join(cells) + " |")
    rows.append("")
    for engine, known in registries.items():
        where = "its registry was not read: never refused on architecture"
        if known is not None:
            where = f"{known.version}, {known.repository} `{known.path}` @ {known.commit}"
        rows.append(f"- {engine}: {_cell(where)}")
    return "\n".join(rows) + "\n"


def _prose(text: str) -> str:
    """A help text as Markdown paragraphs: each paragraph on one line, `<name>` shown rather than read as HTML."""
    paragraphs = [" ".join(p.split()) for p in text.strip().split("\n\n")]
    return "\n\n".join(p.replace("<", "&lt;") for p in paragraphs if p)


def _annotation_type(annotation: Any) -> tuple[str, bool]:
    """A command-line parameter's Python annotation in words (``integer``, ``path``, ``flag``), and whether the option
    repeats (a list): what `--help` shows as ``<list[int]>``, in the words the spec's table uses."""
    options = [a for a in typing.get_args(annotation) or (annotation,) if a is not type(None)]
    if typing.get_origin(annotation) is list:
        return _annotation_type(typing.get_args(annotation)[0])[0], True
    if len(options) == 1 and options[0] is not annotation:
        return _annotation_type(options[0])
    names = {bool: "flag", int: "integer", float: "number", str: "text", Path: "path"}
    return names.get(annotation, getattr(annotation, "__name__", str(annotation))), False


def _bound(param: Any, name: str) -> float | None:
    """An option's `min` or `max`: on the parameter (typer with its own click) or on its click range type."""
    for holder in (param, getattr(param, "type", None)):
        value = getattr(holder, name, None)
        if isinstance(value, int | float) and not isinstance(value, bool):
            return value
    return None


def _option_bounds(param: Any) -> str:
    low, high = _bound(param, "min"), _bound(param, "max")
    return "".join(f", {sign} {_number(v)}" for v, sign in ((low, "≥"), (high, "≤")) if v is not None)


def _default_text(param: Any, repository: Path) -> str:
    """What an option is when not given: ``required``, the flag spelling in effect, or the default value (a path in
    the checkout relative to it, so the page reads the same on every machine)."""
    if param.required:
        return "required"
    default = param.default
    if getattr(param, "is_flag", False) and isinstance(default, bool):
        if param.secondary_opts:
            return f"`{param.opts[0] if default else param.secondary_opts[0]}`"
        return "on" if default else "off"
    if default is None or default == ():
        return "—"
    if isinstance(default, Path):
        inside = default.is_absolute() and default.is_relative_to(repository)
        return f"`{default.relative_to(repository) if inside else default}`"
    return f"`{json.dumps(default)}`"


def _parameter_row(param: Any, hints: Mapping[str, Any], repository: Path) -> str:
    """One option or argument of a command: its spelling(s), type and bounds, default, help (and environment
    variable)."""
    kind, repeats = _annotation_type(hints.get(param.name, str))
    if param.param_type_name == "argument":
        names = f"`{param.name.upper()}` (argument)"
    else:
        names = ", ".join(f"`{o}`" for o in [*param.opts, *param.secondary_opts])
    kind = ("flag" if getattr(param, "is_flag", False) else kind) + (", repeatable" if repeats else "")
    help_text = param.help or ""
    if param.envvar:
        help_text += f" Environment: `{param.envvar}`."
    return f"| {names} | {_cell(kind + _option_bounds(param))} | {_cell(_default_text(param, repository))} | " + (
        f"{_cell(help_text)} |"
    )


def _parameters_table(command: Any, function: Callable[..., Any], repository: Path) -> list[str]:
    """A command's parameters as `--help` lists them (hidden ones left out), typed from the function's annotations."""
    hints = typing.get_type_hints(function)
    rows = [
        _parameter_row(param, hints, repository)
        for param in command.params
        if not getattr(param, "hidden", False) and param.name != "help"
    ]
    if not rows:
        return ["No options."]
    return ["| option | type | default | what it does |", "|---|---|---|---|", *rows]


def _usage(name: str, command: Any) -> str:
    """The command's synopsis: ``recommender plan [OPTIONS]``, an argument bare when required, bracketed when not."""
    arguments = [p for p in command.params if p.param_type_name == "argument"]
    words = [f"recommender {name}", "[OPTIONS]"] + [
        p.name.upper() if p.required else f"[{p.name.upper()}]" for p in arguments
    ]
    return f"`{' '.join(words)}`"


def cli_reference(app: Any = None) -> str:
    """Every command of `recommender` (or of the Typer `app` given), in the order `--help` lists them: its help,
    synopsis, every option with its type, bounds, default and help, and its epilog; the options every command takes
    first. Read from the Typer app (the click command the command line itself parses with, and the command
    functions' annotations for the types), as vLLM generates its CLI reference from its parser: an option cannot be
    added or renamed without the page following."""
    import typer

    if app is None:
        from recommender.cli.main import app as recommender_app

        app = recommender_app

    repository = Path(__file__).resolve().parent.parent
    group: Any = typer.main.get_command(app)
    callback = app.registered_callback.callback if app.registered_callback is not None else None
    parts = [_prose(app.info.help or ""), "", "`recommender [OPTIONS] COMMAND [ARGS]...`", ""]
    if callback is not None:
        parts += ["Options every command takes, given before the command:", ""]
        parts += _parameters_table(group, callback, repository)
    functions = {info.name: info.callback for info in app.registered_commands}
    for name in group.list_commands(None):
        command, function = group.commands[name], functions[name]
        parts += ["", f"## recommender {name}", "", _prose(command.help or ""), "", _usage(name, command), ""]
        parts += _parameters_table(command, function, repository)
        if command.epilog:
            parts += ["", _prose(command.epilog)]
    return "\n".join(parts) + "\n"


#: Each marker's generator.
GENERATORS = {
    "spec-keys": spec_keys_table,
    "recommendation-fields": recommendation_fields,
    "support-matrix": support_matrix,
    "architecture-support": architecture_support,
    "cli-reference": cli_reference,
}


def fill(markdown: str) -> str:
    """`markdown` with each generator's marker replaced by its table (a page without markers is returned as is)."""
    for name, generate in GENERATORS.items():
        marker = MARKER.format(name=name)
        if marker in markdown:
            markdown = markdown.replace(marker, generate())
    return markdown
