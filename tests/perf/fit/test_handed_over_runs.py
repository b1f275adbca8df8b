"""The handed-over H200 runs and audited MLPerf rows ship in the package, unchanged, with their source."""

from __future__ import annotations

import hashlib
from importlib import resources

from recommender.engines import PROFILES
from recommender.perf.fit.serving_runs import H200_RUNS, read_runs, release_line
from recommender.quantize import get_scheme

_FOLDER = resources.files("recommender.perf.fit") / "measured_runs"


def test_every_h200_row_replays_as_its_own_campaign_with_its_release_line() -> None:
    loaded = read_runs(H200_RUNS, schemes=get_scheme, profiles=PROFILES)
    assert loaded.skipped == {} and len(loaded.runs) == 199
    assert {r.campaign for r in loaded.runs} == {"aic-h200"}
    assert {r.hardware for r in loaded.runs} == {"h200"}
    assert {r.release for r in loaded.runs} == {"trtllm unrecorded", "vllm unrecorded", "sglang 0.5", "vllm 0.12"}


def test_release_lines_are_major_minor_and_an_empty_version_is_never_guessed() -> None:
    assert release_line("trtllm", "1.0.0rc3") == "trtllm 1.0"
    assert release_line("trtllm", "1.2.0rc6.post1") == "trtllm 1.2"
    assert release_line("sglang", "0.5.6.post2") == "sglang 0.5"
    assert release_line("vllm", "") == "vllm unrecorded"


def test_the_copies_are_the_handed_over_bytes_named_in_source_md() -> None:
    source = (_FOLDER / "SOURCE.md").read_text(encoding="utf-8")
    for name in (
        "serving_runs_h200.csv",
        "mlperf_v41_v51/cases.csv",
        "mlperf_v41_v51/mlperf_v41_llama2_70b_pcie_mi300x_b200.csv",
        "mlperf_v41_v51/mlperf_v51_rtxpro6000_l40s_b200_mi3xx.csv",
    ):
        digest = hashlib.sha256(_FOLDER.joinpath(*name.split("/")).read_bytes()).hexdigest()
        assert digest in source, name


def test_release_line_sets_are_off_by_default_and_keyed_by_line_when_on() -> None:
    from recommender.perf.fit.step_fit import FitSettings, coefficient_key

    run = read_runs(H200_RUNS, schemes=get_scheme, profiles=PROFILES).runs[0]
    assert coefficient_key(run, FitSettings()) == run.engine
    assert coefficient_key(run, FitSettings(release_lines=True)) == run.release
