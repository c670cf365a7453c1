"""Strip the prefixes that engines and the tools around them put in front of a log message.

Shapes (LOG_FORMATS.md), stacked in any order:
  process tags        (APIServer pid=1) (EngineCore_DP0 pid=402) (VllmWorker rank=3 pid=88)
  vLLM header         INFO 10-10 05:07:25 [kv_cache_utils.py:1229]   (bracket missing up to 0.7,
                      time missing in pasted logs)
  uvicorn             INFO:     Application startup complete.
  docker --timestamps 2026-10-10T05:07:25.123456789Z
  CI                  [2025-03-10T15:07:20Z]
  SGLang              [2026-04-08 14:05:21 TP0]
  job runner          07:29:01 [INFO] [job]
  job wrapper         2026-06-09 14:01:52.982 [Error] (Process)
  docker compose      vllm-1  |  (service_1 with compose v1)
  journald            Dec  1 04:30:50 node1 vllm[1234]:
  torch ranks         [rank0]:
  ANSI colour codes   with or without their ESC byte
  progress bars       a tqdm bar glued to the front, or overwritten with carriage returns
"""
from __future__ import annotations

import re
from typing import NamedTuple


class Prefixed(NamedTuple):
    worker: str | None
    level: str | None
    log_time: str | None
    message: str


_LEVELS = r"DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL|FATAL"
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\[[0-9]{1,3}(?:;[0-9]{1,3})*m")

_VLLM_HEADER = re.compile(
    rf"({_LEVELS}) (?:(\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?) )?\[?([\w.\-]+\.py):\d+\] ?")
_PROCESS_TAG = re.compile(r"\(([A-Za-z_][\w\-]*(?: \w+=[\w.\-]+)+)\)\s*")
_DOCKER_TS = re.compile(
    r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?)\s+")
_BRACKET_TS = re.compile(
    r"\[(\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?)(?: ([A-Za-z][^\]]*))?\]\s*")
_JOB_RUNNER = re.compile(rf"(\d\d:\d\d:\d\d(?:[.,]\d+)?) \[({_LEVELS})\] \[[^\]]*\]\s*")
_WRAPPER = re.compile(
    rf"(\d{{4}}-\d\d-\d\d \d\d:\d\d:\d\d(?:[.,]\d+)?) \[({_LEVELS}|Error|Info|Warning|Debug)\]"
    r"(?: \([A-Za-z]\w*\))?\s+", re.IGNORECASE)
_COMPOSE = re.compile(r"[A-Za-z0-9][\w.\-]*[\-_]\d+ *\| ")  # service-1, service_1 (compose v1)
_JOURNALD = re.compile(
    r"([A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d) [\w.\-]+ [\w.@\-]+(?:\[\d+\])?: ")
_RANK = re.compile(r"\[rank\d+\]: ?")
_UVICORN = re.compile(rf"({_LEVELS}):\s+")
_PROGRESS = re.compile(
    r".*?\d+%(?:\|[^|]*\|| Completed \|)[^\[\n]*\[[^\]]*\]\s*")


# The common vLLM line, `(Tag pid=1) INFO 10-10 05:07:25 [file.py:12] message`, in one match.
_FAST = re.compile(
    rf"\(([A-Za-z_][\w\-]*(?: \w+=[\w.\-]+)+)\) ({_LEVELS}) (\d\d-\d\d \d\d:\d\d:\d\d) "
    r"\[[\w.\-]+\.py:\d+\] ?")


# The common SGLang line, `[2026-04-08 14:05:21 TP0] message`.
_FAST_BRACKET = re.compile(r"\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)(?: ([A-Za-z][^\]]*))?\] ")


def _clean(line: str) -> str:
    if "\r" in line:
        parts = [p for p in line.split("\r") if p.strip()]
        line = parts[-1] if parts else ""
    line = _ANSI.sub("", line)
    return line.rstrip("\n")


def _another_prefix(line: str, pos: int) -> bool:
    """Interleaved writers: a second tag or header right after an engine header."""
    n = len(line)
    while pos < n and line[pos] == " ":
        pos += 1
    if pos >= n:
        return False
    ch = line[pos]
    if ch == "(":
        return _PROCESS_TAG.match(line, pos) is not None
    return ch in "DIWECF" and _VLLM_HEADER.match(line, pos) is not None


def strip_prefixes(line: str) -> Prefixed:
    """Peel every known prefix off the front of `line`.

    worker is the innermost process tag (the process that wrote the message), level and log_time
    come from the engine's own header when it has one, else from the outer capture's prefix.
    """
    if line.startswith("(") and "\r" not in line:
        m = _FAST.match(line)
        if m and _ANSI.search(line) is None and not _another_prefix(line, m.end()):
            return Prefixed(m.group(1), m.group(2), m.group(3), line[m.end():].rstrip("\n"))
    elif line.startswith("[") and "\r" not in line:
        m = _FAST_BRACKET.match(line)
        if m and _ANSI.search(line) is None and not _another_prefix(line, m.end()):
            return Prefixed(m.group(2), None, m.group(1), line[m.end():].rstrip("\n"))
    line = _clean(line)
    worker = level = log_time = outer_time = outer_level = None
    pos = 0
    n = len(line)
    while pos < n:
        ch = line[pos]
        if ch == " " or ch == "\t":
            pos += 1
            continue
        m = None
        if pos == 0 and "| " in line:
            m = _COMPOSE.match(line)
            if m:
                pos = m.end()
                continue
        if ch == "(":
            m = _PROCESS_TAG.match(line, pos)
            if m:
                worker = m.group(1)
        elif ch == "[":
            m = _BRACKET_TS.match(line, pos)
            if m:
                outer_time = outer_time or m.group(1)
                if m.group(2):
                    worker = m.group(2)
            else:
                m = _RANK.match(line, pos)
        elif ch.isdigit():
            m = _DOCKER_TS.match(line, pos)
            if m:
                outer_time = outer_time or m.group(1)
            else:
                m = _JOB_RUNNER.match(line, pos) or _WRAPPER.match(line, pos)
                if m:
                    outer_time = outer_time or m.group(1)
                    outer_level = outer_level or m.group(2).upper()
        elif ch.isupper():
            m = _JOURNALD.match(line, pos) if line[pos + 1:pos + 3].islower() else None
            if m:
                outer_time = outer_time or m.group(1)
                pos = m.end()
                continue
            m = _VLLM_HEADER.match(line, pos)
            if m:
                level = m.group(1)
                if m.group(2):
                    log_time = m.group(2)
            else:
                m = _UVICORN.match(line, pos)
                if m:
                    level = level or m.group(1)
        if m is None and ("it/s]" in line or "s/it]" in line or "]" in line and "%" in line):
            m = _PROGRESS.match(line, pos)
            if m and m.end() >= n:
                m = None  # a bare progress line is a message of its own
        if m is None or m.end() == pos:
            break
        pos = m.end()
        if m.re is _VLLM_HEADER and not _another_prefix(line, pos):
            # the engine header is the last prefix: what follows is the message, indentation kept
            break
    return Prefixed(worker, level or outer_level, log_time or outer_time, line[pos:])
