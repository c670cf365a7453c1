"""Will a spec fit, before it is launched: the memory arithmetic of one engine layout.

From a model's config (config.json, or a generated model's) and a spec's engine flags:
- the weights each GPU holds under the layout: attention, dense MLP and embeddings split over the
  tensor-parallel ranks (so kept whole on each data-parallel rank: data-parallel attention
  replicates them), routed experts over tensor x data-parallel ranks (vLLM's MoE layers use that
  group, expert-parallel or not), layers over the pipeline stages;
- the KV cache bytes a token takes on one GPU: 2 x KV heads x head size per layer (grouped-query
  heads split over the tensor ranks, at least one a rank), or one MLA latent (kv_lora_rank +
  qk_rope_head_dim, kept whole on each rank); at the KV cache dtype (fp8: one byte);
- the KV cache memory: the engine's utilisation times the GPU's memory, less the weights and the
  reserve (activation peak and non-torch memory) that launches of the same engine used; the pool in
  tokens (whole blocks; exactly the blocks `--num-gpu-blocks-override` names); decode context
  parallelism spreads a sequence's tokens over its ranks, so the pool holds that many times more;
- the sequences that fit per workload, and the verdict: fits, tight or does not fit, with why.

Everything here is arithmetic on its arguments: reading model folders, logs and params is the
callers' (the plan stage, the scheduler's check).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

GIB = 1024 ** 3
DTYPE_BYTES = {"float32": 4, "float": 4, "float16": 2, "half": 2, "bfloat16": 2, "fp8": 1,
               "fp8_e4m3": 1, "fp8_e5m2": 1, "float8_e4m3fn": 1, "int8": 1, "fp4": 0.5}
DEFAULT_BLOCK = {"vllm": 16, "sglang": 1}
# The engine's flags that set the layout, by engine; each name, then its aliases.
LAYOUT_FLAGS = {
    "vllm": {"tp": ("--tensor-parallel-size", "-tp"), "pp": ("--pipeline-parallel-size", "-pp"),
             "dp": ("--data-parallel-size", "-dp"), "dcp": ("--decode-context-parallel-size", "-dcp"),
             "util": ("--gpu-memory-utilization",), "block": ("--block-size",),
             "blocks": ("--num-gpu-blocks-override",), "kv_dtype": ("--kv-cache-dtype",),
             "max_len": ("--max-model-len",), "seqs": ("--max-num-seqs",), "dtype": ("--dtype",)},
    "sglang": {"tp": ("--tp", "--tp-size", "--tensor-parallel-size"), "pp": ("--pp", "--pp-size"),
               "dp": ("--dp", "--dp-size", "--data-parallel-size"), "dcp": (),
               "util": ("--mem-fraction-static",), "block": ("--page-size",), "blocks": (),
               "kv_dtype": ("--kv-cache-dtype",), "max_len": ("--context-length",),
               "seqs": ("--max-running-requests",), "dtype": ("--dtype",)},
}
DEFAULT_UTIL = {"vllm": 0.9, "sglang": 0.88}


@dataclass(frozen=True)
class Shape:
    """What of a model's config decides its memory."""
    arch: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    intermediate: int
    tied: bool
    dtype_bytes: float
    experts: int = 0                    # routed experts (0: a dense model)
    moe_intermediate: int = 0
    shared_experts: int = 0
    dense_layers: int = 0               # layers with a dense MLP in a MoE model (the first ones)
    mla: tuple[int, int] | None = None  # (kv_lora_rank, qk_rope_head_dim)
    q_lora: int = 0
    qk_nope: int = 0
    v_head: int = 0
    hybrid: bool = False                # linear-attention layers hold a state, not per-token KV
    max_positions: int = 0

    @property
    def attention(self) -> str:
        return "MLA" if self.mla else ("MHA" if self.kv_heads == self.heads else "GQA")


