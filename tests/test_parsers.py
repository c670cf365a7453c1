"""Parsers of raw run files: every line shape of LOG_FORMATS.md, plus real engine output."""
from __future__ import annotations

import io
import math
from pathlib import Path

import pytest

from stages.ingest.parsers import bench_json, cmd, metrics, run_files
from stages.formats import launch_out, run_folder
from stages.formats.prefixes import strip_prefixes
from stages.formats.lines import read_chunks
from stages.formats.sglang_log import parse_sglang_log
from stages.formats.engine_log import exception_of
from stages.formats.vllm_log import parse_vllm_log

LOGS = Path(__file__).parent / "fixtures" / "logs"


def facts(parsed, name):
    return [f for f in parsed.facts if f.fact == name]


def one(parsed, name):
    found = facts(parsed, name)
    assert len(found) == 1, (name, parsed.facts)
    return found[0]


# ---------------------------------------------------------------- prefixes

@pytest.mark.parametrize("line, worker, level, log_time, message", [
    ("(APIServer pid=1) INFO 10-10 05:07:25 [kv_cache_utils.py:1229] hello",
     "APIServer pid=1", "INFO", "10-10 05:07:25", "hello"),
    ("(EngineCore_DP0 pid=402) WARNING 10-10 05:07:25 [core.py:1] hello",
     "EngineCore_DP0 pid=402", "WARNING", "10-10 05:07:25", "hello"),
    ("(Worker_TP2_DCP2 pid=1926) ERROR 10-10 05:07:25 [multiproc_executor.py:1058] hello",
     "Worker_TP2_DCP2 pid=1926", "ERROR", "10-10 05:07:25", "hello"),
    ("(Worker_TP1_EP1 pid=77) INFO 10-10 05:07:25 [a.py:1] hello", "Worker_TP1_EP1 pid=77", "INFO",
     "10-10 05:07:25", "hello"),
    ("(VllmWorker rank=3 pid=88) INFO 10-10 05:07:25 [a.py:1] hello", "VllmWorker rank=3 pid=88",
     "INFO", "10-10 05:07:25", "hello"),
    ("(Worker pid=9) INFO 10-10 05:07:25 [a.py:1] hello", "Worker pid=9", "INFO", "10-10 05:07:25",
     "hello"),
    ("INFO 01-30 03:18:12 gpu_model_runner.py:848] hello", None, "INFO", "01-30 03:18:12", "hello"),
    ("INFO [kv_cache_utils.py:1319] hello", None, "INFO", None, "hello"),
    ("hello", None, None, None, "hello"),
    ("2026-10-10T05:07:25.123456789Z (EngineCore pid=402) INFO 10-10 05:07:26 [a.py:1] hello",
     "EngineCore pid=402", "INFO", "10-10 05:07:26", "hello"),
    ("2026-10-10T05:07:25.123456789Z hello", None, None, "2026-10-10T05:07:25.123456789Z", "hello"),
    ("[2025-03-10T15:07:20Z] INFO 03-10 15:07:20 [a.py:1] hello", None, "INFO", "03-10 15:07:20",
     "hello"),
    ("[2025-03-10T15:07:20Z] hello", None, None, "2025-03-10T15:07:20Z", "hello"),
    ("07:29:01 [INFO] [job] (Worker pid=9) INFO [a.py:1] hello", "Worker pid=9", "INFO", "07:29:01",
     "hello"),
    ("07:29:01 [ERROR] [job] hello", None, "ERROR", "07:29:01", "hello"),
    ("\x1b[0;36m(Worker pid=9)\x1b[0;0m INFO 10-10 05:07:25 [a.py:1] hello", "Worker pid=9", "INFO",
     "10-10 05:07:25", "hello"),
    ("[0;36m(Worker pid=9)[0;0m INFO 10-10 05:07:25 [a.py:1] hello", "Worker pid=9", "INFO",
     "10-10 05:07:25", "hello"),
    ("[1;36m(EngineCore_DP0 pid=402)[0m [0;32mINFO[0m 10-10 05:07:25 [a.py:1] hello",
     "EngineCore_DP0 pid=402", "INFO", "10-10 05:07:25", "hello"),
    ("Capturing CUDA graphs (mixed prefill-decode, PIECEWISE): 100%|██████████| 67/67 "
     "[00:10<00:00,  6.50it/s](VllmWorker rank=0 pid=88) INFO 10-10 05:07:25 [a.py:1] hello",
     "VllmWorker rank=0 pid=88", "INFO", "10-10 05:07:25", "hello"),
    ("Loading safetensors checkpoint shards: 100% Completed | 4/4 [00:02<00:00,  1.60it/s]"
     "(Worker pid=9) INFO 10-10 05:07:25 [a.py:1] hello", "Worker pid=9", "INFO", "10-10 05:07:25",
     "hello"),
    ("Loading: 10%|█ | 1/10 [00:01<?, ?it/s]\rLoading: 100%|██| 10/10 [00:02<00:00, 5it/s]\r"
     "(Worker pid=9) INFO 10-10 05:07:25 [a.py:1] hello", "Worker pid=9", "INFO", "10-10 05:07:25",
     "hello"),
    ("[2026-04-08 14:05:21 TP0] hello", "TP0", None, "2026-04-08 14:05:21", "hello"),
    ("[2026-04-08 14:05:21 DP1 TP0] hello", "DP1 TP0", None, "2026-04-08 14:05:21", "hello"),
    ("[2026-04-08 14:05:21] hello", None, None, "2026-04-08 14:05:21", "hello"),
    ("INFO:     Application startup complete.", None, "INFO", None, "Application startup complete."),
    # interleaved writers: the innermost process tag wrote the message
    ("(EngineCore_DP0 pid=1) INFO 10-10 05:07:25 [a.py:1] (Worker_TP0 pid=2) WARNING 10-10 05:07:26 "
     "[b.py:2] hello", "Worker_TP0 pid=2", "WARNING", "10-10 05:07:26", "hello"),
    # stacked in another order: docker, then CI, then ANSI, then the engine
    ("2026-10-10T05:07:25Z [2026-10-10T05:07:25Z] \x1b[0;36m(Worker pid=9)\x1b[0m ERROR 10-10 05:07:25 "
     "[a.py:1] hello", "Worker pid=9", "ERROR", "10-10 05:07:25", "hello"),
])
def test_strip_prefixes_shapes(line, worker, level, log_time, message):
    got = strip_prefixes(line)
    assert (got.worker, got.level, got.log_time, got.message) == (worker, level, log_time, message)


