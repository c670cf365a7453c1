"""Plans: one spec's (its memory arithmetic, verdict and time, with the campaign's history) and
every launch's beside what its log says.

For a spec: its model's config and checkpoint size, its engine flags and its profile's planning
settings (stages/planning/inputs.py) give the memory arithmetic (capacity.py: weights a GPU, KV bytes
a token, the KV cache and its pool, the sequences that fit, the verdict), with the reserve the
campaign's launches of the same engine kept where there are some (history.py); and the time
(time.py: engine start, gate, each step) from other launches of the same model and engine, else
the profile's rates; so GPU-hours, and their cost at each of params.yaml's price sets.

For a launch: the same plan made from its own flags (its cmd.sh), with the history of the other
launches (never its own figures), beside what its log says; the error of each, in percent of the
logged figure; a launch that failed for memory after a plan that said it would not fit is marked
as foreseen. Derive publishes these rows as the table launch_plans; the plan stage prints and
writes the specs' plans.
"""
from __future__ import annotations

from pathlib import Path

from stages.core.config import CampaignError, profile_workloads
from stages.planning import capacity, inputs
from stages.planning.history import History

SPECS_FILE = "specs.json"    # the plan stage's plans of the specs, under paths.plan; the scheduler reads it

def budget_gib(params: dict, launch: dict, flags: dict) -> float | None:
    """The memory a launch's engine was allowed a GPU: its utilisation flag times its profile's GPU
    memory (None on a CPU engine, or where the profile has no planning settings)."""
    try:
        s = inputs.settings(params, launch["profile"])
    except CampaignError:
        return None
    if s.memory_gib is None:
        return None
    return capacity.layout_from_args(launch["engine"], flags).util * s.memory_gib


def plan_one(params: dict, *, name: str, profile: str, engine: str, engine_version: str | None,
             model_name: str, args: dict, workloads: dict, workload_names: list[str],
             hist: History, models_dir: Path, model_path: str | None = None,
             leave_out: str | None = None, step_names: list[str] | None = None,
             warm: bool = False) -> dict:
    """One plan: the arithmetic, the verdict and the time, as a flat dict. `warm`: the launch
    follows another on the same machine (its engine starts as such launches did)."""
    reserve, reserve_n = hist.reserve(
        profile, engine, engine_version, lambda la: budget_gib(params, la, hist.flags.get(la["run_id"], {})),
        leave_out=leave_out)
    sp = inputs.spec_plan(params, profile=profile, engine=engine, model_name=model_name, args=args,
                          workloads=workloads, workload_names=workload_names, models_dir=models_dir,
                          model_path=model_path, reserve_gib=reserve)
    st, m, shape, lay, cap = sp.settings, sp.model, sp.shape, sp.layout, sp.capacity
    history_times, history_n = hist.times(model_name, engine, leave_out=leave_out)
    est = inputs.estimate(params, name, sp, workloads, workload_names, history=history_times,
                          step_names=step_names, warm=warm)
    from_history = sum(1 for b in est.basis.values() if b == "history")
    gpus = lay.gpus if st.memory_gib is not None else 0
    version = engine_version or "any version"
    reserve_from = (f"{_launches(reserve_n)} of {engine} {version}" if reserve_n else "the profile")
    parts = len(est.basis)
    if not history_n:
        time_from = f"all {parts} parts from the profile's rates (no other launch of {model_name} on {engine})"
    else:
        share = f"all {parts}" if from_history == parts else f"{from_history} of {parts}"
        rest = "" if from_history == parts else ", the rest from the profile's rates"
        time_from = f"{share} parts from {_launches(history_n, 'other ')} of {model_name} on {engine}{rest}"
    basis = (f"reserve: {reserve_from if st.memory_gib is not None else 'none (a CPU engine)'}"
             f"; time: {time_from}"
             f"{'; a warm start (it follows another launch on the machine)' if warm else ''}")
    return {
        "spec": name, "profile": profile, "model": model_name, "engine": engine,
        "attention": shape.attention, "config": m.source, "gpus": gpus,
        "weights_gib": cap.weights_gib, "bytes_per_param": cap.bytes_per_param,
        "budget_gib": cap.budget_gib, "reserve_gib": cap.reserve_gib, "kv_cache_gib": cap.kv_memory_gib,
        "kv_bytes_token": cap.kv_bytes_token, "kv_tokens": cap.pool_tokens,
        "concurrency_x": cap.concurrency_x, "max_model_len": lay.max_len, "fit": cap.fit,
        "verdict": cap.verdict, "why": cap.why, "basis": basis,
        "engine_start_s": est.engine_start_s, "gate_s": est.gate_s, "steps_s": est.steps_s,
        "run_s": est.total_s, "gpu_hours": est.total_s / 3600 * gpus,
    }


