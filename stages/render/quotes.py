"""Quotes that tell: a launch's server.log quoted at the lines that explain it (launch_quote).

A ready launch is quoted at the first line matching each `ready` pattern of site/quotes.yaml; a
failed one at its first error line and, by the first `errors` rule whose `match` finds that line,
at the last line before it matching each `explain` pattern. Copies of a quoted line from other
ranks (the same message once the process tag, level, time and numbers are set aside) are folded
into one line and a count. The block's `$ grep` command, run on the raw file, prints every line
the block shows (and the copies it folds). In a log that tails several services' logs
(stages/formats/tailed.py) only the engine's own blocks are quoted: another service's "Application
startup complete" or error is not the engine's, and the block says whose lines it kept."""
from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import yaml

from stages.core.config import SAFE_LOADER
from stages.formats.tailed import engine_lines
from stages.core.secrets import redact_text
from stages.render.errors import FactError
from stages.render.evidence import RAW_MAX, RawFileRefused, _shown, evidence_block, read_raw

QUOTES_FILE = Path(__file__).resolve().parents[2] / "site" / "quotes.yaml"
WIDTH = 200                # characters of a quoted line shown; the error line, the one readers
ERROR_WIDTH = 400          # came for, gets more
ANSI = re.compile(r"\x1b\[[0-9;]*m")
NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
# what stands before a log line's message: colour codes (with or without ESC), process tags
# `(Worker_TP3 pid=9)`, brackets `[2026-04-08 14:05:21 TP0]` `[core.py:843]` `[rank0]:`, level, time
PREFIX = re.compile(r"^(?:\s*(?:\x1b?\[[0-9;]+m|\([^()]*\)|\[[^\]]*\]:?|"
                    r"(?:DEBUG|INFO|WARNING|ERROR|CRITICAL)\b|\d\d-\d\d \d\d:\d\d:\d\d|"
                    r"\d{4}-\d\d-\d\d[T ][\d:.]+Z?))+\s*")
GREP_UNSAFE = re.compile(r"\\[^][.*+?|(){}^$\\]|\(\?")   # what grep -E and Python's re read apart


@dataclass(frozen=True)
class Rule:
    name: str
    match: str
    explain: tuple[str, ...]
    note: str | None = None


@dataclass(frozen=True)
class Quotes:
    ready: tuple[str, ...]
    errors: tuple[Rule, ...]


@dataclass
class Quoted:
    line: int                  # 1-based, as grep -n counts
    text: str
    copies: list[int]          # lines of the copies folded into it
    same: bool = True          # whether the copies' messages are the same to the digit
    width: int = WIDTH


def _pattern(where: str, value) -> str:
    if not isinstance(value, str) or not value or GREP_UNSAFE.search(value):
        raise FactError(f"quotes.yaml: {where}: {value!r} is not a pattern grep -E and Python read alike")
    try:
        re.compile(value)
    except re.error as exc:
        raise FactError(f"quotes.yaml: {where}: {exc}") from None
    return value


def load_quotes(path: Path = QUOTES_FILE) -> Quotes:
    return _parse(Path(path).read_text())


@lru_cache(maxsize=4)
def _parse(text: str) -> Quotes:
    data = yaml.load(text, Loader=SAFE_LOADER) or {}
    ready = tuple(_pattern(f"ready {e.get('name')}", e.get("pattern")) for e in data.get("ready") or [])
    errors = tuple(Rule(r.get("name"), _pattern(f"errors {r.get('name')} match", r.get("match")),
                        tuple(_pattern(f"errors {r.get('name')} explain", p) for p in r.get("explain") or []),
                        r.get("note"))
                   for r in data.get("errors") or [])
    return Quotes(ready, errors)


def message(line: str) -> str:
    """A line's message: what follows its colour codes, process tag, level and time."""
    return PREFIX.sub("", ANSI.sub("", line), count=1).strip()


def fold_key(line: str) -> str:
    return NUMBER.sub("#", message(line))


def _first(rx: re.Pattern, lines: list[str], before: int, kept: set[int] | None = None) -> int | None:
    return next((i for i in range(before) if (kept is None or i in kept) and rx.search(lines[i])), None)


def _last(rx: re.Pattern, lines: list[str], before: int, kept: set[int] | None = None) -> int | None:
    return next((i for i in reversed(range(before))
                 if (kept is None or i in kept) and rx.search(lines[i])), None)


@dataclass
class Quote:
    quoted: list[Quoted]
    patterns: list[str]        # grep -E finds every quoted line (and its copies) by these
    end: int                   # grep reads the log's first `end` lines (up to the error line)
    note: str | None = None


