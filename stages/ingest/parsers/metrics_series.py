"""The /metrics sampler's file of a benchmark point, `bench/<point_id>.metrics-series.txt`: the
engine's /metrics scraped every interval around the point (or a multi-turn workload).

    # point=<point_id>              settings before the samples: point, url, interval_ms, clock
    @ 1764690000.123456             a sample: its time in epoch seconds (UTC)
    vllm:num_requests_running{engine="0",model_name="m"} 4.0     its exposition lines
    @ 1764690002.125000 error=connection refused                  a scrape that failed
    # requests_start=1764690000.5   settings after: requests_start, requests_end, samples, sampler_exit

    settings  (key, value, line) for each `# key=value` line
    samples   one dict per `@` line (name None, error) and per exposition line of its sample
              (name, labels, value), each with sample_idx, t_s and its line

Exposition lines are read by stages/ingest/parsers/metrics.py; `# HELP` and `# TYPE` lines are
passed over. A sample line before any `@` line, an `@` line whose time is not a number, or any
other line is an error row, and the rest of the file is read.
"""
from __future__ import annotations

import math
import re

from stages.formats.run_folder import METRICS_SERIES_SUFFIX
from stages.formats.lines import ParseError, SampledFile, text_lines
from stages.ingest.parsers.metrics import Sample, sample_of_line

SUFFIX = METRICS_SERIES_SUFFIX
_EXPOSITION_COMMENT = re.compile(r"^#\s*(HELP|TYPE|UNIT|EOF)\b")


def is_series_file(name: str) -> bool:
    """A file of a run's bench/ folder with the series suffix (or it, gzipped)."""
    base = name.rsplit("/", 1)[-1]
    base = base[:-3] if base.endswith(".gz") else base
    return name.startswith("bench/") and base.endswith(SUFFIX) and len(base) > len(SUFFIX)


def point_of(name: str) -> str:
    base = name.rsplit("/", 1)[-1]
    base = base[:-3] if base.endswith(".gz") else base
    return base[: -len(SUFFIX)]


def _sample_line(text: str, number: int) -> tuple[float | None, str | None, ParseError | None]:
    """`@ <epoch seconds> [error=<text>]` -> (time, error)."""
    head, _, rest = text[1:].strip().partition(" ")
    try:
        t_s = float(head)
    except ValueError:
        return None, None, ParseError(number, f"metrics series: sample time {head[:40]!r} is not a number")
    if not math.isfinite(t_s):
        return None, None, ParseError(number, f"metrics series: sample time {head[:40]!r} is not a number")
    rest = rest.strip()
    error = None
    if rest:
        error = rest[len("error="):].strip() if rest.startswith("error=") else rest
        error = error[:500] or "error"
    return t_s, error, None


def parse_series_file(data: bytes) -> SampledFile:
    out = SampledFile()
    sample_idx = -1
    t_s: float | None = None
    for number, text in text_lines(data):
        if text.startswith("#"):
            if out.setting(text, number) is None and not _EXPOSITION_COMMENT.match(text):
                out.errors.append(ParseError(number, f"metrics series: comment line not understood: {text[:80]!r}"))
            continue
        if text.startswith("@"):
            got, error, problem = _sample_line(text, number)
            if problem:
                out.errors.append(problem)
                t_s = None          # its exposition lines are left out, not put in the sample before
                sample_idx += 1
                continue
            sample_idx += 1
            t_s = got
            out.samples.append({"sample_idx": sample_idx, "t_s": t_s, "name": None, "labels": None,
                                "value": None, "error": error, "source_line": number})
            continue
        got = sample_of_line(text, number)
        if isinstance(got, ParseError):
            out.errors.append(ParseError(number, f"metrics series: {got.reason}"))
        elif isinstance(got, Sample):
            if t_s is None:
                out.errors.append(ParseError(number, "metrics series: sample line outside a sample "
                                                     "(no `@ <time>` line before it)"))
                continue
            out.samples.append({"sample_idx": sample_idx, "t_s": t_s, "name": got.name,
                                "labels": got.labels, "value": got.value, "error": None,
                                "source_line": number})
    if sample_idx < 0:
        out.errors.append(ParseError(None, "metrics series: no samples (no `@ <time>` line)"))
    return out
