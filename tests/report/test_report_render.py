"""report.md / report.html from a hand-built study: the answer, the evidence, the rejects, the figures.

The inputs are the real typed results (`CandidateResult` holding `QualityResult`, `ServingEstimate`,
`CostEstimate`, `MemoryFit`) assembled by the real `recommendation.build`, so the renderer reads
exactly what the search hands it.
"""

from __future__ import annotations

import dataclasses
import io
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
from rich.console import Console

from recommender.config.candidate import Candidate
from recommender.config.spec import LatencySLA
from recommender.decision.recommendation import Recommendation, build, result_of
from recommender.decision.rules import pick
from recommender.engines import EngineLaunch
from recommender.evaluation.candidate import CandidateResult
from recommender.evaluation.constraints import Constraints
from recommender.evaluation.load_curve import LoadCurve, LoadPoint
from recommender.perf.model.memory import MemoryFit
from recommender.perf.pricing import CostEstimate
from recommender.perf.sim.results import Percentiles
from recommender.perf.sim.serving import ServingEstimate
from recommender.provenance import Provenance
from recommender.quality.fidelity import FidelityResult
from recommender.quality.result import QualityResult
from recommender.quality.verdict import Check, Verdict
from recommender.report.figure_data import cost_data, describe_figures, pareto_data, pareto_front
from recommender.report.render import render_html, render_markdown, write_report
from recommender.report.table import render

MODEL = "acme/chat<v2>"
SLA = LatencySLA(ttft_p99_ms=1000.0, tpot_p99_ms=50.0)
MODELED = "roofline on catalog entry {hw}, assumed efficiencies; continuous-batching simulation"
#: The local device: a continuous-batching simulation on step times measured here, so "calibrated".
CALIBRATED = "cpu, transformers eager, median of 3; continuous-batching simulation"

KL_BROKEN = "quality: fidelity mean_kl 0.09 (bf16 0) breaks mean KL <= 0.02"
UNVERIFIED_BROKEN = "quality: unverified (torchao-float8-dynamic needs CUDA capability >= 8.9)"
TTFT_BROKEN = "ttft: P99 2400.0 ms > SLA 1000 ms"
PRUNED_BROKEN = "memory: needs 90.00 GB per device, 72.0 GB usable"

Study = tuple[Recommendation, list[CandidateResult], LoadCurve]


def _quality(method: str, precision: str, verdict: Verdict, mean_kl: float | None) -> QualityResult:
    ppl_delta = None if verdict == "unverified" else 0.002
    task = Check(
        "demo_code_ppl",
        "bits_per_byte",
        1.20,
        None if ppl_delta is None else 1.20 + ppl_delta,
        ppl_delta,
        None if ppl_delta is None else ppl_delta - 0.024,
        "relative drop <= 2%",
        "unverified" if ppl_delta is None else "pass",
        None if ppl_delta is None else (ppl_delta - 0.004, ppl_delta + 0.004),
        None if ppl_delta is None else 64,
    )
    kl_verdict: Verdict = "unverified" if mean_kl is None else ("pass" if mean_kl <= 0.02 else "fail")
    kl = Check(
        "fidelity",
        "mean_kl",
        0.0,
        mean_kl,
        mean_kl,
        None if mean_kl is None else mean_kl - 0.02,
        "mean KL <= 0.02",
        kl_verdict,
        None,
        None if mean_kl is None else 4096,
        higher_is_better=False,
    )
    fidelity = None if mean_kl is None else FidelityResult(mean_kl, 4 * mean_kl, 0.97, 1.01, 4096)
    return QualityResult(
        method=method,
        precision=precision,
        verdict=verdict,
        checks=[task, kl],
        fidelity=fidelity,
        device="cpu",
        seconds=1.0,
        docs_evaluated=64,
    )


def _serving(hardware: str) -> ServingEstimate:
    provenance = (
        Provenance("calibrated", CALIBRATED)
        if hardware == "local"
        else Provenance("modeled", MODELED.format(hw=hardware))
    )
    return ServingEstimate(
        ttft_ms=Percentiles(300.0, 380.0, 420.0),
        tpot_ms=Percentiles(15.0, 19.0, 21.5),
        requests_per_s=4.0,
        tokens_per_s=5000.0,
        load_per_replica_rps=3.0,
        provenance=provenance,
    )


