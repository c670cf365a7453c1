"""The Compare page's comparisons: which pairs of run sets it sets side by side, each compared as
`campaign diff` compares them (stages/render/compare_page.py prints them).

The page finds its comparisons in the campaign's runs (stages/render/sql/diff/found_pairs.sql):
one setup measured under two engine images, and a setup and the one that took its place, named a
follow-up in params.yaml `arms` or found as the next launch of a model whose launch never became
ready. params.yaml `compare:` adds pairs, each `{base: X, head: Y, title: ...}` (optionally
`tolerance_pct`), and titles a found one whose runs it selects. A side is a run set, a spec, a run
or an image (or bare tag), resolved by `stages.render.diff.resolve` against the current campaign
database; git revisions are left to `campaign diff`, because the page's numbers must be facts of the
current tables. A configured pair that selects no run of this campaign (or whose points ran more
than once) is left out with a one-line notice to the author, never text for readers.

`plan` finds and checks the pairs, `draw` compares each with `stages.render.diff.compare`.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import duckdb

from stages.render import diff, diff_stats
from stages.render import run_sets as run_set_lib
from stages.core.config import CampaignError
from stages.render.diff_sides import Side, is_run, side_points

DEFAULT_TOLERANCE_PCT = 5.0
FOUND_KINDS = ("images", "follow-up", "rescue")   # how the runs hold a comparison (compare.md.j2)


@dataclass
class Comparison:
    title: str
    base: str                           # each side as `campaign diff` names it: a run set, spec,
    head: str                           # run or image
    sides: tuple[Side, Side]
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
                 specs: list[str]) -> Side | None:
    """A side from the current tables (a run set, a spec that has runs, a run or an image/tag), or
    None when it selects no run of this campaign (a git revision is `campaign diff`'s)."""
    if token not in run_sets and token not in specs and not is_run(con, token) \
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
        sides = (Side(base, [base], "current", con), Side(head, [head], "current", con))
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
    return sum(diff.repeated_points(side_points(side)) for side in c.sides)


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
