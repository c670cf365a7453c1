"""The small files of a run folder: niah.log, meta.json and import.json (the run id and the times
they hold: stages/formats/run_folder.py; launch.out: stages/formats/launch_out.py)."""
from __future__ import annotations

import re
from typing import Any

from stages.core.numbers import loose_float
from stages.formats.lines import ParseError, json_file_object, json_object, text_lines
from stages.formats.run_folder import SCHEMA_VERSIONS

_GATE = re.compile(r"^GATE\s+(\S+)\s+score=\s*(\S+)")
_SHOWN = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._- ")


def shown(text: str, limit: int = 80) -> str:
    """`text` quoted so that it is inert anywhere it is printed: letters, digits, '.', '_', '-'
    and spaces as they are, any other character as a \\x or \\u escape; cut at `limit` characters."""
    out = "".join(c if c in _SHOWN else f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}"
                  if ord(c) < 0x10000 else f"\\U{ord(c):08x}" for c in text[:limit])
    return f"'{out}'" + ("..." if len(text) > limit else "")


def parse_niah(data: bytes) -> tuple[list[dict[str, Any]], list[tuple[str, float | None, int]], list[ParseError]]:
    """Probes (one JSON object per line) and gates (`GATE <name> score= X`) of a niah.log."""
    probes: list[dict[str, Any]] = []
    gates: list[tuple[str, float | None, int]] = []
    errors: list[ParseError] = []
    for number, text in text_lines(data):
        if text.startswith("{"):
            obj = json_object(text, number, "niah.log: probe is ")
            if isinstance(obj, ParseError):
                errors.append(obj)
                continue
            probes.append(_probe(obj, len(probes), number))
        elif text.startswith("GATE"):
            m = _GATE.match(text)
            if not m:
                errors.append(ParseError(number, f"niah.log: GATE line not understood: {text[:80]!r}"))
                continue
            try:
                score: float | None = float(m.group(2))
            except ValueError:
                errors.append(ParseError(number, f"niah.log: gate score {m.group(2)!r} is not a number"))
                score = None
            gates.append((m.group(1), score, number))
    return probes, gates, errors


def _probe(obj: dict[str, Any], idx: int, line: int) -> dict[str, Any]:
    ok = obj.get("ok")
    tokens = loose_float(obj.get("prompt_tokens"))
    reasoning = loose_float(obj.get("reasoning_tokens"))
    answer, failure = obj.get("answer"), obj.get("failure")
    key = obj.get("key")
    return {
        "probe_idx": idx,
        "needle_key": None if key is None else str(key),
        "depth": loose_float(obj.get("depth")),
        "prompt_tokens": None if tokens is None else int(tokens),
        "ok": ok if isinstance(ok, bool) else None,
        "latency_s": loose_float(obj.get("latency_s")),
        "answer": None if answer is None else str(answer).replace("\x00", ""),
        "failure": None if failure is None else str(failure).replace("\x00", ""),
        "reasoning_tokens": None if reasoning is None else int(reasoning),
        "source_line": line,
    }


def parse_meta(data: bytes) -> tuple[dict[str, Any] | None, list[ParseError]]:
    """meta.json as a dict, or None with the reason it cannot be used."""
    return _json_record(data, "meta.json", SCHEMA_VERSIONS)


def parse_import(data: bytes) -> tuple[dict[str, Any] | None, list[ParseError]]:
    """import.json (the record `campaign import` writes beside the files it copied) as a dict, or
    None with the reason it cannot be used."""
    return _json_record(data, "import.json", SCHEMA_VERSIONS, record="import")


def _json_record(data: bytes, name: str, versions: tuple[int, ...], record: str | None = None
                 ) -> tuple[dict[str, Any] | None, list[ParseError]]:
    """A JSON object of a known schema_version (and `record` kind, where given), or None with why."""
    parsed = json_file_object(data, name)
    if isinstance(parsed, ParseError):
        return None, [parsed]
    if record is not None and parsed.get("record") != record:
        return None, [ParseError(1, f"{name}: not an {record} record (record: {record})")]
    version = parsed.get("schema_version")
    if version not in versions:
        return None, [ParseError(1, f"{name}: schema_version {version!r} is not one this ingest "
                                    f"knows ({', '.join(map(str, versions))})")]
    return parsed, []
