"""Part 1, the node: rendered from the committed probe of a two-GPU H200 machine, or left out."""
from __future__ import annotations

import copy
import html
import json
import re
from pathlib import Path

import pandas as pd
import pytest

from helpers.node_render import NODE, NODE_TABLES
from helpers.render_campaign import audit_entry, audit_ref, build_campaign, render_kwargs
from stages.render import chart_parts, charts_node
from stages.render import stage as render
from stages.render.errors import FactError
from stages.render.evidence import cat_v
from stages.render.page_macros import PageMacros


@pytest.fixture(scope="module")
def rendered(node_render):
    """The render fixture's campaign with the node probe, rendered with its site built (the
    session's build, tests/conftest.py): its folder and render's summary."""
    return node_render.root, copy.deepcopy(node_render.made)


def page(root: Path, name: str = "posts/part-node.md") -> str:
    return (root / "data" / "docs" / name).read_text()


def test_node_part_comes_first_in_the_series(rendered):
    root, summary = rendered
    assert summary["pages"][:3] == ["index.md", "posts/part-node.md", "posts/part-local-cpu.md"]
    index = page(root, "index.md")
    assert index.index("[Part 1: The node](posts/part-node.md)") < index.index(
        "[Part 2: A dress rehearsal on a CPU](posts/part-local-cpu.md)")
    assert "[Part 2: A dress rehearsal on a CPU](part-local-cpu.md) →" in page(root)
    assert "← [Part 1: The node](part-node.md)" in page(root, "posts/part-local-cpu.md")
    html = (root / "data" / "site" / "index.html").read_text()
    assert html.index('href="part-node.html"') < html.index('href="part-local-cpu.html"')  # parts list


def test_numbers_are_facts_with_their_raw_lines(rendered):
    root, _ = rendered
    text = page(root)
    for value, fid in (("347.6", f"node_busbw_peak_gbs--0-1--{NODE}"),
                       ("4 GiB", f"node_busbw_peak_message--0-1--{NODE}"),
                       ("382.9", f"node_p2p_copy_gbs--1--{NODE}--0"),
                       ("18", f"node_link_nvlinks--GPU0--{NODE}--GPU1")):
        assert f'[{value}](../{audit_ref(fid, NODE)} "audit trail"){{.fact}}' in text
    records = {r["id"]: r for r in json.loads((root / "data" / "facts.json").read_text())}
    peak = records[f"node_busbw_peak_gbs--0-1--{NODE}"]
    assert peak["value"] == pytest.approx(347.635) and peak["unit"] == "GB/s"
    assert (peak["source_file"], peak["source_line"]) == (f"data/nodes/{NODE}/allreduce.jsonl", 13)
    assert '"busbw_gbs": 347.635' in peak["excerpt"] and peak["run_ids"] == []
    size = records[f"node_busbw_peak_message--0-1--{NODE}"]
    assert size["value"] == 4 * 2**30 and size["display"] == "4 GiB"
    audit = html.unescape(audit_entry(root / "data" / "docs", f"node_busbw_peak_gbs--0-1--{NODE}", NODE))
    assert f"<code>data/nodes/{NODE}/allreduce.jsonl</code>, line 13" in audit


def test_inventory_matrix_p2p_and_sweep_tables(rendered):
    root, _ = rendered
    text = page(root)
    assert "| Device | GPU0 | GPU1 |" in text
    assert "| **GPU0** | X | NV18 |" in text and "| **GPU1** | NV18 | X |" in text
    # both directions cross one NV18 link with peer access: said once above the copy rates
    assert "The same in every row: **Link** NV18; **Peer access** yes." in text
    assert f"| GPU0 | GPU1 | [382.9](../audit/{NODE}.html#node_p2p_copy_gbs-" in text
    assert f"| GPU1 | [140.4](../{audit_ref(f'node_gpu_memory_gib--1--{NODE}', NODE)}" in text
    sweep = text.split("| Message per GPU |", 1)[1].split("\n\n", 1)[0]
    assert sweep.count("\n| [") == 13 and "[1 MiB](" in sweep and "[4 GiB](" in sweep
    for table in NODE_TABLES:
        assert f"(../downloads/{table}.csv)" in text


