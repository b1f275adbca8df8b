"""Money is printed as money: plain decimals, never scientific notation, through one function."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from recommender.money import usd

PACKAGE = Path(__file__).resolve().parents[1] / "recommender"


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (3.6e-05, "$0.000036"),  # the demo's $/1M tokens, once printed "$3.6e-05"
        (3.5318844848484204e-05, "$0.000035"),
        (0.000159, "$0.00016"),
        (0.0823, "$0.082"),
        (0.74, "$0.74"),  # a GPU-hour
        (0.5, "$0.50"),  # cents are written with two decimals
        (3.49, "$3.49"),
        (12.5, "$12.50"),
        (795.7, "$796"),  # a month: whole dollars
        (1752.4, "$1,752"),
        (-1752.4, "-$1,752"),  # a saving that is a cost
        (0.0, "$0"),
        (None, "-"),
    ],
)
def test_amounts_print_as_plain_decimals(value: float | None, text: str) -> None:
    assert usd(value) == text


def test_significant_digits_below_a_dollar_and_cents_above_a_hundred_on_request() -> None:
    assert usd(3.5318844848484204e-05, significant=3) == "$0.0000353"
    assert usd(0.0823, significant=4) == "$0.08230"
    assert usd(324.2121, cents=True) == "$324.21"
    assert usd(321, cents=True) == "$321.00"


@pytest.mark.parametrize("exponent", range(-12, 8))
def test_no_amount_ever_prints_in_scientific_notation(exponent: int) -> None:
    for mantissa in (1.0, 3.6, 9.99):
        text = usd(mantissa * 10.0**exponent)
        assert "e" not in text.lower() and re.fullmatch(r"\$[0-9,]+(\.[0-9]+)?", text), text


def test_every_dollar_figure_in_the_package_goes_through_usd() -> None:
    """A `$` glued to a format spec (`f"${x:.2g}"`) is how `$3.6e-05` was printed: none may come back."""
    offenders = [
        f"{path.relative_to(PACKAGE.parent)}:{n}: {line.strip()}"
        for path in sorted(PACKAGE.rglob("*.py"))
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if re.search(r"\$\{[^}]*:[^}]*\}", line)
    ]
    assert offenders == []
