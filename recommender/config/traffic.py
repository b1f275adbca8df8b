"""Traffic over a day: a daily profile of hourly rates or a recorded trace, and the request lengths it implies.

A spec's ``traffic`` is one constant rate with fixed lengths unless it carries a ``profile``:
24 hourly rates with lognormal lengths (a coefficient of variation around the spec's means),
or a CSV trace of requests (arrival time in seconds, prompt tokens, output tokens) whose
hourly rates and length histogram are the trace's own. With a profile the search sizes the
fleet for the peak hour (``requests_per_second`` defaults to it, and the length means to the
profile's), so a constant profile is today's constant rate exactly; autoscaling
(`recommender.fleet.daily.autoscale`) and the GPU mix (`recommender.fleet.daily.gpu_mix`) read the hours and the
lengths.

The models here are referenced by `recommender.config.spec`; they validate their own fields (finite,
in range) so a bad profile is one line naming the field, like every other spec error.
"""

from __future__ import annotations

import csv
import io
import math
from pathlib import Path
from typing import Annotated, Any, Protocol

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator, model_validator

from recommender.errors import BadInputError
from recommender.input_files import expand_user, read_text, usable_path
from recommender.perf.sim.conversation import Conversation
from recommender.perf.sim.serving import TrafficLoad
from recommender.perf.sim.workload import EmpiricalLengths, LengthDist, Lengths, SharedPrefix

__all__ = [
    "ConversationTurns",
    "check_prefix_inside_rows",
    "FleetPolicy",
    "PromptPrefix",
    "TraceRequests",
    "TrafficProfile",
    "hourly_rates",
    "length_models",
    "traffic_defaults",
    "with_absolute_trace",
]

HOURS_PER_DAY = 24
SECONDS_PER_HOUR = 3600.0
#: Largest coefficient of variation accepted for a length distribution (real traces sit well below 5).
MAX_CV = 10.0
#: Prompt or output length a spec may name: beyond any served context window, so a typo, not a workload.
MAX_TOKENS = 1_000_000
#: Requests per second a spec may name: from one request every 11.6 days (below it there is no fleet to size,
#: and the simulator's inter-arrival times overflow) to ten million (the busiest public APIs serve a few
#: hundred thousand).
MIN_RPS = 1e-6
MAX_RPS = 1e7
#: A trace file: 64 MiB, 2 million requests, a month of arrivals at most (its days are folded onto one; a
#: longer span is usually arrival times in milliseconds). Sample a longer trace.
MAX_TRACE_BYTES = 64 * 1024 * 1024
MAX_TRACE_REQUESTS = 2_000_000
MAX_TRACE_DAYS = 31
#: Latest arrival time, seconds: a UNIX time is fine; a float beyond this loses the hour of the day.
MAX_ARRIVAL_S = 1e11
TRACE_FIELD = "traffic.profile.trace"

