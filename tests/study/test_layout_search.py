"""A real study over both layouts: Optuna samples the layout, a disaggregated candidate is priced by the plan's
pool planner (prefill + decode pools, workers from the traffic), shares its scheme's one quality evaluation,
and reaches results.json, recommendation.json and MLflow with both pools and their launch."""

from __future__ import annotations

import json
from pathlib import Path

import optuna
import pytest
import yaml
from mlflow import MlflowClient

from recommender.config.spec import load_spec
from recommender.perf.catalog.gpus import load_catalog
from recommender.perf.pricing import HOURS_PER_MONTH
from recommender.report.artifacts import write_documents
from recommender.study import run_search
from tests.conftest import write_spec, write_suite


def _spec(tmp_path: Path, demo_model_dir: Path) -> Path:
    suite = write_suite(tmp_path / "suite.yaml", limit=6)
    return write_spec(
        tmp_path / "layouts.yaml",
        {
            "name": "layouts",
            "model": {"source": str(demo_model_dir), "release": "test"},
            "use_case": str(suite),
            "traffic": {"prompt_tokens": 900, "output_tokens": 64, "requests_per_second": 200},
            "sla": {"ttft_p99_ms": 1000, "tpot_p99_ms": 30},
            "space": {
                "schemes": {"bf16": ["baseline"]},
                "hardware": ["h100-sxm"],
                "batch_sizes": [64],
                "layout": ["aggregated", "disaggregated"],
                "link": "nvlink",
            },
            "current": {"precision": "bf16", "scheme": "baseline", "hardware": "h100-sxm", "batch_size": 64},
            "engines": ["vllm"],
            "search": {"n_trials": 2, "seed": 0},
            "speculation": None,
        },
    )


@pytest.mark.slow  # about a minute on 2 cores: the demo model quantized, scored, simulated in both layouts
def test_a_search_over_both_layouts_prices_disaggregated_pools_with_their_launch(
    tmp_path: Path, demo_model_dir: Path
) -> None:
    spec = load_spec(_spec(tmp_path, demo_model_dir))
    storage, tracking = f"sqlite:///{tmp_path}/o.db", f"sqlite:///{tmp_path}/m.db"
    outcome = run_search(
        spec, storage=storage, tracking_uri=tracking, output_root=tmp_path / "out", write_documents=write_documents
    )

    by_layout = {r.candidate.layout: r for r in outcome.results}
    assert set(by_layout) == {"aggregated", "disaggregated"}
    agg, dis = by_layout["aggregated"], by_layout["disaggregated"]
    assert dis.status == "evaluated" and dis.pools is not None and dis.cost is not None, dis.broken
    pools = dis.pools
    assert pools.link == "nvlink" and pools.transfer_ms > 0 and pools.engine == "vllm"
    assert pools.prefill.tensor_parallel == pools.decode.tensor_parallel == 1 and pools.decode.batch_size == 64
    assert pools.prefill.estimate.workers >= 1 and pools.decode.estimate.workers >= 1
    assert dis.cost.accelerators == pools.gpus and dis.cost.replicas == pools.prefill.estimate.workers + (
        pools.decode.estimate.workers
    )
    assert dis.cost.usd_per_month == dis.cost.price_per_hour_usd * pools.gpus * HOURS_PER_MONTH
    assert dis.serving is not None and dis.serving.ttft_p99_high_ms is not None
    assert dis.serving.ttft_p99_high_ms <= spec.sla.ttft_p99_ms and not dis.broken
    # Both layouts serve one checkpoint: one quality evaluation, the same verdict.
    assert outcome.quality_evaluations == 1
    assert agg.quality is not None and dis.quality is not None and dis.quality.verdict == agg.quality.verdict
    # The launch: each pool's vLLM worker with its NIXL role, the proxy, and the Dynamo deployment.
    assert pools.launch is not None
    assert '"kv_role":"kv_producer"' in pools.launch.prefill and '"kv_role":"kv_consumer"' in pools.launch.decode
    assert "DynamoGraphDeployment" in pools.launch.dynamo

    # Optuna sampled the layout; MLflow logged it with the pools' parameters.
    study = optuna.load_study(study_name=spec.study_name, storage=storage)
    assert {t.params["layout"] for t in study.trials} == {"aggregated", "disaggregated"}
    client = MlflowClient(tracking_uri=tracking)
    children = client.search_runs(
        [client.get_run(outcome.parent_run_id).info.experiment_id],
        filter_string=f"tags.mlflow.parentRunId = '{outcome.parent_run_id}'",
    )
    logged = {c.data.params["layout"]: c.data.params for c in children}
    assert logged["disaggregated"]["decode_workers"] == str(pools.decode.estimate.workers)
    assert logged["disaggregated"]["link"] == "nvlink" and "prefill_workers" not in logged["aggregated"]

    # results.json and recommendation.json keep their keys and add the layout and both pools.
    results = json.loads((outcome.output_dir / "results.json").read_text())
    stored = {r["candidate"]["layout"]: r for r in results}
    assert stored["disaggregated"]["pools"]["decode"]["estimate"]["workers"] == pools.decode.estimate.workers
    assert stored["aggregated"]["pools"] is None
    rec = json.loads((outcome.output_dir / "recommendation.json").read_text())
    layouts = rec["layouts"]
    assert layouts["aggregated"] == agg.key and layouts["disaggregated"] == dis.key
    assert layouts["disaggregated_gpus"] == pools.gpus and layouts["winner"] in ("aggregated", "disaggregated")
    assert layouts["reason"].startswith(("aggregated wins", "disaggregated saves")), layouts["reason"]
    report = (outcome.output_dir / "report.md").read_text()
    assert "Aggregated against disaggregated" in report and layouts["reason"] in report
    if rec["winner"]["candidate"]["layout"] == "disaggregated":  # its launch is both pools' and the router's
        assert [e["engine"].split(" ", 2)[1] for e in rec["launch"]] == ["prefill", "decode", "router"]