def test_strip_prefixes_keeps_message_indentation_and_bare_progress_lines():
    assert strip_prefixes("(Worker pid=9) ERROR 10-10 05:07:25 [a.py:1]   File \"x.py\"").message == \
        '  File "x.py"'
    bar = "Loading safetensors checkpoint shards: 100% Completed | 4/4 [00:02<00:00,  1.60it/s]"
    assert strip_prefixes(bar).message == bar


# ---------------------------------------------------------------- vLLM facts

def vllm(text: str, **kw):
    return parse_vllm_log(text.encode(), **kw)


def test_kv_pool_shapes():
    p = vllm("(EngineCore_DP0 pid=1) INFO 10-10 05:07:25 [kv_cache_utils.py:1] GPU KV cache size: "
             "5,659,136 tokens\n")
    assert one(p, "kv_tokens").value_num == 5659136
    assert one(p, "kv_tokens").detail == "GPU"
    p = vllm("INFO 10-10 05:07:25 [kv_cache_utils.py:1] GPU KV cache size: 1,573,325 tokens, "
             "Maximum concurrency for 800,000 tokens per request: 1.97x\n")
    assert one(p, "kv_tokens").value_num == 1573325
    assert one(p, "max_concurrency_x").value_num == pytest.approx(1.97)
    assert one(p, "max_concurrency_len").value_num == 800000
    p = vllm("INFO 10-10 05:07:25 [kv_cache_utils.py:1] CPU KV cache size: 1,048,576 tokens\n"
             "INFO 10-10 05:07:25 [kv_cache_utils.py:2] Maximum concurrency for 2048 tokens per request: 10.79x\n")
    assert one(p, "kv_tokens").detail == "CPU"
    assert one(p, "max_concurrency_x").value_num == pytest.approx(10.79)
    assert one(p, "max_concurrency_len").line == 2


def test_gpu_blocks_become_tokens_only_with_a_known_block_size():
    line = "INFO 01-30 03:18:12 executor_base.py:1] # GPU blocks: 1381, # CPU blocks: 512\n"
    p = vllm(line)
    assert one(p, "kv_blocks").value_num == 1381
    assert facts(p, "kv_tokens") == []
    p = vllm(line, block_size=16)
    assert one(p, "kv_tokens").value_num == 1381 * 16
    p = vllm("INFO 01-30 03:18:11 a.py:1] non-default args: {'block_size': 32}\n" + line, block_size=16)
    assert one(p, "block_size").value_num == 32
    assert one(p, "kv_tokens").value_num == 1381 * 32


@pytest.mark.parametrize("message, gib, unit, load_s", [
    ("Loading model weights took 14.99 GB", 14.99, "GB", None),
    ("Model loading took 3.34 GB and 0.77 seconds", 3.34, "GB", 0.77),
    ("Model loading took 27.52 GiB and 305.87 seconds", 27.52, "GiB", 305.87),
    ("Model loading took 102.31 GiB memory and 70.385249 seconds", 102.31, "GiB", 70.385249),
])
def test_weights_shapes(message, gib, unit, load_s):
    p = vllm(f"(Worker_TP0 pid=5) INFO 10-10 05:07:25 [gpu_model_runner.py:1] {message}\n")
    assert one(p, "weights_gib").value_num == pytest.approx(gib)
    assert one(p, "weights_gib").detail == unit
    if load_s is None:
        assert facts(p, "load_s") == []
    else:
        assert one(p, "load_s").value_num == pytest.approx(load_s)


def test_kv_memory_negative_and_no_memory():
    p = vllm("(Worker pid=1) INFO 10-10 05:07:25 [gpu_worker.py:1] Available KV cache memory: -5.34 GiB\n"
             "(EngineCore_DP0 pid=2) ERROR 10-10 05:07:26 [core.py:1] ValueError: No available memory "
             "for the cache blocks. Try increasing `gpu_memory_utilization`.\n")
    assert one(p, "kv_memory_gib").value_num == pytest.approx(-5.34)
    assert one(p, "no_kv_memory").line == 2
    err = one(p, "error")
    assert (err.detail, err.worker, err.line) == ("ValueError", "EngineCore_DP0 pid=2", 2)
    assert err.value_text.startswith("No available memory for the cache blocks")


