"""Stats lines read in bulk: no Python step per line.

The lines holding the anchor are found with whole-chunk operations (a split on the anchor, the
newline offsets with numpy). Each such line is reduced to its skeleton: the line with every digit
made `0`. A shape's pattern treats all digits alike (it has no digit literal), so a line matches a
shape exactly when its skeleton does, and with the same group spans. Each distinct skeleton is
matched once; the lines sharing one have their fields at the same offsets, and those fields are
read for all lines at once as columns of digits.

A float is read as integer digits divided by a power of ten: both exact in a double (at most 15
digits), so the quotient is the correctly rounded value, the same number `float()` gives.
Skeletons whose fields do not fit that (more digits, odd characters) are left to the line reader.
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view
import pandas as pd

from stages.formats.lines import MAX_LINE_BYTES, STAT_TYPES, BulkShape, StatBlock

_DIGITS_ALIKE = bytes.maketrans(b"0123456789", b"0" * 10)
_MAX_INT_DIGITS = 18
_MAX_FLOAT_DIGITS = 15
_DIVISORS = np.array([float(10**k) for k in range(_MAX_INT_DIGITS + 1)])
# A shifted field is read as round(float(field) * 10**shift, 9) reads it: exact while the result
# has at most 9 fraction digits and few whole digits (the product's error stays far below 1e-9).
_MAX_SHIFTED_FRACTION = 9
_MAX_SHIFTED_WHOLE = 5
_ZERO = ord("0")
_MAX_LAYOUTS = 4096


def anchored_lines(chunk: bytes, anchors: tuple[bytes, ...]
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(line offset within chunk, start, end) of each line holding one of `anchors`, in file
    order, each line once."""
    found = [p for p in (_anchor_positions(chunk, a) for a in anchors) if len(p)]
    if not found:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, empty
    positions = found[0] if len(found) == 1 else np.sort(np.concatenate(found))
    newlines = np.flatnonzero(np.frombuffer(chunk, dtype=np.uint8) == 10)
    offsets = np.searchsorted(newlines, positions)
    if len(offsets) > 1:
        offsets = offsets[np.concatenate(([True], offsets[1:] != offsets[:-1]))]
    starts = np.concatenate(([0], newlines + 1))[offsets]
    ends = np.append(newlines, len(chunk))[offsets]
    return offsets.astype(np.int64), starts.astype(np.int64), ends.astype(np.int64)


def _anchor_positions(chunk: bytes, anchor: bytes) -> np.ndarray:
    """Byte positions of every occurrence of `anchor`, ascending."""
    pieces = chunk.split(anchor)
    hits = len(pieces) - 1
    if hits == 0:
        return np.zeros(0, dtype=np.int64)
    sizes = np.fromiter(map(len, pieces), dtype=np.int64, count=hits)
    del pieces
    return np.cumsum(sizes) + np.arange(hits, dtype=np.int64) * len(anchor)


def _field(kind: type, text: bytes, shift: int = 0) -> tuple[int, int, int] | None:
    """(digits, power of ten to divide by, dot position or -1) of a field's skeleton, None when
    the field is not one this module reads (the line reader gets the line). A float field read
    with a `shift` is its value times 10**shift (a negative power: multiply)."""
    if kind is str:
        return (0, 0, -1) if text.isascii() and b"\x00" not in text and text else None
    dot = text.find(b".")
    digits = text.replace(b".", b"", 1) if kind is float else text
    if not digits or digits.strip(b"0") or (dot >= 0 and kind is not float):
        return None
    if len(digits) > (_MAX_FLOAT_DIGITS if kind is float else _MAX_INT_DIGITS):
        return None
    fraction = len(text) - dot - 1 if dot >= 0 else 0
    if shift and (fraction - shift > _MAX_SHIFTED_FRACTION
                  or len(digits) - fraction + shift > _MAX_SHIFTED_WHOLE):
        return None
    return len(digits), fraction - shift, dot


def _layout(key: bytes, shapes: tuple[BulkShape, ...]) -> tuple[int, list[tuple[int, int, int, int]]]:
    """The shape index of a skeleton (-1: none, or a field this module does not read) and, per
    column of that shape, (start, end, fraction digits, dot position)."""
    if len(key) > MAX_LINE_BYTES:
        return -1, []
    for index, shape in enumerate(shapes):
        m = shape.pattern.fullmatch(key)
        if m is None:
            continue
        fields = []
        for group, name in enumerate(shape.columns, start=1):
            start, end = m.span(group)
            got = (_field(STAT_TYPES[name], key[start:end], shape.shifts.get(name, 0))
                   if start >= 0 else None)
            if got is None:
                return -1, []
            fields.append((start, end, got[1], got[2]))
        return index, fields
    return -1, []


def _gather(data: np.ndarray, starts: np.ndarray, first: np.ndarray, widest: int) -> np.ndarray:
    """(rows, widest) bytes from each row's field start on (past the chunk's end: its last byte)."""
    at = starts + first
    if len(at) and at.max() + widest <= len(data):
        return sliding_window_view(data, widest)[at]
    index = at[:, None] + np.arange(widest, dtype=np.int64)
    np.minimum(index, len(data) - 1, out=index)
    return data[index]


