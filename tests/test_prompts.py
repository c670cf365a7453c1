"""Prompts built off the GPU's time (stages/run/prompts.py): a bank of worker processes builds the
gate's and the points' prompts while the engine starts, and what a point sends is what it would
have built itself, request for request."""
from __future__ import annotations

import argparse
import logging
import time
from pathlib import Path

import pytest

from stages.core.gate import Gate
from stages.run import bench_client as bench
from stages.run import model, needle, prompts
from stages.run.steps import point_argv, sweep_points

GATE = Gate(depths=(0.1, 0.9), seed=11, answer_tokens=64, template_margin_tokens=16,
            timeout_base_s=1.0, min_prefill_tok_s=1e9, min_decode_tok_s=1e9)
SWEEPS = {
    "long": {"prompt_tokens": 2048, "output_tokens": 16, "concurrency": [1, 2], "prompts_per_user": 2},
    "long-shared": {"prompt_tokens": 2048, "shared_prefix_tokens": 1920, "output_tokens": 16,
                    "concurrency": [2], "prompts_per_user": 2},
}


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    """The model stage's tiny Llama folder (config and tokenizer; no weights are needed here)."""
    return model.run(out=tmp_path_factory.mktemp("models") / "tiny-llama", layers=2, hidden=64,
                     heads=2, kv_heads=1, intermediate=128, max_positions=4096, vocab_size=4096, seed=7)


def in_process(argv: list[str]) -> list:
    """The requests `vllm bench serve` builds itself from argv, in this process."""
    from vllm.benchmarks.datasets import get_samples
    from vllm.benchmarks.serve import add_cli_args

    parser = argparse.ArgumentParser()
    add_cli_args(parser)
    args = parser.parse_args(argv)
    return get_samples(args, prompts.tokenizer(args))


@pytest.mark.parametrize("workers", [1, 0], ids=["process", "thread"])
def test_the_bank_builds_the_requests_each_point_would_build_itself(tiny, tmp_path, workers):
    points = sweep_points(SWEEPS)
    argv = {p.point_id: point_argv(p, base_url="http://127.0.0.1:1", model=str(tiny), folder=tmp_path,
                                   run_id="r", engine="vllm") for p in points}
    with prompts.PromptBank(prompts.point_jobs(points, lambda p: argv[p.point_id]), workers=workers) as bank:
        built = {p.point_id: bank.take(p.point_id) for p in points}
    assert set(bank.waited_s) == set(argv) and all(w >= 0 for w in bank.waited_s.values())
    for point in points:
        ours, theirs = built[point.point_id], in_process(argv[point.point_id])
        assert len(ours) == point.num_prompts
        assert [(r.prompt, r.prompt_len, r.expected_output_len) for r in ours] == \
            [(r.prompt, r.prompt_len, r.expected_output_len) for r in theirs], point.point_id
    # points differ by seed: no point re-sends another's prompts; a shared prefix is shared
    firsts = [built[p.point_id][0].prompt for p in points]
    assert len(set(firsts)) == len(firsts)
    shared = built["long-shared__c02"]
    assert shared[0].prompt[:200] == shared[1].prompt[:200]


def test_the_gate_sends_the_prompts_it_would_build_itself(tiny):
    tokenizer_file = tiny / "tokenizer.json"
    code, target = needle.gate_needle(GATE, 4096)
    with prompts.PromptBank(prompts.gate_jobs(tokenizer_file, target, list(GATE.depths), code, GATE.seed),
                            workers=1) as bank:
        built = [bank.take(needle.gate_key(i)) for i in range(len(GATE.depths))]
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(str(tokenizer_file))
    for i, depth in enumerate(GATE.depths):
        assert built[i] == needle.build_prompt(tokenizer=tok, target_tokens=target, depth=depth,
                                               code=code, seed=GATE.seed + i)
        assert code in built[i][0] and built[i][1] <= target


