"""How quality and cost moved across a model's releases: one JSON document, a table, a plot."""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.table import Table

from recommender.money import usd
from recommender.releases.history import ReleaseStudy


@dataclass(frozen=True, slots=True)
class CheckMove:
    value: float | None
    delta: float | None
    verdict: str


@dataclass(frozen=True)
class MethodMove:
    """One precision/method's quality in one release, against that release's own bf16."""

    verdict: str
    mean_kl: float | None
    checks: dict[str, CheckMove]


@dataclass(frozen=True)
class ReleaseRow:
    release: str
    run_id: str
    study: str
    model_fingerprint: str
    recommended: str | None
    usd_per_1m_tokens: float | None
    ttft_p99_ms: float | None
    tpot_p99_ms: float | None
    saving_percent_per_1m_tokens: float | None
    methods: dict[str, MethodMove]


@dataclass(frozen=True)
class Comparison:
    """What `recommender compare` prints and, with --format json, serialises."""

    model: str
    use_case: str | None
    releases: list[ReleaseRow]


def _method_moves(study: ReleaseStudy) -> dict[str, MethodMove]:
    return {
        method: MethodMove(
            verdict=quality.verdict,
            mean_kl=quality.fidelity.mean_kl if quality.fidelity else None,
            checks={
                f"{c.name}/{c.metric}": CheckMove(c.value, c.delta, c.verdict)
                for c in quality.checks
                if c.name != "fidelity"
            },
        )
        for method, quality in sorted(study.quality_by_method().items())
    }


def compare_data(model: str, studies: list[ReleaseStudy]) -> Comparison:
    """Per release: the recommendation and, per precision/method, each check's delta and verdict and the KL."""
    releases = []
    for study in studies:
        winner, saving = study.winner, study.recommendation.saving
        serving = winner.serving if winner else None
        releases.append(
            ReleaseRow(
                release=study.release,
                run_id=study.run_id,
                study=study.study,
                model_fingerprint=study.fingerprint,
                recommended=winner.key if winner else None,
                usd_per_1m_tokens=winner.usd_per_1m_tokens if winner else None,
                ttft_p99_ms=serving.ttft_ms.p99 if serving else None,
                tpot_p99_ms=serving.tpot_ms.p99 if serving else None,
                saving_percent_per_1m_tokens=saving.percent_per_1m_tokens if saving else None,
                methods=_method_moves(study),
            )
        )
    return Comparison(model, studies[0].use_case if studies else None, releases)


def render_compare(data: Comparison, console: Console) -> None:
    releases = data.releases
    summary = Table(title=f"{data.model} across releases, use case {data.use_case}")
    for column in ("release", "recommended", "$/1M tok", "P99 TTFT ms", "P99 TPOT ms", "saving vs current"):
        summary.add_column(column)
    for r in releases:
        saving = r.saving_percent_per_1m_tokens
        summary.add_row(
            r.release,
            r.recommended or "nothing feasible",
            usd(r.usd_per_1m_tokens, significant=3),
            "-" if r.ttft_p99_ms is None else f"{r.ttft_p99_ms:.1f}",
            "-" if r.tpot_p99_ms is None else f"{r.tpot_p99_ms:.2f}",
            "-" if saving is None else f"{saving:.1f} %",
        )
    console.print(summary)

    methods = sorted({m for r in releases for m in r.methods})
    quality = Table(title="quality against each release's own bf16 (delta per task, mean KL, verdict)")
    quality.add_column("precision/method")
    for r in releases:
        quality.add_column(r.release)
    for method in methods:
        cells = []
        for r in releases:
            entry = r.methods.get(method)
            if entry is None:
                cells.append("not evaluated")
                continue
            checks = entry.checks.items()
            deltas = ", ".join(f"{n.split('/')[0]} {c.delta:+.4g}" for n, c in checks if c.delta is not None)
            kl = "" if entry.mean_kl is None else f"; KL {entry.mean_kl:.2g}"
            cells.append(f"{entry.verdict}: {deltas}{kl}")
        quality.add_row(method, *cells)
    console.print(quality)


def compare_png(data: Comparison) -> bytes:
    """Left: the recommended $/1M tokens per release. Right: mean KL per method per release."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    releases = data.releases
    labels = [r.release for r in releases]
    figure = Figure(figsize=(9, 3.6), dpi=100)
    FigureCanvasAgg(figure)
    cost_axis, kl_axis = figure.subplots(1, 2)
    costs = [r.usd_per_1m_tokens or 0.0 for r in releases]
    cost_axis.bar(labels, costs, color="#4C72B0")
    for i, r in enumerate(releases):
        cost_axis.annotate(r.recommended or "nothing feasible", (i, costs[i]), ha="center", va="bottom", fontsize=6)
    cost_axis.set_ylabel("recommended $/1M tokens")
    cost_axis.set_title("cost of the recommendation")
    for method in sorted({m for r in releases for m in r.methods}):
        values = [move.mean_kl if (move := r.methods.get(method)) else None for r in releases]
        if any(v is not None for v in values):
            kl_axis.plot(labels, [float("nan") if v is None else v for v in values], marker="o", label=method)
    kl_axis.set_ylabel("mean KL vs own bf16")
    kl_axis.set_title("quality loss per method")
    kl_axis.legend(fontsize=6)
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    return buffer.getvalue()


def write_compare_png(data: Comparison, path: Path) -> None:
    """`compare_png` written to `path`, its folder created."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(compare_png(data))
