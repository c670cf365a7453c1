"""The Compare page: pairs of run sets side by side, point by point, as `campaign diff` sees them.

params.yaml lists the pairs under `compare:`, each `{base: X, head: Y, title: ...}` (optionally
`tolerance_pct`). A side is a run set, a spec or an image (or bare tag), resolved by
`stages.render.diff.resolve` against the current campaign database; git revisions are left to
`campaign diff`, because the page's numbers must be facts of the current tables. The comparison
itself is `stages.render.diff.compare`. Every value and change the page prints is a fact (the point and
launch facts the articles use, plus `compare_*_change_pct`), checked against what `compare`
computed, so the page and `campaign diff` cannot disagree.

Better, worse, same and unclear come from the confidence interval of each change
(stages/render/diff_stats.py, settings under params.yaml `diff:`). The interval and the requests (or
repeats) it rests on a side are printed beside the change, each comparison opens with its marks
counted by workload, and the audit entry of a change records its interval and each side's samples
(n, median, p90 and the values).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import duckdb

from stages.render import diff, diff_stats
from stages.render import run_sets as run_set_lib
from stages.core.config import CampaignError
from stages.render.errors import FactError
from stages.render.escape import escape_cell, run_label_link
from stages.render.fact_record import Fact
from stages.render.page_macros import PageMacros
from stages.render.numbers import table_displays

TEMPLATE = "compare.md.j2"
DEFAULT_TOLERANCE_PCT = 5.0
POINT_METRICS = ("ttft_median_s", "ttft_p90_s", "tpot_median_ms", "output_tok_s", "completed_pct")


@dataclass(frozen=True)
class PointFacts:
    """The facts behind a compared point of one table: `<prefix>_<metric>` for each value,
    `compare_<prefix>_change_pct` for the change, bound by run and `keys`."""
    prefix: str
    keys: tuple[str, ...]
    users: str                   # the fact printed as the point's users (concurrency or sessions)


# diff rows carry the table they came from: benchmark points, or agents workloads (whose
# session count stands for the concurrency)
POINT_TABLES = {
    "bench_points": PointFacts("point", ("workload", "concurrency"), "point_concurrency"),
    "agent_runs": PointFacts("agent", ("workload",), "agent_sessions"),
}
LAUNCH_FACTS = {"ready_s": "launch_ready_s", "kv_tokens": "launch_kv_tokens", "gate_score": "gate_score"}
METRIC_LABELS = {
    "ttft_median_s": "TTFT median (s)",
    "ttft_p90_s": "TTFT p90 (s)",
    "tpot_median_ms": "TPOT median (ms)",
    "output_tok_s": "Output (tok/s)",
    "completed_pct": "Completed (%)",
    "status": "Launch status",
    "ready_s": "Ready (s)",
    "kv_tokens": "KV pool (tokens)",
    "gate_score": "Needle gate score",
}
STRONG_MARKS = ("worse", "new failure")


@dataclass
class Comparison:
    title: str
    base: str
    head: str
    result: diff.Result | None = None
    reason: str | None = None           # why the pair could not be drawn
    workloads: list[str] = field(default_factory=list)
    specs: dict[str, str | None] = field(default_factory=dict)   # run id -> spec, for labels

    @property
    def resolved(self) -> bool:
        return self.result is not None

    @property
    def match_keys(self) -> list[str]:
        """The distinct values of what points are matched on (model / layout / context)."""
        rows = (self.result.launches + self.result.points) if self.result else []
        return list(dict.fromkeys(str(r["match_key"]) for r in rows))

    @property
    def match_on(self) -> str:
        attrs = (self.result.key_attrs if self.result else []) + ["workload", "concurrency"]
        return ", ".join(a.replace("ctx_label", "context") for a in attrs)


# ---------------------------------------------------------------- pairs

def check_pairs(pairs: Any) -> list[dict[str, Any]]:
    """The `compare:` list from params, checked: each item names a base and a head."""
    if pairs is None:
        return []
    if not isinstance(pairs, list):
        raise CampaignError("params.yaml: compare must be a list of {base, head, title}")
    out = []
    for i, pair in enumerate(pairs, start=1):
        if not isinstance(pair, dict) or not pair.get("base") or not pair.get("head"):
            raise CampaignError(f"params.yaml: compare item {i} needs base and head")
        tolerance = pair.get("tolerance_pct", DEFAULT_TOLERANCE_PCT)
        if isinstance(tolerance, bool) or not isinstance(tolerance, (int, float)) or tolerance < 0:
            raise CampaignError(f"params.yaml: compare item {i}: tolerance_pct must be a number >= 0")
        out.append({"base": str(pair["base"]), "head": str(pair["head"]),
                    "title": str(pair.get("title") or f"{pair['base']} against {pair['head']}"),
                    "tolerance_pct": float(tolerance)})
    return out


def current_specs(con: duckdb.DuckDBPyConnection) -> list[str]:
    return [r[0] for r in con.execute(
        "select distinct spec from runs where spec is not null order by spec").fetchall()]


def resolve_side(token: str, *, con: duckdb.DuckDBPyConnection, run_sets: dict[str, Any],
                 specs: list[str]) -> diff.Side:
    """A side from the current tables: a run set, a spec that has runs, or an image/tag."""
    if token not in run_sets and token not in specs and not run_set_lib.select(con, {"image": token}, current_only=True):
        raise CampaignError(f"{token!r} is not a run set, a spec with runs or an image of the "
                            "current runs (compare git revisions with `campaign diff`)")
    # paths is only read for git revisions, which the check above has turned away
    return diff.resolve(token, params={"run_sets": run_sets, "specs": {s: {} for s in specs}},
                        paths=None, current=con)  # type: ignore[arg-type]


def resolve_pairs(pairs: list[dict[str, Any]], *, con: duckdb.DuckDBPyConnection,
                  run_sets: dict[str, Any] | None = None,
                  diff_settings: dict[str, Any] | None = None) -> list[Comparison]:
    """Each pair compared, or the one-line reason it could not be. `diff_settings`: params.yaml's
    `diff:` block (confidence, resamples, seed, minimum samples)."""
    run_sets = run_sets or {}
    try:
        stats = diff_stats.Settings.from_params(diff_settings)
    except (TypeError, ValueError) as exc:
        raise CampaignError(f"params.yaml diff: {exc}") from None
    specs = current_specs(con)
    spec_of = dict(con.execute("select run_id, spec from runs").fetchall())
    out = []
    for pair in check_pairs(pairs):
        c = Comparison(pair["title"], pair["base"], pair["head"])
        try:
            sides = [resolve_side(t, con=con, run_sets=run_sets, specs=specs) for t in (c.base, c.head)]
            c.result = diff.compare(*sides, tolerance_pct=pair["tolerance_pct"], stats=stats)
            if c.result.repeated_points:
                # the page prints each value as its point's fact, which is the first repeat's
                raise CampaignError(
                    f"{c.result.repeated_points} of its points ran more than once (repeats); this page "
                    "draws points run once, so compare these with `campaign diff`, which pools the repeats")
        except CampaignError as exc:
            c.result = None
            c.reason = str(exc)
        else:
            c.workloads = list(dict.fromkeys(r["workload"] for r in c.result.points))
            c.specs = {r: spec_of.get(r) for r in spec_of}
        out.append(c)
    return out


# ---------------------------------------------------------------- tables

def _same(a: Any, b: Any) -> bool:
    if a is None or b is None:
        return a is None and b is None
    try:
        return math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=1e-9)
    except (TypeError, ValueError):
        return str(a) == str(b)


class CompareTables:
    """Table macros for the Compare page; every numeric cell is a fact, checked against the diff."""

    def __init__(self, macros: PageMacros):
        self.macros = macros

    def _checked(self, name: str, params: dict[str, Any], expected: Any, what: str) -> Fact:
        fact: Fact = self.macros.book.evaluate(name, params, page=self.macros.page)
        self.macros.uses(fact.sql)
        if not _same(fact.value, expected):
            raise FactError(f"compare page: {what} is {expected!r} in the comparison but "
                            f"{fact.value!r} as fact {fact.id}")
        return fact

    def _fact(self, name: str, params: dict[str, Any], expected: Any, what: str,
              show_unit: bool = False) -> str:
        return self.macros.fact_markup(self._checked(name, params, expected, what), show_unit)

    def _values(self, cells: list[list[Any]], columns: tuple[int, ...]) -> None:
        """Print the facts of the value columns in place, each quantity (unit) of the table at one
        precision across them (stages/render/numbers.py)."""
        at = [(i, j) for i, row in enumerate(cells) for j in columns if isinstance(row[j], Fact)]
        shown = table_displays((cells[i][j].value, cells[i][j].unit, cells[i][j].display) for i, j in at)
        for (i, j), display in zip(at, shown):
            cells[i][j] = self.macros.fact_markup(cells[i][j], display=display)

    @staticmethod
    def _mark(mark: str) -> str:
        text = escape_cell(mark)
        return f"**{text}**" if mark in STRONG_MARKS else text

    @staticmethod
    def _run(c: Comparison, run_id: str | None) -> str:
        return run_label_link(run_id, c.specs.get(run_id)) if run_id else "-"

    def launches(self, c: Comparison) -> str:
        if not c.result or not c.result.launches:
            return self.macros.hold("*No launches to compare.*")
        # With one match key each side has one launch, named above the tables: no run columns.
        match = len(c.match_keys) > 1
        heads = (["Match"] if match else []) + ["Item"] + (["Base run"] if match else []) + ["Base"] \
            + (["Head run"] if match else []) + ["Head", "Change", "Mark", "Note"]
        aligns = {"Base": "---:", "Head": "---:", "Change": "---:"}
        lines = [_row(heads), _row([aligns.get(h, "---") for h in heads])]
        cells: list[list[Any]] = []
        for r in c.result.launches:
            item, b_run, h_run = r["item"], r["base_run_id"], r["head_run_id"]
            if item == "status":
                base = escape_cell(r["base_value"]) if b_run and r["base_value"] else "-"
                head = escape_cell(r["head_value"]) if h_run and r["head_value"] else "-"
                change = "-"
            else:
                if item not in LAUNCH_FACTS:
                    raise FactError(f"compare page: no fact for launch item {item!r}")
                name = LAUNCH_FACTS[item]
                base = self._checked(name, {"run_id": b_run}, _num(r["base_value"]), f"{item} of {b_run}") \
                    if b_run else "-"
                head = self._checked(name, {"run_id": h_run}, _num(r["head_value"]), f"{item} of {h_run}") \
                    if h_run else "-"
                change = self._fact("compare_launch_change_pct",
                                    {"base_run_id": b_run, "head_run_id": h_run, "item": item},
                                    r["change_pct"], f"change of {item}", show_unit=True) \
                    if b_run and h_run else "-"
            cells.append(([escape_cell(r["match_key"])] if match else [])
                         + [escape_cell(METRIC_LABELS.get(item, item))]
                         + ([self._run(c, b_run)] if match else []) + [base]
                         + ([self._run(c, h_run)] if match else [])
                         + [head, change, self._mark(r["mark"]), escape_cell(r.get("note") or "")])
        self._values(cells, (heads.index("Base"), heads.index("Head")))
        return self.macros.hold("\n".join(lines + [_row(row) for row in cells]))

    def points(self, c: Comparison, workload: str) -> str:
        rows = [r for r in (c.result.points if c.result else []) if r["workload"] == workload]
        if not rows:
            return self.macros.hold("*No benchmark points to compare.*")
        match = len(c.match_keys) > 1
        head_cells = [_row((["Match"] if match else []) + ["Users", "Metric", "Base", "Head", "Change",
                                                            "Interval", "n base / head", "Mark", "Note"]),
                      _row((["---"] if match else []) + ["---:", "---", "---:", "---:", "---:", "---:",
                                                         "---:", "---", "---"])]
        cells: list[list[Any]] = []
        for r in rows:
            metric, b_run, h_run = r["metric"], r["base_run_id"], r["head_run_id"]
            facts = POINT_TABLES[r.get("point_table") or "bench_points"]
            if metric not in POINT_METRICS:
                raise FactError(f"compare page: no fact for point metric {metric!r}")
            where = {k: r[k] for k in facts.keys}
            label = f"{metric} of {workload} at concurrency {r['concurrency']}"
            name = f"{facts.prefix}_{metric}"
            users = self._fact(facts.users, {"run_id": b_run or h_run, **where}, r["concurrency"],
                               f"concurrency of {label}")
            base = self._checked(name, {"run_id": b_run, **where}, r["base_value"],
                                 f"base {label}") if b_run else "-"
            head = self._checked(name, {"run_id": h_run, **where}, r["head_value"],
                                 f"head {label}") if h_run else "-"
            change = "-"
            if b_run and h_run:
                fact = self._checked(f"compare_{facts.prefix}_change_pct",
                                     {"base_run_id": b_run, "head_run_id": h_run, "metric": metric, **where},
                                     r["change_pct"], f"change of {label}")
                note_samples(fact, r, c)
                change = self.macros.fact_markup(fact, show_unit=True)
            cells.append(([escape_cell(r["match_key"])] if match else []) + [
                users, escape_cell(METRIC_LABELS.get(metric, metric)),
                base, head, change, escape_cell(diff.interval_text(r)), escape_cell(diff.n_text(r)),
                self._mark(r["mark"]), escape_cell(r["note"] or "-"),
            ])
        first = 3 if match else 2      # the Base and Head columns
        self._values(cells, (first, first + 1))
        return self.macros.hold("\n".join(head_cells + [_row(c) for c in cells]))

    def summary(self, c: Comparison) -> str:
        """The comparison's marks counted by workload (diff.summary), and how they were drawn."""
        if not c.result:
            return self.macros.hold("-")
        marks = (*diff.SUMMARY_MARKS, "other")
        lines = [_row(["Workload", *(m.capitalize() for m in marks)]),
                 _row(["---", *("---:" for _ in marks)])]
        lines += [_row([escape_cell(r["workload"]), *(str(r[m]) for m in marks)])
                  for r in diff.summary(c.result)]
        return self.macros.hold("\n".join(lines))

    def confidence(self, c: Comparison | None = None) -> str:
        """The confidence level of the intervals, as a percentage."""
        level = c.result.confidence if c is not None and c.result else None
        return self.macros.hold(escape_cell(f"{level:.0%}") if level is not None else "-")

    def runs(self, c: Comparison, side: str) -> str:
        """The runs one side selected, as linked labels."""
        if not c.result:
            return self.macros.hold("-")
        key = f"{side}_run_id"
        ids = sorted({r[key] for r in c.result.points + c.result.launches if r.get(key)})
        return self.macros.hold(", ".join(self._run(c, i) for i in ids) or "-")