def _result(
    precision: str,
    method: str,
    hardware: str,
    *,
    usd: float | None,
    verdict: Verdict = "pass",
    broken: tuple[str, ...] = (),
    mean_kl: float | None = 0.004,
    pruned: bool = False,
) -> CandidateResult:
    c = Candidate(precision, method, hardware, batch_size=32)
    if pruned:
        return CandidateResult(c, "pruned", Constraints(memory=1.0), list(broken), memory=MemoryFit(90.0, 72.0))
    cost = None
    if usd is not None:
        cost = CostEstimate(
            usd_per_1m_tokens=usd,
            replicas=2,
            accelerators=2,
            usd_per_month=usd * 3000.0,
            price_per_hour_usd=2.0,
            price_source="test prices (2025-01)",
        )
    return CandidateResult(
        candidate=c,
        status="evaluated",
        constraints=Constraints(quality=-0.01, ttft=-0.5, tpot=-0.5),
        broken=list(broken),
        quality=_quality(method, precision, verdict, mean_kl),
        serving=_serving(hardware),
        cost=cost,
        memory=MemoryFit(18.4, 72.0),
    )


@pytest.fixture(scope="module")
def study() -> Study:
    results = [
        _result("bf16", "baseline", "h100", usd=0.50, mean_kl=0.0),
        _result("int8", "torchao-int8-wo", "l40s", usd=0.30),
        _result("int4", "bnb-nf4", "l4", usd=0.12, verdict="fail", mean_kl=0.09, broken=(KL_BROKEN,)),
        _result(
            "fp8",
            "torchao-float8-dynamic",
            "local",
            usd=0.20,
            verdict="unverified",
            mean_kl=None,
            broken=(UNVERIFIED_BROKEN,),
        ),
        _result("bf16", "baseline", "l4", usd=0.25, mean_kl=0.0, broken=(TTFT_BROKEN,)),
        _result("int4", "bnb-nf4", "a10g", usd=None, pruned=True, broken=(PRUNED_BROKEN,)),
    ]
    rec = build(
        results,
        winner=pick(results),
        current=result_of(results, "bf16/baseline@h100x1/bs32"),
        study="chat-test",
        model=MODEL,
        release="r1",
        use_case="support-bot",
    )
    launch = [
        EngineLaunch(
            engine="vllm",
            supported=True,
            command="vllm serve acme/chat --quantization torchao",
            config_yaml="max_num_seqs: 32\n",
            notes=["weights quantized at load"],
            sources=["https://docs.vllm.ai/en/latest/features/quantization/torchao.html"],
        ),
        EngineLaunch(
            engine="tgi",
            supported=False,
            command=None,
            notes=["TGI has no torchao int8 weight-only path"],
        ),
    ]
    rec = dataclasses.replace(rec, launch=launch)
    points = [LoadPoint(r, 200 + 40 * r, 15 + 2 * r) for r in (1.0, 2.0, 4.0, 8.0)]
    curve = LoadCurve(points, SLA, 6.0, Provenance("modeled", MODELED.format(hw="l40s")))
    return rec, results, curve


def test_pareto_front_on_known_points() -> None:
    points = [(1.0, 5.0), (2.0, 3.0), (3.0, 4.0), (4.0, 1.0), (2.0, 3.0), (0.5, 10.0), (5.0, 1.0)]
    assert pareto_front(points) == [5, 0, 1, 3]
    assert pareto_front([]) == []
    assert pareto_front([(1.0, 1.0)]) == [0]


def test_figure_data_selects_points_and_counts_the_omitted(study: Study) -> None:
    rec, results, curve = study
    data = pareto_data(results)
    keys = [p.key for p in data.points]
    assert "fp8/torchao-float8-dynamic@localx1/bs32" not in keys  # no KL: omitted and counted
    assert (data.without_kl, data.without_price) == (1, 1)
    assert next(p for p in data.points if p.key == "bf16/baseline@h100x1/bs32").mean_kl == 0.0
    assert data.front_over == "feasible candidates"
    assert [data.points[i].key for i in data.front] == ["int8/torchao-int8-wo@l40sx1/bs32", "bf16/baseline@h100x1/bs32"]
    assert "1 without a KL measurement" in data.caption and "modeled for" in data.caption
    cost = cost_data(results)
    bars = {(b.scheme, b.hardware): b for b in cost.bars}
    assert not bars[("int4/bnb-nf4", "l4")].feasible and bars[("int8/torchao-int8-wo", "l40s")].feasible
    months = [b.usd_per_month for b in cost.bars]
    assert months == sorted(months) and bars[("int8/torchao-int8-wo", "l40s")].usd_per_month == 900.0
    # the local device's latencies are simulated on step times measured here: calibrated, not measured
    assert "calibrated for 1, modeled for 4" in cost_data(results).caption
    assert [f.name for f in describe_figures(rec, results, curve)] == ["pareto", "cost_per_month", "load_curve"]


