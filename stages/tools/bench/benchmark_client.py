"""The client benchmark: how long a point keeps the GPUs waiting on the benchmark client itself.

A stand-in OpenAI completions server (answers streamed at once, so the requests cost next to
nothing) on this machine; a run's points with their prompts built ahead by a PromptBank, as the run
stage builds them; each point run with `bench_client.run_point` as the run stage runs it, after
`warm_client` as the run stage calls it while the engine starts. Measured per point: the client's
set-up (the point's start until its first request is sent) and its finish (the last answer until
the point returns: result file, /metrics scrape). The first point is reported apart: it is the one
a run's one-time costs would land on.

Example:
    from stages.tools.bench import benchmark_client
    result = benchmark_client.run(model=params["models"]["tiny-llama"], points=12, progress=print)
    print(benchmark_client.render_markdown(result))
"""
from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from stages.tools.bench.benchmark_campaign import Progress

# The stand-in server: completions streamed token by token, and the endpoints a point touches.
SERVER = r'''
import json, sys
from aiohttp import web

async def completions(request):
    body = await request.json()
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await resp.prepare(request)
    chunk = "data: " + json.dumps({"choices": [{"index": 0, "text": " a"}]}) + "\n\n"
    for _ in range(int(body.get("max_tokens") or 1)):
        await resp.write(chunk.encode())
    usage = {"prompt_tokens": 1, "completion_tokens": int(body.get("max_tokens") or 1)}
    await resp.write(("data: " + json.dumps({"choices": [], "usage": usage}) + "\n\ndata: [DONE]\n\n").encode())
    return resp

async def metrics(request):
    return web.Response(text="vllm:num_requests_running 0\n")

app = web.Application(client_max_size=1 << 30)
app.add_routes([web.post("/v1/completions", completions), web.get("/metrics", metrics)])
web.run_app(app, host="127.0.0.1", port=int(sys.argv[1]), print=None)
'''
TARGETS = {"setup_ms_median": 50.0, "first_setup_ms": 100.0}


def run(*, model: dict[str, Any], points: int = 12, prompt_tokens: int = 1024, output_tokens: int = 16,
        concurrency: int = 4, progress: Progress | None = None) -> dict[str, Any]:
    """Measure `points` points of `concurrency` users against the stand-in server, the prompts
    made with the tokenizer of a model generated from `model` (a params.yaml `models` entry)."""
    from stages.run import bench_client as bench
    from stages.run import model as models
    from stages.run.executors import free_port
    from stages.run.prompts import bench_requests
    from stages.run.steps import point_argv

    say = progress or (lambda _line: None)
    port = free_port(18900)
    base = f"http://127.0.0.1:{port}"
    server = subprocess.Popen([sys.executable, "-c", SERVER, str(port)])
    try:
        _wait_up(base, server)
        with tempfile.TemporaryDirectory(prefix="bench-client-") as tmp:
            folder = Path(tmp)
            (folder / "bench").mkdir()
            model_dir = models.run(out=folder / "model", **model)
            todo = [bench.Point(workload=f"w{i:02d}", concurrency=concurrency, prompt_tokens=prompt_tokens,
                                output_tokens=output_tokens, num_prompts=2 * concurrency, seed=1000 + i)
                    for i in range(points)]
            argv_of = lambda p: point_argv(p, base_url=base, model=str(model_dir), folder=folder,  # noqa: E731
                                           run_id="bench", engine="vllm")
            say(f"bench: client, {points} points of {2 * concurrency} prompts against a stand-in server")
            setup, finish = [], []
            made = Made({p.point_id: bench_requests(argv_of(p)) for p in todo})
            with httpx.Client() as client:
                started = time.perf_counter()
                bench.warm_client(argv_of(todo[0]))
                warm_s = time.perf_counter() - started
                for p in todo:
                    window: list[tuple[float, float]] = []
                    start = time.time()
                    bench.run_point(p, base_url=base, model=str(model_dir), tokenizer=str(model_dir),
                                    bench_dir=folder / "bench", run_id="bench", client=client,
                                    window=lambda a, b: window.append((a, b)), prompts=made)
                    end = time.time()
                    setup.append(window[0][0] - start)
                    finish.append(end - window[0][1])
    finally:
        server.terminate()
        server.wait(timeout=10)
    ms = lambda xs: [round(1000 * x, 1) for x in xs]  # noqa: E731
    return {"points": points, "prompts_per_point": 2 * concurrency, "prompt_tokens": prompt_tokens,
            "warm_client_s": round(warm_s, 2), "first_setup_ms": ms(setup[:1])[0],
            "setup_ms_median": round(1000 * statistics.median(setup[1:]), 1),
            "finish_ms_median": round(1000 * statistics.median(finish[1:]), 1),
            "setup_ms": ms(setup), "finish_ms": ms(finish), "targets": TARGETS}


class Made:
    """Every point's requests, built before the points run (as a run's PromptBank has them once
    the engine is up): `run_point(prompts=...)` takes each point's."""

    def __init__(self, requests: dict[str, list]):
        self.requests = requests

    def __contains__(self, key: str) -> bool:
        return key in self.requests

    def take(self, key: str) -> list:
        return self.requests.pop(key)


def _wait_up(base: str, server: subprocess.Popen) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and server.poll() is None:
        try:
            httpx.get(f"{base}/metrics", timeout=1)
            return
        except httpx.HTTPError:
            time.sleep(0.1)
    raise RuntimeError("the stand-in server did not start")


def render_markdown(r: dict[str, Any]) -> str:
    t = r["targets"]
    ok = lambda v, k: "met" if v <= t[k] else "missed"  # noqa: E731
    return "\n".join([
        "## The benchmark client's own time per point",
        "",
        f"{r['points']} points of {r['prompts_per_point']} prompts of {r['prompt_tokens']} tokens, their "
        "prompts built ahead, against a stand-in server that answers at once; the run stage's "
        f"`warm_client` first ({r['warm_client_s']} s, while a run's engine starts).",
        "",
        "| measure | value | target |",
        "|---|---:|---|",
        f"| set-up before the first request, median | {r['setup_ms_median']} ms | "
        f"≤ {t['setup_ms_median']:.0f} ms: {ok(r['setup_ms_median'], 'setup_ms_median')} |",
        f"| set-up of the first point | {r['first_setup_ms']} ms | "
        f"≤ {t['first_setup_ms']:.0f} ms: {ok(r['first_setup_ms'], 'first_setup_ms')} |",
        f"| after the last answer, median | {r['finish_ms_median']} ms | |",
        "",
    ])
