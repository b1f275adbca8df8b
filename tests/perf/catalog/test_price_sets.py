"""Price sets: one provider and tier each, dated and sourced; selectable in the spec; contract prices win."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from recommender.config.candidate import Candidate
from recommender.config.spec import LatencySLA, SearchSpec, Traffic, spec_from_mapping
from recommender.errors import BadInputError
from recommender.evaluation.performance import PerformanceEvaluator
from recommender.perf.catalog.architectures import load_architecture
from recommender.perf.catalog.gpus import load_catalog
from recommender.perf.catalog.prices import get_price_set, load_price_sets
from tests.conftest import REPO, build_spec

SETS = load_price_sets()
TRAFFIC = Traffic(prompt_tokens=512, output_tokens=128, requests_per_second=1)
SLA = LatencySLA(ttft_p99_ms=2000, tpot_p99_ms=200)


@pytest.mark.parametrize("name", sorted(SETS.price_sets))
def test_every_figure_is_one_providers_with_source_and_date(name: str) -> None:
    prices = SETS.price_sets[name]
    catalog = load_catalog(price_set=name)
    assert prices.name == name and prices.provider and prices.tier and prices.absent
    for key, price in prices.prices.items():
        assert key in catalog.accelerators
        assert price.source.startswith("https://") and price.date, (name, key)
        assert price.date != "unknown" or "(unverified)" in price.source, (name, key)
        accel = catalog.get(key)
        assert accel.price_per_hour_usd == price.usd_per_hour and accel.price_set == name
        dated = f" (from {price.dated_set})" if price.dated_set else ""  # a union names the dated set
        assert accel.price_note.startswith(f"price set {name}{dated}: {prices.provider} ")
    # Every other GPU is unpriced, never filled in from another provider.
    for key in set(catalog.accelerators) - set(prices.prices):
        assert catalog.get(key).price_per_hour_usd is None
        refusal = catalog.price_refusal(key)
        assert refusal is not None and f"{key} has no price in price set {name}" in refusal
        assert "hardware_catalog" in refusal and "price_set" in refusal  # the one-line fix


def test_every_catalog_gpu_is_priced_by_some_set_and_named_where_absent() -> None:
    """Each GPU has a price in at least one set; a set that lacks a GPU names it in its `absent` line."""
    catalog = load_catalog()
    priced = {key for prices in SETS.price_sets.values() for key in prices.prices}
    assert set(catalog.accelerators) <= priced, sorted(set(catalog.accelerators) - priced)
    for prices in SETS.price_sets.values():
        for key in set(catalog.accelerators) - set(prices.prices):
            assert re.search(rf"(?<![\w-]){re.escape(key)}(?![\w-])", prices.absent), (prices.name, key)


def test_the_new_sets_carry_their_figures() -> None:
    """RunPod's 2026-08-27 Secure Cloud list, CoreWeave's on-demand instances (per GPU) and Vultr's AMD rows."""
    runpod = SETS.price_sets["runpod-secure-2026-08-27"].prices
    assert {k: runpod[k].usd_per_hour for k in ("b300", "rtx-pro-6000", "a40", "l4", "mi300x")} == {
        "b300": 7.89,
        "rtx-pro-6000": 2.09,
        "a40": 0.44,
        "l4": 0.49,
        "mi300x": 2.39,
    }
    coreweave = SETS.price_sets["coreweave-on-demand-2026-09-20"].prices
    assert coreweave["gb200"].usd_per_hour == 42.00 / 4 and coreweave["b200"].usd_per_hour == 68.80 / 8
    vultr = SETS.price_sets["vultr-cloud-gpu-on-demand-2026-07-31"]
    assert set(vultr.prices) == {"mi300x", "mi325x", "mi355x"}
    assert all("(unverified)" in p.source for p in vultr.prices.values())  # not confirmed on Vultr's own page


def test_within_one_set_the_bigger_variant_is_never_cheaper() -> None:
    """The mixes of issue 14 (H100 SXM under H100 PCIe, A100 40 GB over 80 GB) came from mixing providers."""
    for prices in SETS.price_sets.values():
        usd = {k: p.usd_per_hour for k, p in prices.prices.items()}
        for big, small in (("h100-sxm", "h100-pcie"), ("a100-80gb", "a100-40gb"), ("h200", "h100-sxm")):
            if big in usd and small in usd:
                assert usd[big] > usd[small], (prices.name, big, small)


def test_the_default_set_and_the_named_ones() -> None:
    assert SETS.default == "runpod-secure"
    assert load_catalog().prices == get_price_set("runpod-secure")
    # H100 SXM: RunPod Secure Cloud 3.49, Lambda 1x on-demand 4.29 (both read 2026-09-25); the old catalog's
    # 2.00 was another provider (GMI Cloud) than its 2.89 H100 PCIe (RunPod).
    assert load_catalog().get("h100-sxm").price_per_hour_usd == 3.49
    assert load_catalog().get("h100-pcie").price_per_hour_usd == 2.89
    assert load_catalog(price_set="lambda-on-demand-2026-09-25").get("h100-sxm").price_per_hour_usd == 4.29
    assert load_catalog(price_set="aws-on-demand-us-east-1-2026-06").get("a10g").price_per_hour_usd == 1.006


def test_unknown_price_set_is_refused_with_a_suggestion() -> None:
    with pytest.raises(BadInputError) as info:
        load_catalog(price_set="runpod-secure-2026")
    assert info.value.field == "price_set" and "runpod-secure-2026-09-25" in info.value.fix