def _weights(fields: np.ndarray, widest: int) -> np.ndarray:
    """Per skeleton, the power of ten of each position of a numeric field (0: the dot, or past
    the field's end), so that a field's value is the sum of digit x weight."""
    table = np.zeros((len(fields), widest), dtype=np.int64)
    for row, (start, end, _, dot) in enumerate(fields.tolist()):
        table[row, : end - start] = _places(end - start, dot)
    return table


@lru_cache(maxsize=1024)
def _places(width: int, dot: int) -> tuple[int, ...]:
    """The power of ten of each position of a field `width` long with its dot at `dot`."""
    places = [c for c in range(width) if c != dot]
    out = [0] * width
    for power, c in enumerate(reversed(places)):
        out[c] = 10**power
    return tuple(out)


def _number(data: np.ndarray, starts: np.ndarray, codes: np.ndarray, fields: np.ndarray,
            kind: type) -> np.ndarray:
    """A numeric field on each line from its digits: sum of digit x 10^place, the dot skipped."""
    widest = int((fields[:, 1] - fields[:, 0]).max())
    raw = _gather(data, starts, fields[:, 0][codes], widest)
    weights = _weights(fields, widest)[codes]
    value = np.einsum("ij,ij->i", raw.astype(np.int64) - _ZERO, weights)
    if kind is int:
        return value
    power = fields[:, 2][codes]
    out = value.astype(np.float64)
    if power.min() < 0:
        out *= _DIVISORS[np.maximum(-power, 0)]
        power = np.maximum(power, 0)
    return out / _DIVISORS[power]


def _text(data: np.ndarray, starts: np.ndarray, codes: np.ndarray,
          fields: np.ndarray) -> pd.Categorical:
    """A text field on each line, as a categorical of its distinct values."""
    width = fields[:, 1] - fields[:, 0]
    widest = int(width.max())
    raw = _gather(data, starts, fields[:, 0][codes], widest)
    if width.min() != widest:
        raw[np.arange(widest) >= width[codes][:, None]] = 0
    values = np.ascontiguousarray(raw).view(f"S{widest}").ravel()
    distinct, inverse = np.unique(values, return_inverse=True)
    return pd.Categorical.from_codes(inverse.ravel().astype(np.int32),
                                     [v.decode() for v in distinct.tolist()])


Layouts = dict[bytes, tuple[int, list[tuple[int, int, int, int]]]]


def read_bulk(chunk: bytes, first_line: int, anchors: tuple[bytes, ...],
              shapes: tuple[BulkShape, ...], layouts: Layouts | None = None
              ) -> tuple[list[StatBlock], dict[int, int], np.ndarray]:
    """The lines of `chunk` holding one of `anchors`: one StatBlock per shape met (rows in file order),
    {start: end} of the other anchored lines, for the line reader, and the starts of the lines
    read here. `layouts` keeps the skeletons already matched against `shapes` (one dict for the
    chunks of one file: the same skeletons come back chunk after chunk)."""
    offsets, starts, ends = anchored_lines(chunk, anchors)
    if not len(offsets):
        return [], {}, starts
    skeleton = chunk.translate(_DIGITS_ALIKE)
    keys = list(map(skeleton.__getitem__, map(slice, starts.tolist(), ends.tolist())))
    del skeleton
    distinct = {key: i for i, key in enumerate(dict.fromkeys(keys))}
    codes = np.fromiter(map(distinct.__getitem__, keys), dtype=np.int64, count=len(keys))
    del keys
    known = {} if layouts is None else layouts
    if len(known) > _MAX_LAYOUTS:
        known.clear()
    found = []
    for key in distinct:
        got = known.get(key)
        if got is None:
            got = known[key] = _layout(key, shapes)
        found.append(got)
    shape_of = np.array([index for index, _ in found], dtype=np.int64)[codes]
    data = np.frombuffer(chunk, dtype=np.uint8)
    blocks = []
    for index, shape in enumerate(shapes):
        rows = np.flatnonzero(shape_of == index)
        if not len(rows):
            continue
        fields = np.array([f if i == index else [(0, 0, 0, -1)] * len(shape.columns)
                           for i, f in found], dtype=np.int64)  # (skeletons, columns, 4)
        row_codes, row_starts = codes[rows], starts[rows]
        columns: dict[str, object] = {"line": first_line + offsets[rows]}
        for j, name in enumerate(shape.columns):
            kind = STAT_TYPES[name]
            if kind is str:
                columns[name] = _text(data, row_starts, row_codes, fields[:, j])
            else:
                columns[name] = _number(data, row_starts, row_codes, fields[:, j], kind)
        blocks.append(StatBlock(shape.kind, columns))
    rest = shape_of < 0
    return (blocks, dict(zip(starts[rest].tolist(), ends[rest].tolist())), starts[~rest])
