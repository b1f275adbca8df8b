"""Hostile files and names, property-based (first filed in issue 32): one generator per class, each in `make test`.

- config.json fields (every field `ConfigFields` declares, on a dense and a MoE base): either refused in one
  line naming the field, or a shape whose every figure is a finite positive number; through `plan` too.
- catalog overrides (prices, keys with control characters, fields of the wrong kind, alias bombs inside).
- names and paths (control characters, NUL, components over 255 bytes) as `--model`, `--out`, `--plot`,
  `--output-dir`, a spec path and `search.study_name`: refused before any work, in one line.
- every error message is one line whatever its values hold.
- YAML anchors: expanded size counted before construction (a bomb refused in well under a second, a fair use
  of aliases still read); traces checked against the model's context, naming the first line past it;
  `+kv-fp8` given n times; checkpoint files given the modes of the umask.

`make test` draws 1,000 cases here (the `@settings` of each test says how many) in about 30 s.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any
from unittest import mock

import pytest
import yaml
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from recommender.errors import CONTROL_CHARACTERS, BadInputError
from recommender.input_files import MAX_YAML_NODES, load_yaml
from recommender.perf.catalog.architectures import ARCHITECTURES
from recommender.perf.catalog.config_fields import ConfigFields, check_config_fields
from recommender.perf.model.shape import ModelShape
from tests.cli.test_hostile_properties import BASES, Outcome, Reached, assert_clean, run_cli
from tests.conftest import DEMO_MODEL


def fast(n: int) -> settings:
    """`n` cases in `make test`: no deadline (two busy cores), no example database written into the checkout."""
    return settings(
        max_examples=n,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )


def _shipped(name: str) -> dict[str, Any]:
    raw: dict[str, Any] = json.loads((ARCHITECTURES / f"{name}.json").read_text(encoding="utf-8"))
    return {k: v for k, v in raw.items() if not k.startswith("_")}


#: A dense, a Mixtral and a Qwen-MoE base: every field the code reads is present in one of them.
CONFIG_BASES = {
    "dense": _shipped("llama-3.1-8b"),
    "mixtral": _shipped("mixtral-8x7b"),
    "qwen-moe": _shipped("qwen3-30b-a3b"),
}
FIELDS = sorted(ConfigFields.model_fields)
#: The read fields that are switches (Gemma-4's K-as-V full layers and MoE block beside the MLP).
_BOOLEAN_FIELDS = {"tie_word_embeddings", "attention_k_eq_v", "enable_moe_block"}
#: Values no config field takes: a number as text, a float, a bool, a list, a mapping, a sign, a huge count.
NEVER_A_FIELD = st.one_of(
    st.integers(min_value=1, max_value=10**6).map(str),
    st.floats(allow_nan=False, allow_infinity=False),
    st.just(True),
    st.lists(st.integers(), min_size=1, max_size=3).map(lambda v: ",".join(map(str, v))),
    st.just({"a": 1}),
    st.integers(max_value=-1),
    st.integers(min_value=10**10, max_value=10**30),
)
ANY_VALUE = st.one_of(
    NEVER_A_FIELD,
    st.integers(min_value=0, max_value=200_000),
    st.none(),
    st.lists(st.integers(min_value=-2, max_value=100), max_size=4),
)


def _shape_is_sane(shape: ModelShape) -> None:
    figures = [
        shape.total_params,
        shape.active_params,
        shape.kv_bytes_per_token(),
        shape.mlp_activation_width,
        shape.touched_body_params(1),
        shape.touched_body_params(4096),
        shape.attention_flops(8, 64),
    ]
    assert all(f > 0 for f in figures), figures
    assert shape.active_params <= shape.total_params


@fast(300)
@given(base=st.sampled_from(sorted(CONFIG_BASES)), name=st.sampled_from(FIELDS), value=ANY_VALUE)
def test_config_fields_are_refused_by_name_or_make_a_sane_shape(base: str, name: str, value: Any) -> None:
    """Class A, 300 cases: any value in any read field is refused naming that field, or prices a sane shape."""
    config = {**CONFIG_BASES[base], name: value}
    try:
        check_config_fields(config, field="--model")
    except BadInputError as exc:
        assert len(str(exc).splitlines()) == 1
        assert name in str(exc) or "config " in str(exc), str(exc)  # the field, or the rule tying it to others
        return
    assert not isinstance(value, str | dict | float), (name, value)
    assert not isinstance(value, bool) or name in _BOOLEAN_FIELDS, (name, value)
    try:
        shape = ModelShape.from_config(SimpleNamespace(**config))
    except BadInputError as exc:  # a MoE layout the MoE module refuses by field (a missing count, a period)
        assert len(str(exc).splitlines()) == 1
        return
    _shape_is_sane(shape)


@fast(60)
@given(base=st.sampled_from(sorted(CONFIG_BASES)), name=st.sampled_from(FIELDS), value=NEVER_A_FIELD)
def test_plan_refuses_a_config_field_of_the_wrong_kind_in_one_line(base: str, name: str, value: Any) -> None:
    """Class A through the CLI, 60 cases: a string, float, bool, mapping, negative or absurd value is refused."""
    assume(not (name in _BOOLEAN_FIELDS and isinstance(value, bool)))  # a yes/no field's own kind
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "config.json").write_text(json.dumps({**CONFIG_BASES[base], name: value}), encoding="utf-8")
        outcome = run_cli(["plan", "--model", str(Path(tmp) / "config.json"), "--hardware", "l40s"], Path(tmp))
    assert_clean(outcome, refused=True)
    assert name in outcome.err


# -- catalog overrides ----------------------------------------------------------------------------------------
KEYS = st.one_of(
    st.sampled_from(["h100-sxm", "l40s", "l4", "new-gpu"]),
    st.text(alphabet=st.characters(blacklist_categories=["Cs"]), min_size=1, max_size=12),
)
PRICE_FIELDS = st.sampled_from(["price_per_hour_usd", "memory_gb", "memory_bandwidth_gbps", "max_tensor_parallel"])
PRICES = st.one_of(
    st.sampled_from([0, -1, -0.0, 1e-300, 10**6, "1.5", True, None, [], {}]),
    st.floats(),
    st.floats(min_value=0.01, max_value=50),
)


@fast(80)
@given(key=KEYS, field=PRICE_FIELDS, value=PRICES, bomb=st.booleans())
def test_catalog_overrides_are_refused_in_one_line_or_planned(key: str, field: str, value: Any, bomb: bool) -> None:
    """Class D/E, 80 cases: a catalog override of any key and value (a zero price, a key holding a newline, an
    alias bomb beside it) is refused in one line before the plan, or planned."""
    doc = yaml.safe_dump({"accelerators": {key: {field: value}}}, allow_unicode=True)
    if bomb:
        doc += "x: &a [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]\n" + "".join(
            f"x{i}: &a{i} [{', '.join(['*a' if i == 0 else f'*a{i - 1}'] * 10)}]\n" for i in range(6)
        )
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "cat.yaml").write_text(doc, encoding="utf-8")
        spec = {**BASES["plan"][0], "hardware_catalog": str(Path(tmp) / "cat.yaml")}
        (Path(tmp) / "spec.yaml").write_text(yaml.safe_dump(spec), encoding="utf-8")
        outcome = run_cli(["plan", "--spec", str(Path(tmp) / "spec.yaml")], Path(tmp))
    assert_clean(outcome, refused=bomb or (field == "price_per_hour_usd" and _never_a_price(value)))


def _never_a_price(value: Any) -> bool:
    """A number no price can be: zero, negative, over the bound, infinite or NaN (other kinds: lax parsing)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    return not 0 < value <= 10_000