def test_a_contract_price_overrides_the_set(tmp_path: Path) -> None:
    path = tmp_path / "contract.yaml"
    path.write_text(
        "accelerators:\n  h100-sxm: {price_per_hour_usd: 1.85, price_source: 3-year reservation, "
        "price_date: '2026-11-01'}\n  l4: {price_per_hour_usd: 0.40}\n"
    )
    catalog = load_catalog(path)
    h100, l4 = catalog.get("h100-sxm"), catalog.get("l4")
    assert h100.price_per_hour_usd == 1.85 and h100.price_set == "hardware_catalog"
    assert h100.price_note == "contract price from hardware_catalog: 3-year reservation (2026-11-01)"
    assert l4.price_per_hour_usd == 0.40 and catalog.price_refusal("l4") is None
    assert catalog.get("h200").price_set == "runpod-secure"  # the rest still from the set


def test_costs_name_their_price_set() -> None:
    _, llama8 = load_architecture("llama-3.1-8b")
    evaluator = PerformanceEvaluator(load_catalog(price_set="lambda-on-demand-2026-09-25"), llama8, TRAFFIC, SLA)
    priced = evaluator.evaluate(Candidate("bf16", "baseline", "h100-sxm", 32))
    assert priced.cost is not None and priced.cost.price_set == "lambda-on-demand-2026-09-25"
    assert priced.cost.price_per_hour_usd == 4.29
    assert priced.cost.price_source.startswith("price set lambda-on-demand-2026-09-25: Lambda 1x H100 SXM")
    # A GPU the set does not price is pruned with the reason and the fix, not priced from elsewhere.
    unpriced = evaluator.evaluate(Candidate("bf16", "baseline", "l40s", 32))
    assert unpriced.status == "pruned" and unpriced.cost is None
    assert "l40s has no price in price set lambda-on-demand-2026-09-25" in unpriced.broken[0]


#: search_spaces/demo.yaml as it was at 910e1b5, before price sets (comments left out: they do not count).
DEMO_SPEC_BEFORE_PRICE_SETS = """
# The embedded default: runs offline on two CPU cores in about five minutes (`make demo`).
name: demo
model:
  source: ../recommender/demo/model
  name: demo-code-llama
  release: v1
use_case: ../evals/demo.yaml
traffic:
  prompt_tokens: 960
  output_tokens: 32
  requests_per_second: 1500
sla:
  ttft_p99_ms: 250
  tpot_p99_ms: 30
engines: [vllm, sglang]
space:
  methods:
    bf16: [baseline]
    fp8: [fp8-dynamic]
    int8: [int8-w8a8]
    int4: [w4a16-gptq-g128, bnb-nf4]
  hardware: [t4, a10g, l40s, h100-sxm]
  batch_sizes: [64, 256]
  max_num_batched_tokens: [8192]
  tensor_parallel: [1]
current:
  precision: bf16
  method: baseline
  hardware: h100-sxm
  batch_size: 64
search:
  n_trials: 40
  seed: 0
"""


def _spec(**changes: Any) -> SearchSpec:
    return build_spec(changes)


def test_the_spec_selects_a_set_and_refuses_an_unpriced_current_gpu() -> None:
    spec = _spec(price_set="lambda-on-demand-2026-09-25")
    assert spec.price_set == "lambda-on-demand-2026-09-25"
    assert spec.fingerprint() != _spec().fingerprint()  # another price set is another study
    with pytest.raises(BadInputError) as info:
        _spec(price_set="aws-on-demand-us-east-1-2026-06")  # the demo's current GPU, an H100, is not in it
    assert info.value.field == "search_space.yaml: current.hardware"
    assert "h100-sxm has no price in price set aws-on-demand-us-east-1-2026-06" in info.value.problem
    with pytest.raises(BadInputError) as unknown:
        _spec(price_set="gcp")
    assert unknown.value.field == "search_space.yaml: price_set"


def test_a_spec_without_price_set_keeps_its_study_name() -> None:
    """Specs written before price sets keep their fingerprint: the field is left out of the hash while unset.

    ef2f76a1a4 is search_spaces/demo.yaml's fingerprint before price sets existed (main at 910e1b5); the spec
    moved into the package since, so its relative paths are read from where it was then.
    """
    raw = yaml.safe_load(DEMO_SPEC_BEFORE_PRICE_SETS)
    old_home = REPO / "search_spaces" / "demo.yaml"
    spec = spec_from_mapping(raw, spec_path=old_home, label="demo.yaml")
    assert spec.price_set is None and spec.fingerprint() == "ef2f76a1a4"


def test_the_default_union_prices_every_gpu_its_provider_rents_each_from_its_newest_date() -> None:
    """RunPod's 2026-09-25 set prices 7 GPUs and its 2026-08-27 set 12: the union prices all 12, each price
    from the newest set that lists it, with that set's date and source."""
    union, newest, older = (
        get_price_set(n) for n in ("runpod-secure", "runpod-secure-2026-09-25", "runpod-secure-2026-08-27")
    )
    assert set(union.prices) == set(newest.prices) | set(older.prices) and len(union.prices) == 12
    assert union.prices["h100-sxm"].usd_per_hour == newest.prices["h100-sxm"].usd_per_hour == 3.49
    assert union.prices["h100-sxm"].date == "2026-09-25" and union.prices["h100-sxm"].dated_set == newest.name
    assert union.prices["mi300x"].date == "2026-08-27" and union.prices["mi300x"].dated_set == older.name
    catalog = load_catalog()
    assert catalog.get("mi300x").price_per_hour_usd == 2.39 and catalog.get("rtx-pro-6000").price_per_hour_usd
    assert "(from runpod-secure-2026-08-27)" in catalog.get("l4").price_source
    assert catalog.price_refusal("t4") is not None  # RunPod rents no T4: still unpriced, never borrowed
