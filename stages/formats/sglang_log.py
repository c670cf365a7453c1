"""SGLang server log: startup facts, readiness, the first error, Prefill/Decode batch lines."""
from __future__ import annotations

import re
from typing import Iterable

from stages.core.numbers import text_number
from stages.formats.engine_log import line_fact, scan_log
from stages.formats.prefixes import Prefixed
from stages.formats.lines import BulkShape, Chunk, Fact, LogParse, ParseError, Stat
from stages.formats.tailed import engine_view

STARTUP_ANCHORS = (b"max_total_num_tokens", b"max_running_requests", b"context_len", b"Load weight end",
                   b"KV Cache is allocated")
READY = b"fired up and ready"
STEADY_ANCHORS = (b"Prefill batch", b"Decode batch")
STARTUP_KEYS = (
    "max_total_num_tokens", "chunked_prefill_size", "max_prefill_tokens", "max_running_requests",
    "context_len",
)
_PAIR = re.compile(r"\b(max_total_num_tokens|chunked_prefill_size|max_prefill_tokens"
                   r"|max_running_requests|context_len)\s*=\s*(-?\d+)")
_ALLOCATED = re.compile(r"KV Cache is allocated\..*?#tokens: (\d+)")
_WEIGHTS = re.compile(r"mem usage=(-?[\d.]+) ?(GB|GiB)")
_BATCH = re.compile(r"(Prefill|Decode) batch[.,]?\s*(.*)")
_FIELD = re.compile(r"(#?[A-Za-z][\w\- ()/#]{0,63}?):\s*([^,]+)")   # a key is short: no scan to the end of a long line
_DP = re.compile(r"\bDP(\d+)\b")
_DECODE_COMMON = re.compile(
    r"Decode batch[.,] #running-req: (\d+), #token: (\d+), token usage: (\d+\.?\d*), "
    r"(?:cuda graph: (True|False), )?gen throughput \(token/s\): (\d+\.?\d*), #queue-req: (\d+),?\s*$")
_PREFILL_COMMON = re.compile(
    r"Prefill batch[.,] #new-seq: (\d+), #new-token: (\d+), #cached-token: (\d+), "
    r"token usage: (\d+\.?\d*), #running-req: (\d+), #queue-req: (\d+),?\s*$")

# The same two shapes read straight from the bytes with their `[time]` or `[time TPn]` prefix
# (no DP rank: no engine index): what strip_prefixes and _fast_stats would make of such a line.
_BULK_HEAD = rb"\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)(?: TP\d+)?\] "
BULK_SHAPES = (
    BulkShape("sglang_decode", re.compile(
        _BULK_HEAD + rb"Decode batch[.,] #running-req: (\d+), #token: \d+, token usage: (\d+\.?\d*), "
        rb"(?:cuda graph: (?:True|False), )?gen throughput \(token/s\): (\d+\.?\d*), "
        rb"#queue-req: (\d+),?[ \t]*"),
        ("log_time", "running_reqs", "kv_usage_pct", "gen_tok_s", "waiting_reqs"),
        {"kv_usage_pct": 2}),
    BulkShape("sglang_prefill", re.compile(
        _BULK_HEAD + rb"Prefill batch[.,] #new-seq: \d+, #new-token: (\d+), #cached-token: (\d+), "
        rb"token usage: (\d+\.?\d*), #running-req: (\d+), #queue-req: (\d+),?[ \t]*"),
        ("log_time", "new_tokens", "cached_tokens", "kv_usage_pct", "running_reqs", "waiting_reqs"),
        {"kv_usage_pct": 2}),
)

_COLUMNS = {
    "#new-token": "new_tokens",
    "#cached-token": "cached_tokens",
    "#running-req": "running_reqs",
    "#queue-req": "waiting_reqs",
    "gen throughput (token/s)": "gen_tok_s",
    "input throughput (token/s)": "prompt_tok_s",
}
_USAGE_KEYS = ("token usage", "full token usage")
_INT_COLUMNS = {"new_tokens", "cached_tokens", "running_reqs", "waiting_reqs"}


