"""Audit pages: one page per run (a node, or a kind of fact that spans runs), with an entry per
fact printed from it at the fact's own anchor: value, query, raw line or why none holds it, the
inputs of a derived fact, its caveat marks and why (stages/render/marks.py), and where it is
printed. The run's cmd.sh is shown once at the top of its page, each query once at the bottom, so
a page grows with its facts, not with their SQL.

The pages are written as finished HTML (audit_page.html.j2, in the theme's stylesheets), not as
Markdown for mkdocs to convert: a node campaign audits tens of thousands of numbers, and putting
their entries through Markdown would cost more than the rest of the render. mkdocs copies them
into the site as they are; they are reached from the numbers that link to them and from the index.
"""
from __future__ import annotations

import functools
import html
import json
from collections import Counter, defaultdict
from pathlib import Path

import jinja2
from markupsafe import Markup

from stages.render import blog
from stages.render.escape import audit_target, escape_html, html_code
from stages.render.evidence import render_evidence
from stages.render.fact_record import Fact
from stages.render.marks import audit_lines
from stages.render.numbers import format_value, with_unit
from stages.render.queries import fact_query_path

PAGE_TEMPLATE = Path(__file__).parent / "audit_page.html.j2"
QUERIES_PAGE = "queries.html"   # beside the audit pages: every query the entries name, once
STATISTIC_WORDS = {"median": "the median of the values used", "p90": "the p90 of the values used",
                   "p99": "the p99 of the values used",
                   "share_pct": "the percent of the values used that are 1 (met), not 0",
                   "per_second": "one second over the median of the values used (milliseconds)",
                   "count": "how many were used", "mean": "the mean of the values used",
                   "sum": "the sum of the values used"}


def theme_stylesheets() -> list[str]:
    """The material theme's own stylesheets (their names carry a content hash), as the built
    site holds them under assets/stylesheets/; none when the theme is not installed."""
    try:
        import material
    except ImportError:
        return []
    folder = Path(material.__file__).parent / "templates" / "assets" / "stylesheets"
    return [f"assets/stylesheets/{p.name}" for kind in ("main", "palette")
            for p in sorted(folder.glob(f"{kind}.*.min.css"))]


def _page_link(page: str, titles: dict[str, str]) -> str:
    """A link from an audit page to the site page `page` (a docs path) where it is published."""
    return f'<a href="../{html.escape(blog.published_url(page))}">{escape_html(titles.get(page, page))}</a>'


def _printed_on(fact: Fact, titles: dict[str, str]) -> str:
    return ", ".join(_page_link(p, titles) for p in fact.pages) or "-"


def _sql_block(sql: str) -> str:
    return f'<pre><code class="language-sql">{html.escape(sql.rstrip())}</code></pre>'


def _row(label: str, cell: str) -> str:
    return f"<tr><th>{label}</th><td>{cell}</td></tr>"


class Said:
    """What an audit page has shown already, by content, and the entry that showed it: a raw line
    or a list of inputs that several entries rest on is shown once, the others link to it."""

    def __init__(self, page: str | None = None, pages: tuple[str, ...] | None = None):
        self.page = page
        self.pages = pages     # the pages most entries are printed on, said once at the top
        self.lines: dict[tuple, tuple[str, str]] = {}
        self.inputs: dict[tuple, tuple[str, str]] = {}
        self.notes: dict[tuple, tuple[str, str]] = {}

    @staticmethod
    def first(seen: dict, key: tuple, fact: Fact) -> tuple[str, str] | None:
        if key in seen:
            return seen[key]
        seen[key] = (fact.audit_anchor, fact.name)
        return None


def _shown_at(where: tuple[str, str]) -> str:
    return f'<a href="#{where[0]}">{html_code(where[1])}</a>'


