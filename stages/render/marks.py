"""Caveat marks: what a printed number cannot vouch for, said where it is printed.

A number resting on a provisional run, a capacity-limited point, a point the prefix cache served
or a statistic over one request carries a mark per caveat (Fact.marks, in facts.json): its link
names them in its title and classes (page_macros.fact_markup), the stylesheet draws each mark's
sign beside it, the page ends with a legend of the signs it used (`legend`), and its audit entry
says each mark and why (`audit_lines`). A ratio or difference carries the marks of its inputs.

Which facts may carry which marks is data, stages/render/sql/facts/marks.yaml (`MarkRules`); what
a fact rests on follows from its parameters, and the caveats of the points and runs come from
the public tables, queried once per render on first need (`FactMarks`; the queries are
stages/render/sql/render/fact_marks.sql and fact_mark_frontiers.sql).
"""
from __future__ import annotations

import fnmatch
import html
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Iterable

import yaml

from stages.render.declared import ChangeFact
from stages.render.declared_file import column_facts
from stages.render.errors import FactError
from stages.render.escape import audit_target, escape_html, escape_text
from stages.render.queries import COLUMN_FACTS, FACTS_SQL, ROWS_SQL

MARKS_FILE = FACTS_SQL / "marks.yaml"
POINTS_QUERY = ROWS_SQL / "fact_marks.sql"
FRONTIERS_QUERY = ROWS_SQL / "fact_mark_frontiers.sql"
MARK_KEYS = ("class", "sign", "says", "why", "rests")
LEGEND_TITLE = "Marks beside the numbers"
CHANGE_PARAMS = ("base_run_id", "head_run_id")


@dataclass(frozen=True)
class Mark:
    name: str          # as facts.json and the link's title say it: "one request"
    css: str           # its class on the link: "one-request"
    sign: str          # the glyph the stylesheet draws beside the number
    says: str          # the legend's line
    why: str           # the audit entry's line for a fact resting on a point or run so marked
    rests: str         # the audit entry's words for a derived fact one of whose inputs carries it


@dataclass(frozen=True)
class Family:
    name: str
    marks: tuple[str, ...]
    facts: frozenset[str]
    patterns: tuple[str, ...] = ()
    frontier: dict[str, str] = field(default_factory=dict)   # fact -> role (fact_mark_frontiers)

    def holds(self, fact_name: str) -> bool:
        return fact_name in self.facts or any(fnmatch.fnmatchcase(fact_name, p) for p in self.patterns)


@dataclass(frozen=True, eq=False)      # hashed by identity: _family's cache keys on it
class MarkRules:
    marks: dict[str, Mark]            # in the order they are printed
    families: tuple[Family, ...]

    def family(self, fact_name: str) -> Family | None:
        """The family a fact is in: the one that lists it, else the first whose patterns match."""
        return _family(self, fact_name)

    def ordered(self, names: Iterable[str]) -> list[str]:
        """Mark names in the order they are printed (unknown names are an error)."""
        names = set(names)
        unknown = names - set(self.marks)
        if unknown:
            raise FactError(f"unknown mark(s) {', '.join(sorted(unknown))} (known: {', '.join(self.marks)})")
        return [m for m in self.marks if m in names]


@lru_cache(maxsize=4096)
def _family(rules: MarkRules, fact_name: str) -> Family | None:
    listed = [f for f in rules.families if fact_name in f.facts]
    if listed:
        return listed[0]
    return next((f for f in rules.families if f.holds(fact_name)), None)


def _text(entry: dict, key: str, where: str) -> str:
    value = entry.get(key)
    if not isinstance(value, str) or not value.strip():
        raise FactError(f"{where}: `{key}` must be text")
    return value