def pick(text: str, status: str | None, error_line: int | None, quotes: Quotes,
         spans: list[tuple[int, int]] | None = None) -> Quote:
    """What to quote of a whole log `text`, for a launch of `status` whose first error is at
    `error_line` (1-based; None when its log records none); `spans`: the (first, last) line spans
    that are the engine's own (a log tailing several services), None for all."""
    lines = text.split("\n")
    kept = None if spans is None else {i - 1 for first, last in spans for i in range(first, last + 1)}
    failed = status != "ready" and error_line and 0 < error_line <= len(lines)
    if not failed:
        quote = Quote([], list(quotes.ready), len(lines))
        chosen = [_first(re.compile(p), lines, len(lines), kept) for p in quote.patterns]
    else:
        err = error_line - 1
        rule = next((r for r in quotes.errors if re.search(r.match, lines[err])), None)
        quote = Quote([], list(rule.explain) if rule else [], error_line, rule.note if rule else None)
        chosen = [_last(re.compile(p), lines, err, kept) for p in quote.patterns] + [err]
        quote.patterns.append(rule.match if rule else _literal(message(lines[err]) or lines[err]))
    grepped = re.compile("|".join(quote.patterns))
    keys = {j: fold_key(lines[j]) for j in range(quote.end)
            if (kept is None or j in kept) and grepped.search(lines[j]) and not (failed and j == err)}
    taken: set[int] = set()
    for i in sorted({i for i in chosen if i is not None}):
        if i in taken:
            continue                      # already quoted as a copy of an earlier line
        group = [i] if failed and i == err else [j for j, key in keys.items() if key == keys[i]]
        taken.update(group)
        first = group[0]
        quote.quoted.append(Quoted(first + 1, lines[first], [j + 1 for j in group[1:]],
                                   all(message(lines[j]) == message(lines[first]) for j in group)))
    quote.quoted.sort(key=lambda q: q.line)
    if failed:
        quote.quoted[-1].width = ERROR_WIDTH
    return quote


def _literal(text: str) -> str:
    """The first 60 characters of `text` as a pattern that matches them literally."""
    return re.sub(r"([][.*+?|(){}^$\\])", r"\\\1", text[:60])


def _span(lines: list[int]) -> str:
    if lines == list(range(lines[0], lines[-1] + 1)):
        return f"line {lines[0]}" if len(lines) == 1 else f"lines {lines[0]}-{lines[-1]}"
    return f"between lines {lines[0]} and {lines[-1]}"


def _shown_line(text: str, width: int) -> str:
    text = redact_text(ANSI.sub("", text).rstrip("\r"))
    return text if len(text) <= width else text[:width] + " …"


def quote_lines(quoted: list[Quoted], note: str | None = None) -> list[str]:
    """The block's output lines: each quoted line numbered as grep -n numbers it, then its copies
    said in one line."""
    out = []
    for q in quoted:
        out.append(f"{q.line}:{_shown_line(q.text, q.width)}")
        if q.copies:
            how = "the same message" if q.same else "the same message but other numbers"
            out.append(f"  … and {len(q.copies)} more with {how} ({_span(q.copies)})")
    if note:
        out.append(f"# {note}")
    return out


def render_quote(run_id: str, status: str | None, error_line: int | None, *, runs_dir: Path,
                 root: Path, quotes_file: Path = QUOTES_FILE, engine: str | None = None) -> str:
    """The evidence block quoting run_id's server.log (see the module's docstring), HTML-escaped."""
    if "/" in str(run_id) or str(run_id) in ("", ".", ".."):
        raise FactError(f"launch_quote: bad run id {run_id!r}")
    quotes = load_quotes(quotes_file)
    path = runs_dir / run_id / "server.log"
    shown = shlex.quote(_shown(path, root))
    try:
        data, more = read_raw(path, (runs_dir,))
    except FileNotFoundError:
        return evidence_block(f"ls {shown}", [f"(no server.log in {_shown(path.parent, root)})"])
    except (RawFileRefused, OSError) as exc:
        reason = str(exc).split(": ", 1)[-1] if isinstance(exc, RawFileRefused) else exc.strerror
        return evidence_block(f"ls {shown}", [f"(not shown: {_shown(path, root)}: {reason})"])
    return quote_block(data.decode("utf-8", errors="replace"), status, error_line, _shown(path, root),
                       quotes, more, tailed=engine_lines(data, engine or "vllm"))


def quote_block(text: str, status: str | None, error_line: int | None, shown: str,
                quotes: Quotes, more: bool = False,
                tailed: tuple[str, list[tuple[int, int]]] | None = None) -> str:
    """The evidence block for a log's `text`, its command naming the file as `shown`; `tailed`:
    the engine's header name and line spans in a log tailing several services (engine_lines)."""
    quote = pick(text, status, error_line, quotes, tailed[1] if tailed else None)
    grep = f"grep -a -n -E {shlex.quote('|'.join(quote.patterns))}"
    shown = shlex.quote(shown)
    whole = quote.end >= len(text.split("\n"))
    command = f"{grep} {shown}" if whole else f"head -n {quote.end} {shown} | {grep}"
    if any("\x1b" in q.text for q in quote.quoted):
        command += r" | sed 's/\x1b\[[0-9;]*m//g'"
    out = quote_lines(quote.quoted, quote.note)
    if not quote.quoted:
        out = ["(no line of server.log matches these patterns)"]
    if tailed:
        out.append(f"# only the engine's lines, under ==> {tailed[0]} <==: this log tails several services' logs")
    if more:
        out.append(f"(read up to {RAW_MAX:,} bytes)")
    return evidence_block(command, out)
