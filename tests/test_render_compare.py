"""The Compare page: the comparisons a campaign's runs hold and the pairs params lists, drawn with
stages/render/diff.py, every printed number a fact; a listed pair that selects nothing is a notice
to the author, never text for readers."""
from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import numpy as np
import pytest
import yaml

from helpers.fact_lines import line_problems
from helpers.render_campaign import PROJECT, RUN4, RUN16, audit_entry, audit_ref, build_campaign, render_kwargs
from stages.render import compare_page, compare_pairs
from stages.render import stage as render
from stages.core.config import CampaignError
from stages.render.errors import FactError
from stages.render.facts import FactBook
from stages.render.page_macros import PageMacros

PAIR = {"base": "tiny-seqs4", "head": "tiny-seqs16",
        "title": "Sequence cap 4 against 16 on the CPU rehearsal"}


def docs(root: Path, name: str) -> str:
    return (root / "data" / "docs" / name).read_text()


def spread(centre: float, n: int, p90: float) -> list[float]:
    """n values whose median is `centre` and whose p90 is about `p90` (lowest first)."""
    u = (np.arange(n) + 0.5) / n
    return list(np.interp(u, [0.0, 0.5, 0.9, 1.0], [0.95 * centre, centre, p90, 1.05 * p90]))


def add_requests(root: Path) -> None:
    """The per-request times the intervals rest on: each point's requests (twice its users, as
    it sent) in its result file (ttfts, latencies, lengths) and in bench_requests, spread about
    the point's figures; the agents workload's requests in turn_requests."""
    con = duckdb.connect(str(root / "data" / "campaign.duckdb"))
    points = con.execute("select run_id, point_id, workload, concurrency, sent, ttft_median_s, ttft_p90_s, "
                         "tpot_median_ms, prompt_tokens, output_tokens, source_file from bench_points").fetchall()
    for run_id, point_id, workload, conc, sent, ttft, p90, tpot, prompt, output, source in points:
        ttfts = spread(ttft, sent, p90)
        tpots = spread(tpot, sent, tpot * 1.02)[::-1]
        latencies = [t + q * (output - 1) / 1000 for t, q in zip(ttfts, tpots)]
        f = root / source
        result = json.loads(f.read_text())
        result.update(ttfts=ttfts, latencies=latencies, output_lens=[output] * sent, input_lens=[prompt] * sent)
        f.write_text(json.dumps(result))
        con.executemany("insert into bench_requests values (?, ?, ?, ?, 1, ?, ?, ?, ?, ?, null, ?, ?, null, true, true,"
                        " true, true, null, '', ?, 1, 'latencies', 'latencies', null, null)",
                        [(run_id, point_id, workload, conc, i, prompt, output, t, lat, q, prompt / t, source)
                         for i, (t, lat, q) in enumerate(zip(ttfts, latencies, tpots))])
    for run_id, ttft, p90, tpot, source in con.execute(
            "select run_id, ttft_median_s, ttft_p90_s, tpot_median_ms, source_file from agent_runs").fetchall():
        con.executemany("insert into turn_requests values (?, 'agents', 'agents', 'agents', ?, 1, ?, 3000,"
                        " 3000, 64, ?, ?, null, 0, ?, null, null, null, true, false, ?, ?)",
                        [(run_id, i % 4, i, t, t + tpot * 63 / 1000, tpot, source, i + 1)
                         for i, t in enumerate(spread(ttft, 16, p90))])
    con.close()


@pytest.fixture(scope="module")
def compared(tmp_path_factory):
    root = tmp_path_factory.mktemp("compare")
    build_campaign(root)
    add_requests(root)
    settings = yaml.safe_load((PROJECT / "params.yaml").read_text())["diff"]
    summary = render.run(**render_kwargs(root, compare=[PAIR, {"base": "HEAD", "head": "tiny-seqs16"}],
                                         diff_settings=settings))
    return root, summary


