"""A page's macros: what its template calls to print facts, tables of facts, evidence blocks,
charts and run references. Each call's output is held behind a placeholder while the template
renders (so that check_digits, stages/render/digits.py, sees only what the template itself typed);
the placeholders are swapped for their output afterwards. The facts come from the FactBook
(stages/render/facts.py).
"""
from __future__ import annotations

import decimal
from pathlib import Path
from typing import Any

from markupsafe import Markup

from stages.render.errors import FactError
from stages.render.escape import (audit_target, code, escape_cell, escape_label, escape_text,
                                  run_anchor, run_label_link, setup_label_text,
                                  unlink_missing_runs)
from stages.render.digits import PLACEHOLDER
from stages.render.evidence import render_evidence
from stages.render.fact_record import Fact
from stages.render.marks import link_classes, link_title
from stages.render.quotes import render_quote
from stages.render.numbers import table_displays, with_unit
from stages.render.queries import sql_params, tables_in
from stages.render.facts import FactBook


def _token(n: int) -> str:
    letters = ""
    n += 1
    while n:
        n, r = divmod(n - 1, 26)
        letters = chr(65 + r) + letters
    return f"@@M{letters}@@"


def said_once(cells: list[list[str]]) -> tuple[list[tuple[int, str]], list[int]]:
    """A table's columns whose printed cell is the same in every row, to be said once above it
    rather than repeated down a column: (index, cell) of each such column with a value to say,
    and the indices of the columns the table keeps. Only a table of two rows or more gives any;
    a column blank in every row is left out without a word, and the table keeps one column at
    least. A fact column is one cell in every row only when it is one fact (its link's target is
    the fact's own), so every number keeps its audit entry and marks."""
    width = len(cells[0]) if cells else 0
    if len(cells) < 2:
        return [], list(range(width))
    same = [j for j in range(width) if all(row[j] == cells[0][j] for row in cells)]
    if len(same) == width:
        same = same[1:]
    common = [(j, cells[0][j]) for j in same if cells[0][j].strip()]
    return common, [j for j in range(width) if j not in same]


