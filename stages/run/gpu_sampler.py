"""GPU samples around a benchmark point: each GPU of the run's set, read by an `nvidia-smi` query
loop started before the point and stopped after it, into `gpu/<point_id>.csv` of the run folder.

The file, written once:
  # point=<point_id>            lines of `# key=value` first: which point, which GPUs, how often,
  # gpus=0,1,2,3                the clock the timestamps are in, and the command
  # interval_ms=200
  # clock=UTC
  # command=nvidia-smi --query-gpu=... --format=csv,nounits --loop-ms=200 --id=0,1,2,3
  index, timestamp, power.draw [W], ...      nvidia-smi's own output, as it printed it
  0, 2026/12/01 14:50:00.123, 251.12, ...
  # window_start=2026-12-01T14:50:00.456789Z  the point's window, on the same clock, and how
  # window_end=2026-12-01T14:51:02.001234Z    the loop ended, appended once it has stopped
  # requests_start=2026-12-01T14:50:04.120001Z  where the client timed its requests: the first
  # requests_end=2026-12-01T14:51:01.870002Z    of the point's requests sent, the last answer
  # sampler_exit=0                              ended (what the energy is counted over)

The point's window spans the benchmark client's whole run, its set-up included (loading the
tokenizer, building the prompts, a test request), while the GPUs idle; the samples taken before
`requests_start` show their idle power. A file written before the requests window was recorded
has no `requests_*` lines.

nvidia-smi runs with TZ=UTC, so its timestamps and the window are on one clock. No GPU set (the
local-cpu profile) or no `gpu_sampler` settings in the profile: no sampler. A sampler that cannot
start or dies leaves its reason in the file; the point runs all the same (derive then finds its
samples missing and flags the point's energy invalid).

Example:
    with gpu_sampler.sampling(folder, "long__c04", [0, 1], profile.get("gpu_sampler")):
        run_the_point()
"""
from __future__ import annotations

import contextlib
import datetime as dt
import os
import shlex
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Iterator

from stages.core.config import CampaignError
from stages.formats.run_folder import GPU_SAMPLES_FOLDER, GPU_SAMPLES_SUFFIX

FOLDER, SUFFIX = GPU_SAMPLES_FOLDER, GPU_SAMPLES_SUFFIX
# nvidia-smi --query-gpu fields, in the order of the file's columns.
QUERY = ("index", "timestamp", "power.draw", "utilization.gpu", "memory.used", "clocks.sm",
         "clocks_throttle_reasons.active")
SMI = "nvidia-smi"
STOP_GRACE_S = 5.0
FIRST_SAMPLE_WAIT_S = 10.0
POLL_S = 0.01               # how often start and stop look for the loop's next sample
# the timestamp column as nvidia-smi prints it, in the TZ the loop runs under (UTC)
SMI_TIME = "%Y/%m/%d %H:%M:%S.%f"


def settings(cfg: dict | None) -> int | None:
    """The sampling interval in ms from a profile's `gpu_sampler` settings; None: no sampler."""
    if not cfg:
        return None
    interval = cfg.get("interval_ms") if isinstance(cfg, dict) else None
    if isinstance(interval, bool) or not isinstance(interval, int) or interval < 1:
        raise CampaignError(f"gpu_sampler.interval_ms must be a positive integer, not {interval!r}")
    return interval


def command(gpus: list[int], interval_ms: int, smi: str = SMI) -> list[str]:
    return [smi, "--query-gpu=" + ",".join(QUERY), "--format=csv,nounits",
            f"--loop-ms={interval_ms}", "--id=" + ",".join(map(str, gpus))]


def file_for(folder: Path, point_id: str) -> Path:
    return folder / FOLDER / f"{point_id}{SUFFIX}"


