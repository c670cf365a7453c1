"""Part 2's section on what went wrong: run_events quoted from launch.out, or one sentence."""
from __future__ import annotations

import html

import duckdb

from helpers.render_campaign import RUN4, RUN16, RUN16_FAILED, build_campaign, published_ref, render_kwargs
from stages.render import stage as render

HEADING = "## What went wrong, and what the pipeline did"


def section(root) -> str:
    text = (root / "data" / "docs" / "posts" / "part-local-cpu.md").read_text()
    return text.split(HEADING, 1)[1].split("\n## ", 1)[0]


def test_events_are_counted_quoted_and_tabled(tmp_path):
    build_campaign(tmp_path)
    render.run(**render_kwargs(tmp_path))
    text = section(tmp_path)
    failed_ref = published_ref(tmp_path, "profile_run_events--point_failed--local-cpu")
    assert f'[1](../{failed_ref} "audit trail"){{.fact}} benchmark point failed' in text
    assert f"[0](../{published_ref(tmp_path, 'profile_run_events--run_interrupted--local-cpu')}" in text
    assert "runs were interrupted" in text
    # the failed launch is kept beside the attempt of its spec that completed
    shown = html.unescape(text)
    failed = shown.split(f"<code>{RUN16_FAILED}</code>", 1)[1].split("<pre", 1)[0]
    assert "never became ready" in failed and f"<code>{RUN16}</code>" in failed
    assert f"$ cat data/runs/{RUN4}/launch.out</span>" in shown
    assert "point&#95;error=long&#95;&#95;c16 ReadTimeout: &lt;timed out&gt;" in text
    table = text.split("| Run | Event | Point | What launch.out says |", 1)[1]
    assert "| point failed | long&#95;&#95;c16 | ReadTimeout: &lt;timed out&gt; |" in table
    assert "| launch failed | - | the engine did not become ready (status=failed) |" in html.unescape(table)
    page, anchor = failed_ref.split("#")
    # a count: no raw line holds it, so the entry cites none and names the run
    audit_text = html.unescape((tmp_path / "data" / "docs" / page).read_text()
                               .split(f'id="{anchor}"')[1].split("</section>")[0])
    assert "no single raw line" in audit_text and f"<code>{RUN4}</code>" in audit_text


def test_without_events_the_section_is_one_sentence(tmp_path):
    db = build_campaign(tmp_path)
    with duckdb.connect(str(db)) as con:
        con.execute("delete from run_events")
    render.run(**render_kwargs(tmp_path))
    text = section(tmp_path).strip()
    assert text.startswith("No run on this profile recorded a failed or skipped benchmark point")
    assert text.count(".") == 1 and "|" not in text and "<pre" not in text
