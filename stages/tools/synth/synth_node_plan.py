"""The scripted node campaign (synth_node.py): every attempt on the 8-GPU node as data.

Four models on profile h200x8, launched with the docker executor:
  glm53       tp8_dcp8 crashes at init without `--dcp-comm-backend ag_rs`, then comes up with it;
              the power sampler gets no line from GPU 5 during decode-32k at four users
  minimax_m3  tep8 on the stable image fails on its KV cache dtype; the nightly image serves, its
              needle gate scores two of three (one answer loops), 64 users exceed its 16 sequences
  dsv4_pro    dep8 has no memory left for its KV cache; tep8 serves, one doc-256k request is
              answered from the prefix cache, and 16 users of doc-256k exceed what fits
  qwen3_235b  tp4 twice, on the stable image and on a nightly one
The numbers are invented for the fixture. Same plan, same bytes.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone

STABLE = "vllm/vllm-openai:v0.31.0"
NIGHTLY_MINIMAX = "vllm/vllm-openai:nightly-1a001d584244bd21829a5e5bd4a376ea141c0ce3"
NIGHTLY_QWEN = "vllm/vllm-openai:nightly-7c41e9a0d2b35f1864c0e27fa9b1d5e3c8a6f402"
VERSIONS = {STABLE: "0.31.0", NIGHTLY_MINIMAX: "0.31.1rc2.dev187+g1a001d584",
            NIGHTLY_QWEN: "0.31.1rc3.dev42+g7c41e9a0d"}


@dataclass(frozen=True)
class Startup:
    """What the engine reports while it starts."""
    arch: str
    weights_gib: float
    load_s: float
    kv_gib: float | None = None          # None: it never got that far
    kv_tokens: int | None = None
    init_s: float = 0.0
    compile_s: float = 0.0
    moe: tuple[str, str] | None = None   # (backend, quantisation)
    attention: str = "FLASH_ATTN"
    linear: str | None = None            # a linear kernel line (`Using HummingMxfp8LinearKernel ...`)
    workers: tuple[str, ...] = ()        # process tags of the ranks that load weights


@dataclass(frozen=True)
class Crash:
    """A launch that dies before it is ready: who raised what, from where."""
    worker: str                          # the process tag of the raiser, e.g. Worker_TP2_DCP2
    pid: int
    after_s: float
    error: str                           # `Type: message`
    frames: tuple[tuple[str, int, str, str], ...]   # (file under vllm/, line, function, code)
    via_worker_proc: bool = True         # raised in a worker process (else in the engine core)


@dataclass(frozen=True)
class Load:
    """One benchmark point as the scenario wants it served."""
    workload: str
    concurrency: int
    prefill_tok_s: float                 # uncached prefill rate of one request alone
    tpot_ms: float                       # decode step of one request alone
    cached: tuple[int, ...] = ()         # requests answered from the prefix cache
    silent_gpus: tuple[int, ...] = ()    # GPUs of the set the power sampler got no line from


@dataclass(frozen=True)
class Attempt:
    spec: str
    started: datetime
    startup: Startup
    image: str | None = None             # None: the spec's, else the profile's
    gpus: tuple[int, ...] = tuple(range(8))
    drop_args: tuple[str, ...] = ()      # flags the spec has now that this attempt lacked
    crash: Crash | None = None
    ready_s: float = 0.0
    gate_answers: tuple[str, ...] = ()   # one per depth; "{code}" is replaced by the needle's code
    gate_prefill_tok_s: float = 10000.0
    points: tuple[Load, ...] = ()
    turns: tuple[Load, ...] = ()         # ramp and agents workloads (concurrency unused)
    pid_base: int = 300
    seed: int = 0
    answers: tuple[str, ...] = field(default=("The", "next", "step", "is", "to", "check", "the",
                                               "ledger", "against", "the", "signal", "record."))


def _t(day: int, hour: int, minute: int) -> datetime:
    return datetime(2026, 11, day, hour, minute, 0, tzinfo=timezone.utc)


def _frames(*rows: tuple[str, int, str, str]) -> tuple[tuple[str, int, str, str], ...]:
    head = (("v1/executor/multiproc_executor.py", 721, "worker_main", "worker = WorkerProc(*args, **kwargs)"),
            ("v1/executor/multiproc_executor.py", 562, "__init__", "self.worker.load_model()"))
    return head + rows


GLM_STARTUP = dict(arch="GlmMoeDsaForCausalLM", weights_gib=88.41, load_s=141.37,
                   moe=("DEEPGEMM", "Fp8"), attention="FLASHMLA_SPARSE",
                   workers=tuple(f"Worker_TP{r}_DCP{r}" for r in range(8)))
MINIMAX_STARTUP = dict(arch="MiniMaxM3ForCausalLM", weights_gib=27.9, load_s=96.84,
                       moe=("FLASHINFER_CUTLASS", "Mxfp8"), attention="FLASH_ATTN",
                       linear="HummingMxfp8LinearKernel", workers=tuple(f"Worker_TP{r}_EP{r}" for r in range(8)))
DSV4_TEP = dict(arch="DeepseekV4ForCausalLM", weights_gib=104.37, load_s=233.52, moe=("DEEPGEMM", "Fp8"),
                attention="FLASHMLA_SPARSE", workers=tuple(f"Worker_TP{r}_EP{r}" for r in range(8)))
QWEN = dict(arch="Qwen3MoeForCausalLM", weights_gib=54.82, load_s=61.09, attention="FLASH_ATTN",
            workers=tuple(f"Worker_TP{r}_EP{r}" for r in range(4)))

SCENARIO: tuple[Attempt, ...] = (
    Attempt(
        spec="glm53-tp8-dcp8", started=_t(16, 6, 0), startup=Startup(**GLM_STARTUP),
        drop_args=("--dcp-comm-backend",), seed=11,
        crash=Crash(worker="Worker_TP2_DCP2", pid=1902, after_s=212.4, error=(
            "NotImplementedError: decode context parallel with the all-gather KV communication "
            "backend is not implemented for the sparse MLA indexer; pass --dcp-comm-backend ag_rs"),
            frames=_frames(
                ("v1/worker/gpu_model_runner.py", 3104, "load_model", "self.model = model_loader.load_model("),
                ("v1/attention/backends/mla/flashmla_sparse.py", 618, "__init__",
                 "raise NotImplementedError("))),
    ),
    Attempt(
        spec="glm53-tp8-dcp8", started=_t(16, 6, 25), seed=12,
        startup=Startup(**GLM_STARTUP, kv_gib=31.62, kv_tokens=3_981_312, init_s=402.61, compile_s=96.3),
        ready_s=611.4, gate_prefill_tok_s=11800.0,
        gate_answers=("The access code mentioned in the text is {code}.",
                      "The text states the access code once: {code}.",
                      "Looking through the notes, the access code is {code}."),
        points=(Load("doc-256k", 1, 21500, 21.3), Load("doc-256k", 4, 21500, 21.3),
                Load("doc-512k", 1, 17800, 27.1), Load("doc-512k", 2, 17800, 27.1),
                Load("doc-1m", 1, 12400, 38.4), Load("decode-32k", 1, 26000, 14.6),
                Load("decode-32k", 4, 26000, 14.6, silent_gpus=(5,)),
                Load("short-1k", 1, 9000, 11.8),
                Load("short-1k", 8, 9000, 11.8)),
        turns=(Load("ramp-1m", 1, 15600, 24.0),),
    ),
    Attempt(
        spec="minimax-m3-tep8-stable", started=_t(16, 9, 10), startup=Startup(**MINIMAX_STARTUP), seed=21,
        crash=Crash(worker="Worker_TP0_EP0", pid=1900, after_s=168.9, error=(
            "RuntimeError: kv_cache_dtype fp8 is not supported by the lightning attention layers of "
            "MiniMaxM3ForCausalLM (supported: auto, bfloat16)"),
            frames=_frames(
                ("v1/worker/gpu_model_runner.py", 3127, "load_model", "self.model = model_loader.load_model("),
                ("model_executor/layers/lightning_attn.py", 402, "__init__", "raise RuntimeError("))),
    ),
    Attempt(
        spec="minimax-m3-tep8", started=_t(16, 9, 30), seed=22,
        startup=Startup(**MINIMAX_STARTUP, kv_gib=92.4, kv_tokens=5_214_208, init_s=288.17, compile_s=71.05),
        ready_s=455.9, gate_prefill_tok_s=14300.0,
        gate_answers=("{code}", "the the the the the the the the the the the the the the the the",
                      "{code}"),
        points=(Load("short-1k", 1, 12500, 9.4), Load("short-1k", 8, 12500, 9.4),
                Load("short-1k", 64, 12500, 9.4)),
        turns=(Load("agents-200k", 8, 16800, 12.2),),
    ),
    Attempt(
        spec="dsv4-pro-dep8", started=_t(16, 11, 0), seed=31,
        startup=Startup(arch="DeepseekV4ForCausalLM", weights_gib=121.84, load_s=251.06, kv_gib=-2.87,
                        moe=("DEEPGEMM", "Fp8"), attention="FLASHMLA_SPARSE",
                        workers=tuple(f"EngineCore_DP{r}" for r in range(8))),
        crash=Crash(worker="EngineCore_DP0", pid=300, after_s=371.6, via_worker_proc=False, error=(
            "ValueError: No available memory for the cache blocks. Try increasing "
            "`gpu_memory_utilization` when initializing the engine."),
            frames=(("v1/engine/core.py", 98, "__init__", "self._initialize_kv_caches(vllm_config)"),
                    ("v1/engine/core.py", 211, "_initialize_kv_caches",
                     "kv_cache_configs = get_kv_cache_configs(vllm_config, kv_cache_specs,"),
                    ("v1/core/kv_cache_utils.py", 700, "check_enough_kv_cache_memory",
                     "raise ValueError("))),
    ),
    Attempt(
        spec="dsv4-pro-tep8", started=_t(16, 11, 20), seed=32,
        startup=Startup(**DSV4_TEP, kv_gib=19.46, kv_tokens=1_843_456, init_s=517.4, compile_s=0.0),
        ready_s=804.2, gate_prefill_tok_s=13100.0,
        gate_answers=("{code}", "The access code is {code}.", "{code}"),
        points=(Load("doc-256k", 1, 18900, 23.7, cached=(1,)), Load("doc-256k", 2, 18900, 23.7),
                Load("doc-256k", 16, 18900, 23.7)),
    ),
    Attempt(
        spec="qwen3-235b-tp4", started=_t(16, 13, 0), gpus=(0, 1, 2, 3), seed=41,
        startup=Startup(**QWEN, moe=("TRITON", "Fp8"), kv_gib=66.1, kv_tokens=1_443_840, init_s=148.9,
                        compile_s=38.2),
        ready_s=243.7, gate_prefill_tok_s=24100.0, gate_answers=("{code}", "{code}", "{code}"),
        points=(Load("doc-256k", 1, 27400, 16.2), Load("doc-256k", 2, 27400, 16.2),
                Load("short-1k", 1, 15800, 8.1), Load("short-1k", 8, 15800, 8.1)),
    ),
    Attempt(
        spec="qwen3-235b-tp4", started=_t(16, 14, 0), gpus=(4, 5, 6, 7), image=NIGHTLY_QWEN, seed=42,
        startup=Startup(**QWEN, moe=("FLASHINFER_CUTLASS", "Fp8"), kv_gib=66.7, kv_tokens=1_452_032,
                        init_s=139.5, compile_s=36.9),
        ready_s=231.2, gate_prefill_tok_s=25300.0, gate_answers=("{code}", "{code}", "{code}"),
        points=(Load("doc-256k", 1, 29100, 15.1), Load("doc-256k", 2, 29100, 15.1),
                Load("short-1k", 1, 16400, 7.6), Load("short-1k", 8, 16400, 7.6)),
    ),
)

CACHED_PREFILL_TOK_S = 190_000.0        # a prompt found in the prefix cache
