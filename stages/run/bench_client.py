"""Benchmark points with vLLM's own `vllm bench serve`, and /metrics snapshots around each point.

The benchmark runs in-process through `vllm.benchmarks.serve` (the same code as the `vllm bench
serve` command line) so a sweep pays its import cost once. Each point writes one result file
(`--save-result --save-detailed`), the equivalent command line, the benchmark's own printout, and
the engine's /metrics text before and after.

Every request the benchmark sends is timed on the wall clock as it goes (`timed_requests`): the
point's requests window, from the first of its requests sent to the last answer ended, leaves
out the client's set-up (tokenizer, prompts, the test request) so the GPU sampler can count the
energy of the requests alone.
"""
from __future__ import annotations

import contextlib
import functools
import gc
import io
import shlex
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

import httpx

from stages.core.config import CampaignError


# Seeds of repeat r of a point are this far apart from repeat r - 1's, beyond every first-repeat
# seed (seed_base + 100 x workload position + concurrency), so that no two runs of a point share one.
REPEAT_SEED_STRIDE = 1_000_000


@dataclass(frozen=True)
class Point:
    workload: str
    concurrency: int
    prompt_tokens: int
    output_tokens: int
    num_prompts: int
    seed: int
    prefix_tokens: int = 0      # a prefix shared by every prompt of the point (0: none)
    repeat: int = 1             # which run of the point this is, counted from one
    repeats: int = 1            # how many runs of the point its workload asks for

    @property
    def point_id(self) -> str:
        """`<workload>__c<NN>`, and `__r<R>` after it when the workload repeats its points (so a
        workload without repeats names its files as before)."""
        base = f"{self.workload}__c{self.concurrency:02d}"
        return base if self.repeats == 1 else f"{base}__r{self.repeat}"


def point_seed(*, seed_base: int, position: int, concurrency: int, repeat: int) -> int:
    """The seed of one run of a point: from the workload's position in params, the concurrency and
    the repeat number; repeat 1 keeps the seed a point without repeats always had."""
    return seed_base + 100 * position + concurrency + REPEAT_SEED_STRIDE * (repeat - 1)


def points_for(*, workloads: dict, names: list[str], seed_base: int = 1000) -> list[Point]:
    """The sweep of a spec: every concurrency of every named workload, each with its own seed,
    so no point re-sends another point's prompts (no accidental prefix-cache hits).

    A workload with `repeats: N` (default 1) runs each of its points N times, one after the
    other, each its own `vllm bench serve` with its own seed and result file.

    A workload with `shared_prefix_tokens` opens every prompt of a point with the same prefix of
    that many tokens: the prefix cache serves it after the first request, on purpose. That is
    how the cache rule and the engine's cache counters are exercised on real engine output."""
    order = {name: i for i, name in enumerate(workloads)}
    out = []
    for name in names:
        if name not in workloads:
            raise CampaignError(f"unknown workload {name!r} (params.yaml workloads: {', '.join(workloads)})")
        w = workloads[name]
        prompt, prefix = int(w["prompt_tokens"]), int(w.get("shared_prefix_tokens", 0))
        if not 0 <= prefix < prompt:
            raise CampaignError(f"workload {name!r}: shared_prefix_tokens must be below prompt_tokens")
        repeats = w.get("repeats", 1)
        if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
            raise CampaignError(f"workload {name!r}: repeats must be a positive integer, not {repeats!r}")
        for c in w["concurrency"]:
            c = int(c)
            for r in range(1, repeats + 1):
                out.append(Point(workload=name, concurrency=c, prompt_tokens=prompt,
                                 output_tokens=int(w["output_tokens"]),
                                 num_prompts=max(c * int(w.get("prompts_per_user", 2)), 2),
                                 seed=point_seed(seed_base=seed_base, position=order[name],
                                                 concurrency=c, repeat=r),
                                 prefix_tokens=prefix, repeat=r, repeats=repeats))
    return out


# vllm bench serve's client for each engine: vLLM's own, and SGLang through its OpenAI endpoint.
BACKENDS = {"vllm": "vllm", "sglang": "openai"}
# How each engine empties its prefix cache between points, where it offers one.
CACHE_RESET = {"vllm": "/reset_prefix_cache", "sglang": "/flush_cache"}


