"""A spec's ``probe: {engine: vllm}``: the local candidates measured through the engine, what it prunes up front.

These run without the engine (the slow `tests/engines/test_search_through_engine_slow.py` starts it): the schemes
the CPU engine does not serve are pruned before anything loads, with its reason; the spec without ``probe`` names
the study it named before the key existed.
"""

from __future__ import annotations

import json
from pathlib import Path

from recommender.config.local_probe import LocalProbe
from recommender.engines.cpu_engine_schemes import CPU_ENGINE_SCHEMES, cpu_engine_refusal
from recommender.quantize import all_schemes, get_scheme
from tests.conftest import build_spec, run_cli_in_process, write_spec

LOCAL = {
    "space.hardware": ["local"],
    "space.schemes": {"bf16": ["baseline"], "int8": ["int8-w8a8"], "fp8": ["fp8-dynamic"], "int4": ["bnb-nf4"]},
    "space.speculative": None,
    "speculation": None,
    "current": {"precision": "bf16", "scheme": "baseline", "hardware": "local", "batch_size": 64},
    "local_device": {"price_per_hour_usd": 0.2, "price_source": "this machine"},
}


def test_the_engine_serves_the_schemes_measured_on_it_and_says_why_not_the_others() -> None:
    schemes = all_schemes()
    for name in CPU_ENGINE_SCHEMES:  # each a real scheme, served
        assert name in schemes and cpu_engine_refusal(name, schemes[name].precision) is None
    fp8 = cpu_engine_refusal("fp8-dynamic", get_scheme("fp8-dynamic").precision)
    assert fp8 is not None and "1,000x slower" in fp8 and "int8-w8a8" in fp8
    nf4 = cpu_engine_refusal("bnb-nf4", "int4")
    assert nf4 is not None and nf4.startswith("bnb-nf4 was not measured on vLLM's CPU build")


def test_a_dry_run_prunes_what_the_engine_does_not_serve_here(tmp_path: Path) -> None:
    spec = write_spec(tmp_path / "engine.yaml", {**LOCAL, "probe": {"engine": "vllm", "concurrency": [4, 1]}})
    done = run_cli_in_process("search", str(spec), "--dry-run", "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert answer["local_measured_by"] == "vllm"
    pruned = dict(answer["pruned"])
    assert {k.split("@")[0] for k in pruned} == {"fp8/fp8-dynamic", "int4/bnb-nf4"}
    assert all(why.startswith("runnable: ") and "(measured)" in why for why in pruned.values())
    assert {k.split("@")[0] for k in answer["measured_here"]} == {"bf16/baseline", "int8/int8-w8a8"}
    assert not list(tmp_path.glob("*.db"))  # nothing written


def test_the_in_process_probe_prunes_nothing_for_the_engine_and_keeps_the_study_name(tmp_path: Path) -> None:
    done = run_cli_in_process("search", str(write_spec(tmp_path / "t.yaml", LOCAL)), "--dry-run", "--json")
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert answer["local_measured_by"] == "transformers" and len(answer["measured_here"]) == 8  # 4 schemes x 2 sizes
    without = build_spec(LOCAL)
    explicit = build_spec({**LOCAL, "probe": {"engine": "transformers"}})
    assert without.probe is None and without.fingerprint() != explicit.fingerprint()
    assert build_spec().fingerprint() == build_spec({"probe": None}).fingerprint()


def test_levels_are_sorted_and_the_engine_is_named() -> None:
    probe = LocalProbe(engine="vllm", concurrency=[16, 1, 4])
    assert probe.concurrency == [1, 4, 16] and probe.through_engine
    assert not LocalProbe().through_engine