def _first(cfg: dict, *keys, default=0):
    for k in keys:
        if cfg.get(k) is not None:
            return cfg[k]
    return default


def shape_from_config(cfg: dict) -> Shape:
    """A `Shape` from a Hugging Face config.json (its `text_config` where it nests one)."""
    cfg = {**cfg, **(cfg.get("text_config") or {})}
    hidden = int(_first(cfg, "hidden_size", "d_model"))
    heads = int(_first(cfg, "num_attention_heads", "n_heads"))
    layers = int(_first(cfg, "num_hidden_layers", "n_layers"))
    kv_heads = int(_first(cfg, "num_key_value_heads", default=heads) or heads)
    head_dim = int(_first(cfg, "head_dim", default=hidden // heads if heads else 0))
    experts = int(_first(cfg, "n_routed_experts", "num_local_experts", "num_experts"))
    kv_lora = cfg.get("kv_lora_rank")
    layer_types = cfg.get("layer_types") or cfg.get("attn_type_list") or []
    hybrid = any(str(t).lower() in ("linear_attention", "linear", "mamba", "0") for t in layer_types)
    dtype = str(cfg.get("torch_dtype") or cfg.get("dtype") or "bfloat16")
    return Shape(
        arch=(cfg.get("architectures") or ["?"])[0], layers=layers, hidden=hidden, heads=heads,
        kv_heads=kv_heads, head_dim=head_dim, vocab=int(cfg.get("vocab_size") or 0),
        intermediate=int(cfg.get("intermediate_size") or 0),
        tied=bool(cfg.get("tie_word_embeddings", False)), dtype_bytes=DTYPE_BYTES.get(dtype, 2),
        experts=experts, moe_intermediate=int(_first(cfg, "moe_intermediate_size", default=0)),
        shared_experts=int(_first(cfg, "n_shared_experts", "num_shared_experts", default=0)),
        dense_layers=int(_first(cfg, "first_k_dense_replace", default=0)) if experts else layers,
        mla=(int(kv_lora), int(cfg.get("qk_rope_head_dim") or 0)) if kv_lora else None,
        q_lora=int(cfg.get("q_lora_rank") or 0), qk_nope=int(cfg.get("qk_nope_head_dim") or 0),
        v_head=int(cfg.get("v_head_dim") or 0), hybrid=hybrid,
        max_positions=int(cfg.get("max_position_embeddings") or 0))


@dataclass(frozen=True)
class Params:
    """Parameter counts by how a layout splits them."""
    embeddings: int        # embedding and output head: split over tensor ranks
    dense: int             # attention, dense MLPs, shared experts, norms: split over tensor ranks
    experts: int           # routed experts: split over tensor x data ranks

    @property
    def total(self) -> int:
        return self.embeddings + self.dense + self.experts


def param_counts(s: Shape) -> Params:
    h = s.hidden
    if s.mla:
        kv_lora, rope = s.mla
        q_in = s.q_lora if s.q_lora else h
        attn = ((h * s.q_lora + s.q_lora) if s.q_lora else 0) + q_in * s.heads * (s.qk_nope + rope)
        attn += h * (kv_lora + rope) + kv_lora + kv_lora * s.heads * (s.qk_nope + s.v_head)
        attn += s.heads * s.v_head * h
    else:
        attn = h * s.heads * s.head_dim * 2 + h * s.kv_heads * s.head_dim * 2
    moe_layers = s.layers - s.dense_layers if s.experts else 0
    dense = s.layers * (attn + 2 * h) + s.dense_layers * 3 * h * s.intermediate
    dense += moe_layers * (s.shared_experts * 3 * h * s.moe_intermediate + h * s.experts) + h
    experts = moe_layers * s.experts * 3 * h * s.moe_intermediate
    return Params(embeddings=s.vocab * h * (1 if s.tied else 2), dense=dense, experts=experts)


@dataclass(frozen=True)
class Layout:
    engine: str
    tp: int = 1
    pp: int = 1
    dp: int = 1
    dcp: int = 1
    util: float = 0.9
    block: int = 16
    blocks_override: int | None = None
    kv_dtype: str = "auto"
    max_len: int = 0
    max_seqs: int | None = None

    @property
    def gpus(self) -> int:
        return self.tp * self.pp * self.dp


def _flag(args: dict, names) -> object:
    for n in names:
        if n in args:
            return args[n]
        alt = n.replace("-", "_") if n.startswith("--") else None
        if alt and ("--" + alt[2:]) in args:
            return args["--" + alt[2:]]
    return None


def layout_from_args(engine: str, args: dict, *, default_block: int | None = None) -> Layout:
    """A spec's layout from its engine flags (as params.yaml's `args` or cmd.sh give them).
    `default_block`: the engine's block size where the flags give none, when the device's differs
    from the engine's usual one (vLLM's CPU backend: 128)."""
    flags = LAYOUT_FLAGS.get(engine, LAYOUT_FLAGS["vllm"])
    get = lambda key, default=None: (v if (v := _flag(args, flags[key])) not in (None, "") else default)  # noqa: E731
    blocks = get("blocks")
    seqs = get("seqs")
    return Layout(engine=engine, tp=int(get("tp", 1)), pp=int(get("pp", 1)), dp=int(get("dp", 1)),
                  dcp=int(get("dcp", 1)), util=float(get("util", DEFAULT_UTIL.get(engine, 0.9))),
                  block=int(get("block", default_block or DEFAULT_BLOCK.get(engine, 16))),
                  blocks_override=int(blocks) if blocks is not None else None,
                  kv_dtype=str(get("kv_dtype", "auto")), max_len=int(get("max_len", 0)),
                  max_seqs=int(seqs) if seqs is not None else None)


def weights_per_gpu(s: Shape, lay: Layout, checkpoint_bytes: int | None = None) -> tuple[float, float]:
    """(bytes one GPU holds, bytes a parameter takes). A checkpoint's size, where known, gives the
    bytes per parameter (its quantization); else the config's dtype."""
    p = param_counts(s)
    per_param = checkpoint_bytes / p.total if checkpoint_bytes else float(s.dtype_bytes)
    held = (p.embeddings + p.dense) / lay.tp + p.experts / (lay.tp * lay.dp)
    return held / lay.pp * per_param + rotary_table_bytes(s, lay), per_param


def rotary_table_bytes(s: Shape, lay: Layout) -> float:
    """The rotary embedding's cos/sin table the engine keeps beside the weights: a row per position
    (the served context, else the config's), the rotary dimensions wide, at the model's dtype. At a
    million positions it outweighs a small model's weights (llama-1m: 0.25 GiB against 0.02)."""
    positions = max(lay.max_len, s.max_positions)
    return positions * (s.mla[1] if s.mla else s.head_dim) * s.dtype_bytes


def kv_bytes_per_token(s: Shape, lay: Layout) -> float:
    """One token's KV cache on one GPU, all its layers."""
    kv = DTYPE_BYTES.get(lay.kv_dtype, s.dtype_bytes) if lay.kv_dtype != "auto" else s.dtype_bytes
    layers = math.ceil(s.layers / lay.pp)
    if s.mla:
        return layers * sum(s.mla) * kv
    heads = max(1, s.kv_heads // lay.tp)
    return layers * 2 * heads * s.head_dim * kv


@dataclass
class Plan:
    """One spec's plan: the arithmetic and its verdict."""
    gpus: int
    weights_gib: float
    bytes_per_param: float
    budget_gib: float                  # utilisation x the GPU's memory
    reserve_gib: float
    kv_memory_gib: float
    kv_bytes_token: float
    pool_tokens: int | None            # None: hybrid attention, not planned per token
    concurrency_x: float | None        # the engine's estimate: pool / max-model-len
    verdict: str                       # fits | tight | does not fit
    why: str
    fit: dict[str, int] = field(default_factory=dict)   # workload -> sequences that fit


TIGHT_SEQUENCES = 2.0       # fewer max-length sequences than this in the pool: tight
TIGHT_WEIGHTS = 0.9         # weights above this share of the budget: tight


def plan(s: Shape, lay: Layout, *, gpu_memory_gib: float | None, reserve_gib: float,
         kv_space_gib: float | None = None, checkpoint_bytes: int | None = None,
         workloads: dict[str, int] | None = None) -> Plan:
    """`workloads`: name -> tokens a sequence holds (prompt + output). A CPU engine (no
    `gpu_memory_gib`) has a fixed KV cache space, `kv_space_gib`, its weights in host memory."""
    weights, per_param = weights_per_gpu(s, lay, checkpoint_bytes)
    weights_gib = weights / GIB
    if gpu_memory_gib is None:
        budget, kv_gib = float(kv_space_gib or 0.0), float(kv_space_gib or 0.0)
    else:
        budget = lay.util * gpu_memory_gib
        kv_gib = budget - weights_gib - reserve_gib
    per_token = kv_bytes_per_token(s, lay)
    pool = None
    if not s.hybrid:
        if lay.blocks_override is not None:
            pool = lay.blocks_override * lay.block * lay.dcp
        else:
            pool = max(0, int(kv_gib * GIB // (per_token * lay.block))) * lay.block * lay.dcp
    conc = pool / lay.max_len if pool is not None and lay.max_len else None
    engines = lay.dp
    fit = {}
    for name, tokens in (workloads or {}).items():
        if pool is not None and tokens and (not lay.max_len or tokens <= lay.max_len):
            n = pool // tokens * engines
            fit[name] = min(n, lay.max_seqs * engines) if lay.max_seqs else n
    if gpu_memory_gib is None:
        arith = f"a fixed KV cache space of {kv_gib:.2f} GiB (weights {weights_gib:.2f} GiB in host memory)"
    else:
        arith = (f"{lay.util:g} x {gpu_memory_gib:.2f} GiB = {budget:.2f} GiB a GPU; weights "
                 f"{weights_gib:.2f} GiB, reserve {reserve_gib:.2f} GiB, so {kv_gib:.2f} GiB for the KV cache")
    if lay.dp > 1 and s.experts:
        p = param_counts(s)
        dense = (p.embeddings + p.dense) / lay.tp / lay.pp * per_param / GIB
        arith += (f" (data parallel: each GPU keeps {dense:.2f} GiB of attention, dense and embedding "
                  f"weights whole; tensor parallelism over the {lay.dp * lay.tp} GPUs would split them)")
    if kv_gib <= 0:
        verdict, why = "does not fit", f"{arith}: nothing left for the KV cache"
    elif pool is not None and lay.max_len and pool < lay.max_len:
        verdict, why = "does not fit", (f"{arith}: a pool of {pool:,} tokens, less than one "
                                        f"{lay.max_len:,}-token sequence")
    elif (conc is not None and conc < TIGHT_SEQUENCES) or (
            gpu_memory_gib is not None and weights_gib > TIGHT_WEIGHTS * budget):
        verdict, why = "tight", (f"{arith}: {conc:.2f} sequences of {lay.max_len:,} tokens" if conc
                                 is not None else f"{arith}: weights take over 90 % of the budget")
    else:
        verdict, why = "fits", (f"{arith}: a pool of {pool:,} tokens" if pool is not None else
                                f"{arith} (hybrid attention: its state is not planned per token)")
    return Plan(gpus=lay.gpus, weights_gib=weights_gib, bytes_per_param=per_param, budget_gib=budget,
                reserve_gib=reserve_gib, kv_memory_gib=kv_gib, kv_bytes_token=per_token,
                pool_tokens=pool, concurrency_x=conc, verdict=verdict, why=why, fit=fit)
