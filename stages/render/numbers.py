"""How numbers are printed: one value, a value with its unit, and the numbers of one table.

One value (`format_value`): thousands separators, and three significant digits by magnitude
(0 decimals from 1,000, 1 from 10, 2 from 1, three significant digits below 1).

A table (`table_displays`): the same quantity prints at one precision throughout the table, so
0.02 never stands beside 0.0244. The quantity is the fact's unit: for each unit, the decimals are
the most any of its float values needs for three significant digits (at most MAX_DECIMALS), and
every float of that unit is printed with them. Integers stay integers; a display the query wrote
itself (such as 4 GiB, or a signed change) is kept as written.
"""
from __future__ import annotations

import datetime as dt
import decimal
import math
from typing import Any, Iterable

SIGNIFICANT = 3
MAX_DECIMALS = 6


def format_value(value: Any, decimals: int | None = None) -> str:
    """Thousands separators, and decimals that suit the magnitude unless given."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, decimal.Decimal):
        value = int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, int):
        return f"{value:,}" if decimals is None else f"{value:,.{decimals}f}"
    if isinstance(value, float):
        if decimals is None:
            size = abs(value)
            if value == 0:
                return "0"
            if size < 1:
                return f"{value:.{SIGNIFICANT}g}"
            decimals = 0 if size >= 1000 else 1 if size >= 10 else 2
        return f"{value:,.{decimals}f}"
    if isinstance(value, (dt.date, dt.datetime)):
        return value.isoformat()
    return str(value)


def with_unit(display: str, unit: str | None) -> str:
    """A printed value and its unit: 71.3 s, 8,192 tokens, -9.1% (a percent sign takes no space);
    no value (-) takes no unit."""
    if not unit or display == "-":
        return display
    return f"{display}{unit}" if unit == "%" else f"{display} {unit}"


def needed_decimals(value: float) -> int:
    """Decimals that show three significant digits of value, as format_value chooses them."""
    size = abs(value)
    if size == 0 or not math.isfinite(size):
        return 0
    if size >= 1:
        return 0 if size >= 1000 else 1 if size >= 10 else 2
    return min(MAX_DECIMALS, SIGNIFICANT - 1 - math.floor(math.log10(size)))


def table_displays(cells: Iterable[tuple[Any, str | None, str]]) -> list[str]:
    """The displays of a table's numbers, given (value, unit, display) for each: the floats of one
    unit printed at one precision, every other display as given."""
    cells = list(cells)
    decimals: dict[str | None, int] = {}
    for value, unit, display in cells:
        if _reprintable(value, display):
            decimals[unit] = max(decimals.get(unit, 0), needed_decimals(value))
    return [format_value(value, decimals[unit]) if _reprintable(value, display) else display
            for value, unit, display in cells]


def _reprintable(value: Any, display: str) -> bool:
    """A float shown as format_value prints it (not a display the query wrote)."""
    return isinstance(value, float) and not isinstance(value, bool) and display == format_value(value)
