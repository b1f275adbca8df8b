"""A real study whose disaggregated candidates decode at their own tensor-parallel degree: every pair of degrees
sampled once, each priced at its pools' degrees, and both degrees in results.json and recommendation.json."""

from __future__ import annotations

import json
from pathlib import Path

import optuna
import pytest
import yaml

from recommender.config.spec import load_spec
from recommender.report.artifacts import write_documents
from recommender.study import run_search
from tests.study.test_layout_search import _spec


@pytest.mark.slow  # about a minute on 2 cores: the demo model scored once, six candidates simulated
def test_a_search_over_two_degrees_prices_each_pool_at_its_own_and_records_both(
    tmp_path: Path, demo_model_dir: Path
) -> None:
    path = _spec(tmp_path, demo_model_dir)
    raw = yaml.safe_load(path.read_text())
    raw["space"] |= {"tensor_parallel": [1, 2]}
    raw["search"]["n_trials"] = 6  # the whole grid: per degree, aggregated and a decode pool at each degree
    path.write_text(yaml.safe_dump(raw))
    spec = load_spec(path)
    storage, tracking = f"sqlite:///{tmp_path}/o.db", f"sqlite:///{tmp_path}/m.db"
    outcome = run_search(
        spec, storage=storage, tracking_uri=tracking, output_root=tmp_path / "out", write_documents=write_documents
    )

    by_key = {r.key: r for r in outcome.results}
    assert len(by_key) == 6, sorted(by_key)
    for r in outcome.results:
        if r.candidate.layout == "disaggregated" and r.pools is not None:
            pools = (r.pools.prefill.tensor_parallel, r.pools.decode.tensor_parallel)
            assert pools == (r.candidate.tensor_parallel, r.candidate.decode_tp), r.key
    assert any(r.key.endswith("/disagg/decode-tp2") and r.pools is not None for r in outcome.results), by_key
    study = optuna.load_study(study_name=spec.study_name, storage=storage)
    for t in study.trials:
        assert ("decode_tensor_parallel" in t.params) == (t.params["layout"] == "disaggregated"), t.params
    results = json.loads((outcome.output_dir / "results.json").read_text())
    assert {r["candidate"]["decode_tensor_parallel"] for r in results} == {0, 1, 2}
    rec = json.loads((outcome.output_dir / "recommendation.json").read_text())
    winner = rec["winner"]
    assert "decode_tensor_parallel" in winner["candidate"]
    if winner["candidate"]["layout"] == "disaggregated":  # each pool's degree, and the launch at it
        c = winner["candidate"]
        decode_tp = c["decode_tensor_parallel"] or c["tensor_parallel"]
        assert winner["pools"]["decode"]["tensor_parallel"] == decode_tp
        assert winner["pools"]["prefill"]["tensor_parallel"] == c["tensor_parallel"]
