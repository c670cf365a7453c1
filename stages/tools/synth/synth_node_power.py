"""The GPU sampler's file of a scripted node point (synth_node.py): `gpu/<point_id>.csv` as
stages/run/gpu_sampler.py writes it around a step, with nvidia-smi's lines as a driver of the node
prints them (its column names are those of the H200 recorded in data/nodes).

The power is invented but shaped like an H200 serving: about 120 W a GPU with no request in
flight, more the more requests prefill (compute-bound, near the 700 W limit) or decode (memory-
bound, less per request), a few watts of noise, each GPU a little apart from the others. The
loop starts one interval before the window (as the sampler waits for its first line) and takes
its last sample up to one and a half intervals after. A GPU listed in `silent` prints no line.
"""
from __future__ import annotations

import math
import random
from datetime import datetime, timedelta, timezone

from stages.run import gpu_sampler
from stages.tools.synth.synth_node_sim import Req

# nvidia-smi's header for the sampler's query, as a recent driver names its columns
HEADER = ("index, timestamp, power.draw [W], utilization.gpu [%], memory.used [MiB], "
          "clocks.current.sm [MHz], clocks_event_reasons.active")
IDLE_W = 118.0
LIMIT_W = 700.0
PREFILL_LOAD = 0.78        # share of the range above idle one prefilling request draws
DECODE_LOAD = 0.2          # ... one decoding request; several add up less than in proportion
MEMORY_MIB = 131_840       # weights and KV cache of a loaded engine on a 141 GB H200
IDLE_REASON = "0x0000000000000001"   # clocks_event_reasons: GPU idle
BUSY_REASON = "0x0000000000000000"
POWER_CAP_REASON = "0x0000000000000004"   # software power cap


def load_at(reqs: list[Req], t: float) -> float:
    """How busy a GPU is at `t` (0 idle, 1 at its power limit) from the requests in flight."""
    prefilling = sum(1 for r in reqs if r.begin <= t < r.first)
    decoding = sum(1 for r in reqs if r.first <= t < r.end)
    load = PREFILL_LOAD * min(prefilling, 1) + DECODE_LOAD * decoding ** 0.7
    return min(load, 1.0)


def sample_line(gpu: int, when: datetime, load: float, rng: random.Random) -> str:
    spread = 1.0 + 0.015 * math.sin(gpu * 1.7)      # each GPU a little apart, the same every point
    watts = min(LIMIT_W, (IDLE_W + (LIMIT_W - IDLE_W) * load) * spread + rng.gauss(0.0, 3.0))
    busy = load > 0
    reason = IDLE_REASON if not busy else POWER_CAP_REASON if watts >= LIMIT_W - 5 else BUSY_REASON
    utilization = 0 if not busy else min(100, round(60 + 40 * load + rng.uniform(-2, 2)))
    stamp = when.strftime("%Y/%m/%d %H:%M:%S.") + f"{when.microsecond // 1000:03d}"
    return (f"{gpu}, {stamp}, {watts:.2f}, {utilization}, {MEMORY_MIB + 64 * gpu}, "
            f"{1980 if busy else 1755}, {reason}")


def sampler_file(*, point_id: str, gpus: tuple[int, ...], interval_ms: int, started: datetime,
                 window: tuple[float, float], reqs: list[Req], silent: tuple[int, ...] = (),
                 seed: str) -> str:
    """The file's text. `started`: the run's start; `window`: the point's (start, end) in seconds
    since then; `reqs`: the point's requests, on the same clock."""
    rng = random.Random(seed)
    interval = interval_ms / 1000
    argv = gpu_sampler.command(list(gpus), interval_ms)
    lines = [f"# point={point_id}", f"# gpus={','.join(map(str, gpus))}", f"# interval_ms={interval_ms}",
             "# clock=UTC", f"# command={' '.join(argv)}", HEADER]
    t = window[0] - interval - 0.087            # the loop's first line, before the window opens
    drift = 0.0
    while t <= window[1] + 1.5 * interval:
        when = (started + timedelta(seconds=t + drift)).astimezone(timezone.utc)
        load = load_at(reqs, t)
        lines += [sample_line(gpu, when, load, rng) for gpu in gpus if gpu not in silent]
        t += interval
        drift += rng.uniform(0.0, 0.004)        # nvidia-smi's loop runs a few ms slow each time
    utc = lambda s: gpu_sampler.stamp((started + timedelta(seconds=s)).timestamp())  # noqa: E731
    # as the run stage writes them: its requests window inside its own (here they coincide: the
    # simulated client sets nothing up)
    lines += [f"# window_start={utc(window[0])}", f"# requests_start={utc(window[0])}",
              f"# requests_end={utc(window[1])}", f"# window_end={utc(window[1])}", "# sampler_exit=stopped"]
    return "\n".join(lines) + "\n"
