"""The real run on one H200 (tests/fixtures/gpu_h200x1/, its README says how it was made) built
as a team with one GPU builds it: its run folder in data/runs, the one-GPU profile active, no spec
to launch, `dvc repro`. vLLM 0.26.0 wrote no per-request latencies: every sweep point still has
its time per output token (from the gaps between tokens, and marked so), a decode speed, a place
on its setup's Pareto frontier and an energy per output token counted over its own requests, not
over the seconds its client spent building prompts."""
from __future__ import annotations

import csv
import json
import re
import statistics
from datetime import datetime, timezone
from pathlib import Path

import duckdb
import pytest

from helpers.node_campaign import plain, repro_with_runs
from helpers.site_browser import charts_drawn, open_site_page

FIXTURE = Path(__file__).parent / "fixtures" / "gpu_h200x1"
RUN = "llama-1b__gpu1_seqs64__32k__vllm__1202-160157"     # FIXTURE's one run folder
RAW = FIXTURE / RUN
PART = "part-one-gpu"
SWEEP = [f"{w}__c{c:02d}" for w, cs in (("long", (1, 4, 16, 64)), ("chat", (1, 4, 16, 64)),
                                         ("long-shared", (1, 4))) for c in cs]


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("gpu")
    repro_with_runs(root, "h200x1", FIXTURE)
    db = duckdb.connect(str(root / "data" / "campaign.duckdb"), read_only=True)
    facts = {f["id"]: f for f in json.loads((root / "data" / "facts.json").read_text())}
    md = (root / "data" / "docs" / "posts" / f"{PART}.md").read_text()
    yield {"root": root, "db": db, "facts": facts, "md": md, "text": plain(md)}
    db.close()


def table(db, sql: str, *args) -> list[dict]:
    cur = db.execute(sql, list(args))
    names = [d[0] for d in cur.description]
    return [dict(zip(names, r)) for r in cur.fetchall()]


def test_the_run_was_made_by_the_one_gpu_profile_with_the_engines_own_python():
    meta = json.loads((RAW / "meta.json").read_text())
    assert meta["profile"] == "h200x1" and meta["executor"] == "local" and meta["gpus"] == "0"
    assert meta["engine_version"] == "0.26.0"          # asked of the engine's Python, not ours
    assert (RAW / "cmd.sh").read_text().splitlines()[-1].startswith(
        "CUDA_VISIBLE_DEVICES=0 VLLM_PORT=20000 VLLM_SERVER_DEV_MODE=1 python3 -m vllm.entrypoints")
    for point in SWEEP:
        assert "latencies" not in json.loads((RAW / "bench" / f"{point}.json").read_text())


def test_every_sweep_point_has_tpot_and_decode_speed_from_the_gaps_between_tokens(built):
    rows = {r["point_id"]: r for r in table(built["db"], "select * from bench_points where run_id = ?", RUN)}
    assert sorted(rows) == sorted(SWEEP)
    for point in SWEEP:
        row, raw = rows[point], json.loads((RAW / "bench" / f"{point}.json").read_text())
        assert row["tpot_from"] == "itls" and row["figures_from"] == "requests", point
        tpots = [sum(itl) / (out - 1) * 1000 for itl, out, err in
                 zip(raw["itls"], raw["output_lens"], raw["errors"]) if not err and out > 1]
        assert row["tpot_median_ms"] == pytest.approx(statistics.median(tpots), rel=1e-9), point
        # the tool's own median, computed from latencies it kept to itself, agrees
        assert row["tpot_median_ms"] == pytest.approx(raw["median_tpot_ms"], rel=1e-3), point
        assert row["decode_tok_s_per_user"] == pytest.approx(1000 / row["tpot_median_ms"])


def test_every_sweep_point_is_on_the_setups_chart_and_the_frontier_is_drawn(built):
    placed = table(built["db"], "select * from pareto_points where run_id = ?", RUN)
    assert sorted(r["point_id"] for r in placed) == sorted(SWEEP)
    assert table(built["db"], "select * from pareto_left_out") == []
    assert all(r["gpus"] == 1 and r["output_tok_s_per_gpu"] == pytest.approx(r["output_tok_s"]) for r in placed)
    long = sorted((r for r in placed if r["workload"] == "long"), key=lambda r: r["concurrency"])
    assert all(r["on_frontier"] for r in long)      # more users: faster server, slower users
    specs = {m.group(1): json.loads(m.group(2).replace("\\u003c", "<").replace("\\u003e", ">")
                                    .replace("\\u0026", "&"))
             for m in re.finditer(r'<script type="application/json" id="spec-part-one-gpu-pareto-chart-[0-9a-f]+-([a-z-]+)">'
                                  r'(.*?)</script>', built["md"])}
    assert sorted(specs) == ["chat", "long", "long-shared"]        # one chart per workload
    drawn = [r for rows in specs["long"]["datasets"].values() for r in rows if "setup" in r]
    assert sorted((r["concurrency"], r["on_frontier"]) for r in drawn) == [(1, True), (4, True), (16, True), (64, True)]