def plan_specs(params: dict, names: list[str], hist: History, models_dir: Path) -> list[dict]:
    """The plans of `names`, launched in that order: each after the first of its profile finds
    the machine's caches warm, as the scheduler runs them (stages/planning/history.py, warm)."""
    out, profiles_seen = [], set()
    prices = params.get("prices") or {}
    for name in names:
        fields = inputs.spec_fields(params, name)
        warm = fields["profile"] in profiles_seen
        profiles_seen.add(fields["profile"])
        try:
            p = plan_one(params, name=name, engine_version=None, hist=hist, models_dir=models_dir,
                         warm=warm, **fields)
        except CampaignError as exc:
            out.append({"spec": name, "profile": fields["profile"], "model": fields["model_name"],
                        "gpus": params["specs"][name].get("gpus"), "verdict": "not planned", "why": str(exc)})
            continue
        p["cost_usd"] = {k: round(p["gpu_hours"] * float(v["usd_per_gpu_hour"]), 2) for k, v in prices.items()}
        out.append(p)
    return out


# What an engine's error says when memory ran out (vLLM: "No available memory for the cache
# blocks", "CUDA out of memory"; SGLang: "Not enough memory"), for launch_plans.failed_for_memory.
MEMORY_ERROR_PATTERN = r"(?i)out of memory|no available memory|not enough memory|OutOfMemoryError|KV cache memory"

# What derive's launch_plans takes from a launch's plan (the rest it reads from the launch's log).
LAUNCH_PLAN_COLUMNS = {
    "run_id": "varchar", "verdict": "varchar", "why": "varchar", "basis": "varchar",
    "budget_gib": "double", "reserve_gib": "double", "planned_weights_gib": "double",
    "planned_kv_cache_gib": "double", "planned_kv_tokens": "bigint", "planned_concurrency_x": "double",
    "planned_ready_s": "double", "planned_gate_s": "double", "planned_run_s": "double",
}


def plan_launches(params: dict, hist: History, models_dir: Path) -> list[dict]:
    """Each launch's plan, made from its own flags and steps and the other launches' history: a
    row of LAUNCH_PLAN_COLUMNS (`not planned`, and why, where its model or profile settings lack)."""
    rows = []
    for la in hist.launches:
        flags = hist.flags.get(la["run_id"], {})
        steps = hist.steps.get(la["run_id"], {})
        workload_names = sorted({s.split("__c")[0] for s in steps})
        try:
            p = plan_one(params, name=la["spec"] or "", profile=la["profile"], engine=la["engine"],
                         engine_version=la["engine_version"], model_name=la["model"], args=flags,
                         workloads=profile_workloads(params, la["profile"]), workload_names=workload_names,
                         hist=hist, models_dir=models_dir, leave_out=la["run_id"], step_names=list(steps),
                         warm=hist.warm(la))
        except CampaignError as exc:
            p = {"verdict": "not planned", "why": str(exc), "basis": None}
        ready = la["status"] == "ready"
        rows.append({
            "run_id": la["run_id"], "verdict": p["verdict"], "why": p["why"], "basis": p["basis"],
            "budget_gib": p.get("budget_gib"), "reserve_gib": p.get("reserve_gib"),
            "planned_weights_gib": p.get("weights_gib"), "planned_kv_cache_gib": p.get("kv_cache_gib"),
            "planned_kv_tokens": p.get("kv_tokens"), "planned_concurrency_x": p.get("concurrency_x"),
            "planned_ready_s": p.get("engine_start_s"), "planned_gate_s": p.get("gate_s") if ready else None,
            "planned_run_s": p.get("run_s") if ready else None,
        })
    return rows


def _launches(n: int, kind: str = "") -> str:
    return f"{n} {kind}launch" + ("" if n == 1 else "es")