@pytest.mark.slow  # about a minute on 2 cores: the demo model scored once, six candidates simulated
def test_a_search_over_two_gpus_prices_pools_on_two_gpu_types_and_names_both(
    tmp_path: Path, demo_model_dir: Path
) -> None:
    path = _spec(tmp_path, demo_model_dir)
    raw = yaml.safe_load(path.read_text())
    raw["space"] |= {"hardware": ["h100-sxm", "l40s"], "link": "infiniband-ndr"}
    raw["search"]["n_trials"] = 6  # the whole grid: per GPU, aggregated and a decode pool on each GPU
    path.write_text(yaml.safe_dump(raw))
    spec = load_spec(path)
    storage, tracking = f"sqlite:///{tmp_path}/o.db", f"sqlite:///{tmp_path}/m.db"
    outcome = run_search(
        spec, storage=storage, tracking_uri=tracking, output_root=tmp_path / "out", write_documents=write_documents
    )

    by_key = {r.key: r for r in outcome.results}
    assert len(by_key) == 6, sorted(by_key)
    mixed = by_key["bf16/baseline@h100-sxmx1/bs64/disagg/decode-l40s"]
    assert mixed.status == "evaluated" and mixed.pools is not None and mixed.cost is not None, mixed.broken
    p, q = mixed.pools.prefill.estimate.gpus, mixed.pools.decode.estimate.gpus
    h100, l40s = (load_catalog().hourly_price(hw) for hw in ("h100-sxm", "l40s"))
    assert mixed.cost.usd_per_month == pytest.approx((p * h100 + q * l40s) * HOURS_PER_MONTH, rel=1e-9)
    study = optuna.load_study(study_name=spec.study_name, storage=storage)
    for t in study.trials:
        assert ("decode_hardware" in t.params) == (t.params["layout"] == "disaggregated"), t.params
    results = json.loads((outcome.output_dir / "results.json").read_text())
    assert {r["candidate"]["decode_hardware"] for r in results} == {"", "h100-sxm", "l40s"}
    rec = json.loads((outcome.output_dir / "recommendation.json").read_text())
    winner = rec["winner"]["candidate"]
    report = (outcome.output_dir / "report.md").read_text()
    if winner["decode_hardware"]:  # pools on two GPU types: both named where the user reads what to buy and run
        assert "(decode) at" in report and winner["decode_hardware"] in report
        assert any(winner["decode_hardware"] in note for note in rec["winner"]["pools"]["launch"]["notes"])