def test_init_and_compile_times():
    p = vllm("INFO 10-10 05:07:25 [core.py:1] init engine (profile, create kv cache, warmup model) "
             "took 81.30 seconds\n")
    assert one(p, "init_s").value_num == pytest.approx(81.30)
    assert facts(p, "compile_s") == []
    p = vllm("INFO 10-10 05:07:25 [core.py:1] init engine (profile, create kv cache, warmup model) "
             "took 401.63 s (compilation: 98.54 s)\n")
    assert one(p, "init_s").value_num == pytest.approx(401.63)
    assert one(p, "compile_s").value_num == pytest.approx(98.54)
    p = vllm("INFO 10-10 05:07:25 [backends.py:1] torch.compile takes 25.3 s in total\n")
    assert one(p, "compile_s").value_num == pytest.approx(25.3)


def test_kernels_and_backends():
    p = vllm("\n".join([
        "(Worker_TP0 pid=1) INFO 10-10 05:07:25 [mxfp4.py:1] Using 'MARLIN' Mxfp4 MoE backend.",
        "(Worker_TP0 pid=1) INFO 10-10 05:07:25 [a.py:1] Using HummingMxfp8LinearKernel for MXFP8 GEMM",
        "(Worker_TP0 pid=1) INFO 10-10 05:07:25 [a.py:1] Using KV cache scaling factor 1.0 for fp8_e4m3",
        "(Worker_TP0 pid=1) INFO 10-10 05:07:25 [cuda.py:1] Using FLASH_ATTN attention backend out of "
        "potential backends: ['FLASH_ATTN', 'FLASHINFER']",
        "INFO 01-30 03:18:12 selector.py:1] Using Flash Attention backend.",
        "(Worker pid=1) INFO 10-10 05:07:25 [a.py:1] Using max model len 4096",
    ]) + "\n")
    assert one(p, "moe_backend").value_text == "MARLIN"
    assert one(p, "linear_kernel").value_text == "HummingMxfp8LinearKernel"
    assert one(p, "kv_scale").value_num == 1.0
    assert one(p, "kv_scale").value_text == "fp8_e4m3"
    assert [f.value_text for f in facts(p, "attention_backend")] == ["FLASH_ATTN", "Flash Attention"]


@pytest.mark.parametrize("line, version", [
    ("(APIServer pid=1) INFO 11-30 04:58:28 [api_utils.py:347]  ▄▄ ▄█ █     █     █ ▀▄▀ █  version 0.32.0",
     "0.32.0"),
    ("INFO 03-10 15:07:20 api_server.py:1] vLLM API server version 0.31.0", "0.31.0"),
    ("(EngineCore pid=2) INFO 11-30 04:58:47 [core.py:133] Initializing a V1 LLM engine (v0.32.0) with "
     "config: model='/m'", "0.32.0"),
])
def test_version_shapes(line, version):
    assert one(vllm(line + "\n"), "engine_version").value_text == version


def test_nccl_version_is_not_the_engine_version():
    p = vllm("node:1:1 [0] NCCL INFO NCCL version 2.21.5+cuda12.4\n")
    assert facts(p, "engine_version") == []


def test_first_exception_line_is_the_error_and_mentions_are_not():
    p = vllm("\n".join([
        "(APIServer pid=1) WARNING 10-10 05:07:20 [system_utils.py:1] This can cause fd limit errors "
        "like `OSError: [Errno 24] Too many open files`.",
        'INFO:     127.0.0.1:1 - "POST /v1/completions HTTP/1.1" 500 Internal Server Error',
        "(Worker_TP2_DCP2 pid=1926) ERROR 10-10 05:07:25 [multiproc_executor.py:1058] Traceback (most "
        "recent call last):",
        "(Worker_TP2_DCP2 pid=1926) ERROR 10-10 05:07:25 [multiproc_executor.py:1058]     raise "
        "NotImplementedError('x')",
        "(Worker_TP2_DCP2 pid=1926) ERROR 10-10 05:07:25 [multiproc_executor.py:1058] "
        "NotImplementedError: DCP for FlashMLA sparse",
        "(Worker_TP0 pid=1920) ERROR 10-10 05:07:26 [multiproc_executor.py:1058] RuntimeError: later",
        "(EngineCore_DP0 pid=402) ERROR 10-10 05:07:27 [core.py:1] EngineCore failed to start.",
    ]) + "\n")
    err = one(p, "error")
    assert (err.detail, err.value_text, err.worker, err.line) == (
        "NotImplementedError", "DCP for FlashMLA sparse", "Worker_TP2_DCP2 pid=1926", 5)
    assert err.excerpt.startswith("(Worker_TP2_DCP2 pid=1926) ERROR")


@pytest.mark.parametrize("message, kind", [
    ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB", "torch.OutOfMemoryError"),
    ("RuntimeError: fused_minimax_m3_qknorm_rope_kv_insert", "RuntimeError"),
    ("KeyboardInterrupt", "KeyboardInterrupt"),
    ("Exception: boom", "Exception"),
    ("torch._dynamo.exc.BackendCompilerFailed: backend='inductor' raised:",
     "torch._dynamo.exc.BackendCompilerFailed"),
])
def test_exception_names(message, kind):
    assert exception_of(message)[0] == kind