Rate = Annotated[float, Field(ge=0, le=MAX_RPS, allow_inf_nan=False)]
Cv = Annotated[float, Field(ge=0, le=MAX_CV, allow_inf_nan=False)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TraceRequests(BaseModel):
    """A trace's requests, read once when the spec is validated: arrival times (s) and token lengths."""

    model_config = ConfigDict(frozen=True)

    arrivals_s: list[float]
    prompt_tokens: list[int]
    output_tokens: list[int]
    #: The file's line number of the first request (2 below a header), so a check of one request names its line.
    first_line: int = 1

    def line_of(self, index: int) -> int:
        """The trace file's line number of request `index` (0-based)."""
        return self.first_line + index

    def hourly_rates(self) -> list[float]:
        """Mean requests/s in each hour of the day, the trace's days folded onto one (a partial day counts once)."""
        arrivals = np.asarray(self.arrivals_s)
        days = max(1, math.ceil((arrivals.max() - arrivals.min() + 1e-9) / (HOURS_PER_DAY * SECONDS_PER_HOUR)))
        hours = (arrivals // SECONDS_PER_HOUR).astype(np.int64) % HOURS_PER_DAY
        counts = np.bincount(hours, minlength=HOURS_PER_DAY)
        return [float(c) / (days * SECONDS_PER_HOUR) for c in counts]


#: A trace's columns, as its header names them (in any order) or, with no header, in this order.
TRACE_COLUMNS = ("arrival_s", "prompt_tokens", "output_tokens")


def read_trace(path: Path) -> TraceRequests:
    """The CSV's rows (header ``arrival_s,prompt_tokens,output_tokens``), read through the one input reader
    (missing, too large, not UTF-8: refused like any input file); a bad row is refused naming its line."""
    text = read_text(path, field=TRACE_FIELD, what="trace", max_bytes=MAX_TRACE_BYTES)
    arrivals: list[float] = []
    prompts: list[int] = []
    outputs: list[int] = []
    order = [0, 1, 2]  # the columns' positions of arrival_s, prompt_tokens, output_tokens
    first_line = 1
    try:
        for line, row in enumerate(csv.reader(io.StringIO(text, newline="")), start=1):
            if line == 1 and row and not _is_number(row[0]):
                order = _header_order(row, path)  # a header names the columns: read by name, in any order
                first_line = 2
                continue
            if len(row) != 3:
                raise _row_error(path, line, "need 3 columns (arrival_s, prompt_tokens, output_tokens)")
            row = [row[i] for i in order]
            if len(arrivals) == MAX_TRACE_REQUESTS:
                raise BadInputError(
                    TRACE_FIELD,
                    f"{path.name} holds more than {MAX_TRACE_REQUESTS:,} requests",
                    "sample the trace (its rates and lengths are what is read)",
                )
            arrival, prompt, output = _parse_row(row, path, line)
            arrivals.append(arrival)
            prompts.append(prompt)
            outputs.append(output)
    except csv.Error as exc:
        raise BadInputError(TRACE_FIELD, f"{path.name} is not a CSV file ({exc})", "give a plain CSV file") from None
    if len(arrivals) < 2:
        raise BadInputError(TRACE_FIELD, f"{path.name}: a trace needs at least 2 requests", "record a longer trace")
    span_days = (max(arrivals) - min(arrivals)) / (HOURS_PER_DAY * SECONDS_PER_HOUR)
    if span_days > MAX_TRACE_DAYS:
        raise BadInputError(
            TRACE_FIELD,
            f"{path.name} spans {span_days:,.0f} days, more than {MAX_TRACE_DAYS}",
            "give arrival_s in seconds (not milliseconds), over a representative month at most",
        )
    return TraceRequests(arrivals_s=arrivals, prompt_tokens=prompts, output_tokens=outputs, first_line=first_line)


def _header_order(header: list[str], path: Path) -> list[int]:
    """Where a header puts arrival_s, prompt_tokens and output_tokens; refused unless it names exactly those."""
    names = [h.strip().lower() for h in header]
    if sorted(names) != sorted(TRACE_COLUMNS):
        shown = ",".join(h.strip() for h in header)[:120]
        raise _row_error(path, 1, f"the header must name {', '.join(TRACE_COLUMNS)} (in any order), not {shown!r}")
    return [names.index(column) for column in TRACE_COLUMNS]


def _row_error(path: Path, line: int, problem: str) -> BadInputError:
    return BadInputError(TRACE_FIELD, f"{path.name} line {line}: {problem}", "fix that row of the trace")


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _parse_row(row: list[str], path: Path, line: int) -> tuple[float, int, int]:
    try:
        arrival, prompt, output = float(row[0]), int(row[1]), int(row[2])
    except ValueError:
        raise _row_error(path, line, "arrival must be a number of seconds, lengths whole tokens") from None
    if not (math.isfinite(arrival) and 0 <= arrival <= MAX_ARRIVAL_S):
        raise _row_error(path, line, f"arrival time {row[0][:40]} must be finite, >= 0 and <= {MAX_ARRIVAL_S:g} s")
    if not (1 <= prompt <= MAX_TOKENS and 1 <= output <= MAX_TOKENS):
        raise _row_error(path, line, f"lengths must be between 1 and {MAX_TOKENS} tokens")
    return arrival, prompt, output


class TrafficProfile(_Strict):
    """How the load moves over a day: ``hourly_rps`` (24 rates, hour 0 first) or a ``trace`` CSV, not both.

    ``prompt_cv``/``output_cv`` spread an hourly profile's lengths lognormally around the spec's
    means (0: fixed lengths); a trace's lengths are its own histogram, so the CVs are refused there.
    """

    hourly_rps: list[Rate] | None = Field(default=None, description="24 mean rates, requests/s, hour 0 first.")
    trace: Path | None = Field(default=None, description="CSV of arrival_s,prompt_tokens,output_tokens.")
    prompt_cv: Cv = Field(default=0.0, description="Coefficient of variation of prompt lengths (lognormal).")
    output_cv: Cv = Field(default=0.0, description="Coefficient of variation of output lengths (lognormal).")
    _trace: TraceRequests | None = PrivateAttr(default=None)

    @field_validator("hourly_rps")
    @classmethod
    def _a_day_of_load(cls, value: list[float] | None) -> list[float] | None:
        if value is not None and len(value) != HOURS_PER_DAY:
            raise ValueError(f"need {HOURS_PER_DAY} hourly rates (hour 0 first), got {len(value)}")
        if value is not None and max(value) < MIN_RPS:
            raise ValueError(f"the peak hour's rate is below {MIN_RPS:g} req/s; give the requests/s of the busy hours")
        return value

    @model_validator(mode="after")
    def _one_source(self) -> TrafficProfile:
        if (self.hourly_rps is None) == (self.trace is None):
            raise ValueError("give exactly one of hourly_rps (24 rates) or trace (a CSV file)")
        if self.trace is not None:
            if self.prompt_cv or self.output_cv:
                raise ValueError("a trace's lengths are its own histogram; remove prompt_cv/output_cv")
            self._trace = read_trace(self.trace)
        return self

    @property
    def requests(self) -> TraceRequests | None:
        """The trace's requests, or None for an hourly profile."""
        return self._trace

    def rates(self) -> list[float]:
        """Requests/s in each hour of the day."""
        if self._trace is not None:
            return self._trace.hourly_rates()
        assert self.hourly_rps is not None  # _one_source
        return list(self.hourly_rps)


class PromptPrefix(_Strict):
    """A prompt prefix many requests share: a system prompt, or one of a few prompt templates.

    Engines keep a computed prefix's KV blocks (vLLM's automatic prefix caching and SGLang's radix cache are on
    by default, as are TGI's prefix caching and TensorRT-LLM's KV block reuse), so a request whose prompt starts
    with a cached prefix skips that part of its prefill; the simulator keeps each replica's cache
    (``perf/sim/prefix_cache.py``). `tokens` is part of the prompt (``traffic.prompt_tokens`` counts it).
    """

    tokens: Annotated[int, Field(ge=1, le=MAX_TOKENS)] = Field(description="Tokens of the shared prefix.")
    fraction: Annotated[float, Field(ge=0.0, le=1.0, allow_inf_nan=False)] = Field(
        default=1.0, description="Fraction of requests whose prompt starts with a shared prefix."
    )
    templates: Annotated[int, Field(ge=1, le=100_000)] = Field(
        default=1, description="Distinct prefixes (prompt templates), each as likely; 1: one system prompt."
    )

    def as_sharing(self) -> SharedPrefix:
        """What the simulator draws: which requests share which prefix."""
        return SharedPrefix(self.tokens, self.fraction, self.templates)


def check_prefix_inside_rows(prefix: PromptPrefix, requests: TraceRequests, trace: Path | None) -> None:
    """Every trace request's prompt is longer than the shared prefix it starts with (the prompt counts it), as
    for ``prompt_tokens``: a shorter row would be lengthened by the simulator, not served as recorded."""
    short = np.flatnonzero(np.asarray(requests.prompt_tokens, dtype=np.int64) <= prefix.tokens)
    if short.size:
        first = int(short[0])
        name = trace.name if trace is not None else "the trace"
        raise BadInputError(
            "traffic.shared_prefix.tokens",
            f"{prefix.tokens} tokens is not shorter than every prompt of {TRACE_FIELD}: {name} line "
            f"{requests.line_of(first)} has {requests.prompt_tokens[first]} ({short.size} such requests)",
            "give the prefix every request shares (shorter than the trace's shortest prompt), or drop those rows",
        )


class ConversationTurns(_Strict):
    """Multi-turn sessions: each turn's prompt is the previous turn's prompt, its answer and a new message.

    ``traffic.prompt_tokens`` is the first turn's prompt and ``requests_per_second`` counts every turn; the
    engines' prefix caches keep a finished turn's blocks for the next (``perf/sim/conversation.py``), so a turn
    prefills its new message when its history is still cached, the whole history again when it was evicted.
    """

    turns: Annotated[int, Field(ge=2, le=1000)] = Field(description="Requests per conversation.")
    think_time_s: Annotated[float, Field(gt=0, le=86_400, allow_inf_nan=False)] = Field(
        description="Seconds between a turn's arrival and the next's (the user's reading and typing)."
    )
    message_tokens: Annotated[int, Field(ge=1, le=MAX_TOKENS)] = Field(
        description="New tokens each later turn adds after the history it carries."
    )

    def as_sessions(self) -> Conversation:
        return Conversation(self.turns, self.think_time_s, self.message_tokens)


class FleetPolicy(_Strict):
    """How a fleet follows the profile: autoscaling's floor and headroom, and the GPU mix's length buckets."""

    min_replicas: Annotated[int, Field(ge=1, le=10_000)] = Field(default=1, description="Replicas kept up at night.")
    headroom: Annotated[float, Field(ge=1.0, le=10.0, allow_inf_nan=False)] = Field(
        default=1.2, description="Capacity kept above each hour's mean rate (1.2: 20 % for bursts within the hour)."
    )
    prompt_buckets: list[Annotated[int, Field(ge=1, le=MAX_TOKENS)]] = Field(
        default=[512, 2048],
        max_length=8,
        description="Prompt-length edges the GPU mix routes by (tokens); [512, 2048] makes three buckets.",
    )

    @field_validator("prompt_buckets")
    @classmethod
    def _increasing(cls, value: list[int]) -> list[int]:
        if any(b <= a for a, b in zip(value, value[1:], strict=False)):
            raise ValueError("bucket edges must increase, e.g. [512, 2048]")
        return value


def traffic_defaults(raw: Any) -> Any:
    """Before `Traffic` validates: a profile's peak rate and mean lengths fill the constant fields left out.

    A profile that does not validate fills placeholders instead, so the one error reported is the
    profile's own (``traffic.profile.hourly_rps: ...``), not a missing ``requests_per_second``.
    """
    if not isinstance(raw, dict) or raw.get("profile") is None:
        return raw
    try:
        profile = TrafficProfile.model_validate(raw["profile"])
    except ValidationError:
        return {"prompt_tokens": 1, "output_tokens": 1, "requests_per_second": 1.0, **raw}
    data = {**raw, "profile": profile}
    data.setdefault("requests_per_second", max(profile.rates()))
    if profile.requests is not None:
        data.setdefault("prompt_tokens", max(1, round(float(np.mean(profile.requests.prompt_tokens)))))
        data.setdefault("output_tokens", max(1, round(float(np.mean(profile.requests.output_tokens)))))
    return data


def hourly_rates(profile: TrafficProfile | None, requests_per_second: float) -> list[float]:
    """The 24 hourly rates: the profile's, or the constant rate every hour."""
    return profile.rates() if profile is not None else [requests_per_second] * HOURS_PER_DAY


def length_models(profile: TrafficProfile | None, prompt_tokens: int, output_tokens: int) -> tuple[Lengths, Lengths]:
    """What the simulator draws prompt and output lengths from: fixed means, lognormals, or the trace's histogram."""
    if profile is None:
        return prompt_tokens, output_tokens
    if profile.requests is not None:
        return EmpiricalLengths(tuple(profile.requests.prompt_tokens)), EmpiricalLengths(
            tuple(profile.requests.output_tokens)
        )
    prompt = LengthDist(prompt_tokens, profile.prompt_cv) if profile.prompt_cv else prompt_tokens
    output = LengthDist(output_tokens, profile.output_cv) if profile.output_cv else output_tokens
    return prompt, output


def with_absolute_trace(raw: Any, base: Path) -> Any:
    """The raw ``traffic`` mapping with its profile's trace path made absolute against the spec's folder."""
    if not isinstance(raw, dict) or not isinstance(raw.get("profile"), dict):
        return raw
    trace = raw["profile"].get("trace")
    if not isinstance(trace, str):
        return raw
    usable_path(Path(trace), field=TRACE_FIELD)  # a NUL byte or an over-long name: refused, not an OSError
    absolute = (base / expand_user(Path(trace), field=TRACE_FIELD)).resolve()
    return {**raw, "profile": {**raw["profile"], "trace": str(absolute)}}


class _TrafficLike(Protocol):
    profile: TrafficProfile | None
    prompt_tokens: int
    output_tokens: int
    requests_per_second: float
    shared_prefix: PromptPrefix | None
    conversation: ConversationTurns | None


def traffic_load(traffic: _TrafficLike) -> TrafficLoad:
    """The spec's `traffic` as the simulator draws it: its rate, mean lengths (a conversation's mean turn), length
    models (a conversation's first turn), shared prefix and conversations."""
    prompt, output = length_models(traffic.profile, traffic.prompt_tokens, traffic.output_tokens)
    prefix = traffic.shared_prefix.as_sharing() if traffic.shared_prefix is not None else None
    sessions = traffic.conversation.as_sessions() if traffic.conversation is not None else None
    mean_prompt = traffic.prompt_tokens
    if sessions is not None:
        mean_prompt = sessions.mean_prompt(traffic.prompt_tokens, traffic.output_tokens)
    return TrafficLoad(
        traffic.requests_per_second, mean_prompt, traffic.output_tokens, prompt, output, prefix, sessions
    )
