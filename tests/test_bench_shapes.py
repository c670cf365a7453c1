"""`vllm bench serve` result files of every shape its releases write, 0.10 to 0.34
(tests/fixtures/bench_shapes/, its README says which release writes which): each read through
ingest and derive gives a time per output token and says where it came from: each request's
latency where the file has latencies (0.30 on), the gaps between its tokens (itls) where it has
none (every release before), the tool's own summary where it has neither (saved without
--save-detailed). The figures recomputed from the requests are the tool's own, to the float."""
from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest

from helpers.derive_rows import ingest_and_derive
from helpers.render_campaign import render_kwargs
from stages.render import stage as render
from stages.render.inputs import input_rows, recompute

SHAPES = Path(__file__).parent / "fixtures" / "bench_shapes"
RULES = {"prefix_cache_tok_s": 60000, "gate_min_score": 1.0, "cached_share_max_pct": 20,
         "default_max_num_seqs": 256, "burst_tpot_ms": 0.5, "cached_mark_pct": 10}
# fixture -> where its TPOT comes from
EXPECTED = {
    "vllm_0.10.0-0.10.2_itls.json": "itls",
    "vllm_0.11.0-0.11.0_itls_peak.json": "itls",
    "vllm_0.11.1-0.14.1_itls_failed.json": "itls",
    "vllm_0.15.0-0.16.0_start_times.json": "itls",
    "vllm_0.17.0-0.29.0_start_times_rtfx.json": "itls",
    "vllm_0.17.0-0.29.0_summary_only.json": "tool summary",
    "vllm_0.30.0-0.34.0_latencies.json": "latencies",
    "vllm_0.30.0-0.34.0_summary_only.json": "tool summary",
}


def test_every_shape_is_covered():
    assert set(EXPECTED) == {p.name for p in SHAPES.glob("*.json")}


@pytest.fixture(scope="module")
def derived(tmp_path_factory) -> dict:
    """One run folder per shape (a folder from elsewhere: no meta.json, only its launch record
    and its result file), ingested and derived together."""
    root = tmp_path_factory.mktemp("shapes")
    runs = root / "data" / "runs"
    ids = {}
    for n, name in enumerate(sorted(EXPECTED), 1):
        run_id = f"tiny-chat__shape{n:02d}__4k__vllm__0415-1620{n:02d}"
        (runs / run_id / "bench").mkdir(parents=True)
        (runs / run_id / "launch.out").write_text("status=ready\n")
        (runs / run_id / "bench" / "short_chat__c02.json").write_bytes((SHAPES / name).read_bytes())
        ids[name] = run_id
    con = duckdb.connect(str(ingest_and_derive(root, RULES)), read_only=True)
    yield {"con": con, "ids": ids}
    con.close()


def point(con, run_id: str) -> dict:
    cur = con.execute("select * from bench_points where run_id = ?", [run_id])
    names = [d[0] for d in cur.description]
    [row] = cur.fetchall()
    return dict(zip(names, row))


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_shape_gives_the_tools_own_tpot_and_says_where_it_came_from(derived, name):
    raw = json.loads((SHAPES / name).read_text())
    row = point(derived["con"], derived["ids"][name])
    assert row["tpot_from"] == EXPECTED[name]
    assert row["tpot_median_ms"] == pytest.approx(raw["median_tpot_ms"], rel=1e-12)
    assert row["tpot_p99_ms"] == pytest.approx(raw["p99_tpot_ms"], rel=1e-12)
    assert row["decode_tok_s_per_user"] == pytest.approx(1000 / raw["median_tpot_ms"], rel=1e-12)
    assert row["ttft_median_s"] == pytest.approx(raw["median_ttft_ms"] / 1000, rel=1e-12)
    assert row["completed"] == raw["completed"]


def test_requests_without_latencies_take_theirs_from_ttft_and_itls(derived):
    name = "vllm_0.17.0-0.29.0_start_times_rtfx.json"
    raw = json.loads((SHAPES / name).read_text())
    assert "latencies" not in raw
    rows = derived["con"].execute(
        "select request_idx, latency_s, latency_from, tpot_ms, tpot_from from bench_requests"
        " where run_id = ? order by request_idx", [derived["ids"][name]]).fetchall()
    assert len(rows) == len(raw["ttfts"])
    for i, latency, latency_from, tpot, tpot_from in rows:
        assert latency_from == "ttft + itls" and tpot_from == "itls"
        assert latency == pytest.approx(raw["ttfts"][i] + sum(raw["itls"][i]), rel=1e-12)
        assert tpot == pytest.approx(sum(raw["itls"][i]) / (raw["output_lens"][i] - 1) * 1000, rel=1e-12)
    # the e2e latency the tool itself summarised, recomputed from the requests
    median_e2el = derived["con"].execute(
        "select median(latency_s) * 1000 from bench_requests where run_id = ? and ok",
        [derived["ids"][name]]).fetchone()[0]
    assert median_e2el == pytest.approx(raw["median_e2el_ms"], rel=1e-12)