@pytest.mark.parametrize("message", ["Internal Server Error", "Error: nope", "raise ValueError('x')",
                                     "Found ulimit ... `OSError: [Errno 24]`"])
def test_not_exception_lines(message):
    assert exception_of(message) is None


def test_bare_exception_line_without_prefix():
    p = vllm("Traceback (most recent call last):\n  File \"x.py\", line 1\n"
             "RuntimeError: fused_minimax_m3_qknorm_rope_kv_insert, kernel.cu:556,\n")
    err = one(p, "error")
    assert (err.detail, err.worker, err.line) == ("RuntimeError", None, 3)


def test_message_on_the_line_after_its_prefixes_takes_their_tags():
    p = vllm("(EngineCore_DP0 pid=1) (Worker_TP3 pid=7) INFO 10-10 05:07:25 [gpu_worker.py:1] \n"
             "Available KV cache memory: 25.8 GiB\n")
    f = one(p, "kv_memory_gib")
    assert (f.value_num, f.worker, f.log_time, f.line) == (25.8, "Worker_TP3 pid=7", "10-10 05:07:25", 2)


def test_ready_line():
    p = vllm("INFO:     Waiting for application startup.\nINFO:     Application startup complete.\n")
    assert one(p, "ready").line == 2


def test_stats_lines_with_optional_fields():
    p = vllm("\n".join([
        "(APIServer pid=1) INFO 10-10 05:07:25 [loggers.py:1] Engine 000: Avg prompt throughput: 409.6 "
        "tokens/s, Avg generation throughput: 7.9 tokens/s, Running: 4 reqs, Waiting: 0 reqs, GPU KV "
        "cache usage: 0.4%, Prefix cache hit rate: 0.0%",
        "(APIServer pid=1) INFO 10-10 05:07:35 [loggers.py:1] Engine 001: Avg prompt throughput: 1,024.5 "
        "tokens/s, Avg generation throughput: 7.9 tokens/s, Running: 2 reqs, Waiting: 3 reqs, Deferred: 1 "
        "reqs, GPU KV cache usage: 12.5%, Prefix cache hit rate: 50.0%, External prefix cache hit rate: "
        "1.0%, MM cache hit rate: 0.0%, MFU: 3.2%   ",
        "INFO 01-30 03:18:12 metrics.py:1] Avg prompt throughput: 0.0 tokens/s, Avg generation "
        "throughput: 5.0 tokens/s, Running: 1 reqs, Swapped: 0 reqs, Pending: 2 reqs, GPU KV cache "
        "usage: 3.0%, CPU KV cache usage: 0.0%.",
        "INFO 10-10 05:07:45 [metrics.py:1] SpecDecoding metrics: Mean acceptance length: 2.1",
    ]) + "\n")
    a, b, c = p.stats
    assert (a.engine_idx, a.prompt_tok_s, a.running_reqs, a.kv_usage_pct, a.log_time, a.line) == (
        0, 409.6, 4, 0.4, "10-10 05:07:25", 1)
    assert (b.engine_idx, b.prompt_tok_s, b.waiting_reqs, b.prefix_hit_pct) == (1, 1024.5, 3, 50.0)
    assert b.extra["Deferred"] == 1 and b.extra["External prefix cache hit rate"] == 1.0
    assert (c.engine_idx, c.gen_tok_s, c.waiting_reqs, c.kv_usage_pct) == (None, 5.0, 2, 3.0)
    assert p.errors == []


def test_real_vllm_cpu_log():
    p = parse_vllm_log((LOGS / "sample_server.log").read_bytes())
    kv = one(p, "kv_tokens")
    assert (kv.value_num, kv.detail, kv.worker, kv.line) == (1048576, "CPU", "EngineCore pid=2228", 48)
    assert one(p, "max_concurrency_len").value_num == 4096
    assert one(p, "init_s").value_num == pytest.approx(32.75)
    assert {f.value_text for f in facts(p, "engine_version")} == {"0.32.0"}
    assert one(p, "ready").line == 96
    assert one(p, "error").detail == "vllm.v1.engine.exceptions.EngineDeadError"
    assert [(s.line, s.prompt_tok_s, s.kv_usage_pct) for s in p.stats] == [(113, 1228.8, 0.0)]
    assert p.errors == []


def test_chunked_reading_gives_the_same_lines():
    data = (LOGS / "sample_server.log").read_bytes()
    whole = parse_vllm_log(data)
    chunked = parse_vllm_log(read_chunks(io.BytesIO(data), size=1000))
    assert [(f.fact, f.line) for f in chunked.facts] == [(f.fact, f.line) for f in whole.facts]
    assert [s.line for s in chunked.stats] == [s.line for s in whole.stats]


def test_known_line_it_cannot_read_is_an_error_and_bad_bytes_do_not_raise():
    data = (b"\xff\xfe\x00garbage\n" + b"x" * 200_000 + b"\n"
            b"INFO 10-10 05:07:25 [a.py:1] Maximum concurrency for lots of tokens\n"
            b"INFO 10-10 05:07:25 [a.py:1] GPU KV cache size: 12\x00,000 tokens\n")
    p = parse_vllm_log(data)
    assert [e.line for e in p.errors] == [3]
    assert "Maximum concurrency" in p.errors[0].reason


# ---------------------------------------------------------------- SGLang

