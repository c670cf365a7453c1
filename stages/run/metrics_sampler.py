"""The engine's /metrics sampled around a benchmark point: a background thread GETs the engine's
`/metrics` every `interval_ms` while the point (or a whole multi-turn workload) runs, and keeps
the lines of the families below in `bench/<point_id>.metrics-series.txt` of the run folder.

The file, written as the samples come (a run that crashes leaves what was sampled):
  # point=<point_id>                         `# key=value` lines first: which point, the URL,
  # url=http://127.0.0.1:8011/metrics        how often, and the clock of the `@` lines
  # interval_ms=1000
  # clock=epoch seconds (UTC)
  @ 1764690000.123456                        a sample: when its scrape was sent, then the kept
  vllm:num_requests_running{engine="0",model_name="m"} 4.0     exposition lines of the answer,
  vllm:num_requests_waiting{engine="0",model_name="m"} 0.0     as the engine printed them
  @ 1764690001.124001 error=ConnectError: [Errno 111] Connection refused    a failed scrape
  # requests_start=1764690000.500000         the point's requests window, where the benchmark
  # requests_end=1764690030.250000           client timed it (epoch seconds)
  # samples=31                               how many `@` lines, failed scrapes included
  # sampler_exit=ok                          ok, or why it stopped early

Comment lines of the answer (`# HELP`, `# TYPE`) are dropped; a line is kept when its metric name
is one of FAMILIES, or one of them with a suffix of SUFFIXES. A last sample is taken when the point
ends. After MAX_FAILURES failed scrapes in a row (an engine that stopped answering) the sampler
stops early and says why in `sampler_exit`; the point goes on. Nothing the sampler meets is
raised to the point: a file that cannot be made means no samples, not a failed point.

Every profile sets `metrics_sampler: {interval_ms: N}`; a profile without the key samples every
DEFAULT_INTERVAL_MS, one with `metrics_sampler: null` not at all.

Example:
    with metrics_sampler.sampling(folder, "long__c04", "http://127.0.0.1:8011", 1000) as sampler:
        run_the_point(window=sampler.mark_requests)
"""
from __future__ import annotations

import contextlib
import threading
import time
from pathlib import Path
from typing import IO, Iterator

import httpx

from stages.core.config import CampaignError
from stages.formats.run_folder import METRICS_SERIES_SUFFIX

FOLDER, SUFFIX = "bench", METRICS_SERIES_SUFFIX     # beside the point's result files
SETTING = "metrics_sampler"           # the profile's key
DEFAULT_INTERVAL_MS = 1000
# The metric families kept, vLLM's then SGLang's.
FAMILIES = (
    "vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc",
    "vllm:gpu_cache_usage_perc", "vllm:num_preemptions", "vllm:prompt_tokens",
    "vllm:generation_tokens", "vllm:prefix_cache_queries", "vllm:prefix_cache_hits",
    "vllm:gpu_prefix_cache_queries", "vllm:gpu_prefix_cache_hits",
    "sglang:num_running_reqs", "sglang:num_queue_reqs", "sglang:token_usage",
    "sglang:cache_hit_rate", "sglang:gen_throughput", "sglang:prompt_tokens",
    "sglang:generation_tokens", "sglang:num_retracted_reqs",
)
SUFFIXES = ("", "_total", "_sum", "_count", "_bucket", "_created")
KEPT = frozenset(f + s for f in FAMILIES for s in SUFFIXES)
MAX_FAILURES = 3                      # failed scrapes in a row before the sampler gives up
MIN_SCRAPE_TIMEOUT_S = 5.0
REASON_CHARS = 300


def settings(profile: dict) -> int | None:
    """The sampling interval in ms from a profile: its `metrics_sampler.interval_ms`,
    DEFAULT_INTERVAL_MS where the key (or the interval) is absent; None: `metrics_sampler: null`."""
    if SETTING not in profile:
        return DEFAULT_INTERVAL_MS
    cfg = profile[SETTING]
    if cfg is None or cfg is False:
        return None
    if not isinstance(cfg, dict):
        raise CampaignError(f"{SETTING} must be a mapping with interval_ms, or null, not {cfg!r}")
    interval = cfg.get("interval_ms", DEFAULT_INTERVAL_MS)
    if isinstance(interval, bool) or not isinstance(interval, int) or interval < 1:
        raise CampaignError(f"{SETTING}.interval_ms must be a positive integer, not {interval!r}")
    return interval


def file_for(folder: Path, point_id: str) -> Path:
    return folder / FOLDER / f"{point_id}{SUFFIX}"


def kept(line: str) -> bool:
    """Whether an exposition line is a sample of one of the kept families."""
    if not line or line.startswith("#"):
        return False
    end = len(line)
    for stop in ("{", " ", "\t"):
        at = line.find(stop)
        if at != -1:
            end = min(end, at)
    return line[:end] in KEPT


def select(text: str) -> list[str]:
    return [line for line in (raw.rstrip("\r") for raw in text.split("\n")) if kept(line)]


def _one_line(text: object) -> str:
    return " ".join(str(text).split())[:REASON_CHARS]


def _reason(exc: BaseException) -> str:
    return _one_line(f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__)


def _epoch(t: float) -> str:
    return f"{t:.6f}"


