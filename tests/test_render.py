"""The render stage: pages from templates and facts, audit pages, sources, and the built site."""
from __future__ import annotations

import html
import json
import re
import shutil
from collections import Counter
from pathlib import Path

import pytest

import duckdb

from helpers.fact_lines import holds, line_problems
from helpers.render_campaign import PROJECT, RUN4, RUN16, audit_entry, audit_ref, build_campaign, render_kwargs
from stages.render import chart_parts
from stages.render import stage as render
from stages.render.chart_writer import PNG_SCALE
from stages.render.site_build import external_loads
from stages.render.sources import SourceError
from stages.core.config import CampaignError
from stages.render.digits import FactCheckError


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    root = tmp_path_factory.mktemp("campaign")
    build_campaign(root)
    summary = render.run(**render_kwargs(root))
    return root, summary


def page(root: Path, name: str = "posts/part-local-cpu.md") -> str:
    return (root / "data" / "docs" / name).read_text()


def shown(text: str) -> str:
    """Markdown as the reader sees its text: character references decoded."""
    return html.unescape(text)


def copy_templates(tmp_path: Path) -> Path:
    site = tmp_path / "site"
    shutil.copytree(PROJECT / "site", site)
    return site


def test_article_prints_facts_that_link_to_audit_pages(rendered):
    root, summary = rendered
    text = page(root)
    # a Part is a blog post in docs/posts/: its links are relative to that folder
    link = f'[71.3](../{audit_ref(f"launch_ready_s--{RUN4}", RUN4)} "audit trail"){{.fact}}'
    assert link in text
    assert (root / "data" / "docs" / "audit" / f"{RUN4}.html").is_file()
    for target, anchor in set(re.findall(r"\]\(\.\./(audit/[^ )#]+\.html)#([^ )]+)", text)):
        assert f'id="{anchor}"' in (root / "data" / "docs" / target).read_text(), target
    assert summary["pages"] == ["index.md", "posts/part-local-cpu.md", "compare.md", "SOURCES.md",
                                "warehouse.md"]
    assert summary["facts"] == len(json.loads((root / "data" / "facts.json").read_text()))


def test_audit_page_shows_file_line_excerpt_sql_and_command(rendered):
    root, _ = rendered
    audit = shown(page(root, f"audit/{RUN16}.html"))
    entry = shown(audit_entry(root / "data" / "docs", f"launch_kv_tokens--{RUN16}", RUN16))
    log = root / "data" / "runs" / RUN16 / "server.log"
    line = next(i for i, l in enumerate(log.read_text().splitlines(), 1) if "CPU KV cache size" in l)
    assert f"<code>data/runs/{RUN16}/server.log</code>, line {line}" in entry
    # the raw line is shown once a page: here, or at the entry that showed it first, linked
    shown_at = re.search(r'The line is shown at <a href="#([^"]+)">', entry)
    holder = audit.split(f'id="{shown_at.group(1)}">', 1)[1].split("</section>", 1)[0] if shown_at else entry
    assert "CPU KV cache size: 8,192 tokens" in holder
    assert f"<code>data/runs/{RUN16}/server.log</code>, line {line}" in holder
    assert 'href="queries.html#query-launch_kv_tokens"' in entry and "<th>Runs</th>" not in entry   # its line names it
    queries = shown(page(root, "audit/queries.html"))   # each query once, for every audit page
    assert 'id="query-launch_kv_tokens"' in queries and "from launches" in queries and "$run_id" in queries
    assert "from launches" not in audit and queries.count('id="query-launch_kv_tokens"') == 1
    assert f"$ cat data/runs/{RUN16}/cmd.sh" in audit and "--max-num-seqs 16" in audit
    assert "dvc repro derive" in audit