def bench_argv(point: Point, *, base_url: str, model: str, tokenizer: str, result_dir: Path,
               run_id: str, engine: str = "vllm") -> list[str]:
    return [
        "--backend", BACKENDS[engine], "--base-url", base_url, "--model", model, "--tokenizer", tokenizer,
        "--dataset-name", "random", "--random-prefix-len", str(point.prefix_tokens),
        "--random-input-len", str(point.prompt_tokens - point.prefix_tokens),
        "--random-output-len", str(point.output_tokens), "--random-range-ratio", "0",
        "--ignore-eos", "--num-prompts", str(point.num_prompts),
        "--max-concurrency", str(point.concurrency), "--seed", str(point.seed),
        "--percentile-metrics", "ttft,tpot,itl,e2el", "--metric-percentiles", "50,90,99",
        "--disable-tqdm", "--save-result", "--save-detailed",
        "--result-dir", str(result_dir), "--result-filename", f"{point.point_id}.json",
        "--metadata", f"workload={point.workload}", f"concurrency={point.concurrency}",
        f"repeat={point.repeat}", f"seed={point.seed}", f"run_id={run_id}",
    ]


def scrape_metrics(client: httpx.Client, base_url: str, path: Path) -> None:
    resp = client.get(f"{base_url}/metrics")
    resp.raise_for_status()
    with open(path, "x") as f:
        f.write(resp.text)


def reset_prefix_cache(client: httpx.Client, base_url: str, engine: str) -> bool:
    """Empty the engine's prefix cache if it offers a way (vLLM needs VLLM_SERVER_DEV_MODE=1)."""
    path = CACHE_RESET.get(engine)
    if not path:
        return False
    try:
        return client.post(f"{base_url}{path}").status_code == 200
    except httpx.HTTPError:
        return False


# Where `vllm bench serve` looks its request functions up, by backend, at the start of every run:
# the dict that serve.py imports (in vllm.benchmarks.lib from 0.10.1, beside serve.py in 0.10.0).
REQUEST_FUNCS = ("vllm.benchmarks.lib.endpoint_request_func", "ASYNC_REQUEST_FUNCS")
REQUEST_FUNCS_0_10_0 = ("vllm.benchmarks.endpoint_request_func", "ASYNC_REQUEST_FUNCS")


def _request_funcs() -> dict | None:
    import importlib
    for module, name in (REQUEST_FUNCS, REQUEST_FUNCS_0_10_0):
        try:
            return getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError):
            continue
    return None


@dataclass(frozen=True)
class Call:
    """One request the benchmark sent: when (wall clock), when its answer ended, and whether it
    was one of the point's own (vllm bench serve numbers those, from 0.10.2: `request_id`; its
    test request, warm-ups and probes carry none)."""
    sent: float
    ended: float
    numbered: bool


@contextlib.contextmanager
def timed_requests() -> Iterator[list[Call]]:
    """Time every request `vllm bench serve` sends while the body runs, one Call a request, in
    the order they ended. The request functions are wrapped in place and put back afterwards; a
    vLLM without that dict gives no times (an empty list)."""
    calls: list[Call] = []
    funcs = _request_funcs()
    if funcs is None:
        yield calls
        return
    originals = dict(funcs)

    def timed(fn):
        @functools.wraps(fn)
        async def call(*args, **kwargs):
            given = kwargs.get("request_func_input", args[0] if args else None)
            numbered = bool(getattr(given, "request_id", None))
            sent = time.time()
            try:
                return await fn(*args, **kwargs)
            finally:
                calls.append(Call(sent, time.time(), numbered))
        return call

    funcs.update({name: timed(fn) for name, fn in originals.items()})
    try:
        yield calls
    finally:
        funcs.update(originals)


def requests_window(calls: list[Call], num_prompts: int) -> tuple[float, float] | None:
    """The benchmark's own requests window, from the first of the point's requests sent to the
    last ended: its numbered requests where the tool numbers them, else the last `num_prompts`
    sent (the test request and warm-ups go first). None when fewer were timed than it sends."""
    if num_prompts < 1:
        return None
    own = [c for c in calls if c.numbered]
    if len(own) != num_prompts:
        own = sorted(calls, key=lambda c: c.sent)[-num_prompts:]
    if len(own) < num_prompts:
        return None
    return min(c.sent for c in own), max(c.ended for c in own)


# vllm bench serve's check that the server's tokenizer counts a prompt as it does (it tokenizes
# the first prompt on the server, and every prompt again on a mismatch), from 0.2x.
ALIGN_STEP = "_align_prompts_to_server_tokenizer"
# the tokenizers `vllm bench serve` asked for, by their arguments, kept for the process's life
_TOKENIZERS: dict[tuple, Any] = {}


