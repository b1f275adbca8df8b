"""An OpenAI-compatible server as the probe sees it: which model it serves, and its engine's own gauges.

``check_endpoint`` asks ``GET /v1/models`` before any load is sent: a server that is down, answers something that is
not that list, or serves another model than the one asked for is refused with one line (``BadInputError``) and
nothing is measured or written. ``parse_metrics`` reads vLLM's Prometheus text (``/metrics``): requests running and
waiting, KV-cache usage, prefix-cache queries and hits; other engines' metrics simply come back empty.
"""

from __future__ import annotations

import json
import math
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from recommender.errors import BadInputError

__all__ = [
    "VLLM_GAUGES",
    "check_endpoint",
    "engine_release",
    "models_served",
    "parse_metrics",
    "scrape_metrics",
    "served_model_matches",
]

#: vLLM's metric names (vllm/v1/metrics/loggers.py) → the names the probe reports.
VLLM_GAUGES = {
    "vllm:num_requests_running": "running",
    "vllm:num_requests_waiting": "waiting",
    "vllm:kv_cache_usage_perc": "kv_cache_usage",
    "vllm:prefix_cache_queries_total": "prefix_queries",
    "vllm:prefix_cache_hits_total": "prefix_hits",
}
_FIELD = "--endpoint"


def _get(url: str, *, timeout: float) -> bytes:
    with urllib.request.urlopen(url, timeout=timeout) as answer:  # noqa: S310 (the user's own server)
        body: bytes = answer.read(1_000_000)
        return body


def models_served(endpoint: str, *, timeout: float = 10.0, field: str = _FIELD) -> list[str]:
    """The model ids ``GET {endpoint}/v1/models`` lists.

    Raises:
        BadInputError: the server cannot be reached, answers an HTTP error, or answers something else than
            OpenAI's model list (``{"data": [{"id": ...}, ...]}``).
    """
    url = endpoint.rstrip("/") + "/v1/models"
    try:
        body = _get(url, timeout=timeout)
    except urllib.error.HTTPError as exc:
        raise BadInputError(
            field, f"{url} answered HTTP {exc.code}", "point it at an OpenAI-compatible server"
        ) from None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        raise BadInputError(
            field, f"no server answers at {url} ({reason})", "start the server or fix the URL"
        ) from None
    try:
        listing = json.loads(body)
        ids = [str(entry["id"]) for entry in listing["data"]]
    except (ValueError, KeyError, TypeError) as exc:
        raise BadInputError(
            field,
            f"{url} did not answer an OpenAI model list ({type(exc).__name__}: {body[:60]!r})",
            "point it at an OpenAI-compatible server (vLLM, SGLang, TGI, TensorRT-LLM serve)",
        ) from None
    return ids


def served_model_matches(served: str, model: str) -> bool:
    """Whether the server's model id names ``model``: the same text, or the same local directory."""
    if served == model:
        return True
    return Path(served).expanduser().resolve() == Path(model).expanduser().resolve() and Path(model).exists()


def check_endpoint(endpoint: str, model: str, *, timeout: float = 10.0, field: str = _FIELD) -> str:
    """The server's id for ``model``; refuses a server that is down, answers garbage or serves another model."""
    ids = models_served(endpoint, timeout=timeout, field=field)
    for served in ids:
        if served_model_matches(served, model):
            return served
    listed = ", ".join(ids[:5]) or "none"
    raise BadInputError(
        field,
        f"the server serves {listed}, not {model}",
        "pass the served model's id as --model, or start the server on that model",
    )


def engine_release(base_url: str) -> str:
    """vLLM's ``GET /version``, else "unknown" (another engine)."""
    try:
        with urllib.request.urlopen(base_url.rstrip("/") + "/version", timeout=5) as answer:  # noqa: S310
            return "vllm " + str(json.loads(answer.read(10_000))["version"])
    except (urllib.error.URLError, OSError, ValueError, KeyError, TypeError):
        return "unknown"


def parse_metrics(text: str) -> dict[str, float]:
    """vLLM's gauges and counters from Prometheus text, summed over their label sets (one engine: one series)."""
    found: dict[str, float] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        name, _, rest = line.partition(" ")
        base = name.split("{", 1)[0]
        if base not in VLLM_GAUGES:
            continue
        try:
            value = float(rest.split()[0])
        except (ValueError, IndexError):
            continue
        if math.isfinite(value):
            key = VLLM_GAUGES[base]
            found[key] = found.get(key, 0.0) + value
    return found


def scrape_metrics(endpoint: str, *, timeout: float = 5.0) -> dict[str, float]:
    """One sample of the engine's gauges; empty where the server has no vLLM /metrics."""
    try:
        return parse_metrics(_get(endpoint.rstrip("/") + "/metrics", timeout=timeout).decode("utf-8", "replace"))
    except (urllib.error.URLError, OSError, ValueError):
        return {}


@dataclass(frozen=True, kw_only=True)
class MetricsSummary:
    """The engine's gauges over a load run: peaks and means of the sampled gauges, the counters' increase."""

    samples: int
    peak: dict[str, float]
    mean: dict[str, float]
    increase: dict[str, float]

    def flat(self) -> dict[str, float]:
        """One flat mapping for a table or MLflow."""
        out = {f"engine_{k}_peak": v for k, v in self.peak.items()}
        out |= {f"engine_{k}_mean": v for k, v in self.mean.items()}
        out |= {f"engine_{k}": v for k, v in self.increase.items()}
        if self.increase.get("prefix_queries"):
            out["engine_prefix_hit_rate"] = self.increase.get("prefix_hits", 0.0) / self.increase["prefix_queries"]
        return out


_COUNTERS = ("prefix_queries", "prefix_hits")


def summarise(samples: list[dict[str, float]]) -> MetricsSummary:
    """Peaks and means of the gauges, and the counters' increase from the first sample to the last."""
    gauges = {k for s in samples for k in s if k not in _COUNTERS}
    peak = {k: max(s.get(k, 0.0) for s in samples) for k in sorted(gauges)}
    mean = {k: sum(s.get(k, 0.0) for s in samples) / len(samples) for k in sorted(gauges)}
    increase = {k: samples[-1].get(k, 0.0) - samples[0].get(k, 0.0) for k in _COUNTERS if samples and k in samples[-1]}
    return MetricsSummary(samples=len(samples), peak=peak, mean=mean, increase=increase)