# -- names and paths ------------------------------------------------------------------------------------------
CONTROL = st.sampled_from(["\n", "\r", "\t", "\x1b[2J", "\x7f", "\x85", "\u2028", "\0"])
NAMES = st.one_of(
    st.tuples(st.text(alphabet="abc-_.", min_size=1, max_size=8), CONTROL, st.text(alphabet="xyz", max_size=8)).map(
        "".join
    ),
    st.integers(min_value=256, max_value=400).map(lambda n: "n" * n),
    st.text(alphabet=st.characters(blacklist_categories=["Cs"]), min_size=1, max_size=20),
)


def _hostile(name: str) -> bool:
    return any(c in name for c in "\n\r\t\x1b\x7f\x85\u2028\0") or len(name.encode()) > 255


#: Where the commands below start their work, besides those `run_cli` replaces.
MORE_WORK = (
    "recommender.quality.lm_eval_runner.task_manager",
    "recommender.cli.checkpoint_export.export_checkpoint",
    "recommender.report.artifacts.regenerate_from_run",
    "recommender.releases.history.load_releases",
)


def _run(args: list[str], cwd: Path) -> Outcome:
    with contextlib.ExitStack() as stack:
        for target in MORE_WORK:
            stack.enter_context(mock.patch(target, side_effect=Reached))
        return run_cli(args, cwd)


