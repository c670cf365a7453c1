"""The Compare page: pairs from params drawn with stages/render/diff.py, every printed number a fact."""
from __future__ import annotations

import html
import json
import re
from pathlib import Path

import duckdb
import pytest

from fact_lines import line_problems
from render_helpers import RUN4, RUN16, audit_entry, audit_ref, build_campaign, render_kwargs
from stages.render import compare_page
from stages.render import stage as render
from stages.core.config import CampaignError
from stages.render.errors import FactError
from stages.render.facts import FactBook, PageMacros

PAIR = {"base": "tiny-seqs4", "head": "tiny-seqs16",
        "title": "Sequence cap 4 against 16 on the CPU rehearsal"}


def docs(root: Path, name: str) -> str:
    return (root / "data" / "docs" / name).read_text()


@pytest.fixture(scope="module")
def compared(tmp_path_factory):
    root = tmp_path_factory.mktemp("compare")
    build_campaign(root)
    summary = render.run(**render_kwargs(root, compare=[PAIR, {"base": "HEAD", "head": "tiny-seqs16"}]))
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
    assert "| Ready (s) |" in html.unescape(text) and f"[71.3](audit/{RUN4}.html#launch_ready_s-" in text
    assert "[-3.4%](audit/compare_launch_change_pct.html#compare_launch_change_pct-" in text
    assert "every row below is tiny-llama / 4k" in text
    for target, anchor in set(re.findall(r"\]\((audit/[^ )#]+\.html)#([^ )]+)", text)):
        assert f'id="{anchor}"' in (root / "data" / "docs" / target).read_text(), target


def test_a_change_audit_page_prints_its_unit_once(compared):
    root, _ = compared
    fid = f"compare_point_change_pct--{RUN4}--16--{RUN16}--ttft_median_s--chat"
    anchor = audit_ref(fid, "compare_point_change_pct").split("#")[1]
    audit = docs(root, "audit/compare_point_change_pct.html")
    assert f'id="{anchor}">\n<h2><code>compare&#95;point&#95;change&#95;pct</code> = -92.3% <a' in audit and "% %" not in audit


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


def test_a_revision_side_is_named_with_its_reason_not_drawn(compared):
    root, _ = compared
    text = docs(root, "compare.md")
    section = text.split("## HEAD against tiny-seqs16", 1)[1]
    assert "Not drawn:" in section and "campaign diff" in section
    assert "None of the comparisons" not in text  # the first pair was drawn


def test_no_pair_resolves_and_the_strict_build_still_passes(tmp_path):
    build_campaign(tmp_path)
    render.run(**render_kwargs(tmp_path, build=True,
                               compare=[{"base": "v9.9.9", "head": "tiny-seqs16", "title": "Nothing"}]))
    text = docs(tmp_path, "compare.md")
    assert "None of the comparisons listed in `params.yaml` can be drawn" in text
    assert "&#x27;v9.9.9&#x27; is not a run set" in text
    assert (tmp_path / "data" / "site" / "compare.html").is_file()
    assert "[Compare images](compare.md)" in docs(tmp_path, "index.md")


def test_without_pairs_the_page_says_so(tmp_path):
    build_campaign(tmp_path)
    render.run(**render_kwargs(tmp_path))
    assert "No comparison is listed in `params.yaml`" in docs(tmp_path, "compare.md")


def test_a_value_that_disagrees_with_its_fact_fails(tmp_path):
    db = build_campaign(tmp_path)
    con = duckdb.connect(str(db), read_only=True)
    try:
        [c] = compare_page.resolve_pairs([PAIR], con=con)
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
    assert compare_page.check_pairs(None) == []
    assert compare_page.check_pairs([{"base": "a", "head": "b"}])[0]["title"] == "a against b"
    with pytest.raises(CampaignError, match="compare item 1 needs base and head"):
        compare_page.check_pairs([{"base": "a"}])
    with pytest.raises(CampaignError, match="must be a list"):
        compare_page.check_pairs({"base": "a", "head": "b"})


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
        assert cells[5] == "no TTFT"
        assert "no TTFT (head): every request failed or came from the prefix cache" in cells[6]
    [tpot] = [l for l in text.splitlines() if audit_ref(f"point_tpot_median_ms--4--{RUN16}--chat", RUN16) in l]
    assert "no TTFT" not in tpot