def test_sglang_log():
    text = "\n".join([
        "[2026-04-08 14:05:01 TP0] Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16, "
        "avail mem=63.64 GB, mem usage=14.99 GB.",
        "[2026-04-08 14:05:02 TP0] max_total_num_tokens=1234567, chunked_prefill_size=8192, "
        "max_prefill_tokens=16384, max_running_requests=4096, context_len=131072, available_gpu_mem=12.1 GB",
        "[2026-04-08 14:05:10] The server is fired up and ready to roll!",
        "[2026-04-08 14:05:21 TP0] Prefill batch. #new-seq: 1, #new-token: 8192, #cached-token: 0, "
        "token usage: 0.05, #running-req: 0, #queue-req: 0, ",
        "[2026-04-08 14:05:22 DP1 TP0] Prefill batch, #new-seq: 1, #new-token: 100, #cached-token: 28, "
        "full token usage: 0.10, swa token usage: 0.20, #running-req: 1, #queue-req: 2, "
        "input throughput (token/s): 5000.0",
        "[2026-04-08 14:05:23 TP0] Decode batch. #running-req: 5, #token: 20800, token usage: 0.29, "
        "cuda graph: True, gen throughput (token/s): 144.95, #queue-req: 0",
        "[2026-04-08 14:05:24 TP0] Decode batch. #running-req: 5, #token: 20800, full token usage: 0.29, "
        "mamba usage: 0.5, gen throughput (token/s): 140.00, #queue-req: 1",
    ]) + "\n"
    p = parse_sglang_log(text.encode())
    assert one(p, "max_total_num_tokens").value_num == 1234567
    assert one(p, "max_running_requests").value_num == 4096
    assert one(p, "context_len").value_num == 131072
    assert one(p, "chunked_prefill_size").value_num == 8192
    assert one(p, "max_prefill_tokens").value_num == 16384
    assert one(p, "weights_gib").value_num == pytest.approx(14.99)
    assert one(p, "ready").line == 3
    kinds = [(s.kind, s.line) for s in p.stats]
    assert kinds == [("sglang_prefill", 4), ("sglang_prefill", 5), ("sglang_decode", 6), ("sglang_decode", 7)]
    a, b, c, d = p.stats
    assert (a.new_tokens, a.cached_tokens, a.kv_usage_pct, a.log_time) == (8192, 0, 5.0, "2026-04-08 14:05:21")
    assert (b.engine_idx, b.cached_tokens, b.kv_usage_pct, b.waiting_reqs, b.prompt_tok_s) == (
        1, 28, 10.0, 2, 5000.0)
    assert (c.running_reqs, c.gen_tok_s, c.kv_usage_pct) == (5, 144.95, 29.0)
    assert d.extra["mamba usage"] == 0.5 and d.waiting_reqs == 1


# ---------------------------------------------------------------- bench JSON

def test_real_bench_json():
    b = bench_json.parse_bench((LOGS / "sample_bench.json").read_bytes(), "long__c04")
    assert b.errors == []
    (point,) = b.points
    assert (point["workload"], point["concurrency"], point["completed"], point["failed"]) == ("long", 4, 8, 0)
    assert math.isinf(point["request_rate"])
    assert point["median_ttft_ms"] == pytest.approx(230.547498500016)
    assert point["duration_s"] == pytest.approx(0.6669445200000155)
    assert '"std_ttft_ms"' in point["metadata_json"]
    assert len(b.requests) == 8
    r = b.requests[0]
    assert (r["request_idx"], r["input_tokens"], r["output_tokens"], r["itl_count"]) == (0, 1536, 16, 15)
    assert r["ttft_s"] == pytest.approx(0.13010670799997115)
    assert r["latency_s"] == pytest.approx(0.35012044000001197)
    assert r["error"] == ""


def test_bench_metadata_keys_variants_and_percentiles():
    data = (b'{"date": "20261130-045959", "request_rate": "inf", "max_concurrency": 16, '
            b'"workload": "chat", "concurrency": "8", "run_id": "r", "request_goodput:": 1.5, '
            b'"p99.9_ttft_ms": 12.5, "p90_ttft_ms": 9.0, "completed": 2, '
            b'"input_lens": [10, 20], "output_lens": [5, null], "ttfts": [0.1, 0.2], '
            b'"itls": [[0.01, 0.02], []], "errors": ["", "boom"]}')
    b = bench_json.parse_bench(data, "whatever")
    (point,) = b.points
    assert (point["workload"], point["concurrency"], point["p90_ttft_ms"]) == ("chat", 8, 9.0)
    assert '"request_goodput": 1.5' in point["metadata_json"]
    assert '"p99.9_ttft_ms": 12.5' in point["metadata_json"]
    assert [r["output_tokens"] for r in b.requests] == [5, None]
    assert [r["itl_count"] for r in b.requests] == [2, 0]
    assert b.requests[1]["error"] == "boom"
    assert b.errors == []


def test_bench_arrays_of_different_lengths_keep_the_point_and_none_of_its_requests():
    data = (b'{"completed": 2, "median_ttft_ms": 100.0, "input_lens": [10, 20], "output_lens": [5], '
            b'"ttfts": [0.1, 0.2]}')
    b = bench_json.parse_bench(data, "chat__c02")
    assert [p["median_ttft_ms"] for p in b.points] == [100.0] and b.requests == []
    (error,) = b.errors
    assert error.reason == ("chat__c02: per-request arrays differ in length (input_lens=2, "
                            "output_lens=1, ttfts=2); its requests are left out")


