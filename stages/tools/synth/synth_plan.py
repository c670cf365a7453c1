"""The plan of a synthetic campaign (synth.py): which runs, of which kind, model and engine, when,
and how big each server.log is, all drawn from one seed."""
from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

from stages.ingest.parsers.cmd import human_int

LOG_SHARE = 0.85                 # of the campaign's bytes; the rest is benchmark results and /metrics
CAMPAIGN_START = datetime(2026, 10, 1, 6, 0, tzinfo=timezone.utc)
RUN_SPACING = timedelta(minutes=47, seconds=13)

# One cycle of twenty runs fixes the proportions: (status, has meta.json, log style, engine).
KIND_CYCLE = (
    ("ready", True, "plain", "vllm"), ("failed", False, "plain", "vllm"),
    ("ready", True, "docker", "vllm"), ("ready", False, "v0", "vllm"),
    ("ready", True, "plain", "sglang"), ("interrupted", True, "plain", "vllm"),
    ("ready", True, "plain", "vllm"), ("ready", True, "docker", "vllm"),
    ("ready", False, "v0", "vllm"), ("ready", True, "plain", "vllm"),
    ("ready", True, "plain", "vllm"), ("failed", True, "docker", "vllm"),
    ("ready", True, "plain", "vllm"), ("ready", False, "v0", "vllm"),
    ("ready", True, "docker", "vllm"), ("ready", True, "plain", "vllm"),
    ("ready", True, "plain", "vllm"), ("ready", True, "docker", "vllm"),
    ("ready", True, "plain", "vllm"), ("ready", True, "plain", "vllm"),
)
# (model, model path, layout, tp, dp, dcp, ctx label, max model len, moe backend)
MODELS = (
    ("glm53", "/models/glm53", "tp8_dcp8", 8, 1, 8, "1024k", "1M", "MARLIN"),
    ("qwen3-235b", "/models/qwen3-235b-a22b", "tp4", 4, 1, 1, "256k", "256k", "TRITON"),
    ("qwen3-235b", "/models/qwen3-235b-a22b", "dp2_tp4", 4, 2, 1, "128k", "128k", "TRITON"),
    ("llama33-70b", "/models/llama-3.3-70b", "tp4", 4, 1, 1, "128k", "128k", None),
    ("gpt-oss-120b", "/models/gpt-oss-120b", "dp8", 1, 8, 1, "128k", "128k", "MARLIN"),
    ("deepseek-v32", "/models/deepseek-v3.2", "tp8", 8, 1, 1, "160k", "160k", "FLASHINFER_CUTLASS"),
)
NEW_IMAGE, OLD_IMAGE, SGLANG_IMAGE = "vllm/vllm-openai:v0.31.0", "vllm/vllm-openai:v0.10.0", "lmsysorg/sglang:v0.5.4"


@dataclass(frozen=True)
class RunPlan:
    index: int
    run_id: str
    status: str                 # ready | failed | interrupted
    has_meta: bool
    style: str                  # plain | docker | v0 (log shape)
    engine: str                 # vllm | sglang
    model: tuple
    started: datetime
    log_bytes: int
    seed: int

    @property
    def engines(self) -> int:
        return self.model[4]

    @property
    def image(self) -> str:
        if self.engine == "sglang":
            return SGLANG_IMAGE
        return OLD_IMAGE if self.style == "v0" else NEW_IMAGE


def plan_campaign(*, runs: int, total_bytes: int, seed: int) -> list[RunPlan]:
    """One RunPlan per run; server.log sizes drawn log-normal, summing to LOG_SHARE of the bytes."""
    rng = random.Random(seed)
    weights = [rng.lognormvariate(0.0, 0.7) for _ in range(runs)]
    kinds = [KIND_CYCLE[i % len(KIND_CYCLE)] for i in range(runs)]
    ready_weight = sum(w for w, k in zip(weights, kinds) if k[0] != "failed") or 1.0
    log_budget = total_bytes * LOG_SHARE
    plans = []
    for i, (weight, (status, has_meta, style, engine)) in enumerate(zip(weights, kinds)):
        model = MODELS[rng.randrange(len(MODELS))]
        started = CAMPAIGN_START + RUN_SPACING * i
        run_id = f"{model[0]}__{model[2]}__{model[6]}__{engine}__{started:%m%d-%H%M%S}"
        size = 0 if status == "failed" else int(log_budget * weight / ready_weight)
        plans.append(RunPlan(i, run_id, status, has_meta, style, engine, model, started, size,
                             rng.randrange(2**31)))
    return plans


def label_tokens(label: str) -> int:
    """A context label (128k, 1024k) in tokens, as vLLM reads the same flag value."""
    return human_int(label)


def kv_tokens(plan: RunPlan) -> int:
    return 1_573_325 + (plan.seed % 997) * 1024

