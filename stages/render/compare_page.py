"""The Compare page: pairs of run sets side by side, point by point, as `campaign diff` sees them.

The page finds its comparisons in the campaign's runs (stages/render/sql/diff/found_pairs.sql):
one setup measured under two engine images, and a setup and the one that took its place, named a
follow-up in params.yaml `arms` or found as the next launch of a model whose launch never became
ready. params.yaml `compare:` adds pairs, each `{base: X, head: Y, title: ...}` (optionally
`tolerance_pct`), and titles a found one whose runs it selects. A side is a run set, a spec, a run
or an image (or bare tag), resolved by `stages.render.diff.resolve` against the current campaign
database; git revisions are left to `campaign diff`, because the page's numbers must be facts of the
current tables. A configured pair that selects no run of this campaign (or whose points ran more
than once) is left out with a one-line notice to the author, never text for readers.

The comparison itself is `stages.render.diff.compare`. Every value and change the page prints is a
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
import re
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
PAGE = "compare.md"
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
FOUND_KINDS = ("images", "follow-up", "rescue")   # how the runs hold a comparison (compare.md.j2)


@dataclass
class Comparison:
    title: str
    base: str                           # each side as `campaign diff` names it: a run set, spec,
    head: str                           # run or image
    sides: tuple[diff.Side, diff.Side]
    tolerance_pct: float = DEFAULT_TOLERANCE_PCT
    found: str | None = None            # one of FOUND_KINDS; None for a pair only params lists
    listed: bool = False                # params.yaml `compare:` lists it
    about: dict[str, Any] = field(default_factory=dict)   # found_pairs' row: model, setups, images
    anchor: str = ""                    # the section's id on the page
    result: diff.Result | None = None
    workloads: list[str] = field(default_factory=list)
    specs: dict[str, str | None] = field(default_factory=dict)   # run id -> spec, for labels

    @property
    def runs(self) -> tuple[tuple[str, ...], tuple[str, ...]]:
        return tuple(sorted(self.sides[0].run_ids)), tuple(sorted(self.sides[1].run_ids))

    @property
    def point_sides(self) -> list[str]:
        """The sides ("base", "head") that ran benchmark points."""
        points = self.result.points if self.result else []
        return [s for s in ("base", "head") if any(r[f"{s}_run_id"] for r in points)]

    @property
    def points_paired(self) -> bool:
        """Whether a benchmark point ran on both sides (else only the launches compare)."""
        return any(r["base_run_id"] and r["head_run_id"] for r in (self.result.points if self.result else []))

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
                 specs: list[str]) -> diff.Side | None:
    """A side from the current tables (a run set, a spec that has runs, a run or an image/tag), or
    None when it selects no run of this campaign (a git revision is `campaign diff`'s)."""
    if token not in run_sets and token not in specs and not diff.is_run(con, token) \
            and not run_set_lib.select(con, {"image": token}, current_only=True):
        return None
    # paths is only read for git revisions, which the check above has turned away
    side = diff.resolve(token, params={"run_sets": run_sets, "specs": {s: {} for s in specs}},
                        paths=None, current=con)  # type: ignore[arg-type]
    return side if side.run_ids else None


def _image_tag(image: str | None) -> str:
    return (image or "-").rsplit(":", 1)[-1]


def found_pairs(con: duckdb.DuckDBPyConnection, arms: dict[str, Any] | None = None) -> list[Comparison]:
    """The comparisons the runs hold: each setup under two images, each rescue found in the
    runs, and each follow-up params.yaml `arms` names (a rescue that an arm names is told as the
    follow-up); in the order their head runs started, arms' own pairs that the runs did not show last."""
    specs = current_specs(con)
    arm_pairs: dict[tuple, Comparison] = {}
    for name, labels in (arms or {}).items():
        if not isinstance(labels, dict):
            continue
        links = [(labels.get("follow_up_of"), name), (name, labels.get("superseded_by"))]
        for base, head in links:
            if not base or not head:
                continue
            sides = [resolve_side(str(t), con=con, run_sets={}, specs=specs) for t in (base, head)]
            if None in sides:
                continue    # a spec this campaign did not run
            c = Comparison(f"{head}, follow-up of {base}", str(base), str(head), (sides[0], sides[1]),
                           found="follow-up", about={"base_setup": str(base), "head_setup": str(head)})
            arm_pairs.setdefault(c.runs, c)
    rows = diff.found_pairs(con)
    out: list[Comparison] = []
    per_setup: dict[str, int] = {}
    for row in rows:
        if row["kind"] == "images":
            per_setup[row["head_setup"]] = per_setup.get(row["head_setup"], 0) + 1
    for row in rows:
        base, head = row["base_run_id"], row["head_run_id"]
        sides = (diff.Side(base, [base], "current", con), diff.Side(head, [head], "current", con))
        if row["kind"] == "images":
            title = f"{row['head_setup']} under two images"
            if per_setup[row["head_setup"]] > 1:
                title += f": {_image_tag(row['base_image'])} against {_image_tag(row['head_image'])}"
        else:
            title = f"{row['base_setup']}, then {row['head_setup']}"
        c = Comparison(title, base, head, sides, found=row["kind"], about=row)
        arm = arm_pairs.pop(c.runs, None)
        if arm is not None:
            arm.about = {**row, **arm.about}
            c = arm
        out.append(c)
    return out + list(arm_pairs.values())


def repeated_points(c: Comparison) -> int:
    return sum(diff.repeated_points(diff.side_points(side)) for side in c.sides)


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "comparison"


def plan(con: duckdb.DuckDBPyConnection, *, pairs: Any = None, run_sets: dict[str, Any] | None = None,
         arms: dict[str, Any] | None = None, notices: list[str] | None = None) -> list[Comparison]:
    """The page's comparisons, sides resolved but not yet compared (see `draw`): the pairs params
    lists, in its order, then those found in the runs. A listed pair whose sides select the runs
    of a found one gives it its title and tolerance. A pair that selects no run of this campaign,
    or whose points ran more than once (the page prints each point's first repeat; `campaign diff`
    pools them), is left out, with its one-line reason added to `notices`."""
    run_sets = run_sets or {}
    notices = notices if notices is not None else []
    specs = current_specs(con)
    listed: list[Comparison] = []
    for pair in check_pairs(pairs):
        sides = [resolve_side(t, con=con, run_sets=run_sets, specs=specs) for t in (pair["base"], pair["head"])]
        empty = [t for t, side in zip((pair["base"], pair["head"]), sides) if side is None]
        if empty:
            said = " and ".join(repr(t) for t in empty)
            notices.append(f"compare: {said} {'select' if len(empty) > 1 else 'selects'} no run in this "
                           f"campaign; left out ({pair['title']!r})")
            continue
        listed.append(Comparison(pair["title"], pair["base"], pair["head"], (sides[0], sides[1]),
                                 tolerance_pct=pair["tolerance_pct"], listed=True))
    out = list(listed)
    by_runs = {c.runs: c for c in listed}
    for c in found_pairs(con, arms):
        same = by_runs.get(c.runs)
        if same is None:
            by_runs[c.runs] = c
            out.append(c)
        elif same.found is None:
            same.found, same.about = c.found, c.about
    kept, anchors = [], set()
    for c in out:
        repeats = repeated_points(c)
        if repeats:
            notices.append(f"compare: {c.title!r}: {repeats} of its points ran more than once "
                           "(repeats); left out, compare them with `campaign diff`, which pools the repeats")
            continue
        anchor = base = slug(c.title)
        n = 1
        while anchor in anchors:
            n += 1
            anchor = f"{base}-{n}"
        anchors.add(anchor)
        c.anchor = anchor
        kept.append(c)
    return kept


def draw(comparisons: list[Comparison], *, con: duckdb.DuckDBPyConnection,
         diff_settings: dict[str, Any] | None = None) -> list[Comparison]:
    """Each comparison compared point by point (diff.compare). `diff_settings`: params.yaml's
    `diff:` block (confidence, resamples, seed, minimum samples)."""
    try:
        stats = diff_stats.Settings.from_params(diff_settings)
    except (TypeError, ValueError) as exc:
        raise CampaignError(f"params.yaml diff: {exc}") from None
    spec_of = dict(con.execute("select run_id, spec from runs").fetchall())
    for c in comparisons:
        c.result = diff.compare(*c.sides, tolerance_pct=c.tolerance_pct, stats=stats)
        c.workloads = list(dict.fromkeys(r["workload"] for r in c.result.points))
        c.specs = spec_of
    return comparisons


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