def test_pair_is_drawn_with_facts_marks_and_both_runs(compared):
    root, summary = compared
    text = docs(root, "compare.md")
    assert "compare.md" in summary["pages"]
    assert "## Sequence cap 4 against 16 on the CPU rehearsal" in text
    # base and head values are the point facts the articles use, linked to their audit pages
    chat16 = [l for l in text.splitlines() if audit_ref(f"point_ttft_median_s--16--{RUN4}--chat", RUN4) in l]
    assert len(chat16) == 1
    row = chat16[0]
    assert audit_ref(f"point_ttft_median_s--16--{RUN16}--chat", RUN16) in row
    # seqs4 queues at 16 chat users (12 over its cap): 0.2 s * 13 = 2.6 s against 0.2 s
    assert "[2.600](" in row and "[0.200](" in row and "[-92.3%](" in row
    assert "| better |" in row and "capacity-limited (base), provisional" in html.unescape(row)
    # the mark rests on the interval of the change from 32 requests a side, wholly below -5%
    low, high = map(float, re.search(r"\| \[(-[\d.]+)%, (-[\d.]+)%\] \| 32 / 32 \|", html.unescape(row)).groups())
    assert low <= -92.3 <= high < -5.0
    assert "| Ready (s) |" in html.unescape(text) and f"[71.3](audit/{RUN4}.html#launch_ready_s-" in text
    assert "[-3.4%](audit/compare_launch_change_pct.html#compare_launch_change_pct-" in text
    [ready] = [l for l in html.unescape(text).splitlines() if l.startswith("| Ready (s) |")]
    assert ready.endswith("| unclear | one launch a side |")     # one start-up time a side
    assert "every row below is tiny-llama / 4k" in text
    for target, anchor in set(re.findall(r"\]\((audit/[^ )#]+\.html)#([^ )]+)", text)):
        assert f'id="{anchor}"' in (root / "data" / "docs" / target).read_text(), target


def test_a_comparison_opens_with_its_marks_by_workload_from_the_intervals(compared):
    root, _ = compared
    text = html.unescape(docs(root, "compare.md"))
    section = text.split("## Sequence cap 4 against 16 on the CPU rehearsal", 1)[1]
    assert "(95% intervals;" in section.split("### Launches", 1)[0]
    counts = {}
    for line in section.split("### Launches", 1)[0].splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) == 6 and cells[0] in ("chat", "long", "agents"):
            counts[cells[0]] = dict(zip(("better", "worse", "unclear", "same", "other"), map(int, cells[1:])))
    assert set(counts) == {"chat", "long", "agents"}
    # each count is the marks of that workload's table below
    for workload, c in counts.items():
        table = section.split(f"### Workload `{workload}`", 1)[1].split("\n### ", 1)[0]
        for mark in ("better", "worse", "unclear", "same"):
            assert table.count(f"| {mark} |") == c[mark], (workload, mark)
    # chat at 16 users: seqs4 queues, a clear gain for seqs16; at one user, two requests a side
    assert counts["chat"]["better"] >= 1 and counts["chat"]["unclear"] >= 1
    [one] = [l for l in section.splitlines() if audit_ref(f"point_ttft_median_s--1--{RUN4}--chat", RUN4) in l]
    assert "| - | 2 / 2 | unclear |" in one and "too few requests (base 2, head 2; 5 a side needed)" in one
    assert "[S17]" in text and "[S18]" in text and "#source-s17" in docs(root, "compare.md")


def test_a_change_audit_entry_shows_each_sides_samples(compared):
    root, _ = compared
    fid = f"compare_point_change_pct--{RUN4}--16--{RUN16}--ttft_median_s--chat"
    records = {r["id"]: r for r in json.loads((root / "data" / "facts.json").read_text())}
    note = records[fid]["source_note"]
    assert "95% interval of the change [-" in note and "marked better" in note
    # the base's 32 requests about 2.6 s (p90 about 3.6 s), the head's about 0.2 s
    assert "Base: n = 32, median 2.618, p90 3.6" in note and "Head: n = 32, median 0.2" in note
    assert "and 20 more" in note      # twelve values shown of 32, lowest first
    anchor = audit_ref(fid, "compare_point_change_pct").split("#")[1]
    entry = docs(root, "audit/compare_point_change_pct.html").split(f'id="{anchor}"', 1)[1].split("</section>", 1)[0]
    entry = html.unescape(entry)
    assert "Base: n = 32, median 2.618" in entry and "values (lowest first) 2.474, 2.482" in entry


def test_a_change_audit_page_prints_its_unit_once(compared):
    root, _ = compared
    fid = f"compare_point_change_pct--{RUN4}--16--{RUN16}--ttft_median_s--chat"
    anchor = audit_ref(fid, "compare_point_change_pct").split("#")[1]
    audit = docs(root, "audit/compare_point_change_pct.html")
    # audit pages are HTML no Markdown reads: data text is escaped for HTML alone
    assert f'id="{anchor}">\n<h2><code>compare_point_change_pct</code> = -92.3% <a' in audit and "% %" not in audit


def test_every_fact_of_the_compare_page_that_cites_a_raw_line_holds_its_value(compared):
    root, _ = compared
    checked, problems = line_problems(root / "data" / "facts.json", root / "data" / "runs")
    assert checked >= 40 and problems == []


