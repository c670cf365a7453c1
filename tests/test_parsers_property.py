"""Parsers never crash: random bytes, truncation, NUL bytes, mixed encodings, very long lines.

Each case starts from a real artifact (or plain random bytes), damages it, and feeds it to its
parser. The parser must return its usual result types, and what it cannot read must come back as
error records rather than exceptions. The counts of cases tried go into the reliability report.
"""
from __future__ import annotations

import os
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stages.ingest.parsers.bench_json import parse_bench
from stages.ingest.parsers.cmd import parse_cmd
from stages.ingest.parsers.metrics import parse_metrics
from stages.ingest.parsers.node_json import parse_allreduce, parse_env, parse_p2p
from stages.formats.node_smi import parse_gpus_csv, parse_nvlink_status, parse_topo
from stages.formats.prefixes import strip_prefixes
from stages.formats.sglang_log import parse_sglang_log
from stages.formats.launch_out import parse_launch_out
from stages.ingest.parsers.run_files import parse_meta, parse_niah
from stages.formats.vllm_log import parse_vllm_log

FIX = Path(__file__).parent / "fixtures"
SERVER_LOG = (FIX / "logs" / "sample_server.log").read_bytes()
BENCH = (FIX / "logs" / "sample_bench.json").read_bytes()
TOPO = (FIX / "node" / "topo_h200x8.txt").read_bytes()
GPUS = (FIX / "node" / "gpus_h200x8.csv").read_bytes()
NVLINK = (FIX / "node" / "nvlink_h200.txt").read_bytes()
NODE = Path(__file__).parent.parent / "data" / "nodes" / "h200x2__1130-054711"
SGLANG = (b"[2026-04-08 14:05:21 TP0] max_total_num_tokens=120000, chunked_prefill_size=8192, "
          b"max_prefill_tokens=16384, max_running_requests=64, context_len=131072\n"
          b"[2026-04-08 14:05:30 TP0] Prefill batch. #new-seq: 1, #new-token: 8192, #cached-token: 0, "
          b"token usage: 0.05, #running-req: 0, #queue-req: 0, \n"
          b"[2026-04-08 14:05:31 TP0] Decode batch. #running-req: 5, #token: 20800, token usage: 0.29, "
          b"gen throughput (token/s): 144.95, #queue-req: 0\n"
          b"The server is fired up and ready to roll!\n")
METRICS = (b"# TYPE vllm:prefix_cache_hits_total counter\n"
           b'vllm:prefix_cache_hits_total{engine="0",model_name="m"} 3968.0\n'
           b'vllm:prefix_cache_queries_total{engine="0",model_name="m"} 153741.0\n')
NIAH = (b'{"key": 0, "depth": 0.1, "prompt_tokens": 3624, "ok": false, "latency_s": 0.3, "answer": "x"}\n'
        b"GATE niah score= 0.0\n")
LAUNCH = b"status=ready\nready_s=52.2\nengine_kv_tokens=16384\nrun_status=complete\n"
CMD = (b"#!/bin/sh\nVLLM_CPU_KVCACHE_SPACE=1 .venv/bin/python3 -m vllm.entrypoints.openai.api_server "
       b"--model data/models/tiny-llama --max-num-seqs 4 --max-model-len 4096\n")
META = b'{"schema_version": 1, "run_id": "a__b__4k__vllm__1130-050606", "started_at": "2026-11-30T05:06:06Z"}\n'


@st.composite
def damaged(draw, original: bytes) -> bytes:
    """The original cut, spliced with junk, NUL bytes, other encodings or a very long line."""
    data = original
    for _ in range(draw(st.integers(1, 3))):
        how = draw(st.sampled_from(["truncate", "junk", "nul", "latin1", "long", "drop_newlines"]))
        at = draw(st.integers(0, len(data))) if data else 0
        if how == "truncate":
            data = data[:at]
        elif how == "junk":
            data = data[:at] + draw(st.binary(max_size=200)) + data[at:]
        elif how == "nul":
            data = data[:at] + b"\0" * draw(st.integers(1, 50)) + data[at:]
        elif how == "latin1":
            data = data[:at] + "café ünïcode ß".encode("latin-1") + data[at:]
        elif how == "long":
            data = data[:at] + b"x" * draw(st.integers(10_000, 150_000)) + data[at:]
        else:
            data = data.replace(b"\n", b"\r", draw(st.integers(0, 20)))
    return data


def inputs(original: bytes):
    return st.one_of(st.binary(max_size=2000), damaged(original))


# `make test` keeps a few examples per parser; `make reliability` sets PARSER_EXAMPLES for its
# full run (over 10,000 inputs in all).
EXAMPLES = int(os.environ.get("PARSER_EXAMPLES", "40"))
SETTINGS = settings(max_examples=EXAMPLES, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@SETTINGS
@given(inputs(SERVER_LOG))
def test_vllm_log(data):
    r = parse_vllm_log(data)
    assert isinstance(r.facts, list) and isinstance(r.errors, list)


@SETTINGS
@given(inputs(SGLANG))
def test_sglang_log(data):
    r = parse_sglang_log(data)
    assert isinstance(r.facts, list) and isinstance(r.errors, list)


@SETTINGS
@given(inputs(BENCH))
def test_bench_json(data):
    r = parse_bench(data, "chat__c04")
    assert isinstance(r.points, list)
    if not r.points:
        assert r.errors, "a result file that gave no point must say why"


@SETTINGS
@given(inputs(METRICS))
def test_metrics(data):
    samples, errors = parse_metrics(data)
    assert isinstance(samples, list) and isinstance(errors, list)


@SETTINGS
@given(inputs(CMD))
def test_cmd(data):
    command, errors = parse_cmd(data.decode("utf-8", "replace"))
    assert command is not None or errors


@SETTINGS
@given(inputs(NIAH), inputs(LAUNCH), inputs(META))
def test_small_files(niah, launch, meta):
    parse_niah(niah)
    pairs, errors = parse_launch_out(launch)
    assert isinstance(pairs, list) and isinstance(errors, list)
    parse_meta(meta)


@SETTINGS
@given(inputs(TOPO), inputs(GPUS), inputs(NVLINK))
def test_node_text(topo, gpus, nvlink):
    parse_topo(topo)
    parse_gpus_csv(gpus)
    parse_nvlink_status(nvlink)


@SETTINGS
@given(inputs((NODE / "allreduce.jsonl").read_bytes()), inputs((NODE / "p2p.jsonl").read_bytes()),
       inputs((NODE / "env.json").read_bytes()))
def test_node_json(allreduce, p2p, env):
    rows, errors = parse_allreduce(allreduce)
    assert isinstance(rows, list) and isinstance(errors, list)
    parse_p2p(p2p)
    parse_env(env)


@SETTINGS
@given(st.text(max_size=500))
def test_prefixes(line):
    p = strip_prefixes(line)
    assert isinstance(p.message, str)