def facts_of_line(p: Prefixed, raw: str, line: int) -> tuple[list[Fact], list[ParseError]]:
    msg = p.message
    out: list[Fact] = []
    errors: list[ParseError] = []
    if "=" in msg and any(key in msg for key in STARTUP_KEYS):
        for key, value in _PAIR.findall(msg):
            out.append(line_fact(key, p, raw, line, value_num=float(value)))
    if "Load weight end" in msg:
        m = _WEIGHTS.search(msg)
        if m:
            out.append(line_fact("weights_gib", p, raw, line, value_num=float(m.group(1)),
                                 detail=m.group(2)))
        else:
            errors.append(ParseError(line, "Load weight end line without mem usage"))
    if "KV Cache is allocated" in msg:
        m = _ALLOCATED.search(msg)
        if m:  # one line per pool and rank; max_total_num_tokens is the pool itself
            out.append(line_fact("kv_allocated_tokens", p, raw, line, value_num=float(m.group(1))))
    if "fired up and ready" in msg:
        out.append(line_fact("ready", p, raw, line, value_num=1.0))
    return out, errors


def _fast_stats(p: Prefixed, line: int) -> Stat | None:
    """The two most common batch line shapes, read in one match each."""
    m = _DECODE_COMMON.match(p.message)
    if m:
        running, tokens, usage, graph, gen, queue = m.groups()
        stat = Stat(kind="sglang_decode", line=line, log_time=p.log_time, running_reqs=int(running),
                    kv_usage_pct=round(float(usage) * 100.0, 9), gen_tok_s=float(gen),
                    waiting_reqs=int(queue), extra={"#token": float(tokens)})
        if graph is not None:
            stat.extra["cuda graph"] = graph
    else:
        m = _PREFILL_COMMON.match(p.message)
        if not m:
            return None
        seqs, new, cached, usage, running, queue = m.groups()
        stat = Stat(kind="sglang_prefill", line=line, log_time=p.log_time, new_tokens=int(new),
                    cached_tokens=int(cached), kv_usage_pct=round(float(usage) * 100.0, 9),
                    running_reqs=int(running), waiting_reqs=int(queue), extra={"#new-seq": float(seqs)})
    if p.worker:
        dp = _DP.search(p.worker)
        if dp:
            stat.engine_idx = int(dp.group(1))
    return stat


def stats_of_line(p: Prefixed, line: int) -> Stat | ParseError | None:
    """One `Prefill batch. #new-seq: ...` or `Decode batch. #running-req: ...` line."""
    fast = _fast_stats(p, line)
    if fast is not None:
        return fast
    m = _BATCH.search(p.message)
    if not m:
        return None
    kind = "sglang_prefill" if m.group(1) == "Prefill" else "sglang_decode"
    stat = Stat(kind=kind, line=line, log_time=p.log_time)
    if p.worker:
        dp = _DP.search(p.worker)
        if dp:
            stat.engine_idx = int(dp.group(1))
    found = 0
    for key, value in _FIELD.findall(m.group(2)):
        key = key.strip()
        number = text_number(value)
        if number is None:
            stat.extra[key] = value.strip()
            continue
        found += 1
        if key in _USAGE_KEYS:
            stat.kv_usage_pct = round(number * 100.0, 9)
            continue
        column = _COLUMNS.get(key)
        if column is None:
            stat.extra[key] = number
        else:
            setattr(stat, column, int(number) if column in _INT_COLUMNS else number)
    if not found:
        return ParseError(line, f"{m.group(1)} batch line without fields")
    return stat


def parse_sglang_log(data: bytes | Iterable[Chunk]) -> LogParse:
    """Facts, batch stats and unreadable known lines of an SGLang server log (of a whole file that
    tails several services' logs, SGLang's blocks only: stages.formats.tailed)."""
    if isinstance(data, (bytes, bytearray)):
        data = engine_view(bytes(data), "sglang")
    return scan_log(data, startup=STARTUP_ANCHORS, ready=READY, steady=STEADY_ANCHORS,
                    facts_of=facts_of_line, stats_of=stats_of_line, stats_word="batch",
                    lookback=False, bulk=BULK_SHAPES)
