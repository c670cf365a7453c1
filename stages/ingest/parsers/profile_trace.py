"""The engine profiler's trace of a point: where its GPU time went, by kind of kernel.

vLLM's torch profiler (`POST /start_profile` ... `POST /stop_profile`, with the profiler's folder
set when the engine starts) writes one Chrome-trace JSON per worker, `*.pt.trace.json.gz`:
`{"traceEvents": [...], ...}` (a bare list of events is the format's other form). A complete
event (`ph` "X") has a name, a category `cat`, a start `ts` and a duration `dur` in µs.

    GPU trace   events of `cat` "kernel", and "gpu_memcpy" / "gpu_memset" (kind `memcpy`)
    CPU trace   (no GPU event at all: the CPU engine) the top-level CPU operators, `cat`
                "cpu_op" events that no other cpu_op of the same thread encloses, operators
                that only wrap others (CPU_WRAPPERS: a compiled graph's call) left aside

Each event lands in exactly one kind of KINDS, by the first rule of GPU_RULES (or CPU_RULES)
whose pattern its name matches (case-insensitive search); none matching: `other`. The rows, one
per kind in KINDS order, give the events counted, their total µs, their share of the whole (%,
the shares sum to 100; kernels of several streams may overlap, so the whole can exceed the
trace's window, `window_us`), and for the audit the longest-running names of the kind (TOP_NAMES)
with the index in `traceEvents` of their longest event.

    read_profile_trace(folder, name)  the file, through stages/core/rawfile (a regular file,
                                      size-limited, `.gz` decompressed)
    parse_profile_trace(data)         the bytes (plain JSON, or gzip by its magic number)

Neither raises on bad input: a truncated, non-JSON or non-trace file, or a trace with nothing to
count, gives `errors` and no rows; a malformed event is an error naming its index and is left out.
"""
from __future__ import annotations

import json
import math
import re
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from stages.core.rawfile import TRACE_BYTES, Refused, open_raw
from stages.formats.lines import ParseError

TRACE_SUFFIX = ".pt.trace.json.gz"
KINDS = ("collective", "gemm", "attention", "moe", "memcpy", "other")
SOURCE_GPU, SOURCE_CPU = "gpu_kernels", "cpu_ops"
GPU_CATS = {"kernel": None, "gpu_memcpy": "memcpy", "gpu_memset": "memcpy"}  # cat -> fixed kind
CPU_CAT = "cpu_op"
TOP_NAMES = 5
MAX_EVENT_ERRORS = 20

# (kind, pattern): the first whose pattern the name matches wins, so the order matters:
# collectives first (a custom all-reduce is not a GEMM), MoE before GEMM (a fused MoE kernel is
# a grouped GEMM), attention before GEMM (FlashAttention kernels are cutlass templates), and
# FlashInfer's sampling kernels kept out of attention.
GPU_RULES: tuple[tuple[str, str], ...] = (
    ("collective", r"nccl|all_?reduce|cross_device_reduce|custom_ar|all_?gather|reduce_?scatter"
                   r"|all_?to_?all|symm_mem|multimem"),
    ("memcpy", r"^memcpy|^memset|\bmemcpy\b|\bmemset\b"),
    ("other", r"flashinfer.*sampl"),
    ("moe", r"moe|expert|topk_?softmax|topkgating|grouped_topk"),
    ("attention", r"flash|fmha|attention|attn|paged|\bmla|_mla|reshape_and_cache|concat_and_cache"
                  r"|merge_states"),
    ("gemm", r"gemm|gemv|cutlass|cublas|nvjet|xmma|matmul|wgmma|splitk|\bmm_|_mm\b"),
)
CPU_RULES: tuple[tuple[str, str], ...] = (
    ("collective", r"c10d|nccl|gloo|all_?reduce|all_?gather|reduce_?scatter|all_?to_?all"
                   r"|shm_allreduce"),
    ("memcpy", r"^aten::(copy_|_to_copy|to|clone|contiguous)$|memcpy|memset"),
    ("moe", r"moe|expert|topk_?softmax|grouped_topk"),
    ("attention", r"attention|attn|flash|paged|\bmla|_mla|scaled_dot_product|sdpa|kv_cache_update"
                  r"|reshape_and_cache|concat_and_cache"),
    ("gemm", r"^aten::(mm|addmm|matmul|bmm|baddbmm|addmv|mv)$|linear|gemm|onednn|mkldnn"
             r"|_mm\b|\bmm_"),
)
# CPU operators that only wrap others (a torch.compile'd graph's call, its guards): never counted
# themselves, the operators inside them are.
CPU_WRAPPERS = r"^## .* ##$|^Pregraph bytecode$|^Torch-Compiled Region|^TorchDynamo Cache Lookup$" \
               r"|^CompiledFunction$"