def test_audit_page_says_once_where_most_entries_are_printed(rendered):
    root, _ = rendered
    audit = page(root, f"audit/{RUN16}.html")
    records = [r for r in json.loads((root / "data" / "facts.json").read_text()) if r["audit_page"] == RUN16]
    common, count = Counter(tuple(r["pages"]) for r in records).most_common(1)[0]
    entries = audit.split('<section class="audit-entry"')[1:]
    assert count > 1 and len(entries) == len(records)
    assert "<p>Printed on " in audit.split('<section class="audit-entry"', 1)[0]
    assert sum("<th>Printed on</th>" not in e for e in entries) == count    # the rest say where
    assert all(f'id="{r["audit_anchor"]}"' in audit for r in records)


def test_facts_file_records_provenance(rendered):
    root, _ = rendered
    records = {r["id"]: r for r in json.loads((root / "data" / "facts.json").read_text())}
    rec = records[f"launch_ready_s--{RUN4}"]
    assert rec["value"] == 71.3 and rec["run_ids"] == [RUN4]
    assert rec["source_file"] == f"data/runs/{RUN4}/launch.out" and rec["source_line"] == 2
    assert rec["excerpt"] == "ready_s=71.3" and rec["stage"] == "derive"
    assert rec["pages"] == ["posts/part-local-cpu.md"] and "git_sha" in rec


def test_every_fact_that_cites_a_raw_line_holds_its_value_there(rendered):
    root, _ = rendered
    checked, problems = line_problems(root / "data" / "facts.json", root / "data" / "runs")
    assert checked >= 40 and problems == []
    records = {r["id"]: r for r in json.loads((root / "data" / "facts.json").read_text())}
    assert records[f"launch_seq_cap--{RUN4}"]["excerpt"].count("--max-num-seqs 4 ") == 1
    assert records[f"launch_ready_s--{RUN16}"]["excerpt"] == "ready_s=68.9"


def test_a_line_holds_a_value_printed_with_separators_or_rounded_not_another():
    assert holds("CPU KV cache size: 1,048,576 tokens", 1048576)
    assert holds('{"ttft_s": 0.024381}', 0.0244) and holds("ready_s=71.3", 71.3)
    assert not holds("status=ready", 71.3)
    assert not holds('{"concurrency": "1"}', 1.1)      # a line less precise than the value
    assert not holds("--max-num-seqs 16", 1)


def test_a_default_sequence_cap_says_no_raw_line_holds_it(tmp_path):
    db = build_campaign(tmp_path)
    with duckdb.connect(str(db)) as con:
        con.execute("update launches set max_num_seqs = null, seq_cap_source_file = null, "
                    "seq_cap_source_line = null where run_id = $r", {"r": RUN4})
    render.run(**render_kwargs(tmp_path))
    docs = tmp_path / "data" / "docs"
    audit = shown(audit_entry(docs, f"launch_seq_cap--{RUN4}", RUN4))
    assert "No raw line holds it: the command gave no cap" in audit
    assert "evidence-cmd" not in audit and "launch.out" not in audit
    given = shown(audit_entry(docs, f"launch_seq_cap--{RUN16}", RUN16))
    assert f"<code>data/runs/{RUN16}/cmd.sh</code>, line 4" in given


def test_article_content_launches_gate_fit_and_charts(rendered):
    root, summary = rendered
    text = page(root)
    assert "--max-num-seqs 4 --num-gpu-blocks-override 128" in text  # quoted from cmd.sh
    assert "ValueError: max_num_seqs (16) exceeds available <cache> blocks" in shown(text)
    assert "<cache>" not in text
    assert '!!! warning "Provisional: dummy weights"' in text
    # beyond the server's max context: a dash, still linked to its audit page
    assert f"[-](../{audit_ref(f'fit_sequences--{RUN4}--long8k', RUN4)}" in text
    assert len(summary["charts"]) == 5
    for rel in summary["charts"]:
        assert (root / "data" / "docs" / f"{rel}.svg").read_text().startswith("<svg")
        spec = json.loads((root / "data" / "docs" / f"{rel}.vl.json").read_text())
        assert spec["facet"] if "ramp_chart" not in rel else spec["layer"]
        assert (root / "data" / "docs" / f"{rel}.png").read_bytes().startswith(b"\x89PNG\r\n")
        assert f"Download: [SVG](../{rel}.svg) · [PNG](../{rel}.png) · [Vega-Lite spec](../{rel}.vl.json)" in text
    assert (root / "data" / "docs" / "downloads" / "bench_points.csv").is_file()
    assert "(../downloads/launches.csv)" in text