class PageMacros:
    """The macros one page's template may call; outputs are held behind placeholders."""

    def __init__(self, book: FactBook, *, page: str, runs_dir: Path, root: Path,
                 audit_prefix: str = "audit/", nodes_dir: Path | None = None):
        self.book = book
        self.page = page
        self.runs_dir = runs_dir
        self.nodes_dir = nodes_dir
        self.root = root
        self.audit_prefix = audit_prefix
        self.outputs: dict[str, str] = {}
        self.tables_used: list[str] = []
        self.anchors: set[str] = set()
        self.marks_used: set[str] = set()    # the caveat marks this page printed (its legend)

    # -- placeholder bookkeeping
    def hold(self, text: str) -> Markup:
        token = _token(len(self.outputs))
        self.outputs[token] = text
        return Markup(token)

    def substitute(self, text: str) -> str:
        text = PLACEHOLDER.sub(lambda m: self.outputs[m.group(0)], text)
        return unlink_missing_runs(text, self.anchors)

    def uses(self, sql: str) -> None:
        """Notes the public tables `sql` reads, for the page's list of tables."""
        for t in tables_in(sql):
            if t not in self.tables_used:
                self.tables_used.append(t)

    # -- facts
    def fact_markup(self, fact: Fact, show_unit: bool = False, display: str | None = None) -> str:
        """A fact as a link to its audit page; `display` prints it otherwise (a table's precision).
        A fact's caveat marks (stages/render/marks.py) are its link's classes and named in its
        title: `[12.3](audit/... "audit trail · provisional"){.fact .provisional}`."""
        shown = fact.display if display is None else display
        text = with_unit(shown, fact.unit) if show_unit else shown
        target = audit_target(self.audit_prefix, fact.audit_page, fact.audit_anchor)
        self.marks_used.update(fact.marks)
        return f'[{escape_text(text)}]({target} "{link_title(fact.marks)}"){{{link_classes(fact.marks)}}}'

    def fact(self, name: str, decimals: int | None = None, show_unit: bool = False,
             **params: Any) -> Markup:
        fact = self.book.evaluate(name, params, page=self.page, decimals=decimals)
        self.uses(fact.sql)
        return self.hold(self.fact_markup(fact, show_unit))

    def value(self, name: str, **params: Any) -> Any:
        """A fact's raw value, for template logic (if/for); printing it is caught by the check."""
        return self.book.evaluate(name, params, page=self.page).value

    # -- rows, run references, tables
    def rows(self, name: str, **params: Any) -> list[dict[str, Any]]:
        sql, data = self.book.rows(name, params)
        self.uses(sql)
        return data

    def run_ref(self, run_id: str, anchor: bool | str = False) -> Markup:
        """A run id as code. With anchor=True (a heading), it becomes the run's section, the
        target of the compact run labels in this page's tables; with anchor="inline" (a run named
        in a paragraph), an anchor just before it is."""
        shown = code(run_id)
        if not anchor:
            return self.hold(shown)
        slug = run_anchor(str(run_id))
        self.anchors.add(slug)
        if anchor == "inline":
            return self.hold(f'<a id="{slug}"></a>{shown}')
        return self.hold(f"{shown} {{#{slug}}}")

    def text(self, value: Any, max_chars: int | None = None) -> Markup:
        """Data text (an id, a label, an error message) printed escaped; numbers are refused."""
        if isinstance(value, (int, float, decimal.Decimal)) and not isinstance(value, bool):
            raise FactError(f"{self.page}: text() got the number {value!r}; use fact()")
        return self.hold(escape_cell("-" if value is None else value, max_chars))

    def table(self, name: str, columns: list, **params: Any) -> Markup:
        """A Markdown table from row query `name`. Column specs: [title, spec] or
        [title, spec, max_chars]; spec is a column name (text), "run:<col>" (a run id, shown
        as `<spec> · HH:MM` and linked to the run's section when the page has one), "setup:<col>"
        (a setup, shown as `model · layout · engine · tag`, the whole setup its tooltip),
        or "fact:<fact name>" (bound from the row's columns). A fact column prints its numbers at
        one precision (stages/render/numbers.py, table_displays). A text cell is shortened to fit
        its column, the whole text its tooltip (escape_label). A column whose cell is the same in
        every row is said once above the table instead (said_once): a fact there only when it is
        one fact, its link and marks as in the rows."""
        sql, data = self.book.rows(name, params)
        self.uses(sql)
        if not data:
            return self.hold("*No rows.*")
        specs = [tuple(c) for c in columns]
        for spec in specs:
            if spec[1].startswith("fact:"):
                self.book.prefetch(spec[1][5:], data)   # the column's facts at once
        cells = [[self._cell(row, c) for c in specs] for row in data]
        for j, spec in enumerate(specs):
            if spec[1].startswith("fact:"):
                column = [row[j] for row in cells]
                shown = table_displays((f.value, f.unit, f.display) for f in column)
                for row, fact, display in zip(cells, column, shown):
                    row[j] = self.fact_markup(fact, display=display)
        common, kept = said_once(cells)
        head = "| " + " | ".join(escape_text(specs[j][0]) for j in kept) + " |"
        align = "| " + " | ".join("---:" if specs[j][1].startswith("fact:") else "---"
                                  for j in kept) + " |"
        lines = [head, align] + ["| " + " | ".join(row[j] for j in kept) + " |" for row in cells]
        above = "; ".join(f"**{escape_text(specs[j][0])}** {cell}" for j, cell in common)
        return self.hold((f"The same in every row: {above}.\n\n" if above else "") + "\n".join(lines))

    def _cell(self, row: dict[str, Any], spec: tuple) -> str | Fact:
        """One cell: its text, or for a fact column the Fact (printed by table())."""
        title, key, *rest = spec
        if key.startswith("fact:"):
            name = key[5:]
            wanted = sql_params(self.book.fact_sql(name))
            missing = [p for p in wanted if p not in row]
            if missing:
                raise FactError(f"{self.page}: column {title!r}: rows lack {', '.join(missing)}")
            fact = self.book.evaluate(name, {p: row[p] for p in wanted}, page=self.page)
            self.uses(fact.sql)
            return fact
        if key.startswith("run:"):
            return run_label_link(str(row[key[4:]]), row.get("spec"))
        if key.startswith("setup:"):
            return setup_label_text(str(row[key[6:]]))
        if key not in row:
            raise FactError(f"{self.page}: column {title!r}: no column {key!r} in the rows")
        value = row[key]
        if isinstance(value, (int, float, decimal.Decimal)) and not isinstance(value, bool):
            raise FactError(f"{self.page}: column {title!r} is numeric; make it a fact:<name> column")
        if isinstance(value, bool):
            return "yes" if value else "no"
        if value is None:
            return "-"
        return escape_label(value, rest[0] if rest else None)

    # -- evidence
    def evidence(self, command: str, run_id: str, file: str, pattern: str | None = None,
                 lines: int | None = None, cut: int | None = None, line: int | None = None) -> Markup:
        return self.hold(render_evidence(command, run_id, file, runs_dir=self.runs_dir, root=self.root,
                                         pattern=pattern, lines=lines, cut=cut, line=line))

    def launch_quote(self, run_id: str) -> Markup:
        """The run's server.log quoted at the lines that tell how its launch went: a ready
        launch's weights, KV memory, pool, concurrency and kernels; a failed one's first error and
        the lines it depends on (site/quotes.yaml), per-rank copies folded (stages/render/quotes.py)."""
        sql, rows = self.book.rows("launch_quote_rows", {"run_id": run_id})
        self.uses(sql)
        row = rows[0] if rows else {}
        return self.hold(render_quote(run_id, row.get("status"), row.get("error_line"),
                                      runs_dir=self.runs_dir, root=self.root, engine=row.get("engine")))

    def node_evidence(self, command: str, node_id: str, file: str, pattern: str | None = None,
                      lines: int | None = None, cut: int | None = None) -> Markup:
        """An evidence block on a file of a node probe folder (nodes_dir/<node_id>/<file>)."""
        if self.nodes_dir is None:
            raise FactError(f"{self.page}: node_evidence needs the nodes folder (render nodes_dir)")
        return self.hold(render_evidence(command, node_id, file, runs_dir=self.nodes_dir,
                                         root=self.root, pattern=pattern, lines=lines, cut=cut))