@pytest.mark.parametrize("values, kind", [
    (b'[0.1, NaN]', "ttfts[1] is NaN"), (b'[0.1, "0.2"]', "ttfts[1] is a string"),
    (b'[Infinity, 0.2]', "ttfts[0] is infinite"), (b'[0.1, true]', "ttfts[1] is true/false"),
    (b'"0.1 0.2"', "ttfts is a string, not a list")])
def test_bench_request_values_that_are_not_numbers_leave_the_requests_out(values, kind):
    b = bench_json.parse_bench(b'{"completed": 2, "input_lens": [1, 2], "ttfts": ' + values + b'}', "p")
    assert len(b.points) == 1 and b.requests == []
    assert [e.reason for e in b.errors] == [f"p: {kind} where a number belongs; its requests are left out"
                                            if "not a list" not in kind
                                            else f"p: {kind}; its requests are left out"]


def test_bench_itls_that_are_not_numbers_leave_the_requests_out():
    b = bench_json.parse_bench(b'{"ttfts": [0.1, 0.2], "itls": [[0.01], [0.02, NaN]]}', "p")
    assert b.requests == [] and [e.reason for e in b.errors] == [
        "p: itls[1] holds NaN where a number belongs; its requests are left out"]


@pytest.mark.parametrize("member, kind", [
    (b'"median_ttft_ms": NaN', "median_ttft_ms is NaN"),
    (b'"completed": "8"', "completed is a string"),
    (b'"mean_tpot_ms": -Infinity', "mean_tpot_ms is infinite"),
    (b'"duration": [1.5]', "duration_s is a list")])
def test_bench_point_figures_that_are_not_numbers_leave_the_point_out(member, kind):
    data = b'{"completed": 2, "request_rate": "inf", ' + member + b', "ttfts": [0.1, 0.2]}'
    b = bench_json.parse_bench(data.replace(b'"completed": 2, ', b'') if b'"completed"' in member
                               else data, "long__c04")
    assert b.points == [] and b.requests == []
    assert [e.reason for e in b.errors] == [
        f"long__c04: {kind} where a number belongs; the point is left out"]


def test_sglang_bench_jsonl_with_bare_infinity():
    data = (b'{"backend": "sglang", "request_rate": Infinity, "max_concurrency": 4, "completed": 3}\n'
            b'{"backend": "sglang", "request_rate": 2.0, "max_concurrency": 8, "completed": 5}\n')
    b = bench_json.parse_bench(data, "run")
    assert [(p["point_id"], p["concurrency"], p["source_line"]) for p in b.points] == [
        ("run#1", 4, 1), ("run#2", 8, 2)]
    assert math.isinf(b.points[0]["request_rate"])


def test_corrupt_bench_json_is_an_error():
    b = bench_json.parse_bench(b'{"date": "x", "completed": 3,\n"ttfts": [0.1, \n', "long__c01")
    assert b.points == [] and len(b.errors) == 1
    assert "not valid JSON" in b.errors[0].reason


# ---------------------------------------------------------------- metrics

def test_prometheus_text():
    text = (b'# HELP vllm:prefix_cache_hits_total Prefix cache hits, in terms of number of cached tokens.\n'
            b'# TYPE vllm:prefix_cache_hits_total counter\n'
            b'vllm:prefix_cache_hits_total{engine="0",model_name="/tmp/tiny"} 1536.0\n'
            b'vllm:time_to_first_token_seconds_bucket{le="+Inf",model_name="a, {b}"} 8.0\n'
            b'gpu_cache_usage_perc{model_name="m"} 0.25 1700000000\n'
            b'process_open_fds 12\n'
            b'vllm:broken{model_name="m" 1\n'
            b'vllm:bad_value{} abc\n')
    samples, errors = metrics.parse_metrics(text)
    assert [(s.name, s.labels, s.value, s.line) for s in samples] == [
        ("vllm:prefix_cache_hits_total", 'engine="0",model_name="/tmp/tiny"', 1536.0, 3),
        ("vllm:time_to_first_token_seconds_bucket", 'le="+Inf",model_name="a, {b}"', 8.0, 4),
        ("gpu_cache_usage_perc", 'model_name="m"', 0.25, 5),
        ("process_open_fds", None, 12.0, 6),
    ]
    assert [e.line for e in errors] == [7, 8]


# ---------------------------------------------------------------- cmd.sh

def test_cmd_local_python_module():
    c, errors = cmd.parse_cmd(
        "#!/bin/sh\ncd /srv/campaign\nexport VLLM_CPU_OMP_THREADS_BIND=auto\n"
        "VLLM_CPU_KVCACHE_SPACE=1 .venv/bin/python -m vllm.entrypoints.openai.api_server "
        "--model data/models/tiny-llama --port 8011 \\\n  --max-num-seqs 4 --max-model-len=4096 "
        "--no-enable-prefix-caching --trust-remote-code > server.log 2>&1\n")
    assert errors == []
    assert (c.engine, c.wrapper, c.image, c.model_path, c.line) == ("vllm", "none", None, "data/models/tiny-llama", 4)
    assert (c.max_num_seqs, c.max_model_len, c.prefix_caching) == (4, 4096, False)
    assert c.flags == [(1, "--model", "data/models/tiny-llama"), (2, "--port", "8011"),
                       (3, "--max-num-seqs", "4"), (4, "--max-model-len", "4096"),
                       (5, "--no-enable-prefix-caching", None), (6, "--trust-remote-code", None)]
    assert [(n, v) for n, v, _ in c.env] == [("VLLM_CPU_OMP_THREADS_BIND", "auto"), ("VLLM_CPU_KVCACHE_SPACE", "1")]
    assert "\\" not in c.command and "  " not in c.command