def test_markdown_states_the_answer_the_rejects_and_never_passes_unverified(study: Study) -> None:
    rec, results, curve = study
    md = render_markdown(rec, results, curve, images={"pareto": "pareto.png"})
    winner = "int8/torchao-int8-wo@l40sx1/bs32"
    assert winner in md.split("\n\n")[2]  # the one-line answer right under the title and study
    assert "40.0 % cheaper per token" in md and "$600/month" in md
    for reason in (KL_BROKEN, UNVERIFIED_BROKEN, TTFT_BROKEN):
        assert reason in md
    unverified_lines = [line for line in md.splitlines() if "torchao-float8-dynamic" in line]
    assert unverified_lines and all("unverified" in line and "pass" not in line for line in unverified_lines)
    assert "```bash\nvllm serve acme/chat --quantization torchao\n```" in md
    assert "TGI has no torchao int8 weight-only path" in md
    assert "![Cost against quality loss](pareto.png)" in md
    assert "&lt;v2>" in md and "<v2>" not in md
    assert "<= 1000 ms" in md and "(modeled)" in md
    local_row = next(line for line in md.splitlines() if line.startswith("| fp8/torchao-float8-dynamic@local"))
    assert "| calibrated |" in local_row and "measured" not in local_row
    order = [
        "Recommended:",
        "How to launch it",
        "Recommended against current",
        "Quality evidence",
        "Cheaper candidates that were rejected",
        "Figures",
        "tie policy",
        "distinct candidates",
    ]
    positions = [md.index(marker) for marker in order]
    assert positions == sorted(positions)


def test_markdown_without_a_winner_lists_the_closest_misses(study: Study) -> None:
    rec, results, _ = study
    failed = dataclasses.replace(rec, winner=None, saving=None)
    md = render_markdown(failed, results)
    assert "Nothing met every threshold." in md and "Closest misses" in md
    assert KL_BROKEN in md


def test_console_table_prints_the_winner_saving_and_rejects(study: Study) -> None:
    rec, _, _ = study
    buffer = io.StringIO()
    render(rec, Console(file=buffer, width=200))
    out = buffer.getvalue()
    assert "int8/torchao-int8-wo@l40sx1/bs32" in out and "modeled" in out
    assert "40.0 % per token, $600/month" in out
    assert "bits_per_byte +0.2% ok, KL 0.004 ok" in out
    assert KL_BROKEN in out and "6 distinct candidates" in out