def _commands(tmp: str, name: str) -> list[list[str]]:
    return [
        ["quantize", "--model", str(DEMO_MODEL), "--scheme", "w4a16-rtn-g128", "--out", f"{tmp}/{name}"],
        ["compare", "--model", "m", "--plot", f"{tmp}/{name}", "--tracking-uri", f"sqlite:///{tmp}/m.db"],
        ["report", "0123456789abcdef", "--output-dir", f"{tmp}/{name}", "--tracking-uri", f"sqlite:///{tmp}/m.db"],
        ["plan", "--model", name],
        ["search", f"{tmp}/{name}"],
    ]


@fast(120)
@given(name=NAMES, which=st.integers(min_value=0, max_value=4))
def test_names_and_paths_are_refused_before_any_work(name: str, which: int) -> None:
    """Class B/C, 120 cases: a name with a control character, NUL or a component over 255 bytes, as an output,
    a plot, a report folder, a model or a spec path, is refused in one line before any work or write."""
    with tempfile.TemporaryDirectory() as tmp:
        outcome = _run(_commands(tmp, name)[which], Path(tmp))
    assert_clean(outcome, refused=_hostile(name))


@fast(60)
@given(name=NAMES)
def test_study_names_with_control_characters_are_refused(name: str) -> None:
    """Class B, 60 cases: `search.study_name` becomes a folder name: control characters and length refused."""
    spec = {**BASES["search"][0], "search": {**BASES["search"][0].get("search", {}), "study_name": name}}
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "spec.yaml").write_text(yaml.safe_dump(spec, allow_unicode=True), encoding="utf-8")
        outcome = run_cli(["search", str(Path(tmp) / "spec.yaml")], Path(tmp))
    assert_clean(outcome, refused=_hostile(name))


@fast(200)
@given(parts=st.lists(st.text(), min_size=2, max_size=3))
def test_every_error_is_one_line_whatever_it_quotes(parts: list[str]) -> None:
    """Class B, 200 cases: no value a message quotes can break it across lines or hold a control character."""
    text = str(BadInputError(*parts))
    assert len(text.splitlines()) == 1 and not CONTROL_CHARACTERS.search(text), repr(text)


