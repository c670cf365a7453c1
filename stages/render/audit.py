"""Audit pages: one page per run (a node, or a kind of fact that spans runs), with an entry per
fact printed from it at the fact's own anchor: value, query, raw line or why none holds it, the
inputs of a derived fact, and where it is printed. The run's cmd.sh is shown once at the top of
its page, each query once at the bottom, so a page grows with its facts, not with their SQL.

The pages are written as finished HTML (audit_page.html.j2, in the theme's stylesheets), not as
Markdown for mkdocs to convert: a node campaign audits tens of thousands of numbers, and putting
their entries through Markdown would cost more than the rest of the render. mkdocs copies them
into the site as they are; they are reached from the numbers that link to them and from the index.
"""
from __future__ import annotations

import functools
import html
import json
from collections import defaultdict
from pathlib import Path

import jinja2
from markupsafe import Markup

from stages.render import blog
from stages.render.escape import audit_target, code, escape_text
from stages.render.evidence import render_evidence
from stages.render.facts import Fact
from stages.render.numbers import format_value, with_unit
from stages.render.queries import fact_query_path

PAGE_TEMPLATE = Path(__file__).parent / "audit_page.html.j2"
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
    return f'<a href="../{html.escape(blog.published_url(page))}">{escape_text(titles.get(page, page))}</a>'


def _printed_on(fact: Fact, titles: dict[str, str]) -> str:
    return ", ".join(_page_link(p, titles) for p in fact.pages) or "-"


def _sql_block(sql: str) -> str:
    return f'<pre><code class="language-sql">{html.escape(sql.rstrip())}</code></pre>'


def _row(label: str, cell: str) -> str:
    return f"<tr><th>{label}</th><td>{cell}</td></tr>"


def fact_entry(fact: Fact, titles: dict[str, str], by_id: dict[str, Fact]) -> list[str]:
    """One fact's entry: a heading at its anchor, its table, its raw line (HTML)."""
    unit = escape_text(with_unit(fact.display, fact.unit)[len(fact.display):])
    params = ", ".join(f"{code(k)} = {code(v)}" for k, v in fact.params.items()) or "none"
    runs = ", ".join(code(r) for r in fact.run_ids) or "-"
    source = (f"{code(fact.source_file)}, line {fact.source_line}"
              + (f". {escape_text(fact.source_note)}" if fact.source_note else "") if fact.source_file
              else escape_text(fact.source_note) if fact.source_note
              else "computed over the runs listed (no single raw line)")
    if fact.inputs:
        links = [f'<a href="{html.escape(audit_target("", by_id[i].audit_page, by_id[i].audit_anchor))}">'
                 f"{escape_text(i)}</a>" if i in by_id else code(i) for i in fact.inputs]
        query = _row("Derived", f"the {escape_text(fact.name)} of " + " and ".join(links))
    else:
        query = _row("Query", f'<a href="#query-{fact.name}"><code>{html.escape(fact_query_path(fact.name))}'
                              "</code></a> (below, with the parameters here)")
    lines = [
        f'<section class="audit-entry" id="{fact.audit_anchor}">',
        f'<h2>{code(fact.name)} = {escape_text(fact.display)}{unit} '
        f'<a class="headerlink" href="#{fact.audit_anchor}" title="Permanent link">¶</a></h2>',
        "<table>",
        _row("Stored value", code(json.dumps(fact.value, default=str))),
        _row("Fact id", code(fact.id)),
        query,
        _row("Parameters", params),
        _row("Runs", runs),
        _row("Raw source", source),
        _row("Printed on", _printed_on(fact, titles)),
        "</table>",
    ]
    if fact.source_file:
        shell = f"sed -n '{fact.source_line}p' {fact.source_file}"
        lines.append(f'<pre class="evidence"><code><span class="evidence-cmd">$ {escape_text(shell)}</span>\n'
                     f"{escape_text(fact.excerpt or '')}</code></pre>")
    if fact.inputs:
        lines.append(_sql_block(fact.sql))
    if fact.statistic:
        lines += inputs_table(fact)
    lines += [f"<p>Check it yourself: <code>campaign trace {escape_text(fact.id)}</code></p>", "</section>"]
    return lines


def inputs_table(fact: Fact) -> list[str]:
    """The rows a fact computed from many rows rests on: each one's file, where in it the value
    is, the value, and whether it was used or why it was left out."""
    used = sum(1 for r in fact.input_rows if r["used"])
    lines = [f"<p>Computed from {used:,} of these {len(fact.input_rows):,} inputs: "
             f"{STATISTIC_WORDS[fact.statistic]}.</p>",
             '<table class="audit-inputs"><thead><tr><th>File</th><th>Where</th>'
             '<th style="text-align:right">Value</th><th>Used</th></tr></thead><tbody>']
    for row in fact.input_rows:
        verdict = "yes" if row["used"] else f"no: {escape_text(row['reason'] or 'left out')}"
        lines.append(f"<tr><td>{code(row['file'])}</td><td>{code(row['path'])}</td>"
                     f'<td style="text-align:right">{escape_text(format_value(row["value"]))}</td>'
                     f"<td>{verdict}</td></tr>")
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
        lines.append(f"<tr><td>{code(row['field'])}</td><td>{code(row['value'])}</td>"
                     f"<td>{escape_text(row['how'])}</td>"
                     f"<td>{code(row['source_file'])}, line {int(row['source_line'])}</td></tr>")
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
    body = [f"<h1>Audit: {code(page)}</h1>",
            f"<p>Every number the series prints from {code(page)}, each at its own anchor: its value, "
            "the query that computed it, the raw line it rests on (or why no single line holds "
            f"it). The tables were computed by the <code>{'</code>, <code>'.join(stages)}</code> stage "
            f"(re-run with <code>dvc repro {stages[0]}</code>) and printed by <code>render</code> "
            f"from git commit <code>{escape_text(sha or 'none (uncommitted tree)')}</code>.</p>"]
    if len(runs) == 1 and runs[0] == page:
        body += ["<p>The command that started the engine:</p>",
                 render_evidence("cat", page, "cmd.sh", runs_dir=runs_dir, root=root)]
        if inferred:
            body += inferred_table(inferred)
    for fact in facts:
        body += fact_entry(fact, titles, by_id)
    queries = {f.name: f.sql for f in facts if not f.inputs}
    if queries:
        body += ['<h2 id="queries">The queries</h2>',
                 "<p>Each evaluated against <code>campaign.duckdb</code> with the parameters of the "
                 "entry above.</p>"]
        for name in sorted(queries):
            body += [f'<h3 id="query-{name}">{code(name)}</h3>',
                     f"<p><code>{html.escape(fact_query_path(name))}</code></p>", _sql_block(queries[name])]
    return _document(f"Audit: {page}", body)


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
            "per run (or node, or kind of figure that spans runs), an entry per number.</p>",
            '<table><thead><tr><th>Audit page</th><th style="text-align:right">Numbers</th>'
            "<th>Printed on</th></tr></thead><tbody>"]
    for page, group in sorted(grouped.items()):
        shown = sorted({p for f in group for p in f.pages})
        used = ", ".join(_page_link(p, titles) for p in shown) or "-"
        href = html.escape(audit_target("", page, "").rstrip("#"))
        body.append(f'<tr><td><a href="{href}">{escape_text(page)}</a></td>'
                    f'<td style="text-align:right">{len(group):,}</td><td>{used}</td></tr>')
    return _document("Audit trail", body + ["</tbody></table>"])