def test_a_point_takes_its_requests_from_the_bank_and_the_dataset_step_is_put_back():
    import vllm.benchmarks.serve as serve

    original = serve.get_samples
    made = ["a request"]
    align = getattr(serve, bench.ALIGN_STEP)
    with bench.samples_from(lambda: made):
        assert serve.get_samples(None, None) is made
        # built with the engine's own tokenizer files: no second tokenization on the server
        import asyncio
        assert asyncio.run(getattr(serve, bench.ALIGN_STEP)("http://x", "m", made)) is made
    assert serve.get_samples is original and getattr(serve, bench.ALIGN_STEP) is align
    with bench.samples_from(None):
        assert serve.get_samples is original


def test_points_from_the_bank_load_the_tokenizer_once(tmp_path):
    import vllm.benchmarks.serve as serve

    loads = []
    load = serve.get_tokenizer
    serve.get_tokenizer = lambda *a, **kw: loads.append((a, kw)) or object()
    try:
        with bench.samples_from(lambda: []):
            first = serve.get_tokenizer(str(tmp_path), tokenizer_mode="auto")
            assert serve.get_tokenizer(str(tmp_path), tokenizer_mode="auto") is first
            assert serve.get_tokenizer(str(tmp_path), tokenizer_mode="slow") is not first
        with bench.samples_from(lambda: []):
            assert serve.get_tokenizer(str(tmp_path), tokenizer_mode="auto") is first
        assert len(loads) == 2
        with bench.samples_from(None):           # a point that builds its own prompts: as vLLM does
            serve.get_tokenizer(str(tmp_path), tokenizer_mode="auto")
        assert len(loads) == 3
    finally:
        serve.get_tokenizer = load


def test_the_client_is_warmed_with_the_tokenizer_the_points_ask_for(tmp_path):
    import vllm.benchmarks.serve as serve

    from stages.run.steps import point_argv

    loads = []
    load = serve.get_tokenizer
    serve.get_tokenizer = lambda *a, **kw: loads.append((a, kw)) or object()
    point = bench.Point(workload="w", concurrency=1, prompt_tokens=64, output_tokens=8, num_prompts=2, seed=1)
    argv = point_argv(point, base_url="http://127.0.0.1:1", model=str(tmp_path), folder=tmp_path,
                      run_id="r", engine="vllm")
    try:
        bench.warm_client(argv)
        assert len(loads) == 1
        # what the benchmark itself asks for (vllm bench serve's main): the one already loaded
        parser = argparse.ArgumentParser()
        serve.add_cli_args(parser)
        args = parser.parse_args(argv)
        with bench.samples_from(lambda: []):
            serve.get_tokenizer(args.tokenizer, tokenizer_mode=args.tokenizer_mode,
                                trust_remote_code=args.trust_remote_code)
        assert len(loads) == 1
    finally:
        serve.get_tokenizer = load


def test_a_job_that_fails_raises_where_its_point_runs():
    with prompts.PromptBank([("p", prompts.gate_prompt, ("/no/such/tokenizer.json", 10, 0.5, "1", 1))],
                            workers=1) as bank:
        assert "p" in bank
        with pytest.raises(Exception, match="tokenizer|No such file|not found"):
            bank.take("p")
        assert "p" not in bank


def test_a_bank_on_a_thread_has_built_every_job_when_the_first_is_taken():
    built: list[str] = []

    def job(key: str, delay_s: float) -> str:
        time.sleep(delay_s)
        built.append(key)
        return key

    jobs = [(k, job, (k, 0.2)) for k in ("a", "b", "c")]
    with prompts.PromptBank(jobs, workers=0) as bank:
        assert bank.take("a") == "a"
        assert built == ["a", "b", "c"]             # none left building beside the first point
        assert bank.waited_s["a"] >= 0.4
        assert bank.take("c") == "c" and bank.waited_s["c"] < 0.1
        assert "b" in bank and "a" not in bank


def test_no_bank_no_jobs_and_the_long_prompt_warning_is_quiet():
    with prompts.PromptBank([]) as bank:
        assert "x" not in bank
    prompts.quiet_long_prompts()
    assert logging.getLogger(prompts.LONG_PROMPT_LOGGER).getEffectiveLevel() >= logging.ERROR
    assert prompts.default_workers(1) == 1 and 1 <= prompts.default_workers(100) <= prompts.MAX_WORKERS
