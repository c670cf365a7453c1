"""Audit pages: one page per run (a node, or a kind of fact that spans runs), with an entry per
fact printed from it at the fact's own anchor: value, query, raw line or why none holds it, the
inputs of a derived fact, and where it is printed. The run's cmd.sh is shown once at the top of
its page, each query once at the bottom, so a page grows with its facts, not with their SQL.
"""
from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

from stages.render.escape import audit_target, code, escape_text
from stages.render.evidence import render_evidence
from stages.render.facts import Fact
from stages.render.numbers import format_value, with_unit
from stages.render.queries import fact_query_path


def _printed_on(fact: Fact, titles: dict[str, str]) -> str:
    return ", ".join(f"[{escape_text(titles.get(p, p))}](../{p})" for p in fact.pages) or "-"


def fact_entry(fact: Fact, titles: dict[str, str], by_id: dict[str, Fact]) -> list[str]:
    """One fact's entry: a heading at its anchor, its table, its raw line."""
    unit = escape_text(with_unit(fact.display, fact.unit)[len(fact.display):])
    params = ", ".join(f"{code(k)} = {code(v)}" for k, v in fact.params.items()) or "none"
    runs = ", ".join(code(r) for r in fact.run_ids) or "-"
    source = (f"{code(fact.source_file)}, line {fact.source_line}" if fact.source_file
              else escape_text(fact.source_note) if fact.source_note
              else "computed over the runs listed (no single raw line)")
    if fact.inputs:
        links = [f"[{escape_text(i)}]({audit_target('', by_id[i].audit_page, by_id[i].audit_anchor)})"
                 if i in by_id else code(i) for i in fact.inputs]
        query = f"| Derived | the {escape_text(fact.name)} of " + " and ".join(links) + " |"
    else:
        query = (f"| Query | [`{fact_query_path(fact.name)}`](#query-{fact.name}) "
                 "(below, with the parameters here) |")
    lines = [
        f"## {code(fact.name)} = {escape_text(fact.display)}{unit} {{#{fact.audit_anchor}}}", "",
        "| | |", "| --- | --- |",
        f"| Stored value | {code(json.dumps(fact.value, default=str))} |",
        f"| Fact id | {code(fact.id)} |",
        query,
        f"| Parameters | {params} |",
        f"| Runs | {runs} |",
        f"| Raw source | {source} |",
        f"| Printed on | {_printed_on(fact, titles)} |",
        "",
    ]
    if fact.source_file:
        shell = f"sed -n '{fact.source_line}p' {fact.source_file}"
        lines += [f'<pre class="evidence"><code><span class="evidence-cmd">$ {escape_text(shell)}</span>\n'
                  f"{escape_text(fact.excerpt or '')}</code></pre>", ""]
    if fact.inputs:
        lines += ["```sql", fact.sql.rstrip(), "```", ""]
    if fact.statistic:
        lines += inputs_table(fact)
    lines += [f"Check it yourself: `campaign trace {fact.id}`", ""]
    return lines


STATISTIC_WORDS = {"median": "the median of the values used", "p90": "the p90 of the values used",
                   "per_second": "one second over the median of the values used (milliseconds)",
                   "count": "how many were used"}


def inputs_table(fact: Fact) -> list[str]:
    """The rows a fact computed from many rows rests on: each one's file, where in it the value
    is, the value, and whether it was used or why it was left out."""
    used = sum(1 for r in fact.input_rows if r["used"])
    lines = [f"Computed from {used:,} of these {len(fact.input_rows):,} inputs: "
             f"{STATISTIC_WORDS[fact.statistic]}.", "",
             "| File | Where | Value | Used |", "| --- | --- | ---: | --- |"]
    for row in fact.input_rows:
        verdict = "yes" if row["used"] else f"no: {escape_text(row['reason'] or 'left out')}"
        lines.append(f"| {code(row['file'])} | {code(row['path'])} | "
                     f"{escape_text(format_value(row['value']))} | {verdict} |")
    return lines + [""]


def audit_page(page: str, facts: list[Fact], *, runs_dir: Path, root: Path,
               titles: dict[str, str], by_id: dict[str, Fact]) -> str:
    """The audit page `page`: the facts audited there, in the order of their ids."""
    facts = sorted(facts, key=lambda f: f.id)
    runs = sorted({r for f in facts for r in f.run_ids})
    stages = sorted({f.stage for f in facts})
    sha = next((f.git_sha for f in facts if f.git_sha), None)
    lines = ["---", f"title: {json.dumps('Audit: ' + page)}", "---", "",
             f"# Audit: {code(page)}", "",
             f"Every number the series prints from {code(page)}, each at its own anchor: its value, "
             "the query that computed it, the raw line it rests on (or why no single line holds "
             f"it). The tables were computed by the `{'`, `'.join(stages)}` stage (re-run with "
             f"`dvc repro {stages[0]}`) and printed by `render` from git commit "
             f"`{sha or 'none (uncommitted tree)'}`.", ""]
    if len(runs) == 1 and runs[0] == page:
        lines += ["The command that started the engine:", "",
                  render_evidence("cat", page, "cmd.sh", runs_dir=runs_dir, root=root), ""]
    for fact in facts:
        lines += fact_entry(fact, titles, by_id)
    queries = {f.name: f.sql for f in facts if not f.inputs}
    if queries:
        lines += ["## The queries {#queries}", "",
                  "Each evaluated against `campaign.duckdb` with the parameters of the entry above.", ""]
        for name in sorted(queries):
            lines += [f"### {code(name)} {{#query-{name}}}", "", f"`{fact_query_path(name)}`", "",
                      "```sql", queries[name].rstrip(), "```", ""]
    return "\n".join(lines)


def audit_pages(facts: list[Fact], *, runs_dir: Path, root: Path,
                titles: dict[str, str]) -> dict[str, str]:
    """Every audit page's Markdown, by page name."""
    grouped: dict[str, list[Fact]] = defaultdict(list)
    for fact in facts:
        grouped[fact.audit_page].append(fact)
    by_id = {f.id: f for f in facts}
    return {page: audit_page(page, group, runs_dir=runs_dir, root=root, titles=titles, by_id=by_id)
            for page, group in sorted(grouped.items())}


def audit_index(facts: list[Fact], titles: dict[str, str]) -> str:
    """The audit trail's index: one row per audit page, with how many facts it holds and where
    they are printed."""
    grouped: dict[str, list[Fact]] = defaultdict(list)
    for fact in facts:
        grouped[fact.audit_page].append(fact)
    lines = ["---", "title: Audit trail", "---", "", "# Audit trail", "",
             "Every number printed in the series, with the query and raw line behind it: one page "
             "per run (or node, or kind of figure that spans runs), an entry per number.", "",
             "| Audit page | Numbers | Printed on |", "| --- | ---: | --- |"]
    for page, group in sorted(grouped.items()):
        shown = sorted({p for f in group for p in f.pages})
        used = ", ".join(f"[{escape_text(titles.get(p, p))}](../{p})" for p in shown) or "-"
        lines.append(f"| [{escape_text(page)}]({page}.md) | {len(group):,} | {used} |")
    return "\n".join(lines) + "\n"
