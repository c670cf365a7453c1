"""vLLM server.log: startup facts, the first error, and the periodic engine stats lines.

Only lines holding one of the anchors are looked at (see engine_log.scan_log). Fact names are those of raw_log_facts (stages/core/sql/schema/raw.sql).
"""
from __future__ import annotations

import re
from typing import Iterable

from stages.core.numbers import text_number
from stages.formats.engine_log import line_fact, scan_log
from stages.formats.prefixes import Prefixed
from stages.formats.lines import BulkShape, Chunk, Fact, LogParse, ParseError, Stat
from stages.formats.tailed import engine_view

# Startup facts are looked for only up to the ready line; stats and errors everywhere.
STARTUP_ANCHORS = (
    b"KV cache size", b"Maximum concurrency", b"GPU blocks", b"cuda blocks", b"block_size", b" took ",
    b" takes ", b"KV cache memory", b"No available memory", b"Using ", b"version ", b"LLM engine (v",
)
READY = b"startup complete"
STEADY_ANCHORS = (b"Avg prompt throughput",)

_KV_SIZE = re.compile(r"\b(GPU|CPU) KV cache size: ([\d,]+) tokens")
_CONCURRENCY = re.compile(r"Maximum concurrency for ([\d,]+) tokens per request: ([\d,.]+)x")
_GPU_BLOCKS = re.compile(r"# (?:GPU|cuda) blocks: (\d+)")
_BLOCK_SIZE = re.compile(r"""\bblock_size['"]?\s*[:=]\s*(\d+)""")
_WEIGHTS_OLD = re.compile(r"Loading model weights took (-?[\d.]+) ?(GiB|GB)")
_MODEL_LOADING = re.compile(
    r"Model loading took (-?[\d.]+) ?(GiB|GB)(?: memory)? and (-?[\d.]+) ?(?:seconds|secs|s)\b")
_KV_MEMORY = re.compile(r"Available KV cache memory: (-?[\d.]+) ?(GiB|GB)")
_INIT = re.compile(
    r"init engine \([^)]*\) took (-?[\d.]+) ?(?:seconds|secs|s)\b(?: \(compilation: (-?[\d.]+) ?s\))?")
_COMPILE = re.compile(r"torch\.compile (?:takes|took) (-?[\d.]+) ?s in total")
_VERSION = (
    re.compile(r"vLLM (?:API server )?version v?(\d+\.\d+[\w.+\-]*)"),
    re.compile(r"LLM engine \(v(\d+\.\d+[\w.+\-]*)\)"),
)
_BANNER_VERSION = re.compile(r"[█▄▀]\s+version v?(\d+\.\d+[\w.+\-]*)")
_MOE = re.compile(r"Using ['\"]?([\w\- .]+?)['\"]? ([\w\-]+ )?MoE backend|Using (.+?) backend for .*MoE")
_LINEAR = re.compile(r"Using (\w+Kernel)\b(?: for (.+))?")
_KV_SCALE = re.compile(r"Using KV cache scaling factor (-?[\d.]+)(?: for (\w+))?")
_ATTENTION = re.compile(
    r"Using (?:AttentionBackendEnum\.)?([\w\- ]+?) (?:attention )?backend\b"
    r"|Using (?:AttentionBackendEnum\.)?([\w\-]+) backend out of")
_STATS_FIELD = re.compile(r"([A-Za-z][A-Za-z ]*?): (-?\d[\d,]*(?:\.\d+)?)")
_ENGINE_IDX = re.compile(r"Engine (\d+):")
# The shape of recent releases, read in one match; anything else goes through the general reader.
_STATS_COMMON = re.compile(
    r"Engine (\d+): Avg prompt throughput: (\d+\.?\d*) tokens/s, Avg generation throughput: "
    r"(\d+\.?\d*) tokens/s, Running: (\d+) reqs, Waiting: (\d+) reqs, (?:GPU|CPU) KV cache usage: "
    r"(\d+\.?\d*)%, Prefix cache hit rate: (\d+\.?\d*)%\s*$")

# The same shapes read straight from the bytes, prefixes included (an optional docker timestamp,
# an optional process tag, the INFO header): what strip_prefixes and the readers above would make
# of such a line, without decoding it. Anything else goes through them.
_BULK_HEAD = (
    rb"(?:\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?[ \t]+)?"
    rb"(?:\([A-Za-z_][\w\-]*(?: \w+=[\w.\-]+)+\) )?INFO (\d\d-\d\d \d\d:\d\d:\d\d) \[?[\w.\-]+\.py:\d+\] ?")
