"""The Compare page: pairs of run sets side by side, point by point, as `campaign diff` sees them.

Which pairs, and each compared point by point with `stages.render.diff.compare`, is
stages/render/compare_pairs.py. Every value and change the page prints is a
fact (the point and launch facts the articles use, plus `compare_*_change_pct`), checked against
what `compare` computed, so the page and `campaign diff` cannot disagree.

Better, worse, same and unclear come from the confidence interval of each change
(stages/render/diff_stats.py, settings under params.yaml `diff:`). The interval and the requests (or
repeats) it rests on a side are printed beside the change, each comparison opens with its marks
counted by workload, and the audit entry of a change records its interval and each side's samples
(n, median, p90 and the values).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from stages.render import diff
from stages.render.compare_pairs import Comparison
from stages.render.errors import FactError
from stages.render.escape import escape_cell, run_label_link
from stages.render.fact_record import Fact
from stages.render.page_macros import PageMacros
from stages.render.numbers import table_displays

TEMPLATE = "compare.md.j2"
PAGE = "compare.md"
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


def link(comparisons: list[Comparison], base_run_id: str, head_run_id: str) -> str | None:
    """The Compare page's section that sets these two runs side by side (base and head), as a
    link target from the docs root; None when the page has none."""
    for c in comparisons:
        if base_run_id in c.sides[0].run_ids and head_run_id in c.sides[1].run_ids:
            return f"{PAGE}#{c.anchor}"
    return None


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
                # a launch that never became ready has no start-up time, pool or gate score to print
                base = self._checked(name, {"run_id": b_run}, _num(r["base_value"]), f"{item} of {b_run}") \
                    if b_run and r["base_value"] is not None else "-"
                head = self._checked(name, {"run_id": h_run}, _num(r["head_value"]), f"{item} of {h_run}") \
                    if h_run and r["head_value"] is not None else "-"
                change = self._fact("compare_launch_change_pct",
                                    {"base_run_id": b_run, "head_run_id": h_run, "item": item},
                                    r["change_pct"], f"change of {item}", show_unit=True) \
                    if isinstance(base, Fact) and isinstance(head, Fact) else "-"
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
            "compare_summary": tables.summary, "compare_confidence": tables.confidence,
            "compare_id": lambda c: macros.hold(f"{{#{c.anchor}}}")}


def part_globals(macros: PageMacros, comparisons: list[Comparison]) -> dict[str, Any]:
    """What a Part's page may ask of the Compare page: `compare_link(base_run_id, head_run_id)`,
    the link target of the section comparing those runs, or "" when the page has none."""
    def compare_link(base_run_id: str, head_run_id: str) -> Any:
        target = link(comparisons, base_run_id, head_run_id)
        return macros.hold(target) if target else ""
    return {"compare_link": compare_link}
