"""Prometheus text exposition (a /metrics scrape) -> samples.

Names are kept as exposed (`vllm:prefix_cache_hits_total`, older `gpu_`-prefixed names too);
labels are kept as written, without the braces.
"""
from __future__ import annotations

from typing import NamedTuple

from stages.parsers.scan import ParseError, decode


class Sample(NamedTuple):
    name: str
    labels: str | None
    value: float
    line: int


_SPECIAL = {"+inf": float("inf"), "inf": float("inf"), "-inf": float("-inf"), "nan": float("nan")}


def _value(text: str) -> float | None:
    lowered = text.lower()
    if lowered in _SPECIAL:
        return _SPECIAL[lowered]
    try:
        return float(text)
    except ValueError:
        return None


def _label_end(line: str, start: int) -> int:
    """Index of the `}` closing the label set opened at `start`, quotes respected; -1 if none."""
    in_quotes = False
    i = start + 1
    n = len(line)
    while i < n:
        ch = line[i]
        if in_quotes:
            if ch == "\\":
                i += 2
                continue
            if ch == '"':
                in_quotes = False
        elif ch == '"':
            in_quotes = True
        elif ch == "}":
            return i
        i += 1
    return -1


def sample_of_line(line: str, number: int) -> Sample | ParseError | None:
    text = line.strip()
    if not text or text.startswith("#"):
        return None
    brace = text.find("{")
    space = text.find(" ")
    if brace >= 0 and (space < 0 or brace < space):
        end = _label_end(text, brace)
        if end < 0:
            return ParseError(number, "metrics sample with an unclosed label set")
        name, labels, rest = text[:brace], text[brace + 1:end], text[end + 1:]
    else:
        if space < 0:
            return ParseError(number, "metrics sample without a value")
        name, labels, rest = text[:space], None, text[space:]
    fields = rest.split()
    if not name or not fields:
        return ParseError(number, "metrics sample without a value")
    value = _value(fields[0])
    if value is None:
        return ParseError(number, f"metrics value {fields[0][:40]!r} is not a number")
    return Sample(name, labels, value, number)


def parse_metrics(data: bytes) -> tuple[list[Sample], list[ParseError]]:
    samples: list[Sample] = []
    errors: list[ParseError] = []
    for number, line in enumerate(decode(data).split("\n"), start=1):
        got = sample_of_line(line, number)
        if isinstance(got, Sample):
            samples.append(got)
        elif got is not None:
            errors.append(got)
    return samples, errors