def stamp(t: float) -> str:
    return dt.datetime.fromtimestamp(t, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


class Sampler:
    """One nvidia-smi loop writing one point's file. `start()`, then `mark_start()` and
    `mark_end()` around the point, then `stop()` (which always runs the file's trailer)."""

    def __init__(self, path: Path, point_id: str, gpus: list[int], interval_ms: int, smi: str = SMI):
        self.path, self.point_id, self.gpus, self.interval_ms = path, point_id, gpus, interval_ms
        self.argv = command(gpus, interval_ms, smi)
        self.proc: subprocess.Popen | None = None
        self.problem: str | None = None
        self.window: dict[str, str] = {}
        self._ended: float | None = None        # mark_end's time, and the file's size then
        self.stop_error: OSError | None = None  # why a stop in the background left the file unfinished
        self._end_offset = 0

    def start(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._out = self.path.open("xb")
        header = {"point": self.point_id, "gpus": ",".join(map(str, self.gpus)),
                  "interval_ms": self.interval_ms, "clock": "UTC",
                  "command": " ".join(shlex.quote(a) for a in self.argv)}
        self._out.write("".join(f"# {k}={_one_line(v)}\n" for k, v in header.items()).encode())
        self._out.flush()
        self._header_bytes = self._out.tell()
        self._err = tempfile.TemporaryFile()
        try:
            self.proc = subprocess.Popen(self.argv, stdout=self._out, stderr=self._err,
                                         stdin=subprocess.DEVNULL, env={**os.environ, "TZ": "UTC"},
                                         start_new_session=True)
        except OSError as exc:
            self.problem = f"cannot start {self.argv[0]}: {exc.strerror or type(exc).__name__}"
            return
        self._wait_first_sample()

    def _wait_first_sample(self) -> None:
        """Until the loop has printed its header and a first sample (or gave up): that sample was
        taken before the point begins, and the GPUs wait no longer than it takes."""
        deadline = time.monotonic() + FIRST_SAMPLE_WAIT_S
        while time.monotonic() < deadline and self.proc.poll() is None:
            with self.path.open("rb") as f:
                f.seek(self._header_bytes)
                if f.read().count(b"\n") >= 2:
                    break
            time.sleep(POLL_S)

    def mark_start(self) -> None:
        self.window["window_start"] = stamp(time.time())

    def mark_end(self) -> None:
        self._ended = time.time()
        self._end_offset = self.path.stat().st_size
        self.window["window_end"] = stamp(self._ended)

    def _sampled_after_end(self) -> bool:
        """Whether every GPU has a sample stamped after the point's end (mark_end) in the file."""
        with self.path.open("rb") as f:
            f.seek(self._end_offset)
            text = f.read().decode("utf-8", "replace")
        after = set()
        for line in text.splitlines(keepends=True):
            cells = line.split(",")
            if not line.endswith("\n") or len(cells) < 2:
                continue
            try:
                at = dt.datetime.strptime(cells[1].strip(), SMI_TIME).replace(tzinfo=dt.timezone.utc)
            except ValueError:
                continue
            if at.timestamp() > self._ended:
                after.add(cells[0].strip())
        return len(after) >= len(self.gpus)

    def mark_requests(self, sent: float, ended: float) -> None:
        """The point's requests window (epoch seconds), as the benchmark client timed it."""
        self.window["requests_start"], self.window["requests_end"] = stamp(sent), stamp(ended)

    def stop(self) -> None:
        """Let the loop take one more sample after the point, stop it, and append the trailer."""
        if not hasattr(self, "_err"):          # the file could not be made: nothing to close
            return
        if self.proc is not None:
            # one more sample of every GPU after the point, as soon as the loop prints it (at most
            # an interval and a bit); a GPU that prints nothing ends the wait at its deadline
            deadline = time.monotonic() + 2 * self.interval_ms / 1000 + POLL_S
            while (self.proc.poll() is None and time.monotonic() < deadline
                   and not (self._ended is not None and self._sampled_after_end())):
                time.sleep(POLL_S)
            if self.proc.poll() is None:
                self.proc.terminate()
                try:
                    self.proc.wait(timeout=STOP_GRACE_S)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait(timeout=STOP_GRACE_S)
                code = "stopped"
            else:
                code = str(self.proc.returncode)
                self.problem = self.problem or f"{self.argv[0]} exited on its own with code {code}"
        else:
            code = "not started"
        self._out.seek(0, os.SEEK_END)
        self._err.seek(0)
        for line in self._err.read().decode("utf-8", "replace").splitlines()[:20]:
            if line.strip():
                self._out.write(f"# stderr={_one_line(line)[:300]}\n".encode())
        trailer = dict(self.window, sampler_exit=code)
        if self.problem:
            trailer["sampler_error"] = self.problem
        self._out.write("".join(f"# {k}={_one_line(v)}\n" for k, v in trailer.items()).encode())
        self._out.close()
        self._err.close()


@contextlib.contextmanager
def sampling(folder: Path, point_id: str, gpus: list[int] | None, cfg: dict | None,
             smi: str = SMI, background: bool = False) -> Iterator[Sampler | None]:
    """Sample `gpus` while the body runs (the point's window is the body); nothing without a GPU
    set or sampler settings. `background`: the sampler takes its sample after the point, stops
    and writes its trailer in a thread of its own, so the next point need not wait for it (about
    0.3 s a point on an H200 host, most of it nvidia-smi's own exit); `finish()` waits for them."""
    interval = settings(cfg)
    if not gpus or interval is None:
        yield None
        return
    sampler = Sampler(file_for(folder, point_id), point_id, list(gpus), interval, smi)
    try:
        sampler.start()
        sampler.mark_start()
        yield sampler
    finally:
        if "window_start" in sampler.window:
            sampler.mark_end()
        if background:
            thread = threading.Thread(target=_stop_recorded, args=(sampler,), daemon=True,
                                      name=f"gpu-sampler stop {point_id}")
            thread.start()
            _stopping.append((thread, sampler))
        else:
            sampler.stop()


# samplers stopping in the background (sampling(background=True)), until finish() joins them
_stopping: list[tuple[threading.Thread, Sampler]] = []


def _stop_recorded(sampler: Sampler) -> None:
    try:
        sampler.stop()
    except OSError as exc:          # the file could not be finished (a full or failing disk)
        sampler.stop_error = exc


def finish() -> list[OSError]:
    """Wait for every sampler stopping in the background; the errors that kept one from
    finishing its file."""
    errors = []
    while _stopping:
        thread, sampler = _stopping.pop(0)
        thread.join()
        if sampler.stop_error is not None:
            errors.append(sampler.stop_error)
    return errors


def main(argv: list[str] | None = None) -> int:
    """`python -m stages.run.gpu_sampler --folder DIR --point ID --gpus 0,1 --interval-ms 200 -- CMD...`:
    sample the GPUs while CMD runs (a load of one's own), as the run stage does around a point."""
    import argparse
    ap = argparse.ArgumentParser(prog="python -m stages.run.gpu_sampler", description=main.__doc__)
    ap.add_argument("--folder", type=Path, required=True, help="folder that gets gpu/<point>.csv")
    ap.add_argument("--point", required=True)
    ap.add_argument("--gpus", required=True, help="comma-separated GPU indices")
    ap.add_argument("--interval-ms", type=int, required=True)
    ap.add_argument("cmd", nargs="+")
    a = ap.parse_args(argv)
    gpus = [int(g) for g in a.gpus.split(",")]
    with sampling(a.folder, a.point, gpus, {"interval_ms": a.interval_ms}) as sampler:
        code = subprocess.run(a.cmd).returncode
    print(sampler.path)
    return code


if __name__ == "__main__":
    raise SystemExit(main())
