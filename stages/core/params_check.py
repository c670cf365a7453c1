"""Checking params.yaml: every problem of it, one line each (`check_params`), before a stage
reads a setting. stages/core/config.py reads params and calls it; the gate settings and the
multi-turn shapes are checked by stages/core/gate.py and stages/core/multiturn_shapes.py.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from stages.core.errors import CampaignError
from stages.core.gate import check_spec_gate, settings_problems
from stages.core.multiturn_shapes import workload_from_params
from stages.core.names import LOCK_DIR, SAFE_NAME, max_context

# Stage outputs, and the raw inputs (and the model) no output may be, contain or sit inside.
OUTPUT_PATHS = ("site", "docs", "derived", "publish", "metrics", "facts", "campaign_db",
                "warehouse", "ledger", "bench", "reliability")
INPUT_PATHS = ("runs", "nodes", "models")
# The rules derive applies: the same for every run (`rules`), and those of the run's own profile
# (`profiles.<name>.rules`), which depend on the machine.
SHARED_RULES = ("gate_min_score", "cached_share_max_pct", "max_chars_per_token", "client_pace_max_pct")
# Shared rules params.yaml must set but a derive called with a rules mapping that lacks them (a
# test's, a campaign's older params) may do without: the check each one states is then off.
OFF_WHEN_ABSENT = ("max_chars_per_token", "client_pace_max_pct")
PROFILE_RULES = ("prefix_cache_tok_s", "default_max_num_seqs", "burst_tpot_ms", "cached_mark_pct")
# The shape of a generated model (params `models.<name>`; stages/run/model.py), every key a
# positive integer.
MODEL_SHAPE = ("layers", "hidden", "heads", "kv_heads", "intermediate", "max_positions",
               "vocab_size", "seed")

STATIC_IMAGES = ("svg", "png")   # the static images render can draw of a chart


def _check_static_images(kinds: Any) -> list[str]:
    if kinds is None:
        return []
    if not isinstance(kinds, list) or any(k not in STATIC_IMAGES for k in kinds):
        return [f"charts.static_images must be a list of {', '.join(STATIC_IMAGES)} (got {kinds!r})"]
    return []


def check_params(params: dict[str, Any], root: Path | str = ".") -> list[str]:
    """Every problem of params: paths that overlap, unknown profiles or specs, unsafe names,
    concurrency that is not a positive integer, workloads longer than a spec's maximum context,
    rules missing, misplaced or not numbers, gate settings that are not."""
    problems = _check_paths(params.get("paths"), Path(root))
    profiles = params.get("profiles")
    if not isinstance(profiles, dict) or not profiles:
        problems.append("profiles must be a mapping of profile names")
        profiles = {}
    active = params.get("profile")
    if active not in profiles:
        problems.append(f"profile {active!r} is not one of profiles ({', '.join(map(str, profiles))})")
    for name, prof in profiles.items():
        problems += _check_name(name, f"profiles.{name}")
        if not isinstance(prof, dict):
            problems.append(f"profiles.{name} must be a mapping")
            continue
        problems += _check_rules(prof.get("rules"), PROFILE_RULES, f"profiles.{name}.rules")
        python = prof.get("python")
        if name == active and "python" not in prof:
            # dvc.yaml's run stage names it: DVC stops on a profile without it
            problems.append(f"profiles.{name}.python is not set (the engine's Python for the local "
                            "executor; null: the project's own)")
        elif python is not None and (not isinstance(python, str) or not python.strip()):
            problems.append(f"profiles.{name}.python must be a command or a path, or null")
    problems += _check_rules(params.get("rules"), SHARED_RULES, "rules")
    problems += _check_static_images((params.get("charts") or {}).get("static_images"))
    models = params.get("models")
    if models is not None and not isinstance(models, dict):
        problems.append("models must be a mapping of model names to their shapes")
    for name, shape in (models if isinstance(models, dict) else {}).items():
        problems += _check_name(name, f"models.{name}")
        if not isinstance(shape, dict) or set(shape) != set(MODEL_SHAPE) or any(
                isinstance(v, bool) or not isinstance(v, int) or v < 1 for v in shape.values()):
            problems.append(f"models.{name} must set {', '.join(MODEL_SHAPE)}, each a positive integer")
    groups = params.get("workloads") or {}
    if not isinstance(groups, dict):
        problems.append("workloads must be a mapping of profile names to workload groups")
        groups = {}
    shaped = {}
    for group_name, group in groups.items():
        if not isinstance(group, dict):
            problems.append(f"workloads.{group_name} must be a mapping of workload names")
            continue
        for name, w in group.items():
            found = _check_workload(name, w, f"workloads.{group_name}.{name}")
            problems += found
            if isinstance(w, dict) and ("kind" not in w or not found):
                shaped[(group_name, name)] = w      # its length can be checked against a context
    specs = params.get("specs")
    if not isinstance(specs, dict):
        problems.append("specs must be a mapping of spec names")
        specs = {}
    for name, s in specs.items():
        problems += _check_spec(name, s, profiles, groups, shaped)
    problems += _check_gate(params, specs)
    arms = params.get("arms") or {}
    if not isinstance(arms, dict):
        problems.append("arms must be a mapping of spec names to labels")
        arms = {}
    for name, labels in arms.items():
        problems += _check_arm(name, labels, specs)
    run_specs = params.get("run_specs") or []
    if not isinstance(run_specs, list):
        problems.append("run_specs must be a list of spec names")
        run_specs = []
    problems += [f"run_specs: {name!r} is not one of specs" for name in run_specs if name not in specs]
    return problems


def _check_gate(params: dict[str, Any], specs: dict[str, Any]) -> list[str]:
    """The gate settings (`gate`, then each spec's profile's and its own): known settings of the
    right kind, and an answer budget that leaves room for a prompt in the spec's context."""
    problems = settings_problems(params.get("gate"), "gate", complete=True)
    if not problems:
        for name, s in specs.items():
            if isinstance(s, dict):
                context = max_context(s)
                problems += check_spec_gate(params, name, context if _positive_int(context) else None)
    return list(dict.fromkeys(problems))


