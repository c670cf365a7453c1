"""`campaign diff --facts`: the published numbers of two git revisions (data/facts.json as each
revision's DVC outputs hold it) side by side, each change with a confidence interval where the
fact's inputs give one (a median or p90 of requests; stages/render/diff_stats.py).
"""
from __future__ import annotations

import csv
import io
import json

from stages.core.config import CampaignError, Paths
from stages.render import diff_stats
from stages.render.diff import cell_text, interval_text, n_text

def facts_at(paths: Paths, rev: str) -> dict[str, dict]:
    """The published facts at a git revision (data/facts.json through DVC), by id.
    `rev` "workspace" reads the file as it is now."""
    import dvc.api

    rel = paths.facts.relative_to(paths.root).as_posix()
    if rev == "workspace":
        text = paths.facts.read_text() if paths.facts.exists() else None
    else:
        try:
            text = dvc.api.read(rel, repo=str(paths.root), rev=rev)
        except Exception as exc:  # DVC raises many types; one line is what the user needs
            raise CampaignError(f"revision {rev}: cannot read {rel} through DVC "
                                f"({type(exc).__name__}); was dvc.lock committed there?") from None
    if text is None:
        raise CampaignError(f"{rel}: not found (run `dvc repro render` first)")
    return {f["id"]: f for f in json.loads(text)}


FACT_STATISTICS = ("median", "p90")     # facts whose inputs give them an interval (fact_record.statistic)


def _used_values(fact: dict) -> list[float]:
    return [float(r["value"]) for r in fact.get("input_rows") or []
            if r.get("used") and isinstance(r.get("value"), (int, float))]


def fact_interval(b: dict, h: dict, settings: diff_stats.Settings) -> dict:
    """For a changed fact computed as a median or p90 of its inputs on both sides: the interval of
    its change from the two sides' inputs and whether it lies wholly off zero (the number moved
    outside its own noise); nothing for other facts, or with too few inputs a side."""
    statistic = b.get("statistic")
    if statistic not in FACT_STATISTICS or h.get("statistic") != statistic:
        return {}
    bv, hv = _used_values(b), _used_values(h)
    if len(bv) < settings.min_samples or len(hv) < settings.min_samples:
        return {"n_base": len(bv), "n_head": len(hv)}
    ci = diff_stats.bootstrap_change(bv, hv, statistic, confidence=settings.confidence,
                                     resamples=settings.resamples, seed=settings.seed)
    if ci is None:
        return {"n_base": len(bv), "n_head": len(hv)}
    return {"ci_low_pct": ci[0], "ci_high_pct": ci[1], "n_base": len(bv), "n_head": len(hv),
            "outside": ci[0] > 0 or ci[1] < 0}


def diff_facts(base: dict[str, dict], head: dict[str, dict],
               settings: diff_stats.Settings | None = None) -> list[dict]:
    """Every published number that changed, appeared or went away between two fact sets; a
    changed median or p90 says whether it moved outside its own interval (fact_interval)."""
    settings = settings or diff_stats.Settings()
    rows = []
    for fid in sorted(set(base) | set(head)):
        b, h = base.get(fid), head.get(fid)
        if b and h and b.get("value") == h.get("value"):
            continue
        rows.append({
            "fact": fid,
            "change": "changed" if b and h else ("new" if h else "removed"),
            "base_value": b.get("display") if b else None,
            "head_value": h.get("display") if h else None,
            "base_runs": ", ".join(b.get("run_ids") or []) if b else None,
            "head_runs": ", ".join(h.get("run_ids") or []) if h else None,
            "pages": ", ".join(sorted(set((b or {}).get("pages") or []) | set((h or {}).get("pages") or []))),
            "ci_low_pct": None, "ci_high_pct": None, "n_base": None, "n_head": None, "outside": None,
            **(fact_interval(b, h, settings) if b and h else {}),
        })
    return rows


def render_facts(rows: list[dict], fmt: str, base: str, head: str) -> str:
    if fmt == "json":
        return json.dumps({"base": base, "head": head, "facts": rows}, indent=2)
    cols = ["fact", "change", "base_value", "head_value", "interval", "n", "outside", "base_runs",
            "head_runs", "pages"]
    if fmt == "csv":
        out = io.StringIO()
        w = csv.DictWriter(out, fieldnames=[c for c in cols if c not in ("interval", "n")] +
                           ["ci_low_pct", "ci_high_pct", "n_base", "n_head"], extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)
        return out.getvalue()
    body = [[interval_text(r) if c == "interval" else n_text(r) if c == "n"
             else ("-" if r[c] is None else "yes" if r[c] else "no") if c == "outside"
             else cell_text(r[c]) for c in cols] for r in rows]
    heads = ["fact", "change", f"base ({base})", f"head ({head})", "interval of the change",
             "n base / head", "outside its noise", "base runs", "head runs", "pages"]
    if fmt == "markdown":
        lines = ["| " + " | ".join(heads) + " |", "| " + " | ".join("---" for _ in heads) + " |"]
        lines += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in body]
    else:
        widths = [max(len(h), *(len(row[i]) for row in body)) if body else len(h) for i, h in enumerate(heads)]
        lines = ["  ".join(h.ljust(w) for h, w in zip(heads, widths)), "  ".join("-" * w for w in widths)]
        lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths)) for row in body]
    known = [r for r in rows if r.get("outside") is not None]
    moved = sum(1 for r in known if r["outside"])
    return ("\n".join(lines) + f"\n\n{len(rows)} published numbers differ between {base} and {head}; "
            f"{moved} of the {len(known)} with an interval moved outside it\n")
