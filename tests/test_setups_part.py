"""The Part that sets the node campaign's setups side by side, built from the committed synthetic
node campaign as test_node_part builds it (`dvc repro` over its run folders): the Pareto chart of
each workload across the setups, the comparison at the speed params.yaml names (a figure only
where a frontier brackets it), the cost of a million output tokens per point and price set, each a
fact whose audit entry names its inputs; and the charts drawn in headless Chromium.
"""
from __future__ import annotations

import csv
import html
import json
import re

import pandas as pd
import pytest
import yaml

from helpers import PROJECT
from helpers.node_campaign import plain, repro_site
from helpers.site_browser import charts_drawn, open_site_page

SETUPS = "part-setups"


@pytest.fixture(scope="module")
def built(node_repro) -> dict:
    """The node campaign as test_node_part builds it (the session's build, tests/conftest.py)."""
    return repro_site(node_repro.root, node_repro.said)


@pytest.fixture(scope="module")
def part(built) -> dict:
    # the story and its reference page (every point, the energy, every price set), as one text
    md = (built["docs"] / "posts" / f"{SETUPS}.md").read_text() + "\n" \
        + (built["docs"] / "reference" / f"{SETUPS}.md").read_text()
    specs, rows = {}, {}
    for m in re.finditer(r'<script type="application/json" id="spec-part-setups-([^"]+)">(.*?)</script>'
                         r'.*?\[CSV\]\(\.\./([^)]+\.csv)\)', md, re.S):
        specs[m.group(1)] = json.loads(m.group(2).replace("\\u003c", "<").replace("\\u003e", ">")
                                       .replace("\\u0026", "&"))
        # the chart's rows whole, as its CSV holds them (its spec keeps the columns it draws)
        rows[m.group(1)] = pd.read_csv(built["docs"] / m.group(3)).to_dict("records")
    return {"md": md, "text": plain(md), "specs": specs, "rows": rows, "facts": built["facts"]}


def chart_rows(part: dict, name: str) -> list[dict]:
    return [r for r in part["rows"][name] if "setup" in r]


def test_the_part_is_in_the_series_over_the_node_runs(built):  # noqa: F811
    index = (built["docs"] / "index.md").read_text()
    assert f"{SETUPS}.md" in index


def test_a_pareto_chart_spans_at_least_three_setups(part):
    pareto = [k for k in part["specs"] if k.startswith("pareto-chart")]
    assert pareto, "no Pareto chart on the Part"
    widest = max(pareto, key=lambda k: len({r["setup"] for r in chart_rows(part, k)}))
    rows = chart_rows(part, widest)
    assert len({r["setup"] for r in rows}) >= 3
    for r in rows:      # per GPU of the run's set, as the point's own throughput says
        assert r["output_tok_s_per_gpu"] == pytest.approx(r["output_tok_s"] / r["gpus"])
        assert r["gpus"] == len(r["gpu_set"].split(","))
    assert {r["gpus"] for r in rows} >= {4, 8}
    assert "[pareto_points.csv](../downloads/pareto_points.csv)" in part["md"]   # the chart's rows


def test_the_comparison_is_read_only_where_a_frontier_brackets_the_speed(part, built):  # noqa: F811
    pareto = yaml.safe_load((PROJECT / "params.yaml").read_text())["pareto"]
    speeds = {f["params"]["workload"]: f["value"] for f in part["facts"].values() if f["name"] == "pareto_speed"}
    assert speeds and all(v == (pareto.get("workloads") or {}).get(w, pareto["compare_user_tok_s"])
                          for w, v in speeds.items())            # each workload's own, else the default
    at = [f for f in part["facts"].values() if f["name"] == "pareto_at_speed"]
    assert at
    read = [f for f in at if f["value"] is not None]
    unread = [f for f in at if f["value"] is None]
    assert read and unread, "the synthetic campaign has frontiers on both sides of the speed"
    for f in unread:
        assert f["source_note"].startswith("Not bracketed")
    # each figure read recomputed from the two frontier points its audit entry names
    points = {(r["run_id"], r["point_id"]): r for k in part["specs"] for r in chart_rows(part, k)}
    for f in read:
        lo_id, lo_run, hi_id, hi_run = re.search(
            r"between (\S+) of (\S+) \(.*\) and (\S+) of (\S+) \(", f["source_note"]).groups()
        lo, hi = points[(lo_run, lo_id)], points[(hi_run, hi_id)]
        speed = speeds[lo["workload"]]
        assert f"Interpolated at {speed:.6g} tok/s per user" in f["source_note"]
        assert lo["on_frontier"] and hi["on_frontier"]
        assert lo["decode_tok_s_per_user"] <= speed <= hi["decode_tok_s_per_user"]
        expected = lo["output_tok_s_per_gpu"] + (hi["output_tok_s_per_gpu"] - lo["output_tok_s_per_gpu"]) \
            * (speed - lo["decode_tok_s_per_user"]) / (hi["decode_tok_s_per_user"] - lo["decode_tok_s_per_user"])
        assert f["value"] == pytest.approx(expected)
    assert "interpolated between the two frontier points around it" in part["text"]
    assert "not reached: every frontier point is slower per user" in part["text"] or \
        "not bracketed: every frontier point is faster per user" in part["text"]