def _samples_text(side: str, s: dict | None) -> str:
    if not s or not s["n"]:
        return f"{side}: no samples"
    values = ", ".join(f"{v:.4g}" for v in s["values"]) + (f" and {s['more']} more" if s.get("more") else "")
    return (f"{side}: n = {s['n']}, median {s['median']:.4g}, p90 {s['p90']:.4g}; "
            f"values (lowest first) {values}")


def note_samples(fact: Fact, row: dict[str, Any], c: Comparison) -> None:
    """Records on the change's fact (its audit entry) the interval the mark rests on and each
    side's samples: the per-request times of the point, repeats pooled, or the throughput of
    each repeat."""
    if row.get("base_samples") is None and row.get("head_samples") is None:
        return
    level = c.result.confidence if c.result else None
    interval = diff.interval_text(row)
    what = (f"{level:.0%} interval of the change {interval}" if interval != "-"
            else "no interval of the change")
    text = (f"{what}, marked {row['mark']}{' (' + row['note'] + ')' if row.get('note') else ''}. "
            f"{_samples_text('Base', row.get('base_samples'))}. {_samples_text('Head', row.get('head_samples'))}.")
    base_note = (fact.source_note or "").split(" Mark: ")[0]
    fact.source_note = f"{base_note} Mark: {text}".strip()


def _row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def _num(value: Any) -> Any:
    """diff's launch rows carry values as text; facts carry numbers."""
    if value is None or isinstance(value, (int, float)):
        return value
    try:
        return float(value)
    except ValueError:
        return value


def page_globals(macros: PageMacros, comparisons: list[Comparison]) -> dict[str, Any]:
    tables = CompareTables(macros)
    return {"comparisons": comparisons, "compare_launches": tables.launches,
            "compare_points": tables.points, "compare_runs": tables.runs,
            "compare_summary": tables.summary, "compare_confidence": tables.confidence}