ARM_LINKS = ("follow_up_of", "superseded_by")   # a spec's labels naming another spec


def _check_arm(name: str, s: Any, specs: dict[str, Any]) -> list[str]:
    """A spec's arm labels (params `arms`): follow_up_of and superseded_by name another spec;
    phase is a positive integer."""
    if name not in specs:
        return [f"arms: {name!r} is not one of specs"]
    if not isinstance(s, dict):
        return [f"arms.{name} must be a mapping of {', '.join(ARM_LINKS)}, phase"]
    problems = [f"arms.{name}.{k} is not a label ({', '.join(ARM_LINKS)}, phase)"
                for k in s if k not in (*ARM_LINKS, "phase")]
    for key in ARM_LINKS:
        other = s.get(key)
        if other is not None and (other not in specs or other == name):
            problems.append(f"arms.{name}.{key}: {other!r} is not another spec")
    if "phase" in s and not _positive_int(s["phase"]):
        problems.append(f"arms.{name}.phase must be a positive integer, not {s['phase']!r}")
    return problems


def _check_name(name: Any, where: str, *, run_id_field: bool = False) -> list[str]:
    """A name safe as a file name and a shell word (and as a run-id field, where it is one)."""
    if not isinstance(name, str) or not SAFE_NAME.match(name) or ".." in name \
            or (run_id_field and "__" in name):
        rule = "letters, digits, '.', '_', '-', not starting with '.' or '-', no '..'"
        return [f"{where}: name {name!r} is not safe as a file name and shell word "
                f"({rule}{', no __' if run_id_field else ''})"]
    return []


def _check_rules(rules: Any, keys: tuple[str, ...], where: str) -> list[str]:
    """A rules mapping holding exactly `keys`, each a number."""
    if not isinstance(rules, dict):
        return [f"{where} must be a mapping of {', '.join(keys)}"]
    problems = [f"{where} is missing {k}" for k in keys if k not in rules]
    for key, value in rules.items():
        if key not in keys:
            home = ("profiles.<name>.rules" if key in PROFILE_RULES
                    else "rules" if key in SHARED_RULES else None)
            problems.append(f"{where}.{key} is not a rule here" + (f" (it belongs under {home})" if home else ""))
        elif isinstance(value, bool) or not isinstance(value, (int, float)):
            problems.append(f"{where}.{key} must be a number, not {value!r}")
    return problems


def _positive_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _check_workload(name: Any, w: Any, where: str) -> list[str]:
    """A workload's own settings: its name, positive integers, a valid multi-turn shape."""
    problems = _check_name(name, where, run_id_field=True)
    if not isinstance(w, dict):
        return problems + [f"{where} must be a mapping"]
    if "kind" in w:
        try:
            workload_from_params(str(name), w)
        except CampaignError as exc:
            problems.append(f"{where}: {str(exc).removeprefix('params.yaml: ')}")
        return problems
    for key in ("prompt_tokens", "output_tokens"):
        if not _positive_int(w.get(key)):
            problems.append(f"{where}.{key} must be a positive integer, not {w.get(key)!r}")
    if "prompts_per_user" in w and not _positive_int(w["prompts_per_user"]):
        problems.append(f"{where}.prompts_per_user must be a positive integer, not {w['prompts_per_user']!r}")
    if "repeats" in w and not _positive_int(w["repeats"]):
        problems.append(f"{where}.repeats must be a positive integer, not {w['repeats']!r}")
    flag = w.get("profile", False)      # stages/run/profiler.py: true, or the concurrencies profiled
    if not (isinstance(flag, bool) or (isinstance(flag, list) and flag and all(map(_positive_int, flag)))):
        problems.append(f"{where}.profile must be true, false or a list of concurrencies, not {flag!r}")
    levels = w.get("concurrency")
    if not isinstance(levels, list) or not levels:
        problems.append(f"{where}.concurrency must be a list of positive integers, not {levels!r}")
    else:
        problems += [f"{where}.concurrency: {c!r} is not a positive integer"
                     for c in levels if not _positive_int(c)]
    prefix = w.get("shared_prefix_tokens", 0)
    if not isinstance(prefix, int) or (_positive_int(w.get("prompt_tokens"))
                                       and not 0 <= prefix < w["prompt_tokens"]):
        problems.append(f"{where}.shared_prefix_tokens must be below prompt_tokens, not {prefix!r}")
    return problems


