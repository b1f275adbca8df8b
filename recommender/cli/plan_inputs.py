"""`recommender plan`'s flags turned into the spec's own typed traffic and SLA, every refusal naming its flag.

The command line's number parsing accepts ``inf`` and ``nan`` and has no upper bounds; the
spec's models refuse both and bound every size, so the flags go through those models and
a refusal names the flag the user typed, not the model's field.
"""

from __future__ import annotations

from pydantic import ValidationError

from recommender.config.candidate import MAX_BATCH
from recommender.config.spec import LatencySLA, Traffic
from recommender.errors import BadInputError, pydantic_message

FLAG_OF = {
    "prompt_tokens": "--prompt-tokens",
    "output_tokens": "--output-tokens",
    "requests_per_second": "--rps",
    "ttft_p99_ms": "--ttft-ms",
    "tpot_p99_ms": "--tpot-ms",
}


def traffic_and_sla(
    *, prompt_tokens: int, output_tokens: int, rps: float, ttft_ms: float, tpot_ms: float
) -> tuple[Traffic, LatencySLA]:
    """The flags as the spec's Traffic and LatencySLA (finite, positive, bounded)."""
    try:
        traffic = Traffic(prompt_tokens=prompt_tokens, output_tokens=output_tokens, requests_per_second=rps)
        sla = LatencySLA(ttft_p99_ms=ttft_ms, tpot_p99_ms=tpot_ms)
    except ValidationError as exc:
        first = exc.errors()[0]
        flag = FLAG_OF.get(str(first["loc"][0]), str(first["loc"][0]))
        raise BadInputError(flag, f"{first['input']!r}: {pydantic_message(dict(first))}",
                            "give a finite positive number in range") from None  # fmt: skip
    return traffic, sla


def distinct(values: list[str] | list[int], *, flag: str) -> None:
    """A repeated flag value is refused (as in a spec: a repeat is usually a typo for another value)."""
    for i, value in enumerate(values):
        if value in values[:i]:
            raise BadInputError(flag, f"{value} given twice", "give each value once")


def check_batch_sizes(values: list[int], *, flag: str = "--batch-size") -> None:
    distinct(values, flag=flag)
    for value in values:
        if value > MAX_BATCH:
            raise BadInputError(flag, f"{value} is over {MAX_BATCH} concurrent sequences", "give a realistic batch")
