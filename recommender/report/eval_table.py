"""The printed answer of `recommender eval`: one row per check, with the paired interval and verdict."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from recommender.quality.result import AS_SERVED, QualityResult


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g}"


def render_eval(result: QualityResult, *, model: str, use_case: str, console: Console) -> None:
    table = Table(title=f"{model}: {result.precision}/{result.method} against bf16, use case {use_case}")
    columns = ("check", "metric", "bf16", result.method, "delta", "interval of delta", "docs", "threshold", "verdict")
    for column in columns:
        table.add_column(column)
    for c in result.checks:
        ci = c.interval  # with its confidence: per look, when looks shared the error rate
        delta = "-" if c.delta is None else f"{c.delta:+.4g}"
        style = {"pass": "green", "fail": "red", "inconclusive": "yellow"}.get(c.verdict, "")
        verdict = f"[{style}]{c.verdict}[/]" if style else c.verdict
        table.add_row(
            c.name, c.metric, _num(c.baseline), _num(c.value), delta, ci, str(c.n_docs or "-"), c.threshold, verdict
        )
    console.print(table)
    if result.fidelity:
        f = result.fidelity
        console.print(
            f"fidelity over {f.tokens} tokens: mean KL {f.mean_kl:.3g}, p99 KL {f.p99_kl:.3g}, "
            f"top-1 agreement {f.top1_agreement:.1%}, perplexity ratio {f.ppl_ratio:.4f}"
        )
    through_engine = result.compute_dtype == AS_SERVED  # no cache there: every document is run
    counted = "documents evaluated through it" if through_engine else "documents evaluated now, the rest from the cache"
    console.print(
        f"verdict: [bold]{result.verdict}[/] (measured on {result.device}; {result.docs_evaluated} {counted})"
    )
    if result.reason and result.verdict == "unverified":
        console.print(f"why unverified: {result.reason}")