def test_cmd_docker_serve():
    c, errors = cmd.parse_cmd(
        "#!/bin/sh\ndocker run --rm --gpus '\"device=0,1,2,3\"' --ipc=host -e NCCL_P2P_LEVEL=SYS "
        "-v /models:/models:ro -p 8000:8000 --name glm \\\n  vllm/vllm-openai:v0.31.0 serve /models/glm53 \\\n"
        "  --tensor-parallel-size 8 -dcp 8 --enable-expert-parallel --data-parallel-size=2 -pp 1 "
        "--prefill-context-parallel-size 2 \\\n  --max-model-len 1M --kv-cache-dtype fp8 "
        "--enable-prefix-caching --block-size 64 --compilation-config '{\"level\": 3}' "
        "--cuda-graph-sizes 1 2 4\n")
    assert errors == []
    assert (c.engine, c.wrapper, c.image, c.model_path) == ("vllm", "docker", "vllm/vllm-openai:v0.31.0", "/models/glm53")
    assert (c.tp, c.dp, c.pp, c.dcp, c.pcp, c.expert_parallel) == (8, 2, 1, 8, 2, True)
    assert (c.max_model_len, c.kv_cache_dtype, c.prefix_caching, c.block_size) == (1024 * 1024, "fp8", True, 64)
    assert ("--compilation-config", '{"level": 3}') in [(f, v) for _, f, v in c.flags]
    assert ("--cuda-graph-sizes", "1 2 4") in [(f, v) for _, f, v in c.flags]
    assert c.env == [("NCCL_P2P_LEVEL", "SYS", 2)]


def test_cmd_docker_image_entrypoint_and_sglang():
    c, _ = cmd.parse_cmd("docker run -it --rm vllm/vllm-openai:v0.10.0 --model /m --tp 4 --max-model-len 128k\n")
    assert (c.wrapper, c.image, c.model_path, c.tp, c.max_model_len) == ("docker", "vllm/vllm-openai:v0.10.0", "/m", 4, 128000)
    c, _ = cmd.parse_cmd("python3 -m sglang.launch_server --model-path /m --tp 8 --dp-size 2 "
                         "--max-running-requests 64 --context-length 131072 --disable-radix-cache --ep-size 8\n")
    assert (c.engine, c.model_path, c.tp, c.dp, c.max_num_seqs, c.max_model_len) == ("sglang", "/m", 8, 2, 64, 131072)
    assert (c.prefix_caching, c.expert_parallel) == (False, True)
    c, _ = cmd.parse_cmd("srun -N1 vllm serve /m -tp 2\n")
    assert (c.wrapper, c.model_path, c.tp) == ("srun", "/m", 2)


def test_cmd_errors():
    c, errors = cmd.parse_cmd("vllm serve /m --max-num-seqs lots\n")
    assert c.max_num_seqs is None and "--max-num-seqs" in errors[0].reason
    c, errors = cmd.parse_cmd("#!/bin/sh\necho nothing here\n")
    assert c is None and "no engine command" in errors[0].reason


# ---------------------------------------------------------------- small files

def test_run_id_recovery():
    r = run_folder.parse_run_id("glm53__tp8_dcp8__1024k__vllm__1010-053939")
    assert (r.model, r.layout, r.ctx_label, r.engine, r.stamp) == ("glm53", "tp8_dcp8", "1024k", "vllm", "1010-053939")
    assert r.started_at(2026).isoformat() == "2026-10-10T05:39:39+00:00"
    r = run_folder.parse_run_id("minimax_m3__tep8__1024k__vllm__1010-050745")
    assert (r.model, r.layout) == ("minimax_m3", "tep8")
    assert run_folder.parse_run_id("odd").model == "odd"


def test_launch_out_and_niah():
    pairs, errors = launch_out.parse_launch_out(b"status=ready\nready_s=71.3\nengine_kv_tokens=16384\n\nnot a pair\n")
    assert pairs == [("status", "ready", 1), ("ready_s", "71.3", 2), ("engine_kv_tokens", "16384", 3)]
    assert [e.line for e in errors] == [5]
    probes, gates, errors = run_files.parse_niah(
        b'{"key": "k1", "depth": 0.1, "prompt_tokens": 3500, "ok": false, "latency_s": 1.5, "answer": "no"}\n'
        b'{"key": "k2", "depth": 0.5, "prompt_tokens": 3500, "ok": true, "latency_s": 1.2, "answer": "k2"}\n'
        b'{"key": broken\nGATE niah score= 0.5\n')
    assert [(p["probe_idx"], p["needle_key"], p["ok"], p["source_line"]) for p in probes] == [
        (0, "k1", False, 1), (1, "k2", True, 2)]
    assert gates == [("niah", 0.5, 4)]
    assert [e.line for e in errors] == [3]
    assert [(p["failure"], p["reasoning_tokens"]) for p in probes] == [(None, None), (None, None)]


