"""Money as people write it: the one format for every dollar figure the tool prints.

A tiny model's price per million tokens is a few millionths of a dollar, and Python's
``g`` and ``e`` formats print that as ``$3.6e-05``, which nobody reads as money. Every
report, console table and message formats dollars through `usd`, so $/month, $/1M tokens
and $/GPU-hour look alike everywhere and never fall into scientific notation. A leaf
module (it imports nothing of the package), so any layer may use it.
"""

from __future__ import annotations

import math


def usd(value: float | None, *, significant: int = 2, cents: bool = False) -> str:
    """`value` US dollars as plain decimals: "$1,752", "$3.49", "$0.74", "$0.000036"; "-" for None.

    Args:
        value: the amount (negative: "-$5").
        significant: significant digits kept below one dollar, where whole cents would round a tiny
            model's $/1M tokens to "$0.00" (at least two decimals, as cents are written).
        cents: keep the cents from $100 up as well; without it such amounts are whole dollars
            ("$796/month"), which is what a monthly bill is compared by.
    """
    if value is None:
        return "-"
    if not math.isfinite(value):
        return f"${value}"
    sign, amount = ("-" if value < 0 else ""), abs(value)
    if amount == 0:
        return "$0"
    if amount >= 100 and not cents:
        text = f"{amount:,.0f}"
    elif amount >= 1:
        text = f"{amount:,.2f}"
    else:
        decimals = max(2, significant - 1 - math.floor(math.log10(amount)))
        text = f"{amount:.{decimals}f}"
    return f"{sign}${text}"
