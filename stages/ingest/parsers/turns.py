"""Multi-turn workload logs: `ramp.log` and `agents.<workload>.jsonl` (JSON Lines).

Each workload opens with a `workload` line, then one `request` line per finished request, then a
`done` line (missing when the run stopped mid-workload). Rows carry the 1-based line they came
from. A line that is not JSON, lacks a required key or holds a value of the wrong type becomes a
ParseError and the rest of the file is still read; so does a request or done line whose workload
has no `workload` line before it in the file (nothing to attach it to).
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

from stages.formats.lines import ParseError, decode
from stages.formats.run_folder import parse_time

KINDS = ("ramp", "agents")
RAMP_LOG = "ramp.log"
AGENTS_PREFIX = "agents."
AGENTS_SUFFIX = ".jsonl"

# key -> (type name, nullable). Types: text, int, number, bool, object.
WORKLOAD_KEYS: dict[str, tuple[str, bool]] = {
    "workload": ("text", False), "kind": ("text", False), "sessions": ("int", False),
    "turns": ("int", False), "output_tokens": ("int", False), "seed": ("int", True),
    "params": ("object", True), "started_at": ("text", True),
}
REQUEST_KEYS: dict[str, tuple[str, bool]] = {
    "workload": ("text", False), "kind": ("text", False), "point_id": ("text", False),
    "session": ("int", False), "turn": ("int", False), "request_idx": ("int", False),
    "target_tokens": ("int", True), "input_tokens": ("int", True), "output_tokens": ("int", False),
    "ttft_s": ("number", True), "latency_s": ("number", True), "max_itl_s": ("number", True),
    "started_s": ("number", True), "needle_ok": ("bool", True), "answer": ("text", True),
    "error": ("text", False),
}
DONE_KEYS: dict[str, tuple[str, bool]] = {
    "workload": ("text", False), "requests": ("int", False), "failed": ("int", False),
    "wall_s": ("number", True),
}
# Keys a line may leave out (read as null); every other key of the lists above must be there.
OPTIONAL = {"seed", "params", "started_at", "target_tokens", "max_itl_s", "started_s",
            "needle_ok", "answer", "wall_s"}
ANSWER_CHARS = 200


@dataclass
class TurnsParse:
    workloads: list[dict[str, Any]] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)
    errors: list[ParseError] = field(default_factory=list)


def is_turns_log(name: str) -> bool:
    """A multi-turn log at the root of a run folder: ramp.log or agents.<workload>.jsonl."""
    if "/" in name:
        return False
    return name == RAMP_LOG or (name.startswith(AGENTS_PREFIX) and name.endswith(AGENTS_SUFFIX)
                                and len(name) > len(AGENTS_PREFIX) + len(AGENTS_SUFFIX))


def _type_ok(value: Any, kind: str) -> bool:
    if kind == "text":
        return isinstance(value, str)
    if kind == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return (isinstance(value, (int, float)) and not isinstance(value, bool)
                and math.isfinite(value))
    if kind == "bool":
        return isinstance(value, bool)
    return isinstance(value, dict)


_TYPE_WORDS = {"text": "a string", "int": "an integer", "number": "a finite number",
               "bool": "true or false", "object": "a JSON object"}


def check_keys(obj: dict[str, Any], keys: dict[str, tuple[str, bool]]) -> str | None:
    """Why `obj` does not fit `keys` (first problem only), or None."""
    missing = [k for k in keys if k not in obj and k not in OPTIONAL]
    if missing:
        return f"missing key(s) {', '.join(missing)}"
    for key, (kind, nullable) in keys.items():
        value = obj.get(key)
        if value is None:
            if not nullable:
                return f"{key} is null"
            continue
        if not _type_ok(value, kind):
            return f"{key} must be {_TYPE_WORDS[kind]}{' or null' if nullable else ''}, not {value!r:.40}"
    return None


def _json_line(text: str, number: int, last: bool, cut: bool, name: str
               ) -> tuple[dict[str, Any] | None, ParseError | None]:
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        if last and cut:
            return None, ParseError(number, f"{name}: last line cut short (no newline at the end): {exc.msg}")
        return None, ParseError(number, f"{name}: not valid JSON: {exc.msg}")
    if not isinstance(obj, dict):
        return None, ParseError(number, f"{name}: not a JSON object")
    return obj, None


def _workload_line_of(obj: dict[str, Any], keys: dict[str, tuple[str, bool]],
                      workloads: dict[str, dict[str, Any]]) -> tuple[dict[str, Any] | None, str | None]:
    """The workload line (its row) a request or done line belongs to, or why the line is refused:
    a key missing or of the wrong type, or no workload line before it."""
    problem = check_keys(obj, keys)
    head = workloads.get(obj.get("workload")) if problem is None else None
    if problem is None and head is None:
        problem = f"workload {obj['workload']!r:.60} has no workload line before it"
    return head, problem


def _clean(text: str | None, limit: int | None = None) -> str | None:
    if text is None:
        return None
    text = text.replace("\x00", "")
    return text[:limit] if limit else text


def _workload_row(obj: dict[str, Any], line: int) -> dict[str, Any]:
    params = obj.get("params")
    return {
        "workload": obj["workload"], "kind": obj["kind"], "sessions": obj["sessions"],
        "turns": obj["turns"], "output_tokens": obj["output_tokens"], "seed": obj.get("seed"),
        "params_json": None if params is None else json.dumps(params, sort_keys=True, ensure_ascii=False),
        "started_at": parse_time(obj.get("started_at")),
        "done_requests": None, "done_failed": None, "done_wall_s": None,
        "source_line": line,
    }


def _request_row(obj: dict[str, Any], line: int) -> dict[str, Any]:
    row = {key: obj.get(key) for key in REQUEST_KEYS}
    row["answer"] = _clean(row["answer"], ANSWER_CHARS)
    row["error"] = _clean(row["error"])
    row["source_line"] = line
    return row


def parse_turns(data: bytes, name: str = RAMP_LOG) -> TurnsParse:
    """Workload rows (with their done line's figures) and request rows of one log file."""
    out = TurnsParse()
    text = decode(data)
    lines = text.split("\n")
    cut = not text.endswith("\n")
    while lines and not lines[-1].strip():
        lines.pop()
    workloads: dict[str, dict[str, Any]] = {}
    done: set[str] = set()
    seen: dict[str, set[int]] = {}

    def error(number: int, reason: str) -> None:
        out.errors.append(ParseError(number, f"{name}: {reason}"))

    for number, raw in enumerate(lines, start=1):
        stripped = raw.strip()
        if not stripped:
            continue
        obj, err = _json_line(stripped, number, number == len(lines), cut, name)
        if err is not None:
            out.errors.append(err)
            continue
        event = obj.get("event")
        if event == "workload":
            problem = check_keys(obj, WORKLOAD_KEYS)
            if problem is None and obj["kind"] not in KINDS:
                problem = f"kind must be one of {', '.join(KINDS)}, not {obj['kind']!r:.40}"
            if problem is None and obj["workload"] in workloads:
                problem = f"a second workload line for {obj['workload']!r} (the first is kept)"
            if problem is not None:
                error(number, f"workload line: {problem}")
                continue
            row = _workload_row(obj, number)
            if obj.get("started_at") is not None and row["started_at"] is None:
                error(number, f"workload line: started_at {obj['started_at']!r:.40} is not an ISO 8601 time")
            workloads[obj["workload"]] = row
            seen[obj["workload"]] = set()
            out.workloads.append(row)
        elif event == "request":
            head, problem = _workload_line_of(obj, REQUEST_KEYS, workloads)
            if problem is None and obj["kind"] != head["kind"]:
                problem = f"kind {obj['kind']!r:.40} differs from its workload line's {head['kind']!r}"
            elif problem is None and obj["request_idx"] in seen[obj["workload"]]:
                problem = f"request_idx {obj['request_idx']} appears twice (the first is kept)"
            if problem is not None:
                error(number, f"request line: {problem}")
                continue
            seen[obj["workload"]].add(obj["request_idx"])
            out.requests.append(_request_row(obj, number))
        elif event == "done":
            head, problem = _workload_line_of(obj, DONE_KEYS, workloads)
            if problem is None and obj["workload"] in done:
                problem = f"a second done line for {obj['workload']!r} (the first is kept)"
            if problem is not None:
                error(number, f"done line: {problem}")
                continue
            done.add(obj["workload"])
            head.update(done_requests=obj["requests"], done_failed=obj["failed"],
                        done_wall_s=None if obj.get("wall_s") is None else float(obj["wall_s"]))
        else:
            error(number, f"unknown event {event!r:.40}")
    return out