_GPU = tuple((kind, re.compile(pattern, re.I)) for kind, pattern in GPU_RULES)
_CPU = tuple((kind, re.compile(pattern, re.I)) for kind, pattern in CPU_RULES)
_WRAPPER = re.compile(CPU_WRAPPERS)


@dataclass
class TopName:
    name: str
    events: int
    total_us: float
    event_index: int         # index in traceEvents of this name's longest event


@dataclass
class KindRow:
    kind: str
    events: int
    total_us: float
    share_pct: float
    top: list[TopName] = field(default_factory=list)


@dataclass
class TraceSplit:
    source: str | None = None                # SOURCE_GPU, SOURCE_CPU, or None (nothing counted)
    rows: list[KindRow] = field(default_factory=list)
    events_total: int = 0                    # events in traceEvents
    window_us: float = 0.0                   # first counted event's start to the last one's end
    errors: list[ParseError] = field(default_factory=list)

    @property
    def total_us(self) -> float:
        return sum(row.total_us for row in self.rows)

    def share(self, kind: str) -> float:
        return next((row.share_pct for row in self.rows if row.kind == kind), 0.0)


def classify(name: str, source: str = SOURCE_GPU) -> str:
    """The kind of a kernel (or, source SOURCE_CPU, of a CPU operator) by its name."""
    for kind, pattern in (_CPU if source == SOURCE_CPU else _GPU):
        if pattern.search(name):
            return kind
    return "other"


def is_trace_file(name: str) -> bool:
    return name.endswith(TRACE_SUFFIX) or name.endswith(".pt.trace.json")


def read_profile_trace(folder: Path, name: str, limit: int = TRACE_BYTES) -> TraceSplit:
    """The trace file `name` inside `folder` (see stages/core/rawfile.open_raw)."""
    try:
        with open_raw(folder, name, limit) as fh:
            data = fh.read()
    except Refused as exc:
        return _failed(exc.reason)
    except (OSError, EOFError, zlib.error) as exc:       # gzip: truncated or not gzip at all
        return _failed(f"cannot read: {exc}")
    return parse_profile_trace(data, limit)


def _failed(reason: str, line: int | None = None) -> TraceSplit:
    return TraceSplit(errors=[ParseError(line, reason)])


def _gunzip(data: bytes, limit: int) -> bytes:
    inflate = zlib.decompressobj(wbits=31)
    out = inflate.decompress(data, limit + 1)
    if len(out) > limit:
        raise ValueError(f"larger than {limit} bytes decompressed")
    if not inflate.eof:
        raise ValueError("truncated gzip stream")
    return out


def parse_profile_trace(data: bytes, limit: int = TRACE_BYTES) -> TraceSplit:
    if data[:2] == b"\x1f\x8b":
        try:
            data = _gunzip(data, limit)
        except (ValueError, zlib.error) as exc:
            return _failed(f"not a readable gzip file: {exc}")
    try:
        doc = json.loads(data)
    except UnicodeDecodeError:
        return _failed("not UTF-8 text")
    except json.JSONDecodeError as exc:
        return _failed(f"not JSON ({exc.msg} at character {exc.pos})", exc.lineno)
    except RecursionError:
        return _failed("not JSON (nested too deep)")
    events = doc.get("traceEvents") if isinstance(doc, dict) else doc
    if not isinstance(events, list):
        return _failed("not a Chrome trace: no traceEvents list")
    return split_events(events)


def _duration(event: dict) -> float | None:
    dur = event.get("dur")
    if isinstance(dur, bool) or not isinstance(dur, (int, float)):
        return None
    return float(dur) if math.isfinite(dur) and dur >= 0 else None


Selected = list[tuple[int, str, str, float, float]]     # (index, name, fixed kind or '', ts, µs)