def _check_spec(name: Any, s: Any, profiles: dict, groups: dict, shaped: dict) -> list[str]:
    """A spec: its names, its profile, its context, and each workload it lists fitting in it."""
    where = f"specs.{name}"
    problems = _check_name(name, where)
    if not isinstance(s, dict):
        return problems + [f"{where} must be a mapping"]
    problems += [f"{where}: missing {key}" for key in ("profile", "model", "layout") if key not in s]
    prof_name = s.get("profile")
    if "profile" in s and prof_name not in profiles:
        problems.append(f"{where}.profile {prof_name!r} is not one of profiles ({', '.join(map(str, profiles))})")
    prof = profiles.get(prof_name) if isinstance(profiles.get(prof_name), dict) else {}
    for key in ("model", "layout"):
        if key in s:
            problems += _check_name(s[key], f"{where}.{key}", run_id_field=True)
    if s.get("engine") or prof.get("engine"):
        problems += _check_name(s.get("engine") or prof.get("engine"), f"{where} engine", run_id_field=True)
    if not isinstance(s.get("args") or {}, dict):
        return problems + [f"{where}.args must be a mapping of flags"]
    context = max_context(s)
    if not _positive_int(context):
        problems.append(f"{where}.args must set --max-model-len (or --context-length) to a positive "
                        f"integer, not {context!r}")
        context = None
    gpus = s.get("gpus")
    if gpus is not None and not _positive_int(gpus) and not (
            isinstance(gpus, list) and gpus and all(isinstance(g, int) and g >= 0 for g in gpus)):
        problems.append(f"{where}.gpus must be a positive count or a list of GPU numbers, not {gpus!r}")
    names = s.get("workloads") or []
    if not isinstance(names, list):
        return problems + [f"{where}.workloads must be a list of workload names"]
    if prof_name not in profiles:
        return problems                     # its workloads cannot be looked up
    group = groups.get(prof_name) if isinstance(groups.get(prof_name), dict) else {}
    for w in names:
        if w not in group:
            problems.append(f"{where}: unknown workload {w!r} (not in workloads.{prof_name})")
        elif context and (prof_name, w) in shaped:
            problems += _check_fits(w, shaped[(prof_name, w)], context, where)
    return problems


def _check_fits(name: str, w: dict, context: int, where: str) -> list[str]:
    """A workload that fits the spec's maximum context, or the line saying it does not."""
    if "kind" in w:
        try:
            workload_from_params(name, w, max_model_len=context)
        except CampaignError as exc:
            return [f"{where}: {str(exc).removeprefix('params.yaml: ')}"]
        return []
    if not (_positive_int(w.get("prompt_tokens")) and _positive_int(w.get("output_tokens"))):
        return []
    need = w["prompt_tokens"] + w["output_tokens"]
    if need > context:
        return [f"{where}: workloads {name} needs {need:,} tokens (prompt_tokens + output_tokens), "
                f"beyond the server's maximum context of {context:,}"]
    return []


def _overlap(a: Path, b: Path) -> bool:
    return a == b or a.is_relative_to(b) or b.is_relative_to(a)


def _check_paths(p: Any, root: Path) -> list[str]:
    """Outputs that could delete or overwrite an input: an output that is, holds or sits inside
    the runs, nodes or models folder, holds the project root (or the locks), or overlaps another."""
    if not isinstance(p, dict):
        return ["paths must be a mapping"]
    problems = [f"paths is missing {k}" for k in (*INPUT_PATHS, *OUTPUT_PATHS) if k not in p]
    bad = [k for k, v in p.items() if not isinstance(v, str) or not v.strip()]
    problems += [f"paths.{k} must be a path, not {p[k]!r}" for k in bad]
    top = root.resolve()
    where = {k: (root / v).resolve() for k, v in p.items() if k not in bad}
    outputs = [k for k in OUTPUT_PATHS if k in where]
    for i, out in enumerate(outputs):
        o, shown = where[out], f"paths.{out} ({p[out]})"
        if top.is_relative_to(o):
            problems.append(f"{shown} is or holds the project root")
            continue
        if (top / LOCK_DIR).is_relative_to(o):
            problems.append(f"{shown} holds the locks folder {LOCK_DIR}")
        for inp in INPUT_PATHS:
            if inp in where and _overlap(o, where[inp]):
                problems.append(f"{shown} overlaps paths.{inp} ({p[inp]}): an output must not be, "
                                "hold or sit inside an input")
        for other in outputs[i + 1:]:
            if _overlap(o, where[other]) and not top.is_relative_to(where[other]):
                problems.append(f"{shown} overlaps paths.{other} ({p[other]}): outputs must not be "
                                "or sit inside each other")
    return problems
