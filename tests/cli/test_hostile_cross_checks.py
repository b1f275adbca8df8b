"""Hostile values checked against each other (first filed in issue 44), property-based: one generator per class.

- A. Values checked where they are used, against everything they depend on: each trace row against the shared
  prefix and the model's positions, each conversation's last turn (constant or started by a trace row), the
  speculation measurement's prompt and new tokens against the positions when speculation is searched.
- B. Canonical forms before duplicate checks: a setting and its spelled-out default (``ngram`` and ``ngram:4``,
  ``64`` and ``64.0``) are one choice, so listing both is refused; the `--scheme` spelling ``x+kv-fp8`` is
  refused in a spec, where the KV cache dtype is its own setting.
- C. The dry run makes every check the real command makes (one function, `study.preflight.check_search`):
  stores, folders, `--resume`, a study of another spec; the two answer with the same line, or both go on.
- D. The field named is the one the user wrote: `traffic.conversation`, `current.speculative`, `gate`'s
  `--candidate`/`--against` (it has no `--releases`).

Each refusal: one `error:` line, exit 2, nothing written, nothing printed, before any work (`run_cli`
replaces the work by a sentinel) and within two seconds once the libraries are imported. `make test` draws
191 cases (about a minute on two busy cores).
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any
from unittest import mock

import optuna
import pytest
import yaml
from hypothesis import assume, example, given
from hypothesis import strategies as st

from recommender.config.spec import load_spec
from recommender.speculation.methods import parse_speculative
from tests.cli.test_hostile_files_and_names import fast
from tests.cli.test_hostile_properties import Outcome, Reached, assert_clean, run_cli
from tests.conftest import build_spec, spec_mapping

#: The demo model's max_position_embeddings.
POSITIONS = 1024
#: CPU seconds a refusal may take in process (the libraries already imported): "within a second or two". CPU
#: time, not wall time, so a loaded machine does not fail it while a search that started would.
REFUSAL_S = 2.0


@pytest.fixture(scope="module", autouse=True)
def _imported(tmp_path_factory: pytest.TempPathFactory) -> None:
    """One search that reaches its work first: the libraries imported, lm-eval's task index built, so each case
    times its checks, not Python's imports."""
    outcome, _ = _run(["search", "{spec}"], tmp_path_factory.mktemp("warm"), spec_mapping())
    assert outcome.code == "reached", outcome.err


def _run(args: list[str], cwd: Path, spec: dict[str, Any] | None = None) -> tuple[Outcome, float]:
    """`recommender ARGS` in `cwd` ({spec} replaced by the written spec), the dry run's work replaced too."""
    if spec is not None:
        (cwd / "spec.yaml").write_text(yaml.safe_dump(spec, allow_unicode=True), encoding="utf-8")
    args = [a.replace("{spec}", str(cwd / "spec.yaml")).replace("{tmp}", str(cwd)) for a in args]
    with mock.patch("recommender.study.dry_run.dry_run", side_effect=Reached):
        started = time.process_time()
        outcome = run_cli(args, cwd)
        return outcome, time.process_time() - started


def _error(outcome: Outcome) -> str:
    return next((line for line in outcome.err.splitlines() if line.startswith("error:")), "")


def _refused(outcome: Outcome, seconds: float, *needles: str) -> None:
    assert_clean(outcome, refused=True)
    assert seconds < REFUSAL_S, f"refused after {seconds:.1f} s"
    for needle in needles:
        assert needle in _error(outcome), (needle, _error(outcome))


def _trace(cwd: Path, rows: list[tuple[int, int]], header: bool) -> str:
    text = "".join(f"{i * 30},{p},{o}\n" for i, (p, o) in enumerate(rows))
    (cwd / "day.csv").write_text(("arrival_s,prompt_tokens,output_tokens\n" if header else "") + text, encoding="utf-8")
    return str(cwd / "day.csv")


# -- A. values checked where they are used --------------------------------------------------------------------
ROWS = st.lists(st.tuples(st.integers(1, 1100), st.integers(1, 200)), min_size=2, max_size=12)


