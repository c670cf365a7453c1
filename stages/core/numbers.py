"""Numbers read from what the campaign is given, one rule for each kind of source, declared side by
side so that the difference between them is seen where they are declared:

  loose_float  a JSON value of a benchmark result or a gate probe record (vllm bench serve,
               SGLang's bench_serving, niah.log): a number, or a string float() reads ("12",
               " 3.5 ", "Infinity", as SGLang writes them); NaN and infinities are kept, for the
               caller to judge (bench_json.not_a_number); None for null, true/false, a list or
               an object
  loose_int    loose_float where finite, truncated to an int: a count written 12, 12.0 or "12"
  finite       a finite JSON number as written (an int or a float): never a string, NaN or an
               infinity; the other benchmark tools' summaries, where only a number is a figure
  strict_int   a JSON integer as written, never 3.0 or "3": a file the project writes itself (a
               node probe's meta.json)
  is_number    whether a value is a number (an int or a float, not true/false): params.yaml
  text_number  a number in a log line's text: white space, thousands commas and a sentence's
               closing full stop dropped ("1,024", "0.25."); None for any other text

Each is a rule of the core, so every stage reads a kind of value one way."""
from __future__ import annotations

import math
from typing import Any


def loose_float(value: Any) -> float | None:
    """A JSON number, or a string float() reads, as float (NaN and infinities as they are)."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value.strip())  # also Infinity and inf, in any case
        except ValueError:
            return None
    return None


def loose_int(value: Any) -> int | None:
    """loose_float where it is finite, truncated to an int."""
    number = loose_float(value)
    if number is None or not math.isfinite(number):
        return None
    return int(number)


def finite(value: Any) -> float | None:
    """A finite number as float, else None (bool, str, NaN, infinity, null)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def positive_count(value: Any) -> int | None:
    """finite where it is a whole number above 0 (3 or 3.0), as int; else None: a tool's
    concurrency setting."""
    number = finite(value)
    return int(number) if number is not None and number == int(number) and number > 0 else None


def summed_count(number: float) -> int | None:
    """A count a tool summed as floats, as int (1748.9999999999998 is its 1749), else None."""
    nearest = round(number)
    return int(nearest) if abs(number - nearest) <= 1e-9 * max(1.0, abs(number)) else None


def strict_int(value: Any) -> int | None:
    """A JSON integer as written (not true/false, not 3.0, not "3"), else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def is_number(value: Any) -> bool:
    """Whether `value` is an int or a float (true/false are not numbers)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def text_number(text: str) -> float | None:
    """The number a log line's text holds: white space, thousands commas and a closing full stop
    dropped; None where what is left is not a number."""
    try:
        return float(text.strip().rstrip(".").replace(",", ""))
    except ValueError:
        return None
