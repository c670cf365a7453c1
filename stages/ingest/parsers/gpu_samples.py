"""The GPU sampler's file of a benchmark point, `gpu/<point_id>.csv` (stages/run/gpu_sampler.py):
`# key=value` lines (the point, the GPU set, the interval, the clock, the command; after the
samples the point's window and how the loop ended) and nvidia-smi's `--query-gpu` CSV between them.

    settings  (key, value, line) for each `# key=value` line
    samples   one dict per sample line: gpu_index, sampled_at (UTC), power_w, utilization_gpu_pct,
              memory_used_mib, clock_sm_mhz, throttle_reasons, with its line

nvidia-smi's column names differ between drivers (`clocks.sm` is headed `clocks.current.sm`,
`clocks_throttle_reasons.active` `clocks_event_reasons.active` on recent ones): each is known by
all its names. A value nvidia-smi could not read (`[N/A]`, `[Not Supported]`) is null.
"""
from __future__ import annotations

import csv
import re
from datetime import datetime, timezone
from typing import Any

from stages.formats.lines import ParseError, SampledFile, text_lines
from stages.formats.run_folder import GPU_SAMPLES_FOLDER, GPU_SAMPLES_SUFFIX

FOLDER, SUFFIX = GPU_SAMPLES_FOLDER, GPU_SAMPLES_SUFFIX
# column -> the names nvidia-smi heads it with (units in brackets left off)
COLUMNS = {
    "gpu_index": ("index",),
    "sampled_at": ("timestamp",),
    "power_w": ("power.draw", "power.draw.instant", "power.draw.average"),
    "utilization_gpu_pct": ("utilization.gpu",),
    "memory_used_mib": ("memory.used",),
    "clock_sm_mhz": ("clocks.sm", "clocks.current.sm"),
    "throttle_reasons": ("clocks_throttle_reasons.active", "clocks_event_reasons.active"),
}
_BY_NAME = {name: column for column, names in COLUMNS.items() for name in names}
_NUMBER = re.compile(r"^[-+]?\d+(?:\.\d+)?")
_TIME_FORMATS = ("%Y/%m/%d %H:%M:%S.%f", "%Y/%m/%d %H:%M:%S")
NUMERIC = {"power_w", "utilization_gpu_pct", "memory_used_mib", "clock_sm_mhz"}


def is_sampler_file(name: str) -> bool:
    """`gpu/<point_id>.csv` of a run folder."""
    folder, _, base = name.partition("/")
    return folder == FOLDER and "/" not in base and base.endswith(SUFFIX) and len(base) > len(SUFFIX)


def point_of(name: str) -> str:
    return name.rsplit("/", 1)[-1][: -len(SUFFIX)]


def _missing(text: str) -> bool:
    return not text or text.startswith("[") or text in ("N/A", "Not Supported")


def parse_time(text: str) -> datetime | None:
    """nvidia-smi's `2026/12/01 14:44:37.018`, on UTC (the sampler runs it with TZ=UTC)."""
    for fmt in _TIME_FORMATS:
        try:
            return datetime.strptime(text, fmt).replace(tzinfo=timezone.utc)
        except ValueError:
            continue
    return None


def parse_sampler_file(data: bytes) -> SampledFile:
    out = SampledFile()
    columns: list[str | None] | None = None
    clock_utc = True
    for number, text in text_lines(data):
        if text.startswith("#"):
            setting = out.setting(text, number)
            if setting is None:
                out.errors.append(ParseError(number, f"gpu samples: comment line not understood: {text[:80]!r}"))
            elif setting[0] == "clock" and setting[1] != "UTC":
                clock_utc = False
                out.errors.append(ParseError(number, f"gpu samples: clock {setting[1][:40]!r} "
                                                     "is not UTC: sample times left out"))
            continue
        try:
            cells = next(csv.reader([text], skipinitialspace=True), [])
        except csv.Error as exc:
            out.errors.append(ParseError(number, f"gpu samples: unreadable line ({exc})"))
            continue
        cells = [c.strip() for c in cells]
        if columns is None:
            columns = [_BY_NAME.get(c.partition(" [")[0].strip()) for c in cells]
            if "gpu_index" not in columns or "sampled_at" not in columns:
                out.errors.append(ParseError(number, "gpu samples: header has no index or timestamp column"))
                return out
            continue
        if len(cells) != len(columns):
            out.errors.append(ParseError(number, f"gpu samples: {len(cells)} cells, header has {len(columns)}"))
            continue
        row: dict[str, Any] = {c: None for c in COLUMNS}
        problem = None
        for column, value in zip(columns, cells):
            if column is None or _missing(value):
                continue
            if column == "gpu_index":
                problem = None if value.isdigit() else f"GPU index {value[:20]!r} is not a number"
                row[column] = int(value) if value.isdigit() else None
            elif column == "sampled_at":
                row[column] = parse_time(value) if clock_utc else None
                if row[column] is None and clock_utc:
                    problem = f"timestamp {value[:40]!r} not understood"
            elif column in NUMERIC:
                m = _NUMBER.match(value)
                row[column] = float(m.group(0)) if m else None
            else:
                row[column] = value
        if problem:
            out.errors.append(ParseError(number, f"gpu samples: {problem}"))
            continue
        row["source_line"] = number
        out.samples.append(row)
    if columns is None:
        out.errors.append(ParseError(None, "gpu samples: no CSV header (the sampler printed nothing)"))
    return out