@fast(40)
@given(rows=ROWS, prefix=st.integers(1, 1000), header=st.booleans())
@example(rows=[(946, 1), (1100, 2)], prefix=1, header=False)  # the rows' mean (1025) past the positions
def test_each_trace_row_is_checked_against_the_shared_prefix(
    rows: list[tuple[int, int]], prefix: int, header: bool
) -> None:
    """A, 40 cases: a row no longer than the prefix is refused naming its line, though the trace's mean (the
    default prompt_tokens, all that was compared before) is longer; then a row past the context, by its line."""
    with tempfile.TemporaryDirectory() as tmp:
        trace = _trace(Path(tmp), rows, header)
        spec = spec_mapping({"traffic": {"profile": {"trace": trace}, "shared_prefix": {"tokens": prefix}}})
        outcome, seconds = _run(["plan", "--spec", "{spec}"], Path(tmp), spec)
    short = [i for i, (p, _) in enumerate(rows) if p <= prefix]
    over = [i for i, (p, o) in enumerate(rows) if p + o > POSITIONS]
    if short:
        _refused(outcome, seconds, "traffic.shared_prefix.tokens", f"day.csv line {short[0] + 1 + header} ")
    elif over:
        _refused(outcome, seconds, f"traffic.profile.trace: day.csv line {over[0] + 1 + header}:")
    else:
        assert_clean(outcome)
        assert outcome.code == "reached", outcome.err


@fast(30)
@given(
    prompt=st.integers(1, 1100),
    output=st.integers(1, 200),
    turns=st.integers(2, 12),
    message=st.integers(1, 300),
    rows=st.none() | ROWS,
)
def test_a_conversation_is_checked_at_its_last_turn_and_named_as_written(
    prompt: int, output: int, turns: int, message: int, rows: list[tuple[int, int]] | None
) -> None:
    """A and D, 30 cases: a conversation whose last turn (its history) passes the context is refused as
    `traffic.conversation`, never as `traffic.prompt_tokens`; with a trace, each row starts one and its last
    turn is checked with answers as long as the trace's longest."""
    conversation = {"turns": turns, "think_time_s": 10, "message_tokens": message}
    with tempfile.TemporaryDirectory() as tmp:
        if rows is None:
            traffic: dict[str, Any] = {"prompt_tokens": prompt, "output_tokens": output, "requests_per_second": 10}
            last = [prompt + (turns - 1) * (output + message) + output]
        else:
            traffic = {"profile": {"trace": _trace(Path(tmp), rows, header=True)}}
            longest = max(o for _, o in rows)
            last = [p + (turns - 1) * (longest + message) + longest for p, _ in rows]
        spec = spec_mapping({"traffic": {**traffic, "conversation": conversation}})
        outcome, seconds = _run(["plan", "--spec", "{spec}"], Path(tmp), spec)
    if max(last) > POSITIONS:
        _refused(outcome, seconds, "traffic.conversation", "exceed the model's 1024 positions")
        assert "traffic.prompt_tokens" not in _error(outcome)
    else:
        assert_clean(outcome)
        assert outcome.code == "reached", outcome.err


@fast(20)
@given(
    prompt=st.integers(8, 1500),
    new=st.integers(2, 600),
    searched=st.booleans(),
    in_current=st.booleans(),
    dry=st.booleans(),
)
def test_the_speculation_settings_are_checked_against_the_models_positions(
    prompt: int, new: int, searched: bool, in_current: bool, dry: bool
) -> None:
    """A, 20 cases: where speculation is searched (or runs today), a measurement whose prompt + new tokens pass
    the model's positions is refused by `search` and its dry run alike; unused settings are left alone."""
    changes: dict[str, Any] = {
        "speculation": {"prompt_tokens": prompt, "new_tokens": new},
        "space.speculative": ["none", "ngram"] if searched else ["none"],
        "current.speculative": "ngram:3" if in_current else "none",
    }
    with tempfile.TemporaryDirectory() as tmp:
        outcome, seconds = _run(["search", "{spec}", *(["--dry-run"] if dry else [])], Path(tmp), spec_mapping(changes))
    if (searched or in_current) and prompt + new > POSITIONS:
        _refused(outcome, seconds, "speculation:", f"({prompt} + {new}) exceed the model's 1024 positions")
    else:
        assert_clean(outcome)
        assert outcome.code == "reached", outcome.err


# -- B. canonical forms before duplicate checks ---------------------------------------------------------------
K = st.integers(1, 16)
SPECULATIVE = st.one_of(
    st.just("none"), st.just("ngram"), K.map(lambda k: f"ngram:{k}"), K.map(lambda k: f"ngram:{k:02d}")
)
#: A whole number as a YAML author may spell it: an int, a float with no fraction, a string of digits.
NUMBER = st.tuples(st.sampled_from([64, 128, 256, 8192]), st.sampled_from([int, float, str])).map(
    lambda pair: pair[1](pair[0])
)


def _canonical(field: str, value: Any) -> Any:
    if field == "speculative":
        method = parse_speculative(str(value))
        return "none" if method is None else method.k
    return int(value)


def _spellings(field: str, value: Any) -> list[Any]:
    """Every way of writing the setting `value` is."""
    canonical = _canonical(field, value)
    if field != "speculative":
        return [canonical, float(canonical), str(canonical)]
    if canonical == "none":
        return ["none"]
    return [f"ngram:{canonical}", f"ngram:{canonical:02d}", *(["ngram"] if canonical == 4 else [])]


