"""Prometheus text exposition (a /metrics scrape) -> samples.

Names are kept as exposed (`vllm:prefix_cache_hits_total`, older `gpu_`-prefixed names too);
labels are kept as written, without the braces.
"""
from __future__ import annotations

import re
from typing import NamedTuple

from stages.formats.lines import ParseError, decode


class Sample(NamedTuple):
    name: str
    labels: str | None
    value: float
    line: int


def _value(text: str) -> float | None:
    try:
        return float(text)  # also reads +Inf, -Inf and NaN, in any case
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
        end = text.find("}", brace)
        if end < 0 or text.count('"', brace, end) % 2 or "\\" in text:
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


# A whole well-formed sample line: name, optional label set, value, optional timestamp. Used on
# the whole text at once; a file with any other line (or a label set whose first `}` may sit
# inside quotes) goes to the line reader.
_SAMPLE_LINE = re.compile(
    r"^([^\s{#][^\s{]*)(\{[^}\n]*\})?[ \t]+(\S+)(?:[ \t]+-?\d+)?[ \t]*\r?$", re.MULTILINE)


class Columns(NamedTuple):
    """The samples of one scrape as columns."""
    names: list[str]
    labels: list[str | None]
    values: list[float]
    lines: list[int]


def _bulk(text: str, lines: list[str]) -> Columns | None:
    """Every sample of a file whose non-comment lines are all well formed; else None."""
    if "\\" in text:
        return None
    numbers = [n for n, line in enumerate(lines, start=1) if line and line[0] != "#"]
    found = _SAMPLE_LINE.findall(text)
    if len(found) != len(numbers):
        return None
    if not found:
        return Columns([], [], [], [])
    names, labels, values = zip(*found)
    if any(label.count('"') % 2 for label in labels):
        return None
    try:
        read = list(map(float, values))
    except ValueError:
        return None
    return Columns(list(names), [label[1:-1] if label else None for label in labels], read, numbers)


def _read_lines(lines: list[str]) -> tuple[list[Sample], list[ParseError]]:
    samples: list[Sample] = []
    errors: list[ParseError] = []
    for number, line in enumerate(lines, start=1):
        got = sample_of_line(line, number)
        if isinstance(got, Sample):
            samples.append(got)
        elif got is not None:
            errors.append(got)
    return samples, errors


def parse_columns(data: bytes) -> tuple[Columns, list[ParseError]]:
    """The samples of a scrape as columns, and the lines that could not be read."""
    text = decode(data)
    lines = text.split("\n")
    fast = _bulk(text, lines)
    if fast is not None:
        return fast, []
    samples, errors = _read_lines(lines)
    if not samples:
        return Columns([], [], [], []), errors
    names, labels, values, numbers = (list(c) for c in zip(*samples))
    return Columns(names, labels, values, numbers), errors


def parse_metrics(data: bytes) -> tuple[list[Sample], list[ParseError]]:
    columns, errors = parse_columns(data)
    return [Sample(*row) for row in zip(*columns)], errors