def fact_entry(fact: Fact, titles: dict[str, str], by_id: dict[str, Fact],
               said: Said | None = None) -> list[str]:
    """One fact's entry: a heading at its anchor, its table, its raw line (HTML). With `said`, a
    raw line or an input list the page has shown already links to where it was shown, and the
    runs are not listed when they are the page's own run and the raw line (in its folder) names it."""
    said = said or Said()
    unit = escape_html(with_unit(fact.display, fact.unit)[len(fact.display):])
    params = ", ".join(f"{html_code(k)} = " + ("this page's run" if v == said.page and k == "run_id" else html_code(v))
                       for k, v in fact.params.items())
    note = ""
    if fact.source_note:
        where = said.first(said.notes, (fact.source_note,), fact)
        note = escape_html(fact.source_note) if where is None else f"As the note at {_shown_at(where)} says."
    source = (f"{html_code(fact.source_file)}, line {fact.source_line}" + (f". {note}" if note else "")
              if fact.source_file else note or "computed over the runs listed (no single raw line)")
    if fact.inputs:
        links = [f'<a href="{html.escape(audit_target("", by_id[i].audit_page, by_id[i].audit_anchor))}">'
                 f"{escape_html(i)}</a>" if i in by_id else html_code(i) for i in fact.inputs]
        query = _row("Derived", f"the {escape_html(fact.name)} of " + " and ".join(links)
                     + (f", with {params}" if params else ""))
    else:   # the query, evaluated with the fact's parameters
        query = _row("Query", f'<a href="{QUERIES_PAGE}#query-{fact.name}">{html_code(fact.name)}</a>'
                     + (f" with {params}" if params else " (no parameters)"))
    lines = [
        f'<section class="audit-entry" id="{fact.audit_anchor}">',
        f'<h2>{html_code(fact.name)} = {escape_html(fact.display)}{unit} '
        f'<a class="headerlink" href="#{fact.audit_anchor}" title="Permanent link">¶</a></h2>',
        "<table>",
        _row("Stored value", html_code(json.dumps(fact.value, default=str))),
        _row("Fact id", html_code(fact.id)),
        query,
        *([] if fact.run_ids == [said.page] and fact.source_file
          else [_row("Runs", ", ".join(html_code(r) for r in fact.run_ids) or "-")]),
        _row("Raw source", source),
        *([] if said.pages is not None and tuple(fact.pages) == said.pages
          else [_row("Printed on", _printed_on(fact, titles))]),
        "</table>",
        *audit_lines(fact, by_id),     # its caveat marks, each with why
    ]
    if fact.source_file:
        where = said.first(said.lines, (fact.source_file, fact.source_line), fact)
        if where is None:
            shell = f"sed -n '{fact.source_line}p' {fact.source_file}"
            lines.append(f'<pre class="evidence"><code><span class="evidence-cmd">$ {escape_html(shell)}</span>\n'
                         f"{escape_html(fact.excerpt or '')}</code></pre>")
        else:
            lines.append(f"<p>The line is shown at {_shown_at(where)}.</p>")
    if fact.inputs:
        lines.append(_sql_block(fact.sql))
    if fact.statistic:
        lines += inputs_table(fact, said)
    if said.page is None:
        lines.append(f"<p>Check it yourself: <code>campaign trace {escape_html(fact.id)}</code></p>")
    lines.append("</section>")
    return lines


def inputs_table(fact: Fact, said: Said | None = None) -> list[str]:
    """The rows a fact computed from many rows rests on: where in its file each value is, the
    value, and whether it was used or why it was left out; the file once above the table when
    they share one. A list the page has shown already (another statistic of the same requests)
    links to it."""
    used = sum(1 for r in fact.input_rows if r["used"])
    said = said or Said()
    key = tuple((r["file"], r["path"], r["value"], r["used"], r["reason"]) for r in fact.input_rows)
    where = said.first(said.inputs, key, fact)
    if where is not None:
        return [f"<p>Computed from {used:,} of the {len(fact.input_rows):,} inputs listed at "
                f"{_shown_at(where)}: {STATISTIC_WORDS[fact.statistic]}.</p>"]
    files = {r["file"] for r in fact.input_rows}
    one = files.pop() if len(files) == 1 else None
    lines = [f"<p>Computed from {used:,} of these {len(fact.input_rows):,} inputs: "
             f"{STATISTIC_WORDS[fact.statistic]}.</p>"]
    if one is not None:
        lines.append(f"<p>Each from {html_code(one)}:</p>")
    lines.append('<table class="audit-inputs"><thead><tr>' + ("" if one is not None else "<th>File</th>")
                 + "<th>Where</th><th>Value</th><th>Used</th></tr></thead><tbody>")
    for row in fact.input_rows:
        verdict = "yes" if row["used"] else f"no: {escape_html(row['reason'] or 'left out')}"
        lines.append("<tr>" + ("" if one is not None else f"<td>{html_code(row['file'])}</td>")
                     + f"<td>{html_code(row['path'])}</td>"
                     f"<td>{escape_html(format_value(row['value']))}</td><td>{verdict}</td></tr>")
    return lines + ["</tbody></table>"]


@functools.lru_cache(maxsize=1)
def _template() -> jinja2.Template:
    env = jinja2.Environment(autoescape=True, keep_trailing_newline=True)
    return env.from_string(PAGE_TEMPLATE.read_text())


def _document(title: str, body: list[str]) -> str:
    return _template().render(title=title, stylesheets=theme_stylesheets(),
                           body=Markup("\n".join(body)))


def inferred_table(rows: list[dict]) -> list[str]:
    """A run without meta.json: each value read from its other files instead, how, and the line
    (run_inferred), so that a number resting on one (a throughput per GPU) can be checked."""
    lines = ["<p>The run has no <code>meta.json</code>. What it would have said was read from the "
             "run's other files, each value from the line named here:</p>",
             "<table>", "<tr><th>Value</th><th>Read as</th><th>How</th><th>Raw source</th></tr>"]
    for row in rows:
        lines.append(f"<tr><td>{html_code(row['field'])}</td><td>{html_code(row['value'])}</td>"
                     f"<td>{escape_html(row['how'])}</td>"
                     f"<td>{html_code(row['source_file'])}, line {int(row['source_line'])}</td></tr>")
    return lines + ["</table>"]