def sampler_window(point: str) -> tuple[float, float, float, float]:
    lines = (RAW / "gpu" / f"{point}.csv").read_text().splitlines()
    kv = dict(line[2:].split("=", 1) for line in lines if line.startswith("# ") and "=" in line)
    at = lambda k: datetime.fromisoformat(kv[k].replace("Z", "+00:00")).timestamp()  # noqa: E731
    return at("window_start"), at("window_end"), at("requests_start"), at("requests_end")


def test_energy_is_counted_over_each_points_requests_within_half_a_second_of_its_duration(built):
    rows = {r["point_id"]: r for r in table(built["db"], "select * from point_energy where run_id = ?", RUN)}
    for point in SWEEP:
        row = rows[point]
        duration = json.loads((RAW / "bench" / f"{point}.json").read_text())["duration"]
        ws, we, rs, re_ = sampler_window(point)
        assert row["window_from"] == "requests" and row["energy_valid"], (point, row["energy_problem"])
        assert row["window_s"] == pytest.approx(re_ - rs, abs=1e-6)
        assert abs(row["window_s"] - duration) < 0.5, point
        assert row["sampler_window_s"] == pytest.approx(we - ws, abs=1e-6) and row["sampler_window_s"] > row["window_s"]
        assert 50 < row["avg_power_total_w"] < 700          # one H200, its 700 W limit
        assert row["j_per_output_token"] == pytest.approx(row["energy_j"] / row["output_tokens"])
        assert row["idle_samples"] > 0 and 50 < row["idle_power_total_w"] < 700
    # the first point's client built sixteen-thousand-token prompts for most of its sampler window
    first = rows["long__c01"]
    assert first["sampler_window_s"] > first["window_s"] + 10


def test_the_energy_is_the_integral_of_the_samples_inside_the_requests_window(built):
    point = "long__c64"
    _, _, rs, re_ = sampler_window(point)
    samples = []
    with (RAW / "gpu" / f"{point}.csv").open() as f:
        for cells in csv.reader(line for line in f if not line.startswith("#")):
            if cells[0].strip().isdigit():
                t = datetime.strptime(cells[1].strip(), "%Y/%m/%d %H:%M:%S.%f").replace(
                    tzinfo=timezone.utc).timestamp()
                samples.append((t, float(cells[2])))
    inside = [(t, p) for t, p in samples if rs <= t <= re_]
    assert len(inside) > 50                          # 200 ms apart over about twenty seconds
    mean_power = sum(p for _, p in inside) / len(inside)
    row = table(built["db"], "select * from point_energy where run_id = ? and point_id = ?", RUN, point)[0]
    assert row["energy_j"] == pytest.approx(mean_power * (re_ - rs), rel=0.02)


def test_the_part_shows_decode_speeds_a_frontier_and_joules_per_token_marked_by_their_source(built):
    text = built["text"]
    assert "## The setups" in text and "## What a token costs in energy" in text
    assert "Marked TPOT from itls" in built["md"]                    # the decode chart's note
    # the tails' per-token table: one row a point, its source and tool the same in every row, said once
    said = "The same in every row: **Run** llama1b-gpu1 · 16:01; **Per token from** itls; **Measured with** vllm bench serve."
    per_token = text.split(said, 1)[1].split("\n\n", 2)[1]
    assert len([line for line in per_token.splitlines() if line.startswith("| ")]) == 2 + len(SWEEP)
    facts = [f for f in built["facts"].values() if f["name"] == "point_j_per_output_token"]
    assert len(facts) == len(SWEEP) and all(f["value"] > 0 for f in facts)
    tpot = [f for f in built["facts"].values() if f["name"] == "point_tpot_median_ms"]
    assert tpot and all("tpot_from is itls" in f["source_note"] for f in tpot)
    window = [f for f in built["facts"].values() if f["name"] == "point_energy_window_s"]
    assert window and all("requests_start" in f["source_note"] for f in window)


def test_the_parts_charts_are_drawn_in_a_browser(built):
    """Every chart of the Part (scaling, tails, timeline, Pareto, the prefill rate at every
    length, where the time went) drawn by vega-embed in headless Chromium, with marks, and no
    console error."""
    with open_site_page(built["root"] / "data" / "site", f"{PART}.html") as (tab, _):
        assert tab.wait_for(charts_drawn())
        marks = tab.js("""[...document.querySelectorAll('div.vega-chart')]
            .map(c => [c.dataset.spec, c.querySelectorAll('svg.marks path').length])""")
        assert len(marks) == 11 and all(n > 0 for _, n in marks), marks
        assert sum("prefill-chart" in spec for spec, _ in marks) == 1
        assert not tab.console_errors()