def _selected(events: list) -> tuple[str | None, Selected, list[ParseError]]:
    """(source, the events to count, errors)."""
    errors: list[ParseError] = []
    gpu: Selected = []
    cpu: list[tuple[int, Any, float, float, str]] = []      # (index, thread, ts, µs, name)
    for index, event in enumerate(events):
        if not isinstance(event, dict) or event.get("ph") != "X":
            continue
        cat = event.get("cat")
        if cat not in GPU_CATS and cat != CPU_CAT:
            continue
        name, dur = event.get("name"), _duration(event)
        ts = event.get("ts")
        if not isinstance(name, str) or dur is None or isinstance(ts, bool) \
                or not isinstance(ts, (int, float)) or not math.isfinite(ts):
            errors.append(ParseError(None, f"event {index} ({cat}): no name, or its ts or dur is "
                                           "not a finite number >= 0; left out"))
            continue
        if cat == CPU_CAT:
            if _WRAPPER.search(name):
                continue
            cpu.append((index, (event.get("pid"), event.get("tid")), float(ts), dur, name))
        else:
            gpu.append((index, name, GPU_CATS[cat] or "", float(ts), dur))
    if len(errors) > MAX_EVENT_ERRORS:
        errors = errors[:MAX_EVENT_ERRORS] + [
            ParseError(None, f"{len(errors) - MAX_EVENT_ERRORS} more malformed events left out")]
    if gpu:
        return SOURCE_GPU, gpu, errors
    return (SOURCE_CPU if cpu else None), _top_level(cpu), errors


def _top_level(cpu: list[tuple[int, Any, float, float, str]]) -> Selected:
    """The CPU operators no other operator of their thread encloses (ts, ts + dur)."""
    out = []
    by_thread: dict[Any, list] = {}
    for item in cpu:
        by_thread.setdefault(repr(item[1]), []).append(item)
    for items in by_thread.values():
        items.sort(key=lambda item: (item[2], -item[3], item[0]))
        end = -math.inf
        for index, _, ts, dur, name in items:
            if ts >= end:                      # starts after the enclosing one ended: top level
                out.append((index, name, "", ts, dur))
                end = ts + dur
            # else: inside the current top-level operator (or overlapping it): not counted again
    out.sort()
    return out


def split_events(events: list) -> TraceSplit:
    """The split of a trace's event list (see the module's docstring)."""
    source, selected, errors = _selected(events)
    split = TraceSplit(source=source, events_total=len(events), errors=errors)
    if source is None:
        split.errors.append(ParseError(None, "no GPU kernel and no CPU operator event to count"))
        return split
    totals = {kind: [0, 0.0, {}] for kind in KINDS}   # events, µs, name -> [n, µs, index, max]
    kinds: dict[str, str] = {}        # name -> kind: a kernel's name is thousands of characters
    for index, name, fixed, _, dur in selected:
        kind = fixed or kinds.get(name) or kinds.setdefault(name, classify(name, source))
        entry = totals[kind]
        entry[0] += 1
        entry[1] += dur
        per = entry[2].setdefault(name, [0, 0.0, index, -1.0])
        per[0] += 1
        per[1] += dur
        if dur > per[3]:
            per[2], per[3] = index, dur
    whole = sum(entry[1] for entry in totals.values())
    split.window_us = (max(ts + dur for _, _, _, ts, dur in selected)
                       - min(ts for _, _, _, ts, _ in selected))
    if whole <= 0:
        split.errors.append(ParseError(None, f"{len(selected)} events counted, with no time"))
        split.source = None
        return split
    for kind in KINDS:
        count, total, names = totals[kind]
        top = sorted(names.items(), key=lambda item: (-item[1][1], item[0]))[:TOP_NAMES]
        split.rows.append(KindRow(kind, count, total, 100.0 * total / whole,
                                  [TopName(name, n, us, index) for name, (n, us, index, _) in top]))
    return split


def as_rows(split: TraceSplit) -> list[dict[str, Any]]:
    """The rows as plain dicts (kind, events, total_us, share_pct, top: [{name, events,
    total_us, event_index}]), in KINDS order."""
    return [{"kind": row.kind, "events": row.events, "total_us": row.total_us,
             "share_pct": row.share_pct,
             "top": [{"name": t.name, "events": t.events, "total_us": t.total_us,
                      "event_index": t.event_index} for t in row.top]} for row in split.rows]