def test_ramp_and_agents_section_is_facts_with_their_raw_lines(rendered):
    root, summary = rendered
    text = page(root)
    assert "## Conversations that grow" in text and "### Agent sessions" in text
    assert "assets/charts/part-local-cpu/ramp_chart-local-cpu" in summary["charts"]
    # the longest wait of RUN4's ramp: 0.2 s at turn 2, audited to its ramp.log request line
    assert f"[0.2](../{audit_ref(f'ramp_longest_wait_s--{RUN4}--ramp', RUN4)}" in text
    assert f"[2](../{audit_ref(f'ramp_longest_wait_turn--{RUN4}--ramp', RUN4)}" in text
    assert f"[80.0](../{audit_ref(f'ramp_turn_cache_hit_pct--{RUN4}--2--ramp', RUN4)}" in text
    assert f"$ head -n 3 data/runs/{RUN4}/ramp.log" in shown(text)
    assert f"[568.5](../{audit_ref(f'agent_output_tok_s--{RUN4}--agents', RUN4)}" in text
    records = {r["id"]: r for r in json.loads((root / "data" / "facts.json").read_text())}
    rec = records[f"ramp_longest_wait_s--{RUN4}--ramp"]
    assert (rec["source_file"], rec["source_line"]) == (f"data/runs/{RUN4}/ramp.log", 3)
    assert '"turn": 2' in rec["excerpt"]


def test_model_answers_and_log_lines_are_escaped(rendered):
    root, _ = rendered
    text = page(root)
    assert "<script>alert" not in text
    assert "&lt;script&gt;alert" in text


def test_sources_numbered_in_order_of_first_citation(rendered):
    root, _ = rendered
    text = page(root)
    tail = text.split("## Sources", 1)[1]
    ids = re.findall(r'^\d+\. <a id="source-(s\d+)"', tail, re.M)
    first = list(dict.fromkeys(m.lower() for m in re.findall(r"\[\[(S\d+)\]\]", text)))
    assert ids == first and ids[0] == "s3"
    assert "[[S3]](#source-s3)" in text
    sources = page(root, "SOURCES.md")
    assert '<a id="s1"></a>' in sources and "docs.vllm.ai" in sources


def test_index_lists_the_parts(rendered):
    root, _ = rendered
    index = page(root, "index.md")
    assert "[Part 2: A dress rehearsal on a CPU](posts/part-local-cpu.md)" in index
    assert "2026-11-30" in index


@pytest.mark.parametrize("edit, error, message", [
    # a number typed into a template
    (("## Launches\n", "## Launches\n\nThe first launch was ready in 71 seconds.\n"), FactCheckError,
     r"part-local-cpu\.md\.j2.*'71'"),
    (("backend [S3]", "backend [S999]"), SourceError, r"unknown source id \[S999\]"),
    (('fact("profile_launches"', 'fact("profile_launchez"'), CampaignError, "unknown fact 'profile_launchez'"),
])
def test_a_template_mistake_fails_the_build_loudly(tmp_path, edit, error, message):
    build_campaign(tmp_path)
    site = copy_templates(tmp_path)
    part = site / "templates" / "part-local-cpu.md.j2"
    part.write_text(part.read_text().replace(*edit))
    with pytest.raises(error, match=message):
        render.run(**render_kwargs(tmp_path, templates_dir=site / "templates"))


def test_missing_campaign_db_is_a_one_line_error(tmp_path):
    with pytest.raises(CampaignError, match="run the derive stage first"):
        render.run(**render_kwargs(tmp_path))