def test_cost_per_million_tokens_per_point_and_price_set(part, built):  # noqa: F811
    params = yaml.safe_load((PROJECT / "params.yaml").read_text())
    costs = [f for f in part["facts"].values() if f["name"] == "point_cost_usd"]
    points = {(r["run_id"], r["point_id"]): r for k in part["specs"] for r in chart_rows(part, k)}
    assert {f["params"]["price_set"] for f in costs} == set(params["prices"])
    assert len(costs) == len(points) * len(params["prices"])
    for f in costs:
        p = points[(f["params"]["run_id"], f["params"]["point_id"])]
        price = params["prices"][f["params"]["price_set"]]["usd_per_gpu_hour"]
        assert f["value"] == pytest.approx(p["gpus"] * price / (p["output_tok_s"] * 3600) * 1e6)
        assert f"{p['gpus']} GPUs x" in f["source_note"] and p["source_file"] in f["source_note"]
        assert "USD per million output tokens" == f["unit"] and SETUPS in " ".join(f["pages"])
    for name, entry in params["prices"].items():   # each price set titled with its source
        assert re.search(rf"### Price set {re.escape(name)} \[\[{entry['source']}\]\]", part["md"])


def test_energy_per_token_per_point_and_the_points_without_one(part, built):  # noqa: F811
    """Joules per output token of every point whose samples cover it, each the sampled energy over
    the result file's output tokens, all from the Part's runs; the point where a GPU fell silent
    is listed with its reason instead of a number."""
    per_token = [f for f in part["facts"].values() if f["name"] == "point_j_per_output_token"
                 and SETUPS in " ".join(f["pages"])]
    power = [f for f in part["facts"].values() if f["name"] == "point_avg_power_per_gpu_w"
             and SETUPS in " ".join(f["pages"])]
    assert per_token and len(per_token) == len(power)
    rows = {(r["run_id"], r["workload"], int(r["concurrency"])): r
            for r in csv.DictReader((built["site"] / "downloads" / "point_energy.csv").open())
            if r["repeat"] == "1" and r["workload"]}
    for f in per_token:     # the sampled energy of the point over its result file's output tokens
        row = rows[(f["params"]["run_id"], f["params"]["workload"], int(f["params"]["concurrency"]))]
        assert row["energy_valid"] == "true"
        assert f["value"] == pytest.approx(float(row["energy_j"]) / float(row["output_tokens"]))
    for f in power:
        assert 50 < f["value"] < 750                                      # watts per H200
    section = part["text"].split("What a token costs in energy")[1].split("What a million output tokens cost")[0]
    assert "Points without a counted energy" in section
    assert "decode-32k__c04" in section and "gpu/decode-32k__c04.csv" in section


def test_every_new_figure_has_an_audit_entry(built):  # noqa: F811
    names = {"pareto_speed", "pareto_at_speed", "pareto_tok_s_per_gpu", "pareto_decode_tok_s_per_user",
             "pareto_gpus", "pareto_concurrency", "pareto_frontier_min_decode", "pareto_frontier_max_decode",
             "price_usd_per_gpu_hour", "point_cost_usd"}
    facts = [f for f in built["facts"].values() if f["name"] in names]
    assert {f["name"] for f in facts} == names
    for f in facts:
        page = (built["site"] / "audit" / f"{f['audit_page']}.html").read_text()
        assert f'id="{f["audit_anchor"]}"' in page
        if f["source_note"]:
            assert f["source_note"] in html.unescape(re.sub(r"<[^>]+>", "", page))


def test_the_pareto_charts_are_drawn_in_a_browser(built):  # noqa: F811
    with open_site_page(built["site"], f"{SETUPS}.html") as (tab, _):
        assert tab.wait_for(charts_drawn('div.vega-chart[data-spec*="pareto-chart"]'))
        marks = tab.js("""[...document.querySelectorAll('div.vega-chart[data-spec*="pareto-chart"]')]
            .map(c => c.querySelectorAll('svg.marks path').length)""")
        assert all(n > 0 for n in marks), marks
        assert not tab.console_errors()
