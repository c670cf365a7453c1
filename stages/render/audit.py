"""Audit pages: one page per fact printed (value, query, raw line, runs) and their index."""
from __future__ import annotations

import json
from pathlib import Path

from stages.render.escape import audit_target, code, escape_text
from stages.render.evidence import render_evidence
from stages.render.facts import Fact
from stages.render.numbers import with_unit
from stages.render.queries import fact_query_path


def audit_page(fact: Fact, *, runs_dir: Path, root: Path, titles: dict[str, str]) -> str:
    unit = escape_text(with_unit(fact.display, fact.unit)[len(fact.display):])
    params = ", ".join(f"{code(k)} = {code(v)}" for k, v in fact.params.items()) or "none"
    runs = ", ".join(code(r) for r in fact.run_ids) or "-"
    used = ", ".join(f"[{escape_text(titles.get(p, p))}](../{p})" for p in fact.pages) or "-"
    source = (f"{code(fact.source_file)}, line {fact.source_line}" if fact.source_file
              else escape_text(fact.source_note) if fact.source_note
              else "computed over the runs listed (no single raw line)")
    lines = [
        "---", f"title: {json.dumps('Audit: ' + fact.id)}", "---", "",
        f"# Audit: {code(fact.name)}", "",
        "| | |", "| --- | --- |",
        f"| Value | **{escape_text(fact.display)}**{unit} |",
        f"| Stored value | {code(json.dumps(fact.value, default=str))} |",
        f"| Fact id | {code(fact.id)} |",
        (f"| Derived | the {escape_text(fact.name)} of "
         + " and ".join(f"[{escape_text(i)}]({audit_target('', i)})" for i in fact.inputs) + " |"
         if fact.inputs else f"| Query | `{fact_query_path(fact.name)}` |"),
        f"| Parameters | {params} |",
        f"| Runs | {runs} |",
        f"| Raw source | {source} |",
        f"| Computed by stage | `{fact.stage}` (re-run with `dvc repro {fact.stage}`); printed by `render` |",
        f"| Git commit | `{fact.git_sha or 'none (uncommitted tree)'}` |",
        f"| Printed on | {used} |",
        "",
    ]
    if fact.source_file:
        shell = f"sed -n '{fact.source_line}p' {fact.source_file}"
        lines += ["## The raw line", "",
                  f'<pre class="evidence"><code><span class="evidence-cmd">$ {escape_text(shell)}</span>\n'
                  f"{escape_text(fact.excerpt or '')}</code></pre>", ""]
    lines += ["## The query", "", "Evaluated against `campaign.duckdb` with the parameters above:", "",
              "```sql", fact.sql.rstrip(), "```", ""]
    shown = fact.run_ids[:5]
    if shown:
        lines += ["## The command that started the engine", ""]
        for run_id in shown:
            lines += [render_evidence("cat", run_id, "cmd.sh", runs_dir=runs_dir, root=root), ""]
        if len(fact.run_ids) > len(shown):
            lines += [f"…and {len(fact.run_ids) - len(shown)} more runs.", ""]
    lines += ["## Check it yourself", "", "```console", f"$ campaign trace {fact.id}",
              f"$ dvc repro {fact.stage}", "```", ""]
    return "\n".join(lines)


def audit_index(facts: list[Fact], titles: dict[str, str]) -> str:
    lines = ["---", "title: Audit trail", "---", "", "# Audit trail", "",
             "Every number printed in the series, with the query and raw line behind it.", "",
             "| Fact | Value | Printed on |", "| --- | ---: | --- |"]
    for f in facts:
        used = ", ".join(f"[{escape_text(titles.get(p, p))}](../{p})" for p in f.pages)
        lines.append(f"| [{escape_text(f.id)}]({audit_target('', f.id)}) | {escape_text(f.display)} | {used} |")
    return "\n".join(lines) + "\n"
