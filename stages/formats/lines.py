"""Shared pieces of the parsers: result records, safe decoding, and fast anchored line search.

A log parser never walks every line in Python. It asks `find_spans` and `number_spans` for the
lines that contain one of a few literal byte strings (found with `bytes.find`, which runs at memory speed),
and only those lines are decoded, stripped of their prefixes and matched with regexes.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, BinaryIO, Iterator, Sequence

from stages.formats.tailed import Chunk, as_chunks  # noqa: F401 - declared with the tail reader


# A line longer than this is cut before decoding (the anchor must fall inside the kept part).
MAX_LINE_BYTES = 64 * 1024
EXCERPT_CHARS = 500
CHUNK_BYTES = 4 * 1024 * 1024



@dataclass(frozen=True, slots=True)
class ParseError:
    line: int | None
    reason: str


# A `# key=value` settings line of a sampler's file (GPU samples, /metrics series).
SETTING_LINE = re.compile(r"^#\s*([A-Za-z_][\w.]*)=(.*)$")


@dataclass
class SampledFile:
    """A sampler's file of a benchmark point (gpu/<point_id>.csv, the /metrics series): its
    settings (key, value, line) for each `# key=value` line, one dict per sample, and its errors."""
    settings: list[tuple[str, str, int]] = field(default_factory=list)
    samples: list[dict[str, Any]] = field(default_factory=list)
    errors: list[ParseError] = field(default_factory=list)

    def setting(self, text: str, number: int) -> tuple[str, str] | None:
        """A `# key=value` line, kept in settings and returned as (key, value); None for another."""
        m = SETTING_LINE.match(text)
        if not m:
            return None
        key, value = m.group(1), m.group(2).strip()
        self.settings.append((key, value, number))
        return key, value


@dataclass(slots=True)
class Fact:
    fact: str
    line: int
    excerpt: str
    value_num: float | None = None
    value_text: str | None = None
    detail: str | None = None
    worker: str | None = None
    log_time: str | None = None


@dataclass(slots=True)
class Stat:
    kind: str
    line: int
    engine_idx: int | None = None
    log_time: str | None = None
    prompt_tok_s: float | None = None
    gen_tok_s: float | None = None
    running_reqs: int | None = None
    waiting_reqs: int | None = None
    kv_usage_pct: float | None = None
    prefix_hit_pct: float | None = None
    new_tokens: int | None = None
    cached_tokens: int | None = None
    extra: dict[str, float | str] = field(default_factory=dict)


STAT_TYPES = {
    "engine_idx": int, "log_time": str, "prompt_tok_s": float, "gen_tok_s": float,
    "running_reqs": int, "waiting_reqs": int, "kv_usage_pct": float, "prefix_hit_pct": float,
    "new_tokens": int, "cached_tokens": int,
}


@dataclass(frozen=True, slots=True)
class BulkShape:
    """A stats line shape read straight from the bytes: `pattern` must fullmatch the whole line
    and give, in order, the `columns` of a Stat (names of STAT_TYPES), and treat every digit alike
    (no digit literal: stages.formats.bulk matches a line's digit-blind skeleton). Lines of this
    shape are kept as arrays (StatBlock) instead of one Stat object each. `shifts` names float
    columns that hold their field times a power of ten, {column: power}, read as the line reader's
    round(float(field) * 10**power, 9) (SGLang's token usage, a fraction, as a percent)."""
    kind: str
    pattern: re.Pattern[bytes]
    columns: tuple[str, ...]
    shifts: dict[str, int] = field(default_factory=dict)


@dataclass(slots=True)
class StatBlock:
    """Stats lines of one shape, one array per column (`line` plus the shape's columns; a text
    column is a pandas Categorical)."""
    kind: str
    columns: dict[str, Any]

    def __len__(self) -> int:
        return len(self.columns["line"])

    def stats(self) -> list[Stat]:
        names = [n for n in self.columns if n != "line"]
        out = []
        for i, line in enumerate(self.columns["line"].tolist()):
            values = {n: self.columns[n][i] for n in names}
            out.append(Stat(kind=self.kind, line=line, **{
                n: (v if STAT_TYPES[n] is str else STAT_TYPES[n](v)) for n, v in values.items()}))
        return out


@dataclass(slots=True)
class LogParse:
    facts: list[Fact] = field(default_factory=list)
    line_stats: list[Stat] = field(default_factory=list)
    blocks: list[StatBlock] = field(default_factory=list)
    errors: list[ParseError] = field(default_factory=list)

    @property
    def stats(self) -> list[Stat]:
        """Every stats line as a Stat, in file order (the bulk ones materialised)."""
        if not self.blocks:
            return self.line_stats
        out = list(self.line_stats)
        for block in self.blocks:
            out.extend(block.stats())
        out.sort(key=lambda s: s.line)
        return out


def decode(raw: bytes) -> str:
    """Bytes to text that any database accepts: invalid UTF-8 replaced, NUL bytes dropped."""
    text = raw.decode("utf-8", errors="replace")
    if "\x00" in text:
        text = text.replace("\x00", "")
    return text


def text_lines(data: bytes) -> Iterator[tuple[int, str]]:
    """The lines of a small file that are not blank, decoded and stripped, with their numbers."""
    for number, line in enumerate(decode(data).split("\n"), start=1):
        text = line.strip()
        if text:
            yield number, text


@dataclass(frozen=True, slots=True)
class JsonProblem:
    """Why a text is not one JSON object: `detail` says what is wrong (the decoder's words, a key
    given twice, nesting too deep), at `line` and `column` of the text (from 1); `syntax` is
    false for a valid JSON value that is not an object."""
    detail: str
    line: int = 1
    column: int = 1
    syntax: bool = True

    @property
    def reason(self) -> str:
        """As the parsers report it: `not valid JSON: <detail>` or `not a JSON object`."""
        return f"not valid JSON: {self.detail}" if self.syntax else "not a JSON object"


class _DuplicateKey(ValueError):
    def __init__(self, key: str):
        super().__init__(key)
        self.key = key


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        raise _DuplicateKey(next(k for k, _ in pairs if k in seen or seen.add(k)))
    return obj


def read_json_object(text: str) -> dict[str, Any] | JsonProblem:
    """The one JSON object `text` holds (white space around it), by the one rule of every raw
    file's JSON object (a line of niah.log or a node probe's JSON lines, meta.json, env.json, the
    benchmark tools' summaries):
      - the top level is an object: any other value is a problem (`syntax` false);
      - a key given twice in any object is a problem: json.loads would keep the last value and
        hide the first;
      - NaN, Infinity and -Infinity are read as floats, since Python's json writes them (vllm
        bench serve, for a statistic of no requests): each parser judges a figure
        (stages.core.numbers.finite, bench_json.not_a_number) and says which one is not a number;
      - nesting too deep to read is a problem, never a RecursionError.
    The text is decoded by the caller with decode(), as every raw text is: an invalid UTF-8 byte
    (inside a generated text, say) is replaced, not a reason to lose the whole object."""
    try:
        obj = json.loads(text, object_pairs_hook=_unique_keys)
    except json.JSONDecodeError as exc:
        return JsonProblem(exc.msg, exc.lineno, exc.colno)
    except _DuplicateKey as exc:
        # where the key is written last (the value json.loads would have kept)
        written = [m.start() for m in re.finditer(re.escape(json.dumps(exc.key)) + r"\s*:", text)]
        at = written[-1] if written else 0
        return JsonProblem(f"key {exc.key!r} given twice", text.count("\n", 0, at) + 1,
                           at - text.rfind("\n", 0, at))
    except RecursionError:
        return JsonProblem("nested too deeply to read")
    if not isinstance(obj, dict):
        first = len(text) - len(text.lstrip())
        return JsonProblem("not an object", text.count("\n", 0, first) + 1, syntax=False)
    return obj


def json_object(text: str, number: int, what: str) -> dict[str, Any] | ParseError:
    """A line that holds one JSON object (read_json_object), or the error `<what>not valid JSON:
    ...` or `<what>not a JSON object` (`what`: the file, and what the line is, as the message
    starts)."""
    obj = read_json_object(text)
    return ParseError(number, f"{what}{obj.reason}") if isinstance(obj, JsonProblem) else obj


def json_file_object(data: bytes, name: str) -> dict[str, Any] | ParseError:
    """A file that holds one JSON object (read_json_object), or the error `<name>: not valid JSON:
    ...` (at the line where it breaks) or `<name>: not a JSON object`."""
    obj = read_json_object(decode(data))
    return ParseError(obj.line, f"{name}: {obj.reason}") if isinstance(obj, JsonProblem) else obj


def excerpt(text: str) -> str:
    text = text.rstrip("\r\n")
    return text if len(text) <= EXCERPT_CHARS else text[: EXCERPT_CHARS - 1] + "…"


def read_chunks(fh: BinaryIO, size: int = CHUNK_BYTES) -> Iterator[Chunk]:
    """Read a binary file in pieces that end at a newline, each with its first line number. The
    bytes after a piece's last newline are read again with the next piece (a seekable file) or
    carried over to it."""
    line = 1
    carry = b""
    seekable = fh.seekable()
    while True:
        block = fh.read(size)
        if not block:
            break
        buf = carry + block if carry else block
        cut = buf.rfind(b"\n")
        if cut < 0 and len(buf) < 4 * size:
            carry = buf
            continue
        if cut < 0:
            cut = len(buf) - 1
        if cut == len(buf) - 1:
            piece, carry = buf, b""
        elif seekable and not carry:
            piece, carry = buf[: cut + 1], b""
            fh.seek(cut + 1 - len(buf), 1)
        else:
            piece, carry = buf[: cut + 1], buf[cut + 1 :]
        yield line, piece
        line += piece.count(b"\n")
    if carry:
        yield line, carry


def line_span(data: bytes, pos: int) -> tuple[int, int]:
    start = data.rfind(b"\n", 0, pos) + 1
    end = data.find(b"\n", pos)
    return start, len(data) if end < 0 else end


def line_text(data: bytes, start: int, end: int) -> str:
    if end - start > MAX_LINE_BYTES:
        end = start + MAX_LINE_BYTES
    return decode(data[start:end])


def find_spans(data: bytes, anchors: Sequence[bytes], stop: int | None = None,
               spans: dict[int, int] | None = None) -> dict[int, int]:
    """{line start: line end} of each line holding an anchor that begins before `stop`."""
    spans = {} if spans is None else spans
    limit = len(data) if stop is None else min(stop, len(data))
    find = data.find
    for anchor in anchors:
        pos = find(anchor, 0, limit)
        while pos >= 0:
            start, end = line_span(data, pos)
            spans[start] = end
            pos = find(anchor, end, limit)
    return spans


def number_spans(data: bytes, spans: dict[int, int]) -> list[tuple[int, int, int]]:
    """(line offset within data, start, end) of each span, in file order."""
    out = []
    offset = 0
    last = 0
    count = data.count
    for start in sorted(spans):
        offset += count(b"\n", last, start)
        last = start
        out.append((offset, start, spans[start]))
    return out


_NAME_BYTES = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")


def first_valid_line(data: bytes, anchors: Sequence[tuple[bytes, bool, bytes | None]], accept
                     ) -> tuple[int, int, int, object] | None:
    """The earliest line holding an anchor for which `accept(text)` returns something truthy.

    anchors are (bytes, must follow a name character, allowed next bytes or None for any). A hit
    counts only when those byte checks pass; they keep a log full of near misses cheap.
    Returns (line offset within data, start, end, accept's result) or None.
    """
    best: tuple[int, int, object] | None = None
    n = len(data)
    for anchor, after_name, next_bytes in anchors:
        size = len(anchor)
        pos = data.find(anchor)
        while pos >= 0 and (best is None or pos < best[0]):
            after = pos + size
            if (next_bytes is None or after >= n or data[after] in next_bytes) and (
                    not after_name or (pos > 0 and data[pos - 1] in _NAME_BYTES)):
                start, end = line_span(data, pos)
                result = accept(line_text(data, start, end))
                if result:
                    if best is None or start < best[0]:
                        best = (start, end, result)
                    break
            pos = data.find(anchor, after)
    if best is None:
        return None
    start, end, result = best
    return data.count(b"\n", 0, start), start, end, result


def previous_line(data: bytes, start: int) -> str | None:
    if start <= 0:
        return None
    prev_start = data.rfind(b"\n", 0, start - 1) + 1
    return line_text(data, prev_start, start - 1)
