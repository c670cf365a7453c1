"""Where the result objects of a benchmark result file are, and on which lines: the file's one
object, the objects of its list, or one object per JSON line (--append-result); for an object
printed over several lines, the line of each top-level key's value, so that a figure cites the line
that holds it. What the objects say is read by bench_json."""
from __future__ import annotations

import json
import re

from stages.formats.lines import ParseError


_SPACE = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()


def key_lines(text: str, start: int) -> dict[str, int]:
    """{key: line of its value} of the top-level keys of the JSON object at text[start] (which
    parses), for an object printed over several lines (`indent`): a figure on a line of its own
    cites that line. A key given twice keeps its first line, as json.loads keeps the last value:
    the caller compares lines only for keys it read."""
    out: dict[str, int] = {}
    line, counted = 1 + text.count("\n", 0, start), start
    pos = _SPACE.match(text, start + 1).end()
    while pos < len(text) and text[pos] == '"':
        key, pos = json.decoder.scanstring(text, pos + 1)
        pos = _SPACE.match(text, pos).end() + 1            # past the colon
        pos = _SPACE.match(text, pos).end()
        line, counted = line + text.count("\n", counted, pos), pos
        out.setdefault(key, line)
        _, pos = _DECODER.raw_decode(text, pos)
        pos = _SPACE.match(text, pos).end()
        if pos < len(text) and text[pos] == ",":
            pos = _SPACE.match(text, pos + 1).end()
    return out


def _element_starts(text: str, start: int) -> list[int]:
    """Where each element of the JSON array at text[start] (which parses) begins."""
    starts = []
    pos = _SPACE.match(text, start + 1).end()
    while pos < len(text) and text[pos] != "]":
        starts.append(pos)
        _, pos = _DECODER.raw_decode(text, pos)
        pos = _SPACE.match(text, pos).end()
        if pos < len(text) and text[pos] == ",":
            pos = _SPACE.match(text, pos + 1).end()
    return starts


def objects_at(text: str) -> tuple[list[tuple[int, dict]], list[ParseError], list[dict[str, int] | None]]:
    """(line, object) for the file's one object, each object of its list or each JSON line, the
    errors that left any out, and the key lines of each object printed over several lines (else
    None)."""
    objects, errors = _objects_read(text)
    if len(objects) != 1 and not (objects and objects[0][0] == objects[-1][0]):
        return objects, errors, [None] * len(objects)      # JSON lines: one object a line
    first = len(text) - len(text.lstrip())
    starts = [first] if text[first:first + 1] == "{" else _element_starts(text, first)
    spread = []
    try:
        for at in starts:
            _, end = _DECODER.raw_decode(text, at)
            spread.append(key_lines(text, at) if "\n" in text[at:end] else None)
    except (ValueError, IndexError):     # not the one document read above: no line to move to
        spread = []
    return objects, errors, spread if len(spread) == len(objects) else [None] * len(objects)


def _objects_read(text: str) -> tuple[list[tuple[int, dict]], list[ParseError]]:
    stripped = text.strip()
    if not stripped:
        return [], [ParseError(1, "empty benchmark result file")]
    try:
        whole = json.loads(stripped)
    except json.JSONDecodeError as exc:
        whole_error = exc
    else:
        first = len(text) - len(text.lstrip())
        line = text.count("\n", 0, first) + 1
        if isinstance(whole, dict):
            return [(line, whole)], []
        if isinstance(whole, list) and all(isinstance(o, dict) for o in whole):
            return [(line, o) for o in whole], []
        return [], [ParseError(line, "benchmark result is not a JSON object")]
    lines = text.split("\n")
    first_json = next((i for i, l in enumerate(lines) if l.strip()), 0)
    try:
        json.loads(lines[first_json])
    except json.JSONDecodeError:
        return [], [ParseError(whole_error.lineno, f"not valid JSON: {whole_error.msg} "
                                                   f"(line {whole_error.lineno} column {whole_error.colno})")]
    out, errors = [], []
    for i, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw)
        except json.JSONDecodeError as exc:
            errors.append(ParseError(i, f"not valid JSON: {exc.msg} (column {exc.colno})"))
            continue
        if isinstance(obj, dict):
            out.append((i, obj))
        else:
            errors.append(ParseError(i, "JSON line is not an object"))
    return out, errors