def test_niah_probes_carry_their_failure_and_reasoning_length():
    """A probe that timed out names its reason; a reasoning model's probe the length of its thinking."""
    probes, _, errors = run_files.parse_niah(
        b'{"key": 0, "depth": 0.1, "prompt_tokens": 1040104, "ok": false, "latency_s": 1569.7, "answer": "",'
        b' "failure": "no answer within the probe\'s timeout of 1,569.6 s (ReadTimeout)", "reasoning_tokens": null,'
        b' "timeout_s": 1569.6}\n'
        b'{"key": 0, "depth": 0.5, "prompt_tokens": 1040104, "ok": true, "latency_s": 812.0, "answer": " 4821937",'
        b' "failure": null, "reasoning_tokens": 3071, "timeout_s": 1569.6}\n'
        b'GATE niah score= 0.5\n')
    assert errors == []
    assert [(p["ok"], p["failure"], p["reasoning_tokens"], p["answer"]) for p in probes] == [
        (False, "no answer within the probe's timeout of 1,569.6 s (ReadTimeout)", None, ""),
        (True, None, 3071, " 4821937")]


def test_launch_out_key_given_twice_with_another_value_is_an_error():
    pairs, errors = launch_out.parse_launch_out(
        b"status=ready\npoint_error=chat__c01 timeout\npoint_error=chat__c02 timeout\n"
        b"gate_score=0.5\ngate_score=0.5\nstatus=failed\n")
    assert [k for k, _, _ in pairs] == ["status", "point_error", "point_error", "gate_score",
                                        "gate_score", "status"]
    assert [(e.line, e.reason) for e in errors] == [
        (6, "launch.out: key status given twice with different values (lines 1 and 6)")]


@pytest.mark.parametrize("name, ok", [
    ("tiny-llama__cpu_seqs4__4k__vllm__1130-053610", True),
    ("glm53__tp8_dcp8__1024k__vllm__1010-045128", True),
    ("tiny-llama__cpu_seqs4__4k__vllm__1130-053610.bak", False),
    ("tiny-llama__cpu_seqs4__4k__vllm__1130-053610 (copy)", False),
    ('tiny[x](mailto:a onmouseover=alert(1);")__cpu_seqs4__4k__vllm__1129-000007', False),
    ("javascript:alert(1)__cpu__4k__vllm__1129-000007", False),
    ("-rf__cpu__4k__vllm__1129-000007", False),
    ("a____cpu__4k__vllm__1129-000007", False),
    ("tiny__cpu__4k__1129-000007", False),
    ("odd", False),
    ("a" * 190 + "__b__4k__vllm__1129-000007", False),
])
def test_run_id_pattern(name, ok):
    assert run_folder.is_run_id(name) is ok


def test_shown_is_inert_and_cut():
    assert run_files.shown('a<b>"c" (d)\n') == "'a\\x3cb\\x3e\\x22c\\x22 \\x28d\\x29\\x0a'"
    assert run_files.shown("x" * 100, limit=5) == "'xxxxx'..."


def test_meta_json():
    meta, errors = run_files.parse_meta(b'{"schema_version": 1, "run_id": "x"}')
    assert meta["run_id"] == "x" and errors == []
    meta, errors = run_files.parse_meta(b'{"schema_version": 7}')
    assert meta is None and "schema_version 7" in errors[0].reason
    meta, errors = run_files.parse_meta(b'{"schema_version": 1,')
    assert meta is None and "not valid JSON" in errors[0].reason


class _Unseekable(io.RawIOBase):
    def __init__(self, data: bytes):
        self._inner = io.BytesIO(data)

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        return self._inner.read(size)


def test_read_chunks_cut_at_newlines_and_number_lines_seekable_or_not():
    lines = [b"x" * (i % 37) for i in range(400)] + [b"y" * 2500, b"z"]
    data = b"\n".join(lines)  # no newline at the end, one line longer than 4 chunks
    for fh in (io.BytesIO(data), _Unseekable(data)):
        chunks = list(read_chunks(fh, size=200))
        assert b"".join(piece for _, piece in chunks) == data
        assert all(piece.endswith(b"\n") for _, piece in chunks[:-1] if b"y" * 800 not in piece)
        number = 1
        for first, piece in chunks:
            assert first == number
            number += piece.count(b"\n")


def test_a_message_opening_a_chunk_takes_the_tags_of_the_line_before_it():
    head = b"(APIServer pid=1) INFO 10-10 05:07:25 [a.py:1] starting\n" * 30
    data = head + (b"(EngineCore_DP0 pid=402) ERROR 10-10 05:07:30 [core.py:9] \n"
                   b"ValueError: no room for the KV cache\n")
    cut = data.index(b"ValueError")
    whole = parse_vllm_log(data)
    chunked = parse_vllm_log([(1, data[:cut]), (1 + data[:cut].count(b"\n"), data[cut:])])
    error = [f for f in chunked.facts if f.fact == "error"]
    assert [(f.line, f.worker, f.log_time, f.detail) for f in error] == [
        (32, "EngineCore_DP0 pid=402", "10-10 05:07:30", "ValueError")]
    assert [(f.fact, f.line, f.worker) for f in chunked.facts] == [(f.fact, f.line, f.worker) for f in whole.facts]