def test_one_quantity_prints_at_one_precision_across_a_table(compared):
    root, _ = compared
    text = html.unescape(docs(root, "compare.md"))
    for workload in ("chat", "long"):
        table = text.split(f"### Workload `{workload}`", 1)[1].split("\n### ", 1)[0]
        places = {}
        for line in table.splitlines():
            cells = line.split(" | ")
            unit = re.search(r"\(([^)]*)\)$", cells[1]) if len(cells) > 4 else None
            if unit is None:
                continue
            unit = unit.group(1)
            for value in re.findall(r"\[(-?[\d,]+(?:\.\d+)?)\]\(audit/[^)#]+#(?:point|agent)_", " | ".join(cells[2:4])):
                places.setdefault(unit, set()).add(len(value.partition(".")[2]))
        assert {"s", "ms", "tok/s", "%"} <= set(places), (workload, places)
        assert all(len(p) == 1 for p in places.values()), (workload, places)
    # chat's TTFTs run from 0.2 s to 2.6 s: both at the three decimals 0.28 s needs
    assert "[2.600](" in text and "[0.200](" in text and "[0.2](" not in text


def test_agents_workloads_are_compared_with_their_own_facts(compared):
    root, _ = compared
    text = docs(root, "compare.md")
    [row] = [l for l in text.splitlines() if audit_ref(f"agent_ttft_median_s--{RUN4}--agents", RUN4) in l]
    assert audit_ref(f"agent_ttft_median_s--{RUN16}--agents", RUN16) in row
    assert audit_ref(f"agent_sessions--{RUN4}--agents", RUN4) in row
    assert "[0.371](" in row and "[0.147](" in row and "[-60.4%](" in row and "| better |" in row
    assert "compare_agent_change_pct.html#compare_agent_change_pct-" in row


def test_change_facts_record_both_runs_and_the_head_result_file(compared):
    root, _ = compared
    records = {r["id"]: r for r in json.loads((root / "data" / "facts.json").read_text())}
    [rec] = [r for r in records.values() if r["name"] == "compare_point_change_pct"
             and r["params"] == {"base_run_id": RUN4, "head_run_id": RUN16, "workload": "chat",
                                 "concurrency": 16, "metric": "ttft_median_s"}]
    assert rec["run_ids"] == [RUN4, RUN16]
    # a computed change: no raw line holds it, and the record says so
    assert rec["source_file"] is None and "base and head values" in rec["source_note"]
    assert (rec["display"], rec["unit"]) == ("-92.3", "%") and rec["pages"] == ["compare.md"]
    assert round(rec["value"], 3) == -92.308


def test_a_revision_side_is_a_notice_to_the_author_not_text_for_readers(compared):
    root, summary = compared
    text = docs(root, "compare.md")
    assert "compare: 'HEAD' selects no run in this campaign; left out ('HEAD against tiny-seqs16')" \
        in summary["notices"]
    assert "HEAD" not in text and "Not drawn" not in text and "is not a run set" not in text
    assert "Nothing to compare" not in text  # the first pair was drawn


def test_no_pair_resolves_and_the_strict_build_still_passes(tmp_path):
    build_campaign(tmp_path)
    summary = render.run(**render_kwargs(tmp_path, build=True,
                                         compare=[{"base": "v9.9.9", "head": "tiny-seqs16", "title": "Nothing"}]))
    text = docs(tmp_path, "compare.md")
    assert [n for n in summary["notices"] if n.startswith("compare:")] == [
        "compare: 'v9.9.9' selects no run in this campaign; left out ('Nothing')"]
    assert "Nothing to compare yet" in text and "v9.9.9" not in text and "## Nothing" not in text
    assert (tmp_path / "data" / "site" / "compare.html").is_file()
    assert "[Compare images](compare.md)" in docs(tmp_path, "index.md")


def test_without_pairs_the_page_says_so(tmp_path):
    build_campaign(tmp_path)
    render.run(**render_kwargs(tmp_path))
    text = docs(tmp_path, "compare.md")
    assert "Nothing to compare yet" in text and " {#" not in text


def test_a_value_that_disagrees_with_its_fact_fails(tmp_path):
    db = build_campaign(tmp_path)
    con = duckdb.connect(str(db), read_only=True)
    try:
        [c] = compare_pairs.draw(compare_pairs.plan(con, pairs=[PAIR]), con=con)
        macros = PageMacros(FactBook(con, root=tmp_path, sha=None), page="compare.md",
                            runs_dir=tmp_path / "data" / "runs", root=tmp_path)
        tables = compare_page.CompareTables(macros)
        tables.points(c, "long")  # agrees
        next(r for r in c.result.points if r["workload"] == "long")["head_value"] += 1.0
        with pytest.raises(FactError, match="in the comparison but"):
            tables.points(c, "long")
    finally:
        con.close()


