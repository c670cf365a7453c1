"""Prompts built off the GPU's time: every prompt a run will send, made while the engine starts.

Building a long prompt is the client's work, not the engine's: `vllm bench serve`'s random
dataset decodes each prompt's token ids and encodes the text again to hold its length (a
million-token prompt takes tens of seconds), and the needle gate sizes its haystack with a few
whole-prompt encodes. Done where the point runs, the GPUs wait for it. A `PromptBank` starts a
pool of worker processes as soon as the engine is launched and builds, in run order, the gate's
prompts and every sweep point's requests with the same code, arguments and seeds the point
itself would use, so the prompts sent are the ones it would have sent, and a point takes its
requests ready-made (`bench_client.run_point(prompts=...)`), waiting only if the pool is behind.

A worker process imports vLLM's benchmark code again (about 12 s of CPU), which long prompts
repay and a machine of two cores feels. With no worker (`workers=0`, a profile's
`client_workers: 0`), the bank builds on one thread of the run's own process, which imports that
code anyway to warm its client, and finishes every job before the first is taken, so that no
build shares the process with a point's timed requests.

What a point still waited for is kept (`waited_s`), so the client's share of a point is known.
The workers silence transformers' once-a-prompt warning that a prompt is longer than the
tokenizer's own maximum (the engine's context, not the tokenizer's, is the limit here).
"""
from __future__ import annotations

import logging
import multiprocessing
import os
import threading
import time
from concurrent.futures import Executor, Future, ProcessPoolExecutor, ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any, Callable

# transformers' logger that prints "Token indices sequence length is longer than the specified
# maximum sequence length for this model" once for every long prompt encoded
LONG_PROMPT_LOGGER = "transformers.tokenization_utils_base"
MAX_WORKERS = 8     # a node has cores to spare; more would only compete with the engine's start
CLIENT_IMPORTS = threading.Lock()    # import_client


def quiet_long_prompts() -> None:
    """Leave transformers' warning about prompts over the tokenizer's maximum unprinted."""
    logging.getLogger(LONG_PROMPT_LOGGER).setLevel(logging.ERROR)


def import_client() -> None:
    """Import vLLM's benchmark modules, one thread at a time: the bank's thread and the run's
    warm_client import them side by side, and two threads that enter vLLM's circular imports by
    different modules can each be handed the other's half-made module."""
    with CLIENT_IMPORTS:
        import vllm.benchmarks.datasets  # noqa: F401
        import vllm.benchmarks.serve  # noqa: F401


def bench_requests(argv: list[str]) -> list[Any]:
    """The requests `vllm bench serve` with `argv` would send (its own dataset code, tokenizer and
    seed): run in a worker process, or on the bank's thread."""
    import_client()
    from vllm.benchmarks.datasets import get_samples

    quiet_long_prompts()
    args = bench_args(argv)
    return get_samples(args, tokenizer(args))


def bench_args(argv: list[str]) -> Any:
    """`vllm bench serve`'s arguments for `argv`, parsed by its own parser."""
    import argparse

    from vllm.benchmarks.serve import add_cli_args

    parser = argparse.ArgumentParser(prog="vllm bench serve")
    add_cli_args(parser)
    return parser.parse_args(argv)


def tokenizer(args: Any, load: Callable[..., Any] | None = None) -> Any:
    """The tokenizer `vllm bench serve` makes from its arguments; `load`: the loader to call
    (vLLM's get_tokenizer by default)."""
    if load is None:
        try:
            from vllm.tokenizers import get_tokenizer as load
        except ImportError:         # vLLM before the tokenizers package
            from vllm.transformers_utils.tokenizer import get_tokenizer as load
    return load(args.tokenizer or args.model, tokenizer_mode=args.tokenizer_mode,
                trust_remote_code=args.trust_remote_code)


def gate_prompt(tokenizer_file: str, target_tokens: int, depth: float, code: str, seed: int
                ) -> tuple[str, int]:
    """One needle prompt (needle.build_prompt), run in a worker process."""
    from tokenizers import Tokenizer

    from stages.run.needle import build_prompt
    return build_prompt(tokenizer=Tokenizer.from_file(tokenizer_file), target_tokens=target_tokens,
                        depth=depth, code=code, seed=seed)


def default_workers(jobs: int) -> int:
    """Workers for `jobs` builds: one core left to the rest of the run, at most MAX_WORKERS."""
    return max(1, min(jobs, MAX_WORKERS, (os.cpu_count() or 2) - 1))


class PromptBank:
    """Builds (key, function, args) jobs in a pool of worker processes, in the order given, or on
    one thread of this process where `workers` is 0; `take(key)` returns a job's result once
    built, and records how long it waited for it. Use as a context manager: leaving it stops the
    workers and drops what was not taken."""

    def __init__(self, jobs: list[tuple[str, Callable[..., Any], tuple]], workers: int | None = None):
        self.waited_s: dict[str, float] = {}
        self._futures: dict[str, Future] = {}
        self._pool: Executor | None = None
        self._threaded = workers == 0
        if not jobs:
            return
        if self._threaded:
            self._pool = ThreadPoolExecutor(1, thread_name_prefix="prompt-bank")
        else:
            # spawned, not forked: the run holds threads (samplers, the engine's log reader)
            self._pool = ProcessPoolExecutor(max_workers=workers or default_workers(len(jobs)),
                                             mp_context=multiprocessing.get_context("spawn"))
        for key, fn, args in jobs:
            self._futures[key] = self._pool.submit(fn, *args)

    def __contains__(self, key: str) -> bool:
        return key in self._futures

    def take(self, key: str) -> Any:
        """Job `key`'s result, waiting for it if it is still being built; a job that failed raises
        its error here, where its point runs."""
        future = self._futures.pop(key)
        start = time.monotonic()
        try:
            if self._threaded:      # nothing left building beside the points
                wait(list(self._futures.values()))
            return future.result()
        finally:
            self.waited_s[key] = time.monotonic() - start

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None

    def __enter__(self) -> "PromptBank":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def point_jobs(points: list[Any], argv_of: Callable[[Any], list[str]]) -> list[tuple[str, Callable, tuple]]:
    """A build job per sweep point, keyed by its point id: the requests of `argv_of(point)`."""
    return [(p.point_id, bench_requests, (argv_of(p),)) for p in points]


def gate_jobs(tokenizer_file: Path, target_tokens: int, depths: list[float], code: str, seed: int
              ) -> list[tuple[str, Callable, tuple]]:
    """A build job per needle depth, keyed `gate-<i>`, with the seeds run_gate gives them."""
    from stages.run.needle import gate_key
    return [(gate_key(i), gate_prompt, (str(tokenizer_file), target_tokens, depth, code, seed + i))
            for i, depth in enumerate(depths)]