BULK_SHAPES = (
    BulkShape("vllm_stats", re.compile(
        _BULK_HEAD + rb"Engine (\d+): Avg prompt throughput: (\d+\.?\d*) tokens/s, Avg generation "
        rb"throughput: (\d+\.?\d*) tokens/s, Running: (\d+) reqs, Waiting: (\d+) reqs, (?:GPU|CPU) KV "
        rb"cache usage: (\d+\.?\d*)%, Prefix cache hit rate: (\d+\.?\d*)%[ \t\r]*"),
        ("log_time", "engine_idx", "prompt_tok_s", "gen_tok_s", "running_reqs", "waiting_reqs",
         "kv_usage_pct", "prefix_hit_pct")),
    BulkShape("vllm_stats", re.compile(
        _BULK_HEAD + rb"Avg prompt throughput: (\d+\.?\d*) tokens/s, Avg generation throughput: "
        rb"(\d+\.?\d*) tokens/s, Running: (\d+) reqs, Swapped: \d+ reqs, Pending: (\d+) reqs, GPU KV "
        rb"cache usage: (\d+\.?\d*)%, CPU KV cache usage: \d+\.?\d*%\.?[ \t\r]*"),
        ("log_time", "prompt_tok_s", "gen_tok_s", "running_reqs", "waiting_reqs", "kv_usage_pct")),
)

_STATS_MAP = {
    "Avg prompt throughput": "prompt_tok_s",
    "Avg generation throughput": "gen_tok_s",
    "Running": "running_reqs",
    "Waiting": "waiting_reqs",
    "Pending": "waiting_reqs",
    "GPU KV cache usage": "kv_usage_pct",
    "Prefix cache hit rate": "prefix_hit_pct",
    "GPU prefix cache hit rate": "prefix_hit_pct",
}
_ATTENTION_WORDS = ("attn", "attention", "flash", "sdpa", "xformers", "mla", "flex", "triton_attn")


def facts_of_line(p: Prefixed, raw: str, line: int) -> tuple[list[Fact], list[ParseError]]:
    """Every startup fact one vLLM log line states. Unknown lines give nothing."""
    msg = p.message
    out: list[Fact] = []
    errors: list[ParseError] = []

    def add(name: str, **values) -> None:
        out.append(line_fact(name, p, raw, line, **values))

    def add_number(name: str, text: str, what: str, **values) -> None:
        """A fact whose value is a number in the line's text; an error where it is not one."""
        number = text_number(text)
        if number is None:
            errors.append(ParseError(line, f"{what} line: {text!r} is not a number"))
        else:
            add(name, value_num=number, **values)

    def read(pattern: re.Pattern, not_understood: str | None = None) -> re.Match | None:
        """The pattern's match in the line; a line that does not match is an error where
        not_understood says what it is (else it may be another line with the same words)."""
        m = pattern.search(msg)
        if m is None and not_understood:
            errors.append(ParseError(line, not_understood))
        return m

    if "KV cache size" in msg:
        if m := read(_KV_SIZE, "KV cache size line without a token count" if "tokens" in msg else None):
            add_number("kv_tokens", m.group(2), "KV cache size", detail=m.group(1))
    if "Maximum concurrency" in msg:
        if m := read(_CONCURRENCY, "Maximum concurrency line not understood"):
            add_number("max_concurrency_x", m.group(2), "Maximum concurrency")
            add_number("max_concurrency_len", m.group(1), "Maximum concurrency")
    if "GPU blocks" in msg or "cuda blocks" in msg:
        if m := read(_GPU_BLOCKS):
            add("kv_blocks", value_num=float(m.group(1)))
    if "block_size" in msg:
        if m := read(_BLOCK_SIZE):
            add("block_size", value_num=float(m.group(1)))
    if " took " in msg or " takes " in msg:
        if "Loading model weights took" in msg:
            if m := read(_WEIGHTS_OLD, "weights line not understood"):
                add("weights_gib", value_num=float(m.group(1)), detail=m.group(2))
        elif "Model loading took" in msg:
            if m := read(_MODEL_LOADING, "Model loading line not understood"):
                add("weights_gib", value_num=float(m.group(1)), detail=m.group(2))
                add("load_s", value_num=float(m.group(3)))
        elif "init engine" in msg:
            if m := read(_INIT, "init engine line not understood"):
                add("init_s", value_num=float(m.group(1)))
                if m.group(2):
                    add("compile_s", value_num=float(m.group(2)))
        elif "torch.compile" in msg:
            if m := read(_COMPILE):
                add("compile_s", value_num=float(m.group(1)))
    if "KV cache memory" in msg:
        if m := read(_KV_MEMORY, "Available KV cache memory line not understood" if "Available" in msg else None):
            add("kv_memory_gib", value_num=float(m.group(1)), detail=m.group(2))
    if "No available memory for the cache blocks" in msg:
        add("no_kv_memory", value_num=1.0)
    if "Using " in msg:
        out.extend(_kernel_facts(msg, p, raw, line))
    if "version" in msg or "LLM engine (v" in msg:
        version = _version(msg)
        if version:
            add("engine_version", value_text=version)
    if "Application startup complete" in msg:
        add("ready", value_num=1.0)
    return out, errors