def audit_page(page: str, facts: list[Fact], *, runs_dir: Path, root: Path,
               titles: dict[str, str], by_id: dict[str, Fact],
               inferred: list[dict] | None = None) -> str:
    """The audit page `page` as HTML: the facts audited there, in the order of their ids (for a
    run's page, after its cmd.sh and, where it has no meta.json, the values read instead)."""
    facts = sorted(facts, key=lambda f: f.id)
    runs = sorted({r for f in facts for r in f.run_ids})
    stages = sorted({f.stage for f in facts})
    sha = next((f.git_sha for f in facts if f.git_sha), None)
    body = [f"<h1>Audit: {html_code(page)}</h1>",
            f"<p>Every number the series prints from {html_code(page)}, each at its own anchor: its value, "
            "the query that computed it, the raw line it rests on (or why no single line holds "
            f"it). The tables were computed by the <code>{'</code>, <code>'.join(stages)}</code> stage "
            f"(re-run with <code>dvc repro {stages[0]}</code>) and printed by <code>render</code> "
            f"from git commit <code>{escape_html(sha or 'none (uncommitted tree)')}</code>.</p>"]
    own_run = len(runs) == 1 and runs[0] == page
    if own_run:
        body += ["<p>Every entry here rests on this run alone. The command that started the engine:</p>",
                 render_evidence("cat", page, "cmd.sh", runs_dir=runs_dir, root=root)]
        if inferred:
            body += inferred_table(inferred)
    shared = Counter(tuple(f.pages) for f in facts).most_common(1)
    said = Said(page, shared[0][0] if shared and shared[0][1] > 1 and shared[0][0] else None)
    if said.pages is not None:
        body.append("<p>Printed on " + ", ".join(_page_link(p, titles) for p in said.pages)
                    + ": every entry below that does not say where it is printed.</p>")
    body.append(f'<p>Each entry\'s query is on <a href="{QUERIES_PAGE}">the queries page</a>, evaluated '
                "with the entry's parameters. Check an entry yourself: <code>campaign trace &lt;its fact id&gt;"
                "</code> prints the same chain from the raw files, <code>campaign trace --verify &lt;its fact "
                "id&gt;</code> recomputes it.</p>")
    for fact in facts:
        body += fact_entry(fact, titles, by_id, said)
    return _document(f"Audit: {page}", body)


def audit_queries(facts: list[Fact]) -> str:
    """The queries page: each query an audit entry names, once for the whole audit (its file and
    its SQL), at the anchor the entries link to."""
    queries = {f.name: f.sql for f in facts if not f.inputs}
    body = ["<h1>The queries</h1>",
            "<p>Each query behind the audit's entries, as its file holds it: evaluated against "
            "<code>campaign.duckdb</code> with the parameters an entry lists.</p>"]
    for name in sorted(queries):
        body += [f'<h2 id="query-{name}">{html_code(name)}</h2>',
                 f"<p><code>{html.escape(fact_query_path(name))}</code></p>", _sql_block(queries[name])]
    return _document("Audit: the queries", body)


def audit_groups(facts: list[Fact]) -> tuple[dict[str, list[Fact]], dict[str, Fact]]:
    """The facts by audit page (pages in name order), and every fact by id."""
    grouped: dict[str, list[Fact]] = defaultdict(list)
    for fact in facts:
        grouped[fact.audit_page].append(fact)
    return dict(sorted(grouped.items())), {f.id: f for f in facts}


def audit_pages(facts: list[Fact], *, runs_dir: Path, root: Path, titles: dict[str, str],
                inferred: dict[str, list[dict]] | None = None) -> dict[str, str]:
    """Every audit page's HTML, by page name; `inferred`: run_inferred's rows by run."""
    grouped, by_id = audit_groups(facts)
    inferred = inferred or {}
    return {page: audit_page(page, group, runs_dir=runs_dir, root=root, titles=titles, by_id=by_id,
                             inferred=inferred.get(page))
            for page, group in sorted(grouped.items())}


def audit_index(facts: list[Fact], titles: dict[str, str]) -> str:
    """The audit trail's index (HTML): one row per audit page, with how many facts it holds and
    where they are printed."""
    grouped: dict[str, list[Fact]] = defaultdict(list)
    for fact in facts:
        grouped[fact.audit_page].append(fact)
    body = ["<h1>Audit trail</h1>",
            "<p>Every number printed in the series, with the query and raw line behind it: one page "
            "per run (or node, or kind of figure that spans runs), an entry per number; the queries "
            f'behind them on <a href="{QUERIES_PAGE}">the queries page</a>.</p>',
            '<table><thead><tr><th>Audit page</th><th style="text-align:right">Numbers</th>'
            "<th>Printed on</th></tr></thead><tbody>"]
    for page, group in sorted(grouped.items()):
        shown = sorted({p for f in group for p in f.pages})
        used = ", ".join(_page_link(p, titles) for p in shown) or "-"
        href = html.escape(audit_target("", page, "").rstrip("#"))
        body.append(f'<tr><td><a href="{href}">{escape_html(page)}</a></td>'
                    f'<td style="text-align:right">{len(group):,}</td><td>{used}</td></tr>')
    return _document("Audit trail", body + ["</tbody></table>"])