# -- YAML anchors ---------------------------------------------------------------------------------------------
@fast(60)
@given(fan=st.integers(min_value=2, max_value=12), depth=st.integers(min_value=1, max_value=12))
def test_alias_expansion_is_bounded_before_construction(fan: int, depth: int, tmp_path: Path) -> None:
    """Class E, 60 cases: an alias tree of any fan-out and depth is read when it expands to at most
    `MAX_YAML_NODES` values and refused, in well under a second, when it expands past them."""
    lines = [f"l0: &l0 [{', '.join(['lol'] * fan)}]"]
    lines += [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * fan)}]" for i in range(1, depth + 1)]
    path = tmp_path / "doc.yaml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    lists = [1 + fan]  # each level's list once expanded: itself and its items
    for _ in range(depth):
        lists.append(1 + fan * lists[-1])
    expanded = 1 + sum(1 + size for size in lists)  # the mapping, and each level's key and list
    started = time.process_time()  # CPU time: a loaded machine does not fail it, a billion-node expansion would
    try:
        load_yaml(path, field="doc")
    except BadInputError as exc:
        assert "expands to over" in str(exc) and expanded > MAX_YAML_NODES, (expanded, str(exc))
        assert time.process_time() - started < 0.5
        return
    assert expanded <= MAX_YAML_NODES


# -- traces against the model's context -----------------------------------------------------------------------
@fast(60)
@given(
    lengths=st.lists(st.tuples(st.integers(1, 1500), st.integers(1, 600)), min_size=2, max_size=40),
    header=st.booleans(),
)
def test_a_trace_request_past_the_context_is_refused_naming_its_line(
    lengths: list[tuple[int, int]], header: bool
) -> None:
    """Class F, 60 cases: the first request whose prompt + output exceeds max_position_embeddings is named."""
    from recommender.config.traffic import TrafficProfile
    from recommender.perf.catalog.architecture_check import check_trace_fits

    with tempfile.TemporaryDirectory() as tmp:
        trace = Path(tmp) / "day.csv"
        rows = "".join(f"{i * 30},{p},{o}\n" for i, (p, o) in enumerate(lengths))
        trace.write_text(("arrival_s,prompt_tokens,output_tokens\n" if header else "") + rows, encoding="utf-8")
        traffic = SimpleNamespace(profile=TrafficProfile(trace=trace))
        over = [i for i, (p, o) in enumerate(lengths) if p + o > 1024]
        try:
            check_trace_fits(SimpleNamespace(max_position_embeddings=1024), traffic, field_prefix="")
        except BadInputError as exc:
            assert over and f"day.csv line {over[0] + 1 + header}:" in str(exc), str(exc)
            return
        assert not over


# -- modifiers and file modes ---------------------------------------------------------------------------------
@fast(40)
@given(times=st.integers(min_value=1, max_value=3000), base=st.sampled_from(["fp16", "baseline", "fp8-dynamic"]))
def test_kv_fp8_is_taken_once_and_refused_when_repeated(times: int, base: str) -> None:
    """Class G, 40 cases: `+kv-fp8` once is a method; n > 1 times one line, never a RecursionError."""
    from recommender.quantize import get_scheme

    name = base + "+kv-fp8" * times
    if times == 1:
        assert get_scheme(name).name == name
        return
    with pytest.raises(BadInputError, match=f"is given {times} times"):
        get_scheme(name, field="--scheme")


@fast(20)
@given(
    umask=st.sampled_from([0o022, 0o002, 0o077, 0o027, 0o000]),
    modes=st.lists(st.sampled_from([0o600, 0o644, 0o400, 0o666, 0o700]), min_size=1, max_size=4),
)
def test_checkpoint_files_get_the_modes_of_the_umask(umask: int, modes: list[int]) -> None:
    """Class H, 20 cases: whatever modes a writer chose, every file ends 0666 and every folder 0777 less the
    umask (the weights readable by whoever can read the config)."""
    from recommender.quantize.file_modes import apply_umask_modes

    previous = os.umask(umask)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp) / "ck"
            (root / "sub").mkdir(parents=True, mode=0o700)
            for i, mode in enumerate(modes):
                (root / f"f{i}").write_bytes(b"x")
                (root / f"f{i}").chmod(mode)
            apply_umask_modes(root)
            assert {p.stat().st_mode & 0o777 for p in root.rglob("f*")} == {0o666 & ~umask}
            assert {(root / "sub").stat().st_mode & 0o777, root.stat().st_mode & 0o777} == {0o777 & ~umask}
    finally:
        os.umask(previous)