class Sampler:
    """One background thread writing one point's series. `start()`, `mark_requests()` when the
    client has timed its requests, then `stop()` (which always appends the trailing lines)."""

    def __init__(self, path: Path, point_id: str, base_url: str, interval_ms: int):
        self.path, self.point_id, self.interval_ms = path, point_id, interval_ms
        self.url = f"{base_url.rstrip('/')}/metrics"
        self.samples = 0
        self.exit: str | None = None             # why the thread stopped early
        self.window: dict[str, str] = {}
        self._out: IO[str] | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._first = threading.Event()
        self._thread: threading.Thread | None = None
        self._timeout = max(MIN_SCRAPE_TIMEOUT_S, interval_ms / 1000)

    def start(self) -> None:
        """Make the file, write its header, start the thread and wait for its first sample (so
        the series begins before the point). A file that cannot be made: no sampler."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._out = self.path.open("x", encoding="utf-8")
            header = {"point": self.point_id, "url": self.url, "interval_ms": self.interval_ms,
                      "clock": "epoch seconds (UTC)"}
            self._out.write("".join(f"# {k}={_one_line(v)}\n" for k, v in header.items()))
            self._out.flush()
        except OSError:
            self._out = None
            return
        self._thread = threading.Thread(target=self._run, name=f"metrics-sampler {self.point_id}",
                                        daemon=True)
        self._thread.start()
        self._first.wait(self._timeout + 1)

    def mark_requests(self, sent: float, ended: float) -> None:
        """The point's requests window (epoch seconds), as the benchmark client timed it."""
        self.window["requests_start"], self.window["requests_end"] = _epoch(sent), _epoch(ended)

    def _write(self, text: str) -> bool:
        with self._lock:
            if self._out is None or self._out.closed:
                return False
            self._out.write(text)
            self._out.flush()
            return True

    def _scrape(self, client: httpx.Client) -> str | None:
        """One sample written; None, or why the scrape failed."""
        sent = time.time()
        try:
            resp = client.get(self.url)
            if resp.status_code != 200:
                problem = f"HTTP {resp.status_code}"
            else:
                lines = select(resp.text)
                text = f"@ {_epoch(sent)}\n" + "".join(line + "\n" for line in lines)
                problem = None
        except (httpx.HTTPError, OSError, UnicodeDecodeError) as exc:
            problem = _reason(exc)
        if problem is not None:
            text = f"@ {_epoch(sent)} error={problem}\n"
        if self._write(text):
            self.samples += 1
        return problem

    def _run(self) -> None:
        failures, interval = 0, self.interval_ms / 1000
        try:
            with httpx.Client(timeout=self._timeout) as client:
                due = time.monotonic()
                while True:
                    problem = self._scrape(client)
                    self._first.set()
                    failures = failures + 1 if problem else 0
                    if failures >= MAX_FAILURES:
                        self.exit = problem
                        return
                    if self._stop.is_set():           # stopped while scraping: one more
                        self._scrape(client)
                        return
                    due += interval
                    if due < time.monotonic():        # a slow scrape: no burst to catch up
                        due = time.monotonic()
                    if self._stop.wait(due - time.monotonic()):
                        self._scrape(client)          # the last sample, after the point
                        return
        except Exception as exc:     # noqa: BLE001 - never raised into the point, recorded
            self.exit = _reason(exc)
        finally:
            self._first.set()

    def stop(self) -> None:
        """Take a last sample, stop the thread, append the trailing lines and close the file."""
        if self._out is None:
            return
        self._stop.set()
        if self._thread is not None:
            self._thread.join(2 * self._timeout + 1)
            if self._thread.is_alive() and self.exit is None:
                self.exit = "sampler thread did not stop"
        trailer = dict(self.window, samples=self.samples, sampler_exit=self.exit or "ok")
        with self._lock:
            try:
                self._out.write("".join(f"# {k}={_one_line(v)}\n" for k, v in trailer.items()))
                self._out.close()
            except OSError:
                pass


@contextlib.contextmanager
def sampling(folder: Path, point_id: str, base_url: str,
             interval_ms: int | None) -> Iterator[Sampler | None]:
    """Sample the engine's /metrics while the body runs; nothing when `interval_ms` is None."""
    if interval_ms is None:
        yield None
        return
    sampler = Sampler(file_for(folder, point_id), point_id, base_url, interval_ms)
    try:
        sampler.start()
        yield sampler
    finally:
        sampler.stop()


def main(argv: list[str] | None = None) -> int:
    """`python -m stages.run.metrics_sampler --folder DIR --point ID --url http://127.0.0.1:8000
    --interval-ms 1000 -- CMD...`: sample an engine's /metrics while CMD runs (a load of one's
    own), as the run stage does around a point."""
    import argparse
    import subprocess
    ap = argparse.ArgumentParser(prog="python -m stages.run.metrics_sampler", description=main.__doc__)
    ap.add_argument("--folder", type=Path, required=True, help=f"folder that gets {FOLDER}/<point>{SUFFIX}")
    ap.add_argument("--point", required=True)
    ap.add_argument("--url", required=True, help="the engine's base URL (its /metrics is read)")
    ap.add_argument("--interval-ms", type=int, default=DEFAULT_INTERVAL_MS)
    ap.add_argument("cmd", nargs="+")
    a = ap.parse_args(argv)
    interval = settings({SETTING: {"interval_ms": a.interval_ms}})
    with sampling(a.folder, a.point, a.url, interval) as sampler:
        code = subprocess.run(a.cmd).returncode
    print(sampler.path)
    return code


if __name__ == "__main__":
    raise SystemExit(main())