@fast(40)
@given(field=st.sampled_from(["speculative", "batch_sizes", "max_num_batched_tokens"]), data=st.data())
def test_a_setting_and_its_spelled_out_default_are_one_choice(field: str, data: st.DataObject) -> None:
    """B, 40 cases: a list naming one setting twice in two spellings is refused naming the list; otherwise
    the study's choices are distinct settings (one spelling each)."""
    spelling = SPECULATIVE if field == "speculative" else NUMBER
    values = data.draw(st.lists(spelling, min_size=1, max_size=3, unique_by=lambda v: _canonical(field, v)))
    if data.draw(st.booleans(), label="one setting spelled twice"):  # half the cases: a repeat in another spelling
        again = data.draw(st.sampled_from(values))
        values.insert(
            data.draw(st.integers(0, len(values))), data.draw(st.sampled_from(_spellings(field, again)), label="again")
        )
    canonical = [_canonical(field, v) for v in values]
    with tempfile.TemporaryDirectory() as tmp:
        outcome, seconds = _run(["plan", "--spec", "{spec}"], Path(tmp), spec_mapping({f"space.{field}": values}))
    if len(set(canonical)) < len(canonical):
        _refused(outcome, seconds, f"space.{field}", "listed twice")
        return
    assert_clean(outcome)
    assert outcome.code == "reached", outcome.err
    from recommender.study.space import space_choices

    choices = space_choices(build_spec({f"space.{field}": values}))
    name = {"batch_sizes": "batch_size", "max_num_batched_tokens": "max_num_batched_tokens"}.get(field, field)
    if name in choices:
        assert len({_canonical(field, v) for v in choices[name]}) == len(choices[name]), choices[name]


@fast(15)
@given(
    methods=st.lists(
        st.sampled_from(["fp8-dynamic", "fp8-dynamic+kv-fp8", "fp8-block", "fp8-block+kv-fp8"]),
        min_size=1,
        max_size=3,
        unique=True,
    ),
    current=st.booleans(),
)
def test_the_kv_cache_dtype_is_its_own_setting_in_a_spec(methods: list[str], current: bool) -> None:
    """B, 15 cases: `x+kv-fp8` (the `--scheme` spelling) beside `x` and an fp8 KV dtype would be one candidate
    twice (it crashed the dry run after the simulation); in a spec it is refused naming the field and the fix."""
    changes: dict[str, Any] = {
        "space.schemes": {"bf16": ["baseline"], "fp8": methods},
        "space.kv_cache_dtypes": ["auto", "fp8"],
    }
    if current:
        changes["current.scheme"], changes["current.precision"] = methods[0], "fp8"
    with tempfile.TemporaryDirectory() as tmp:
        outcome, seconds = _run(["plan", "--spec", "{spec}"], Path(tmp), spec_mapping(changes))
    if any(m.endswith("+kv-fp8") for m in methods):  # space.schemes is checked before current.scheme
        _refused(outcome, seconds, "space.schemes.fp8:", "in a spec the KV cache dtype is its own setting")
    else:
        assert_clean(outcome)
        assert outcome.code == "reached", outcome.err


# -- C. the dry run makes every check of the real command -----------------------------------------------------
def _stored_study(path: Path, name: str, fingerprint: str | None) -> None:
    """A study in a SQLite file as a coordinator leaves it (its fingerprint and performance model), or bare."""
    from recommender.perf.step.calibrated import fit_digest
    from recommender.study.storage import PERF_MODEL_ATTR, SPEC_FINGERPRINT_ATTR

    study = optuna.create_study(study_name=name, storage=f"sqlite:///{path}", directions=["minimize"] * 2)
    if fingerprint is not None:
        study.set_user_attr(PERF_MODEL_ATTR, fit_digest())
        study.set_user_attr(SPEC_FINGERPRINT_ATTR, fingerprint)


STORES = ["none", "this spec", "another spec", "another study", "bare"]
OUTPUTS = ["fresh", "a file", "under /proc", "below a file"]


