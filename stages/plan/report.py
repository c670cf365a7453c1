"""What `campaign plan` prints: each spec's verdict with its arithmetic, its time and GPU-hours,
then the GPU-hours and cost of each run set and Part the specs belong to."""
from __future__ import annotations

from pathlib import Path

from stages.core.config import CampaignError, read_yaml
from stages.core.run_sets import definition


def selects(params: dict, selection: dict, name: str) -> bool:
    """Whether spec `name` is in a run set's selection (stages/core/run_sets.py), as its runs would be."""
    s = (params.get("specs") or {})[name]
    profiles = params.get("profiles") or {}
    prof = s.get("profile") or params.get("profile")
    image = s.get("image") or (profiles.get(prof) or {}).get("image")
    checks = {"profile": lambda v: prof == v, "specs": lambda v: name in v,
              "models": lambda v: s.get("model") in v,
              "image": lambda v: image is not None and (image == v or image.rsplit(":", 1)[-1] == v)}
    return all(checks[k](v) for k, v in selection.items() if k in checks)


def run_set_specs(params: dict, selection: dict) -> list[str]:
    return [n for n in (params.get("specs") or {}) if selects(params, selection, n)]


def resolve(params: dict, names: list[str]) -> tuple[list[str], dict[str, list[str]]]:
    """Spec names and run set names -> the specs to plan, and each named run set's specs."""
    specs, run_sets = params.get("specs") or {}, params.get("run_sets") or {}
    out, groups = [], {}
    for name in names or list(params.get("run_specs") or []):
        if name in specs:
            chosen = [name]
        elif name in run_sets:
            chosen = groups[name] = run_set_specs(params, definition(name, run_sets, "params.yaml run_sets"))
        else:
            raise CampaignError(f"{name!r} is neither a spec nor a run set of params.yaml")
        out += [c for c in chosen if c not in out]
    return out, groups


def parts(params: dict, series_file: Path | None) -> dict[str, dict]:
    """Each Part of the series that covers a run set: its title -> the run set's selection."""
    if series_file is None or not Path(series_file).is_file():
        return {}
    series = read_yaml(Path(series_file)) or {}
    out = {}
    for part in series.get("parts") or []:
        if part.get("runs"):
            out[str(part.get("title"))] = definition(part["runs"], params.get("run_sets"), Path(series_file).name)
    return out


def spec_lines(p: dict) -> list[str]:
    head = f"{p['spec']}  ({p.get('model')}, {p.get('gpus')} GPUs): {p['verdict'].upper()}"
    if p["verdict"] == "not planned":
        return [head, f"  {p['why']}"]
    pool = "-" if p["kv_tokens"] is None else f"{p['kv_tokens']:,}"
    conc = "" if p["concurrency_x"] is None else f", {p['concurrency_x']:.2f}x at {p['max_model_len']:,}"
    fit = ", ".join(f"{w} {n}" for w, n in p["fit"].items())
    cost = ", ".join(f"{k} ${v:,.2f}" for k, v in (p.get("cost_usd") or {}).items())
    return [head,
            f"  memory: {p['why']}",
            f"  {p['attention']}, {p['kv_bytes_token']:,.0f} KV bytes a token a GPU; pool {pool} tokens{conc}",
            f"  sequences that fit: {fit or '-'}",
            f"  time: engine start {p['engine_start_s']:,.0f} s, gate {p['gate_s']:,.0f} s, "
            f"{len(p['steps_s'])} steps {sum(p['steps_s'].values()):,.0f} s: {p['run_s'] / 60:,.1f} min, "
            f"{p['gpu_hours']:.2f} GPU-hours ({cost})",
            f"  from: {p['config']}; {p['basis']}"]


def text(params: dict, plans: list[dict], groups: dict[str, list[str]], part_sets: dict[str, dict]) -> str:
    lines = []
    for p in plans:
        lines += spec_lines(p) + [""]
    by_spec = {p["spec"]: p for p in plans}
    prices = params.get("prices") or {}

    def total(title: str, names: list[str]) -> None:
        chosen = [by_spec[n] for n in names if n in by_spec]
        if not chosen:
            return
        hours = sum(p.get("gpu_hours") or 0.0 for p in chosen)
        unplanned = [p["spec"] for p in chosen if p["verdict"] == "not planned"]
        cost = ", ".join(f"{k} ${hours * float(v['usd_per_gpu_hour']):,.2f}" for k, v in prices.items())
        note = f"; not planned: {', '.join(unplanned)}" if unplanned else ""
        lines.append(f"{title}: {len(chosen)} specs, {hours:,.2f} GPU-hours ({cost}){note}")

    for name, names in groups.items():
        total(f"run set {name}", names)
    for title, selection in part_sets.items():
        total(title, [n for n in by_spec if selects(params, selection, n)])
    total("all", list(by_spec))
    refused = [p["spec"] for p in plans if p["verdict"] == "does not fit"]
    if refused:
        lines.append(f"does not fit: {', '.join(refused)} (dvc repro will not launch them unless the spec says "
                     f"force: true)")
    return "\n".join(lines)