class _StrictParser(HTMLParser):
    """Checks that every non-void element closes in order, and collects what tags load."""

    VOID = {"meta", "img", "br", "hr", "link", "input", "source"}

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[str] = []
        self.loads: list[tuple[str, str, str]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if name in ("src", "href"):
                self.loads.append((tag, name, value or ""))
        if tag not in self.VOID:
            self.stack.append(tag)

    def handle_endtag(self, tag: str) -> None:
        assert self.stack and self.stack[-1] == tag, f"</{tag}> closes {self.stack[-1:]}"
        self.stack.pop()


def test_html_is_self_contained_well_formed_and_escaped(study: Study) -> None:
    rec, results, curve = study
    page = render_html(rec, results, curve)
    parser = _StrictParser()
    parser.feed(page)
    parser.close()
    assert parser.stack == []
    # One inline script (the copy buttons) and nothing fetched: no script src, stylesheet link, import or url().
    assert page.count("<script") == 1 and not re.search(r"<script[^>]*src|<link|@import|url\(|fetch\(", page)
    assert page.count('<button type="button" class="copy"') == page.count("<pre>") == 2  # command and config
    images = [value for tag, _, value in parser.loads if tag == "img"]
    assert len(images) == 3 and all(src.startswith("data:image/png;base64,") for src in images)
    assert all(tag == "a" for tag, _, value in parser.loads if value.startswith(("http://", "https://")))
    assert "&lt;v2&gt;" in page and "<v2>" not in page
    row = next(r for r in page.split("<tr>") if "torchao-float8-dynamic" in r)
    assert "unverified" in row and "pass" not in row


def test_write_report_writes_markdown_pngs_and_html(tmp_path: Path, study: Study) -> None:
    rec, results, curve = study
    written = write_report(tmp_path / "report", rec, results, curve)
    assert set(written) == {"markdown", "html", "pareto", "cost_per_month", "load_curve"}
    for path in written.values():
        assert path.is_file() and path.stat().st_size > 0
    md = written["markdown"].read_text(encoding="utf-8")
    for name in ("pareto", "cost_per_month", "load_curve"):
        assert written[name].read_bytes().startswith(b"\x89PNG") and f"]({name}.png)" in md
    assert "data:image/png;base64," in written["html"].read_text(encoding="utf-8")


def _with_assumptions(study: Study) -> Recommendation:
    """The fixture's recommendation with the assumptions block of the demo spec's traffic and price set."""
    from recommender.config.spec import load_spec
    from recommender.decision.assumptions import assumptions_of
    from recommender.perf.catalog.gpus import load_catalog

    rec = study[0]
    spec = load_spec(Path(__file__).parents[2] / "recommender" / "demo" / "search_space.yaml")
    catalog = load_catalog(spec.hardware_catalog, price_set=spec.price_set)
    return dataclasses.replace(rec, assumptions=assumptions_of(spec, catalog, winner=rec.winner, current=rec.current))


def test_first_screen_states_traffic_price_utilisation_and_monthly_saving(study: Study) -> None:
    rec = _with_assumptions(study)
    a = rec.assumptions
    assert a is not None and a.requests_per_second == 1375 and (a.prompt_tokens, a.output_tokens) == (960, 32)
    winner = next(f for f in a.fleets if f.role == "recommended")
    assert winner.utilisation == pytest.approx(3.0 / 4.0)
    # $900/month over 1,375 req/s x 992 tokens x 3600 s x 730 h, per million tokens
    assert winner.usd_per_1m_tokens_served == pytest.approx(900.0 / (1375 * 992 * 3600 * 730) * 1e6)
    l40s = next(p for p in a.prices if p.hardware == "l40s")
    assert l40s.usd_per_hour == 1.09 and l40s.url.startswith("https://") and l40s.date
    md = render_markdown(rec, study[1], study[2])
    first = md.split("\n\n")[2]
    assert first.startswith("**Buy:**") and "$900/month" in first and "1,375 req/s" in first
    assert "75% busy" in first and "<https://www.runpod.io/pricing>" in first
    assert "Saves $600/month" in md.split("\n\n")[3] and "ranks" in md.split("\n\n")[3]
    assert md.index("## Assumptions") < md.index("How to launch it")
    page = render_html(rec, study[1], study[2])
    assert '<a href="https://www.runpod.io/pricing">' in page
    # recommendation.json carries the block and reads it back as the same object
    from recommender.serialization import from_data, to_data

    assert from_data(Recommendation, to_data(rec)).assumptions == a


def test_notes_render_backticks_as_code_and_addresses_as_links(study: Study) -> None:
    rec = dataclasses.replace(study[0], notes=["run `vllm serve` as in https://docs.vllm.ai/x."])
    page = render_html(rec, study[1])
    assert "<code>vllm serve</code>" in page and '<a href="https://docs.vllm.ai/x">' in page and "`" not in page


def test_a_candidates_line_keeps_its_whole_reason_on_a_pipe() -> None:
    """Issue 29: on a pipe (CI logs, `| tee`) each per-candidate line is one line with its whole reason."""
    import io

    from rich.console import Console

    from recommender.config.candidate import Candidate
    from recommender.evaluation.candidate import CandidateResult
    from recommender.report.console import trial_progress

    reason = "quality: unverified (not evaluated: " + "a long reason that goes on " * 8 + "to its end)"
    result = CandidateResult(Candidate("int8", "int8-w8a8", "l40s", 256), "evaluated", Constraints(), [reason])
    out = io.StringIO()
    console = Console(file=out, width=80, force_terminal=False)
    with trial_progress(console, total=1) as (on_trial, _status):
        on_trial(1, 1, result, False)
    lines = [line for line in out.getvalue().splitlines() if "int8-w8a8" in line]
    assert len(lines) == 1 and lines[0].endswith("to its end)")