@fast(16)
@given(
    store=st.sampled_from(STORES),
    resume=st.booleans(),
    output=st.sampled_from(OUTPUTS),
    bad_spec=st.sampled_from(
        [None, {"space.speculative": ["ngram", "ngram:4"]}, {"speculation": {"prompt_tokens": 1000, "new_tokens": 64}}]
    ),
)
def test_the_dry_run_refuses_exactly_what_the_search_refuses(
    store: str, resume: bool, output: str, bad_spec: dict[str, Any] | None
) -> None:
    """C, 16 cases: `search --dry-run` and `search` on the same spec, store and folders give the same answer:
    the same one line, or both go on to their work; the store file is not touched by either."""
    outputs = {
        "fresh": "{tmp}/out",
        "a file": "{tmp}/spec.yaml",
        "under /proc": "/proc/recommender-out",
        "below a file": "{tmp}/spec.yaml/out",
    }
    answers = []
    for dry in (True, False):
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "spec.yaml"
            path.write_text(yaml.safe_dump(spec_mapping(bad_spec)), encoding="utf-8")
            db = Path(tmp) / "optuna.db"
            if store != "none":
                loaded = load_spec(path) if bad_spec is None else None  # as the command reads it, from its folder
                fingerprint = {"this spec": loaded.fingerprint() if loaded else "x", "another spec": "0123456789"}
                _stored_study(
                    db, loaded.study_name if loaded and store != "another study" else "other", fingerprint.get(store)
                )
            before = db.read_bytes() if db.exists() else b""
            args = [
                "search",
                "{spec}",
                "--storage",
                f"sqlite:///{db}",
                "--output-dir",
                outputs[output],
                *(["--resume"] if resume else []),
                *(["--dry-run"] if dry else []),
            ]
            outcome, seconds = _run(args, Path(tmp))
            assert (db.read_bytes() if db.exists() else b"") == before, "the store was written"
        assert_clean(outcome)
        if outcome.code == 2:
            assert seconds < REFUSAL_S, f"refused after {seconds:.1f} s"
        answers.append((outcome.code, _error(outcome).replace(str(tmp), "{tmp}")))
    assert answers[0] == answers[1], answers
    must_refuse = (
        bad_spec is not None
        or output != "fresh"
        or store == "another spec"
        or (resume and store in ("none", "another study", "bare"))
    )
    assert (answers[0][0] == 2) == must_refuse, answers


# -- D. the field named is the one written --------------------------------------------------------------------
@fast(10)
@given(engines=st.sampled_from([["sglang"], ["sglang", "tgi"]]), in_space=st.booleans())
def test_a_speculative_method_no_engine_launches_is_named_where_it_was_written(
    engines: list[str], in_space: bool
) -> None:
    """D, 10 cases: `current.speculative` is named as such, not as `space.speculative`."""
    changes = {
        "engines": engines,
        "space.speculative": ["none", "ngram"] if in_space else ["none"],
        "current.speculative": "ngram:2",
    }
    with tempfile.TemporaryDirectory() as tmp:
        outcome, seconds = _run(["search", "{spec}"], Path(tmp), spec_mapping(changes))
    _refused(outcome, seconds, "space.speculative:" if in_space else "current.speculative:")


@pytest.fixture(scope="module")
def release_store(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A real MLflow store holding finished study runs of model `m`: v1 and v2 under use case `u`, v3 under `w`
    (no artifacts: reading one is refused naming the release's flag)."""
    from mlflow import MlflowClient

    uri = f"sqlite:///{tmp_path_factory.mktemp('releases')}/mlflow.db"
    client = MlflowClient(tracking_uri=uri)
    experiment = client.create_experiment("recommender/m")
    for release, use_case in (("v1", "u"), ("v2", "u"), ("v3", "w")):
        run = client.create_run(
            experiment,
            tags={"recommender.model": "m", "recommender.release": release, "recommender.use_case": use_case},
        )
        client.set_terminated(run.info.run_id, "FINISHED")
    return uri


@fast(20)
@given(pair=st.lists(st.sampled_from(["v1", "v2", "v3", "v8", "v9"]), min_size=2, max_size=2, unique=True))
def test_gate_names_the_flag_of_the_release_it_refuses(release_store: str, pair: list[str]) -> None:
    """D, 20 cases: `gate` has no `--releases`: a missing release, releases under different use cases, a run
    without its artifacts are named by `--candidate` and/or `--against`, as the user wrote them."""
    candidate, against = pair
    known = {"v1": "u", "v2": "u", "v3": "w"}
    with tempfile.TemporaryDirectory() as tmp:
        outcome, seconds = _run(
            ["gate", "--model", "m", "--candidate", candidate, "--against", against, "--tracking-uri", release_store],
            Path(tmp),
        )
    missing = [flag for flag, rel in (("--candidate", candidate), ("--against", against)) if rel not in known]
    if missing:
        expected = "/".join(missing) + ": no finished study"
    elif known[candidate] != known[against]:
        expected = "--candidate/--against: the releases were evaluated under different use cases"
    else:
        expected = "--candidate: study run"
    assume(outcome.code != "reached")
    _refused(outcome, seconds, f"error: {expected}")
    assert "--releases" not in _error(outcome)