@contextlib.contextmanager
def samples_from(ready: Callable[[], list] | None) -> Iterator[None]:
    """While the body runs, `vllm bench serve` takes its requests from `ready()` instead of
    building them (its dataset step, vllm.benchmarks.serve.get_samples); nothing when None.

    It also skips the tokenizer check (ALIGN_STEP): the requests were built with the tokenizer
    files of the model folder the engine itself loads, so the server counts them alike, and the
    check would tokenize a million-token prompt on the server while the GPU waits (about 2.5 s
    of a 1M point's 3 s before its first request, on an H200). And it loads the tokenizer (which
    the benchmark still uses to count output tokens) once for all of a run's points, not once a
    point (about 30 ms a point here, most of the client's set-up once the prompts are made)."""
    if ready is None:
        yield
        return
    import vllm.benchmarks.serve as serve

    async def as_built(base_url, model_id, input_requests, *args, **kwargs):
        return input_requests

    load = getattr(serve, "get_tokenizer", None)

    def loaded_once(*args, **kwargs):
        key = (args, tuple(sorted(kwargs.items())))
        if key not in _TOKENIZERS:
            _TOKENIZERS[key] = load(*args, **kwargs)
        return _TOKENIZERS[key]

    original = serve.get_samples, getattr(serve, ALIGN_STEP, None)
    serve.get_samples = lambda args, tokenizer: ready()
    if original[1] is not None:
        setattr(serve, ALIGN_STEP, as_built)
    if load is not None:
        serve.get_tokenizer = loaded_once
    try:
        yield
    finally:
        serve.get_samples = original[0]
        if original[1] is not None:
            setattr(serve, ALIGN_STEP, original[1])
        if load is not None:
            serve.get_tokenizer = load


def warm_client(argv: list[str]) -> None:
    """Import `vllm bench serve`, load the tokenizer a point with `argv` and ready-made prompts asks
    for (samples_from keeps it) and freeze the heap, while the engine starts: the run's first
    point then starts its requests as fast as the others (on the H200 host the first point paid
    about 0.5 s for them, a twentieth of a 10 s point)."""
    from stages.run.prompts import bench_args, import_client, tokenizer

    import_client()
    import vllm.benchmarks.serve as serve

    with samples_from(lambda: []):
        tokenizer(bench_args(argv), serve.get_tokenizer)     # as the benchmark asks for it
    # vllm bench serve collects and freezes the process's heap before each benchmark (so that the
    # collector does not pause its requests); done now, the first point's collection finds only
    # what was made since (about 0.3 s of the first point's set-up here)
    gc.collect()
    gc.freeze()


def run_point(point: Point, *, base_url: str, model: str, tokenizer: str, bench_dir: Path,
              run_id: str, client: httpx.Client, engine: str = "vllm",
              window: Callable[[float, float], None] | None = None, prompts=None) -> Path:
    """One benchmark point; returns its result file. Files are created, never overwritten.
    `window(sent, ended)` is told the point's requests window (wall-clock epoch seconds) once the
    benchmark has ended, where its requests could be timed. `prompts`: a PromptBank
    (stages/run/prompts.py) that built the point's requests ahead, with the same arguments."""
    from vllm.benchmarks.serve import main

    from stages.run.prompts import bench_args, quiet_long_prompts

    argv = bench_argv(point, base_url=base_url, model=model, tokenizer=tokenizer,
                      result_dir=bench_dir, run_id=run_id, engine=engine)
    (bench_dir / f"{point.point_id}.cmd").open("x").write(
        "vllm bench serve " + " ".join(shlex.quote(a) for a in argv) + "\n")
    args = bench_args(argv)
    scrape_metrics(client, base_url, bench_dir / f"{point.point_id}.metrics.before.txt")
    quiet_long_prompts()
    ready = (lambda: prompts.take(point.point_id)) \
        if prompts is not None and point.point_id in prompts else None
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out), timed_requests() as calls, \
                samples_from(ready):
            main(args)
    finally:
        (bench_dir / f"{point.point_id}.out").open("x").write(out.getvalue())
    span = requests_window(calls, point.num_prompts)
    if window is not None and span is not None:
        window(*span)
    scrape_metrics(client, base_url, bench_dir / f"{point.point_id}.metrics.after.txt")
    return bench_dir / f"{point.point_id}.json"