def test_a_file_with_latencies_keeps_its_own(derived):
    name = "vllm_0.30.0-0.34.0_latencies.json"
    raw = json.loads((SHAPES / name).read_text())
    rows = derived["con"].execute(
        "select latency_s, latency_from, tpot_from from bench_requests where run_id = ? order by request_idx",
        [derived["ids"][name]]).fetchall()
    assert [r[0] for r in rows] == pytest.approx(raw["latencies"])
    assert {(r[1], r[2]) for r in rows} == {("latencies", "latencies")}


def test_points_no_frontier_places_say_why(tmp_path):
    """pareto_left_out: a run from elsewhere names no GPU set; a run on GPU 0 whose result file
    holds no time per output token at all has no decode speed; one whose requests all failed
    completed none. Each reported point is placed or left out, once."""
    runs = tmp_path / "data" / "runs"
    raw = json.loads((SHAPES / "vllm_0.17.0-0.29.0_start_times_rtfx.json").read_text())
    no_tpot = {k: v for k, v in raw.items() if k != "itls" and "tpot" not in k}
    failed = {**raw, "completed": 0, "failed": 4, "errors": ["timeout"] * 4, "output_lens": [0] * 4,
              "itls": [[]] * 4, "ttfts": [0.0] * 4}
    no_itls = {k: v for k, v in raw.items() if k != "itls"}     # TTFTs, and TPOT from the summary
    for run_id, result, gpus in (("tiny-chat__nogpus__4k__vllm__0415-162001", raw, None),
                                 ("tiny-chat__notpot__4k__vllm__0415-162002", no_tpot, "0"),
                                 ("tiny-chat__failed__4k__vllm__0415-162003", failed, "0"),
                                 ("tiny-chat__noitls__4k__vllm__0415-162004", no_itls, "0")):
        (runs / run_id / "bench").mkdir(parents=True)
        (runs / run_id / "launch.out").write_text("status=ready\n")
        if gpus:
            (runs / run_id / "meta.json").write_text(json.dumps({
                "schema_version": 1, "run_id": run_id, "spec": run_id.split("__")[1],
                "profile": "h200x8" if "noitls" in run_id else "h200x1",
                "engine": "vllm", "model": "tiny-chat", "layout": run_id.split("__")[1],
                "max_model_len": 4096, "gpus": gpus}))
        (runs / run_id / "bench" / "short_chat__c02.json").write_text(json.dumps(result))
    con = duckdb.connect(str(ingest_and_derive(tmp_path, RULES)), read_only=True)
    reasons = dict(con.execute("select split_part(run_id, '__', 2), reason from pareto_left_out").fetchall())
    assert reasons == {"nogpus": "no GPU set", "notpot": "no decode speed", "failed": "no request completed"}
    # the point whose requests hold no TPOT is placed, its TPOT the tool's, its TTFT its requests'
    placed = con.execute("select split_part(run_id, '__', 2), tpot_median_ms from pareto_points").fetchall()
    assert placed == [("noitls", pytest.approx(raw["median_tpot_ms"]))]
    keys = {"run_id": "tiny-chat__noitls__4k__vllm__0415-162004", "workload": "short_chat", "concurrency": 2}
    assert point(con, keys["run_id"])["tpot_from"] == "tool summary"
    assert point(con, keys["run_id"])["figures_from"] == "requests"
    statistic, rows = input_rows(con, "point_tpot_median_ms", keys)
    [used] = [r for r in rows if r["used"]]
    assert used["path"] == "median_tpot_ms" and recompute(statistic, rows) == pytest.approx(raw["median_tpot_ms"])
    statistic, rows = input_rows(con, "point_ttft_median_s", keys)
    assert sorted(r["path"] for r in rows if r["used"]) == [f"ttfts[{i}]" for i in range(4)]
    assert recompute(statistic, rows) == pytest.approx(raw["median_ttft_ms"] / 1000)
    con.close()
    # the one-GPU Part covers the two runs of profile h200x1: its setups section says why neither
    # is placed (the run placed is the node's)
    summary = render.run(**render_kwargs(tmp_path))
    md = (tmp_path / "data" / "docs" / "posts" / "part-one-gpu.md").read_text()
    assert "*No benchmark point of these runs is placed on a frontier here, for the reasons below.*" in md
    rows = [line for line in md.splitlines() if "| no decode speed |" in line or "| no request completed |" in line]
    # both are the point short_chat__c02 of their run: said once above the table
    assert len(rows) == 2 and "The same in every row: **Which** short&#95;chat&#95;&#95;c02." in md
    counts = [f for f in json.loads((tmp_path / "data" / "facts.json").read_text())
              if f["name"] == "setup_left_out_count"]
    assert sorted((f["params"]["reason"], f["value"]) for f in counts) == [
        ("no decode speed", 1), ("no request completed", 1)]
    assert summary["pages"]