def test_evidence_blocks_read_the_node_folder(rendered):
    root, _ = rendered
    text = page(root)
    assert "\x1b" not in text
    text = html.unescape(text)
    assert f"$ cat -v data/nodes/{NODE}/topo.txt</span>\n\t^[[4mGPU0\tGPU1" in text
    assert f"$ head -n 4 data/nodes/{NODE}/nvlink.txt" in text and "Link 0: 26.562 GB/s" in text
    assert f"$ cat data/nodes/{NODE}/gpus.csv" in text and "143771 MiB" in text
    assert "busbw 347.64 GB/s" in text  # probe.log


def test_layout_section_says_the_quad_comparison_waits(rendered):
    root, _ = rendered
    text = page(root)
    layouts = text.split("## What this means for layouts", 1)[1]
    assert "same NVLink island" in layouts
    assert "waits for a probe of the 8-GPU node" in layouts
    assert "GB/s" not in layouts  # no figure for the comparison it cannot make


def test_allreduce_chart_files_fit_the_column(rendered):
    root, summary = rendered
    rel = f"assets/charts/part-node/allreduce_chart-{NODE}"
    assert rel in summary["charts"]
    docs = root / "data" / "docs"
    spec = json.loads((docs / f"{rel}.vl.json").read_text())
    assert spec["layer"][0]["encoding"]["x"]["scale"] == {"base": 2, "type": "log"}
    svg = (docs / f"{rel}.svg").read_text()
    width = float(re.search(r'<svg[^>]*\bwidth="([\d.]+)"', svg).group(1))
    assert width <= chart_parts.CHART_WIDTH + 20
    assert (docs / f"{rel}.png").read_bytes().startswith(b"\x89PNG\r\n")
    assert f"Download: [SVG](../{rel}.svg) · [PNG](../{rel}.png) · [Vega-Lite spec](../{rel}.vl.json)" in page(root)
    html = (root / "data" / "site" / "part-node.html").read_text()
    assert 'class="vega-chart"' in html and "spec-part-node-allreduce-chart-h200x2--1130-054711" in html


def test_without_node_data_the_part_is_left_out(tmp_path):
    build_campaign(tmp_path)
    summary = render.run(**render_kwargs(tmp_path))
    assert "posts/part-node.md" not in summary["pages"]
    assert not (tmp_path / "data" / "docs" / "posts" / "part-node.md").exists()
    index = page(tmp_path, "index.md")
    assert "Part 1" not in index and "[Part 2: A dress rehearsal on a CPU](posts/part-local-cpu.md)" in index


def test_allreduce_chart_one_line_per_group_dashed_across_islands():
    rows = pd.DataFrame([
        {"gpu_group": g, "ranks": n, "spans_islands": s, "message_bytes": b, "time_us": 10.0,
         "algbw_gbs": 1.0, "busbw_gbs": v}
        for g, n, s in (("0-3", 4, False), ("0-7", 8, True)) for b, v in ((2**20, 30.0), (2**30, 300.0))
    ])
    spec = charts_node.allreduce_chart(rows).to_dict()
    colour = spec["layer"][0]["encoding"]["color"]
    assert colour["scale"]["domain"] == ["GPUs 0-3 (4 ranks)", "GPUs 0-7 (8 ranks)"]
    data = next(iter(spec["datasets"].values()))
    assert {(d["group"], d["islands"]) for d in data} == {
        ("GPUs 0-3 (4 ranks)", "one NVLink island"), ("GPUs 0-7 (8 ranks)", "spans islands")}
    assert charts_node.size_label(2**30) == "1 GiB" and charts_node.size_label(1536) == "1.5 KiB"


def test_cat_v_and_node_evidence_needs_the_nodes_folder(tmp_path):
    assert cat_v(b"\x1b[4mGPU0\tX\x1b[0m\n\x7f\xe9") == "^[[4mGPU0\tX^[[0m\n^?M-i"
    macros = PageMacros(book=None, page="p.md", runs_dir=tmp_path, root=tmp_path)  # type: ignore[arg-type]
    with pytest.raises(FactError, match="node_evidence needs the nodes folder"):
        macros.node_evidence("cat", NODE, "topo.txt")