@lru_cache(maxsize=4)
def load_rules(path: Path = MARKS_FILE) -> MarkRules:
    """The marks and the families of facts that may carry them, checked: a family names only
    known marks, a fact is listed by one family at most, a class is one word."""
    try:
        doc = yaml.safe_load(Path(path).read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise FactError(f"{Path(path).name}: cannot read it: {exc}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("marks"), dict) \
            or not isinstance(doc.get("families"), list):
        raise FactError(f"{Path(path).name}: needs `marks` (a mapping) and `families` (a list)")
    marks = {}
    for name, entry in doc["marks"].items():
        where = f"{Path(path).name}: mark {name!r}"
        if not isinstance(entry, dict) or set(entry) != set(MARK_KEYS):
            raise FactError(f"{where}: needs exactly {', '.join(MARK_KEYS)}")
        css = _text(entry, "class", where)
        if not css.replace("-", "").isalnum() or not css[0].isalpha():
            raise FactError(f"{where}: class {css!r} must be letters, digits and '-' (attr_list)")
        marks[str(name)] = Mark(str(name), css, _text(entry, "sign", where), _text(entry, "says", where),
                                _text(entry, "why", where), _text(entry, "rests", where))
    families, listed = [], {}
    for i, entry in enumerate(doc["families"], start=1):
        where = f"{Path(path).name}: family {i}"
        if not isinstance(entry, dict) or not isinstance(entry.get("family"), str):
            raise FactError(f"{where}: needs `family` (its name)")
        unknown_keys = set(entry) - {"family", "marks", "facts", "patterns", "frontier"}
        if unknown_keys:
            raise FactError(f"{where}: unknown key(s) {', '.join(sorted(unknown_keys))}")
        its_marks = entry.get("marks")
        if not isinstance(its_marks, list) or any(m not in marks for m in its_marks):
            raise FactError(f"{where}: `marks` must list marks of {', '.join(marks)}")
        frontier = {str(k): str(v) for k, v in (entry.get("frontier") or {}).items()}
        facts = [str(f) for f in entry.get("facts") or []] + list(frontier)
        for fact in facts:
            if fact in listed:
                raise FactError(f"{where}: fact {fact!r} is listed by family {listed[fact]} too")
            listed[fact] = i
        families.append(Family(entry["family"], tuple(its_marks), frozenset(facts),
                               tuple(str(p) for p in entry.get("patterns") or ()), frontier))
    return MarkRules(marks, tuple(families))


def _key(*values: Any) -> tuple[str, ...]:
    return tuple(str(v) for v in values)


class FactMarks:
    """The marks of the facts one render makes: the caveats of every point and run, read from the
    public tables once (on the first fact that may carry a mark), by the rules of marks.yaml."""

    def __init__(self, query: Callable[[str], tuple[list[str], list[tuple]]], *,
                 facts_sql: Path = FACTS_SQL, rules: MarkRules | None = None):
        self.query = query        # runs a query without parameters: (columns, rows)
        self.facts_sql = facts_sql
        own = facts_sql / MARKS_FILE.name
        self.rules = rules or load_rules(own if own.is_file() else MARKS_FILE)
        self._points: dict[tuple, frozenset[str]] | None = None     # (run, point_id)
        self._levels: dict[tuple, frozenset[str]] = {}               # (run, workload, concurrency)
        self._runs: dict[tuple, frozenset[str]] = {}                 # (run,)
        self._frontiers: dict[tuple, list[tuple]] | None = None      # (setup, workload, role)

    # -- the public tables, once
    def _load_points(self) -> None:
        if self._points is not None:
            return
        columns, rows = self.query(POINTS_QUERY.read_text())
        flags = [(_column(mark), mark) for mark in self.rules.marks.values()]
        lacking = [c for c, _ in flags if c not in columns]
        if lacking:
            raise FactError(f"fact marks: {POINTS_QUERY.name} lacks column(s) {', '.join(lacking)}")
        points: dict[tuple, frozenset[str]] = {}
        levels: dict[tuple, set[str]] = {}
        for row in rows:
            r = dict(zip(columns, row))
            marked = frozenset(mark.name for column, mark in flags if r[column])
            if r["point_id"] is None:
                self._runs[_key(r["run_id"])] = marked
                continue
            points[_key(r["run_id"], r["point_id"])] = marked
            levels.setdefault(_key(r["run_id"], r["workload"], r["concurrency"]), set()).update(marked)
        self._levels = {k: frozenset(v) for k, v in levels.items()}
        self._points = points

    def _frontier_points(self, setup: Any, workload: Any, role: str) -> list[tuple]:
        if self._frontiers is None:
            columns, rows = self.query(FRONTIERS_QUERY.read_text())
            found: dict[tuple, list[tuple]] = {}
            for row in rows:
                r = dict(zip(columns, row))
                found.setdefault(_key(r["setup"], r["workload"], r["role"]), []).append(
                    _key(r["run_id"], r["point_id"]))
            self._frontiers = found
        return self._frontiers.get(_key(setup, workload, role), [])

    # -- a fact's marks
    def of(self, name: str, params: dict[str, Any]) -> list[str]:
        """The marks of fact `name` with `params`, in their printed order."""
        family = self.rules.family(name)
        if family is None or not family.marks:
            return []
        found = self._resting(name, family, params)
        return self.rules.ordered(found & set(family.marks))

    def _resting(self, name: str, family: Family, params: dict[str, Any]) -> set[str]:
        """The marks of what the fact rests on, before its family's choice."""
        if name in family.frontier:
            self._load_points()
            return {m for point in self._frontier_points(params.get("setup"), params.get("workload"),
                                                         family.frontier[name])
                    for m in self._points.get(point, ())}
        if all(p in params for p in CHANGE_PARAMS):
            return self._change(name, params)
        run = params.get("run_id")
        if run is None:
            return set()
        self._load_points()
        if "point_id" in params:
            return set(self._points.get(_key(run, params["point_id"]), ()))
        if "concurrency" in params:
            return set(self._levels.get(_key(run, params.get("workload"), params["concurrency"]), ()))
        return set(self._runs.get(_key(run), ()))

    def _change(self, name: str, params: dict[str, Any]) -> set[str]:
        """A change between two runs rests on the values it compares: its item's fact in each."""
        declared = column_facts(self.facts_sql / COLUMN_FACTS).get(name)
        if not isinstance(declared, ChangeFact):
            return set()
        item = dict(declared.items).get(params.get(declared.by))
        if item is None:
            return set()
        rest = {k: v for k, v in params.items() if k not in (*CHANGE_PARAMS, declared.by)}
        return {m for side in CHANGE_PARAMS for m in self.of(item.name, {**rest, "run_id": params[side]})}

    def union(self, facts: Iterable[Any]) -> list[str]:
        """The marks a fact derived from `facts` carries: all of theirs."""
        return self.rules.ordered({m for f in facts for m in f.marks})


def _column(mark: Mark) -> str:
    """The column of fact_marks.sql that holds a mark: its class with underscores."""
    return mark.css.replace("-", "_")


# ---------------------------------------------------------------- how a page and an audit say them

def link_title(marks: list[str]) -> str:
    """The title of a fact's link: 'audit trail', and its marks after a middle dot."""
    return "audit trail" + (" · " + ", ".join(marks) if marks else "")


def link_classes(marks: list[str], rules: MarkRules | None = None) -> str:
    """The attr_list classes of a fact's link: .fact and one per mark."""
    rules = rules or load_rules()
    return " ".join([".fact", *(f".{rules.marks[m].css}" for m in marks)])


def legend(used: Iterable[str], rules: MarkRules | None = None) -> str:
    """The page's legend of the marks it printed (Markdown), or nothing when it printed none."""
    rules = rules or load_rules()
    names = rules.ordered(used)
    if not names:
        return ""
    lines = [f'- <span class="fact-mark {rules.marks[m].css}">{escape_text(rules.marks[m].sign)}</span> '
             f"{escape_text(rules.marks[m].says)}" for m in names]
    return (f"\n## {LEGEND_TITLE}\n\nA sign beside a number says what it rests on that the number "
            "alone does not show; its audit entry says why.\n\n" + "\n".join(lines) + "\n")


def audit_lines(fact: Any, by_id: dict[str, Any], rules: MarkRules | None = None) -> list[str]:
    """The audit entry's lines on a marked fact (HTML), one per mark: why it carries it. A
    derived fact names the inputs that carry it."""
    if not fact.marks:
        return []
    rules = rules or load_rules()
    lines = []
    for name in fact.marks:
        mark = rules.marks[name]
        if fact.inputs:
            carriers = [by_id[i] for i in fact.inputs if i in by_id and name in by_id[i].marks]
            links = ", ".join(
                f'<a href="{html.escape(audit_target("", f.audit_page, f.audit_anchor))}">{escape_html(f.id)}</a>'
                for f in carriers) or "-"
            said = f"{escape_html(mark.rests)}: {links}"
        else:
            said = escape_html(mark.why)
        lines.append(f'<p class="audit-mark {mark.css}"><strong>{escape_html(name)}</strong> '
                     f'<span class="fact-mark {mark.css}">{escape_html(mark.sign)}</span>: {said}.</p>')
    return lines