def _version(msg: str) -> str | None:
    for pattern in _VERSION:
        m = pattern.search(msg)
        if m:
            return m.group(1)
    m = _BANNER_VERSION.search(msg)
    return m.group(1) if m else None


def _kernel_facts(msg: str, p: Prefixed, raw: str, line: int) -> list[Fact]:
    if "KV cache scaling factor" in msg:
        m = _KV_SCALE.search(msg)
        if m:
            return [line_fact("kv_scale", p, raw, line, value_num=float(m.group(1)), value_text=m.group(2))]
        return []
    if "MoE" in msg:
        m = _MOE.search(msg)
        if m:
            name = (m.group(1) or m.group(3) or "").strip()
            detail = (m.group(2) or "").strip() or None
            return [line_fact("moe_backend", p, raw, line, value_text=name, detail=detail)]
        return []
    if "Kernel" in msg:
        m = _LINEAR.search(msg)
        if m:
            return [line_fact("linear_kernel", p, raw, line, value_text=m.group(1), detail=m.group(2))]
        return []
    if "backend" in msg.lower():
        m = _ATTENTION.search(msg)
        if m:
            name = (m.group(1) or m.group(2)).strip()
            lowered = (msg if "ttention" in msg else name).lower()
            if any(word in lowered for word in _ATTENTION_WORDS):
                return [line_fact("attention_backend", p, raw, line, value_text=name)]
    return []


def stats_of_line(p: Prefixed, line: int) -> Stat | ParseError | None:
    """One `Engine 000: Avg prompt throughput: ...` line (or its V0 form without the engine)."""
    msg = p.message
    if "Avg prompt throughput" not in msg:
        return None
    m = _STATS_COMMON.match(msg)
    if m:
        g = m.groups()
        return Stat(kind="vllm_stats", line=line, log_time=p.log_time, engine_idx=int(g[0]),
                    prompt_tok_s=float(g[1]), gen_tok_s=float(g[2]), running_reqs=int(g[3]),
                    waiting_reqs=int(g[4]), kv_usage_pct=float(g[5]), prefix_hit_pct=float(g[6]))
    stat = Stat(kind="vllm_stats", line=line, log_time=p.log_time)
    m = _ENGINE_IDX.search(msg)
    if m:
        stat.engine_idx = int(m.group(1))
    seen = False
    for key, value in _STATS_FIELD.findall(msg):
        key = key.strip()
        if key.startswith("Engine "):
            continue
        number = text_number(value)
        if number is None:                      # not as the pattern reads it: never a figure
            continue
        column = _STATS_MAP.get(key)
        if key == "CPU KV cache usage" and stat.kv_usage_pct is None and "GPU KV cache usage" not in msg:
            column = "kv_usage_pct"
        if column is None:
            stat.extra[key] = number
            continue
        if column in ("running_reqs", "waiting_reqs"):
            number = int(number)
        setattr(stat, column, number)
        seen = seen or column == "prompt_tok_s"
    if not seen:
        return ParseError(line, "engine stats line without a prompt throughput figure")
    return stat


def parse_vllm_log(data: bytes | Iterable[Chunk], *, block_size: int | None = None) -> LogParse:
    """Facts, stats and unreadable known lines of a vLLM server.log.

    `data` is the whole file or an iterable of (first line number, bytes) chunks; of a whole
    file that tails several services' logs, only vLLM's blocks are read (stages.formats.
    tailed; chunks are given already cut so). `block_size` (from the command line) turns `# GPU blocks` into tokens when the log
    does not state its block size.
    """
    if isinstance(data, (bytes, bytearray)):
        data = engine_view(bytes(data), "vllm")
    result = scan_log(data, startup=STARTUP_ANCHORS, ready=READY, steady=STEADY_ANCHORS,
                      facts_of=facts_of_line, stats_of=stats_of_line, stats_word="throughput",
                      bulk=BULK_SHAPES)
    _add_block_tokens(result, block_size)
    result.facts.sort(key=lambda f: f.line)
    return result


def _add_block_tokens(result: LogParse, block_size: int | None) -> None:
    logged = [f for f in result.facts if f.fact == "block_size"]
    size = logged[0].value_num if logged else block_size
    if not size:
        return
    source = "logged block_size" if logged else "--block-size"
    for f in [f for f in result.facts if f.fact == "kv_blocks"]:
        result.facts.append(Fact(
            fact="kv_tokens", line=f.line, excerpt=f.excerpt, value_num=f.value_num * size,
            detail=f"# GPU blocks x {source} {int(size)}", worker=f.worker, log_time=f.log_time))

