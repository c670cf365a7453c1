"""What a plan is made from besides the campaign's history: a model's config and checkpoint size,
and a profile's planning settings (params.yaml `profiles.<name>.plan`). The plan stage and the
scheduler's check before a launch read them here."""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from stages.core.config import CampaignError, profile_workloads
from stages.core.gate import gate_settings
from stages.core.generated_model import generated_config
from stages.planning import capacity
from stages.planning import time as plan_time
from stages.planning.time import Rates


@dataclass(frozen=True)
class Model:
    config: dict
    checkpoint_bytes: int | None      # None: a generated model (dummy weights) or no index
    source: str                       # where the config came from


def model(params: dict, name: str, models_dir: Path, model_path: str | None = None) -> Model:
    """A model's config: a generated model's from params.yaml `models`, else the config.json of its
    folder under paths.models, else of the spec's model_path where this machine has it."""
    generated = (params.get("models") or {}).get(name)
    if generated:
        return Model(generated_config(generated), None, f"params.yaml models.{name}")
    for folder in (models_dir / name, Path(model_path) if model_path else None):
        if folder is not None and (folder / "config.json").is_file():
            return Model(json.loads((folder / "config.json").read_text()), checkpoint_size(folder),
                         str(folder / "config.json"))
    raise CampaignError(f"model {name!r}: no config.json in the models folder (paths.models) under "
                        f"{name}/ or in the spec's model_path (copy the checkpoint's config.json and "
                        f"model.safetensors.index.json to {name}/ there)")


def checkpoint_size(folder: Path) -> int | None:
    """The checkpoint's bytes: its safetensors index's total_size, else its .safetensors files'."""
    index = folder / "model.safetensors.index.json"
    if index.is_file():
        total = (json.loads(index.read_text()).get("metadata") or {}).get("total_size")
        if total:
            return int(total)
    files = list(folder.glob("*.safetensors"))
    return sum(f.stat().st_size for f in files) or None


@dataclass(frozen=True)
class Settings:
    """A profile's planning settings (params.yaml `profiles.<name>.plan`)."""
    memory_gib: float | None          # one GPU's memory as the engine sees it (None: no GPU)
    kv_space_gib: float | None        # a CPU engine's fixed KV cache space
    reserve_gib: float                # activation peak and non-torch memory, when no launch says
    rates: Rates
    block_size: int | None = None     # the engine's block size on this device, where not its usual


def settings(params: dict, profile: str) -> Settings:
    prof = (params.get("profiles") or {}).get(profile) or {}
    plan = prof.get("plan")
    if not isinstance(plan, dict) or not isinstance(plan.get("rates"), dict):
        raise CampaignError(f"params.yaml: profiles.{profile}.plan (gpu_memory_gib or kv_space_gib, "
                            f"reserve_gib, rates) is not set: nothing to plan {profile} with")
    gpu = plan.get("gpu_memory_gib")
    space = plan.get("kv_space_gib")
    return Settings(float(gpu) if gpu is not None else None, float(space) if space is not None else None,
                    float(plan.get("reserve_gib", 0.0)), Rates.from_params(plan["rates"]),
                    int(plan["block_size"]) if plan.get("block_size") else None)


def sequence_tokens(workloads: dict, names: list[str]) -> dict[str, int]:
    """Tokens one sequence of each workload holds at its longest (prompt and output)."""
    out = {}
    for name in names:
        w = workloads.get(name) or {}
        if w.get("kind") == "ramp":
            out[name] = int(w["end_tokens"]) + int(w["output_tokens"])
        elif w.get("kind") == "agents":
            grow = int(w["turn_tokens"]) + int(w["output_tokens"])
            out[name] = int(w["shared_history_tokens"]) + int(w["turns"]) * grow
        elif "prompt_tokens" in w:
            out[name] = int(w["prompt_tokens"]) + int(w["output_tokens"])
    return out


def spec_fields(params: dict, name: str) -> dict:
    """What a plan takes of spec `name` of params.yaml: its profile, engine, model, flags and
    workloads (spec_plan's arguments, and model_path)."""
    specs = params.get("specs") or {}
    if name not in specs:
        raise CampaignError(f"unknown spec {name!r}")
    s = specs[name]
    profile = s.get("profile") or params.get("profile")
    engine = s.get("engine") or ((params.get("profiles") or {}).get(profile) or {}).get("engine", "vllm")
    return {"profile": profile, "engine": engine, "model_name": s["model"], "args": s.get("args") or {},
            "workloads": profile_workloads(params, profile), "workload_names": list(s.get("workloads") or []),
            "model_path": s.get("model_path")}


@dataclass(frozen=True)
class SpecPlan:
    settings: Settings
    model: Model
    shape: capacity.Shape
    layout: capacity.Layout
    capacity: capacity.Plan


def spec_plan(params: dict, *, profile: str, engine: str, model_name: str, args: dict, workloads: dict,
              workload_names: list[str], models_dir: Path, model_path: str | None = None,
              reserve_gib: float | None = None) -> SpecPlan:
    """The memory arithmetic of one launch; `reserve_gib`: what earlier launches kept, else the
    profile's. Raises CampaignError where the model's config or the profile's settings are missing."""
    st = settings(params, profile)
    m = model(params, model_name, models_dir, model_path)
    shape = capacity.shape_from_config(m.config)
    lay = capacity.layout_from_args(engine, args, default_block=st.block_size)
    cap = capacity.plan(shape, lay, gpu_memory_gib=st.memory_gib, kv_space_gib=st.kv_space_gib,
                        reserve_gib=st.reserve_gib if reserve_gib is None else reserve_gib,
                        checkpoint_bytes=m.checkpoint_bytes,
                        workloads=sequence_tokens(workloads, workload_names))
    return SpecPlan(st, m, shape, lay, cap)


def estimate(params: dict, spec_name: str, sp: SpecPlan, workloads: dict, workload_names: list[str], *,
             history: dict[str, float] | None = None, step_names: list[str] | None = None,
             warm: bool = False) -> plan_time.Estimate:
    """How long the launch holds its GPUs: from `history` (seconds by part, earlier launches of the
    model) where it has a part, else from the profile's rates. `step_names`: only these steps (a
    launch's own, for plan against actual)."""
    steps = plan_time.steps(workloads, [w for w in workload_names if w in workloads])
    if step_names is not None:
        steps = [s for s in steps if s.name in step_names]
    gate = gate_settings(params, spec_name) if spec_name in (params.get("specs") or {}) else {}
    return plan_time.estimate(steps, sp.settings.rates, gate_probes=len(gate.get("depths") or [0.5]),
                              gate_prompt_tokens=sp.layout.max_len, history=history,
                              gate_answer_tokens=int(gate.get("answer_tokens", 256)), warm=warm)
