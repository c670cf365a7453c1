"""The scanning loop shared by the engine log parsers, and the first error of a log.

Only lines holding an anchor are looked at; every other line costs one `bytes.find` pass per
anchor over the buffer. Startup anchors are looked for up to the engine's ready line only; the
steady anchors (periodic stats) and the error anchors everywhere. Two `error` facts at most: the
log's first, and the first after the ready line when the first came before it.
"""
from __future__ import annotations

import re
from typing import Callable, Iterable

import numpy as np

from stages.formats.bulk import Layouts, read_bulk
from stages.formats.prefixes import Prefixed, strip_prefixes
from stages.formats.lines import (
    BulkShape, Chunk, Fact, LogParse, ParseError, Stat, as_chunks, excerpt, find_spans,
    first_valid_line, line_span, line_text, number_spans, previous_line)

# (anchor, must follow a name character, allowed next bytes): `ValueError: ...`,
# `torch.OutOfMemoryError: ...`, `Exception: ...`, a bare `KeyboardInterrupt`, ...
_LINE_END = b":\r\n"
ERROR_ANCHORS = (
    (b"Error:", True, None), (b"Exception", False, _LINE_END), (b"Interrupt", True, _LINE_END),
    (b"Failed:", True, None),
)
_EXCEPTION = re.compile(
    r"((?:[A-Za-z_]\w*\.)*(?:[A-Z]\w*(?:Error|Exception|Interrupt|Failed|Exit)|Exception))(?::\s*(.*)|\s*)$")

FactsOf = Callable[[Prefixed, str, int], tuple[list[Fact], list[ParseError]]]
StatsOf = Callable[[Prefixed, int], "Stat | ParseError | None"]


def line_fact(name: str, p: Prefixed, raw: str, line: int, **values) -> Fact:
    """A fact stated by one log line, with its excerpt and the line's worker and time."""
    return Fact(fact=name, line=line, excerpt=excerpt(raw), worker=p.worker, log_time=p.log_time,
                **values)


def exception_of(message: str) -> tuple[str, str] | None:
    """(exception type, message) when a log message is an exception line, else None."""
    m = _EXCEPTION.match(message.strip())
    if not m:
        return None
    return m.group(1), (m.group(2) or "").strip()


def _with_lookback(p: Prefixed, data: bytes, start: int, before: bytes = b"") -> Prefixed:
    """A message printed on the line after its prefixes (interleaved writers) takes their tags;
    `before` is the previous chunk, for a line that opens its chunk."""
    if p.worker is not None or p.log_time is not None:
        return p
    prev = previous_line(data, start) if start > 0 else previous_line(before, len(before))
    if prev is None:
        return p
    q = strip_prefixes(prev)
    if q.message.strip() or (q.worker is None and q.log_time is None):
        return p
    return Prefixed(q.worker, q.level, q.log_time, p.message)


def _accept_error(text: str):
    p = strip_prefixes(text)
    found = exception_of(p.message)
    return (p, found) if found else None


def scan_log(data: bytes | Iterable[Chunk], *, startup: tuple[bytes, ...], ready: bytes,
             steady: tuple[bytes, ...], facts_of: FactsOf, stats_of: StatsOf, stats_word: str,
             lookback: bool = True, bulk: tuple[BulkShape, ...] = ()) -> LogParse:
    """The scanning loop shared by the engine log parsers.

    A steady line that fullmatches one of the `bulk` shapes is read straight from the bytes into
    that shape's columns (stages.formats.bulk; it states no startup fact); every other anchored
    line is decoded, stripped of its prefixes and given to `facts_of` and `stats_of`.
    """
    result = LogParse()
    first_error: Fact | None = None
    late_error: Fact | None = None
    ready_line: int | None = None
    starting = True
    layouts: Layouts = {}
    before = b""
    for first_line, chunk in as_chunks(data):
        spans: dict[int, int] = {}
        if starting:
            at = chunk.find(ready)
            stop = None if at < 0 else line_span(chunk, at)[1]
            find_spans(chunk, startup + (ready,), stop, spans)
            starting = at < 0
            if stop is not None:
                ready_line = first_line + chunk.count(b"\n", 0, stop)
        if bulk:
            found, rest, matched = read_bulk(chunk, first_line, steady, bulk, layouts)
            result.blocks.extend(found)
            if spans and len(matched):
                # a line of a bulk shape states no startup fact
                for start in np.array(list(spans))[np.isin(list(spans), matched)].tolist():
                    del spans[start]
            spans.update(rest)
        else:
            find_spans(chunk, steady, None, spans)
        for offset, start, end in number_spans(chunk, spans):
            line = first_line + offset
            raw = line_text(chunk, start, end)
            p = strip_prefixes(raw)
            if lookback:
                p = _with_lookback(p, chunk, start, before)
            facts, errors = facts_of(p, raw, line)
            result.facts.extend(facts)
            result.errors.extend(errors)
            if stats_word in p.message:
                stat = stats_of(p, line)
                if isinstance(stat, Stat):
                    result.line_stats.append(stat)
                elif stat is not None:
                    result.errors.append(stat)
        if first_error is None:
            first_error = first_error_fact(chunk, first_line, before)
        if ready_line is not None and late_error is None and (
                first_error is None or first_error.line < ready_line):
            late_error = _error_after(chunk, first_line, ready_line, before)
        before = chunk
    if first_error is not None:
        result.facts.append(first_error)
    if late_error is not None and late_error is not first_error:
        result.facts.append(late_error)
    result.facts.sort(key=lambda f: f.line)
    return result


def _error_after(chunk: bytes, first_line: int, ready_line: int, before: bytes) -> Fact | None:
    """The first error of `chunk` on a line after `ready_line` (an engine that died once it was
    serving, where an earlier error belonged to a launch that never became ready)."""
    if first_line > ready_line:
        return first_error_fact(chunk, first_line, before)
    start = 0
    for _ in range(ready_line - first_line + 1):
        start = chunk.find(b"\n", start) + 1
        if start == 0:
            return None
    return first_error_fact(chunk[start:], ready_line + 1, chunk[:start])


def first_error_fact(chunk: bytes, first_line: int, before: bytes = b"") -> Fact | None:
    hit = first_valid_line(chunk, ERROR_ANCHORS, _accept_error)
    if hit is None:
        return None
    offset, start, end, (p, (kind, message)) = hit
    p = _with_lookback(p, chunk, start, before)
    raw = line_text(chunk, start, end)
    return Fact(fact="error", line=first_line + offset, excerpt=excerpt(raw), value_text=message[:2000],
                detail=kind, worker=p.worker, log_time=p.log_time)