def test_compare_params_are_checked():
    assert compare_pairs.check_pairs(None) == []
    assert compare_pairs.check_pairs([{"base": "a", "head": "b"}])[0]["title"] == "a against b"
    with pytest.raises(CampaignError, match="compare item 1 needs base and head"):
        compare_pairs.check_pairs([{"base": "a"}])
    with pytest.raises(CampaignError, match="must be a list"):
        compare_pairs.check_pairs({"base": "a", "head": "b"})


def test_a_point_without_ttft_is_marked_and_its_ttft_not_compared(tmp_path):
    db = build_campaign(tmp_path)
    with duckdb.connect(str(db)) as con:   # every request of the head's chat point at 4 users came from the cache
        con.execute("update bench_points set ttft_requests = 0, ttft_median_s = null, ttft_p90_s = null "
                    "where run_id = $r and point_id = 'chat__c04'", {"r": RUN16})
    render.run(**render_kwargs(tmp_path, compare=[PAIR]))
    text = html.unescape(docs(tmp_path, "compare.md"))
    rows = [l for l in text.splitlines() if audit_ref(f"point_ttft_median_s--4--{RUN4}--chat", RUN4) in l
            or audit_ref(f"point_ttft_p90_s--4--{RUN4}--chat", RUN4) in l]
    assert len(rows) == 2
    for row in rows:
        cells = row.split(" | ")
        assert cells[3].startswith("[-](audit/") and "#point_ttft_" in cells[3]
        assert cells[4].startswith("[-](audit/compare_")
        # no interval is drawn for a point without TTFT, nor its samples counted
        assert (cells[5], cells[6], cells[7]) == ("-", "-", "no TTFT")
        assert "no TTFT (head): every request failed or came from the prefix cache" in cells[8]
    [tpot] = [l for l in text.splitlines() if audit_ref(f"point_tpot_median_ms--4--{RUN16}--chat", RUN16) in l]
    assert "no TTFT" not in tpot


def test_a_pair_with_repeated_points_is_a_notice_not_drawn(tmp_path):
    """The page prints each value as its point's fact (the first repeat's); with a point run twice
    the pair is left out, with a notice that says why, while the build goes on."""
    db = build_campaign(tmp_path)
    con = duckdb.connect(str(db))
    con.execute("insert into bench_points select * replace (2 as repeat, point_id || '__r2' as point_id) "
                "from bench_points where run_id = $r and workload = 'chat' and concurrency = 16", {"r": RUN4})
    con.close()
    summary = render.run(**render_kwargs(tmp_path, build=True, compare=[PAIR]))
    [notice] = [n for n in summary["notices"] if n.startswith("compare:")]
    assert notice.startswith(f"compare: {PAIR['title']!r}: 1 of its points ran more than once (repeats)")
    assert "`campaign diff`" in notice
    text = html.unescape(docs(tmp_path, "compare.md"))
    assert "Nothing to compare yet" in text and "repeats)" not in text


# ---------------------------------------------------------------- the node campaign

NODE_RUNS = PROJECT / "tests" / "fixtures" / "node_campaign" / "runs"
QWEN_OLD = "qwen3_235b__tp4__256k__vllm__1116-130000"
QWEN_NEW = "qwen3_235b__tp4__256k__vllm__1116-140000"
MINIMAX = ("minimax_m3__tep8__1024k__vllm__1116-091000", "minimax_m3__fx_tep8_recipe__1024k__vllm__1116-093000")
DSV4 = ("dsv4_pro__dep8__781k__vllm__1116-110000", "dsv4_pro__tep8__781k__vllm__1116-112000")