def test_mkdocs_strict_build_works_offline(tmp_path):
    build_campaign(tmp_path)
    summary = render.run(**render_kwargs(tmp_path, build=True))
    site = tmp_path / "data" / "site"
    assert Path(summary["site_index"]) == site / "index.html" and (site / "index.html").is_file()
    html = (site / "part-local-cpu.html").read_text()
    assert 'class="fact" href="audit/{}.html#launch_ready_s-'.format(RUN4) in html
    assert "&lt;script&gt;alert" in html and "<script>alert" not in html
    assert summary["interactive_charts"] is True
    bundle = (site / "assets" / "javascripts" / "vega-bundle.js").read_text()
    assert bundle.startswith("(function () {") and "vegaEmbed" in bundle
    assert 'src="assets/javascripts/vega-bundle.js"' in html
    assert external_loads(site) == []


def test_the_vega_bundle_is_made_once_a_machine(tmp_path, monkeypatch):
    """Two projects' renders: the first makes the bundle and keeps it in the user's cache, the
    second reads it from there; a cache that cannot be written costs the making, not the render."""
    import vl_convert

    made = []
    monkeypatch.setattr(vl_convert, "javascript_bundle", lambda: made.append(1) or "window.vegaEmbed = 1;")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))

    class Out(dict):
        def put_content(self, dest, data):
            self[dest] = bytes(data if isinstance(data, bytes) else data.encode())

    assets = PROJECT / "site" / "assets"
    first, second = Out(), Out()
    assert render.write_assets(assets, first)
    assert render.write_assets(assets, second)
    assert len(made) == 1 and first[render.VEGA_BUNDLE] == second[render.VEGA_BUNDLE]
    assert b"window.vegaEmbed = 1;" in first[render.VEGA_BUNDLE]
    assert [p.name for p in (tmp_path / "cache" / "campaign").iterdir()] == \
        [f"vega-bundle-{vl_convert.__version__}.js"]

    (tmp_path / "not-a-folder").write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "not-a-folder"))
    third = Out()
    assert render.write_assets(assets, third)
    assert len(made) == 2 and third[render.VEGA_BUNDLE] == first[render.VEGA_BUNDLE]


def test_charts_fit_the_article_column(rendered):
    root, summary = rendered
    for rel in summary["charts"]:
        svg = (root / "data" / "docs" / f"{rel}.svg").read_text()
        width = float(re.search(r'<svg[^>]*\bwidth="([\d.]+)"', svg).group(1))
        assert width <= chart_parts.CHART_WIDTH + 20, (rel, width)
        png = (root / "data" / "docs" / f"{rel}.png").read_bytes()
        png_width = int.from_bytes(png[16:20], "big")
        assert png_width == round(width * PNG_SCALE), (rel, png_width)


def test_table_runs_show_spec_and_time_linked_to_their_section(rendered):
    root, _ = rendered
    text = shown(page(root))
    anchor = "run-" + RUN4
    assert f"### <code>{RUN4}</code> {{#{anchor}}}" in text  # the full id stays on the page
    launches = text.split("| Run | Status |", 1)[1].split("\n\n", 1)[0]
    assert f'<a class="run-ref" href="#{anchor}" title="{RUN4}">tiny-seqs4 · 05:12</a>' in launches
    assert f"<code>{RUN4}</code>" not in launches  # no long ids wrapping in narrow columns
    fit = text.split("| Run | Workload |", 1)[1].split("\n\n", 1)[0]
    assert f'title="{RUN16}">tiny-seqs16 · 05:24</a>' in fit


def test_warehouse_page_documents_every_public_column(rendered):
    root, _ = rendered
    text = page(root, "warehouse.md")
    assert "### `bench_points` {#table-bench_points}" in text
    assert "| <code>decode_tok_s_per_user</code> | <code>double</code> | Decode speed" in shown(text)
    assert "Download: [bench_requests.csv](downloads/bench_requests.csv)" in text
    assert (root / "data" / "docs" / "downloads" / "bench_requests.csv").is_file()
    assert '??? note "one&#95;latest&#95;attempt&#95;per&#95;group"' in text
    assert "- Unique key: <code>run_id</code>" in shown(text) and "where finished_at < started_at" in text
    assert "### `raw_log_facts`" in text and "### `stg_runs`" in text