def sections(text: str) -> dict[str, str]:
    """Each comparison's section of the page, by its heading id."""
    return {m.group(1): m.group(2) for m in re.finditer(r"(?ms)^## .*? \{#([a-z0-9-]+)\}\n(.*?)(?=^## |\Z)", text)}


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    """The synthetic node campaign (tests/fixtures/node_campaign), ingested and derived with the
    project's params.yaml (node profile, no spec to launch), and rendered with the site built: with
    the params' `compare:` (a pair of CPU specs, which select nothing here) and `arms`; then again
    without arms, as a campaign imported without its specs has none."""
    root = tmp_path_factory.mktemp("node-compare")
    params = yaml.safe_load((PROJECT / "params.yaml").read_text())
    params.update(profile="h200x8", run_specs=[])
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    for folder in sorted(NODE_RUNS.iterdir()):
        shutil.copytree(folder, root / "data" / "runs" / folder.name)
    env = {**os.environ, "PYTHONPATH": str(PROJECT)}
    for stage in ("ingest", "derive"):
        subprocess.run([sys.executable, "-m", "stages.cli", stage, "--root", str(root)], cwd=root, env=env,
                       check=True, capture_output=True)
    settings = dict(compare=params["compare"], diff_settings=params["diff"], static_images=())
    summary = render.run(**render_kwargs(root, build=True, arms=params["arms"], **settings))
    out = {"root": root, "summary": summary, "text": html.unescape(docs(root, "compare.md")),
           "quad": docs(root, "posts/part-quad.md"), "site": (root / "data" / "site" / "compare.html").read_text()}
    bare = render.run(**render_kwargs(root, **settings))
    out.update(bare=bare, bare_text=html.unescape(docs(root, "compare.md")))
    return out


def test_the_node_campaign_compares_qwen_under_its_two_images(node):
    text = node["text"]
    found = sections(text)
    image = found["qwen3-235b-tp4-under-two-images"]
    assert "measured under two engine images" in image
    assert "vllm/vllm-openai:v0.31.0" in image and "vllm/vllm-openai:nightly-7c41e9a0d2b3" in image
    assert f"campaign diff --base {QWEN_OLD} --head {QWEN_NEW}" in image
    # point by point, each value a fact of its run
    raw = docs(node["root"], "compare.md")
    for run in (QWEN_OLD, QWEN_NEW):
        assert audit_ref(f"point_ttft_median_s--1--{run}--short-1k", run) in raw
    assert "### Workload `doc-256k`" in image and "### Workload `short-1k`" in image
    assert "compare_point_change_pct.html#compare_point_change_pct-" in raw


def test_the_node_campaign_compares_each_spec_with_its_follow_up(node):
    found = sections(node["text"])
    assert list(found) == ["minimax-m3-tep8-follow-up-of-minimax-m3-tep8-stable",
                           "dsv4-pro-tep8-follow-up-of-dsv4-pro-dep8", "qwen3-235b-tp4-under-two-images"]
    for anchor, (base, head) in zip(list(found)[:2], (MINIMAX, DSV4)):
        section = found[anchor]
        assert "`params.yaml` (`arms`) names" in section and "whose launch never became ready" in section
        assert "| Launch status | failed | ready | - | fixed |" in section
        # a failed launch ran no point: the launches compare, no table of points on one side
        assert "No benchmark point ran on both sides (only the head ran any)" in section
        assert "only in head" not in section and "### Workload" not in section
    # glm53's two launches are attempts of one spec, the first not reported: not a comparison
    assert "glm53" not in node["text"]


def test_a_listed_pair_that_selects_nothing_is_a_notice_not_reader_text(node):
    assert "compare: 'tiny-seqs4' and 'tiny-seqs16' select no run in this campaign; left out " \
           "('Sequence cap 4 against 16 on the CPU rehearsal')" in node["summary"]["notices"]
    for text in (node["text"], node["bare_text"]):
        assert "tiny-seqs" not in text and "Not drawn" not in text and "is not a run set" not in text
        assert "Nothing to compare" not in text


def test_the_two_image_part_links_its_comparison_and_the_link_resolves(node):
    assert "](../compare.md#qwen3-235b-tp4-under-two-images)" in node["quad"]
    assert 'id="qwen3-235b-tp4-under-two-images"' in node["site"]
    part = (node["root"] / "data" / "site" / "part-quad.html").read_text()
    assert 'href="compare.html#qwen3-235b-tp4-under-two-images"' in part


def test_without_arms_the_runs_still_show_each_rescue(node):
    found = sections(node["bare_text"])
    assert list(found) == ["minimax-m3-tep8-stable-then-minimax-m3-tep8", "dsv4-pro-dep8-then-dsv4-pro-tep8",
                           "qwen3-235b-tp4-under-two-images"]
    section = found["minimax-m3-tep8-stable-then-minimax-m3-tep8"]
    assert "The launch of <code>minimax-m3-tep8-stable</code> never became ready" in section
    assert "under another image" in section and f"--base {MINIMAX[0]} --head {MINIMAX[1]}" in section
    assert "under another image" not in found["dsv4-pro-dep8-then-dsv4-pro-tep8"]
