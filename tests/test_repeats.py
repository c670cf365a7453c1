"""A run's group is its spec, image and engine version; a workload's repeated points keep their
repeat number from the sweep through ingest and derive."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import duckdb
import pytest

from helpers.db_rows import db_rows
from stages.core.params_check import check_params
from stages.core import config
from stages.core.config import CampaignError
from stages.derive import stage as derive
from stages.ingest import stage as ingest
from stages.ingest.parsers import bench_json
from stages.render import run_sets
from stages.run import bench_client as bench

PROJECT = Path(__file__).resolve().parent.parent
FIXTURE = PROJECT / "tests" / "fixtures" / "runs" / "tiny-llama__cpu_seqs4__4k__vllm__1130-053610"
OLD_IMAGE, NEW_IMAGE = "vllm/vllm-openai:v0.31.0", "vllm/vllm-openai:nightly-abc"
CRASHED = "tiny-llama__cpu_seqs4__4k__vllm__1130-040000"    # old image, died before its version
OLD = "tiny-llama__cpu_seqs4__4k__vllm__1130-050000"        # old image, the fixture's files as they are
NEW = "tiny-llama__cpu_seqs4__4k__vllm__1130-060000"        # new image, chat at one user run twice


# ------------------------------------------------------------------ the sweep

def test_a_workload_with_repeats_runs_each_point_that_often_each_with_its_own_seed(tmp_path):
    workloads = {"long": {"prompt_tokens": 2048, "output_tokens": 64, "concurrency": [1, 4]},
                 "chat": {"prompt_tokens": 256, "output_tokens": 64, "concurrency": [1, 4], "repeats": 2}}
    points = bench.points_for(workloads=workloads, names=["long", "chat"])
    assert [(p.point_id, p.repeat) for p in points] == [
        ("long__c01", 1), ("long__c04", 1),
        ("chat__c01__r1", 1), ("chat__c01__r2", 2), ("chat__c04__r1", 1), ("chat__c04__r2", 2)]
    assert len({p.seed for p in points}) == len(points)
    # a point without repeats, and the first repeat of one, keep the seed points always had
    assert [p.seed for p in points if p.repeat == 1] == [1001, 1004, 1101, 1104]
    r2 = points[3]
    argv = bench.bench_argv(r2, base_url="http://x", model="m", tokenizer="m", result_dir=tmp_path,
                            run_id="r")
    assert argv[argv.index("--result-filename") + 1] == "chat__c01__r2.json"
    assert argv[argv.index("--seed") + 1] == str(r2.seed)
    assert {"repeat=2", f"seed={r2.seed}", "workload=chat", "concurrency=1"} <= set(argv)


@pytest.mark.parametrize("repeats", [0, -1, "2", True, 1.5])
def test_repeats_must_be_a_positive_integer(repeats):
    workloads = {"chat": {"prompt_tokens": 256, "output_tokens": 64, "concurrency": [1], "repeats": repeats}}
    with pytest.raises(CampaignError, match="repeats must be a positive integer"):
        bench.points_for(workloads=workloads, names=["chat"])
    params = config.load_params(PROJECT, check=False)
    params["workloads"]["local-cpu"]["chat"]["repeats"] = repeats
    assert any("chat.repeats must be a positive integer" in p for p in check_params(params, PROJECT))


def test_the_repeat_comes_from_the_result_file_else_its_name_else_is_one():
    from_meta, _ = bench_json.point_of({"repeat": "3", "workload": "chat", "concurrency": "1"},
                                       "chat__c01__r3", 1)
    from_name, _ = bench_json.point_of({"completed": 2}, "chat__c01__r2", 1)
    old, _ = bench_json.point_of({"completed": 2}, "chat__c01", 1)
    assert (from_meta["repeat"], from_name["repeat"], old["repeat"]) == (3, 2, 1)
    assert (from_name["workload"], from_name["concurrency"]) == ("chat", 1)


# ------------------------------------------------------------------ constructed run folders

def _folder(runs: Path, run_id: str, *, image: str, version: str | None, started: str) -> Path:
    """A copy of the fixture run under another id, image and engine version (unsealed: ingest
    seals it as it arrives)."""
    d = runs / run_id
    shutil.copytree(FIXTURE, d)
    (d / "MANIFEST.sha256").unlink()
    meta = json.loads((d / "meta.json").read_text())
    meta.update(run_id=run_id, image=image, engine_version=version, executor="docker",
                started_at=started)
    (d / "meta.json").write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
    return d


def _repeat_chat(d: Path, seeds: dict[int, int]) -> None:
    """chat at one user run twice: chat__c01 becomes chat__c01__r1 and __r2, each with its seed."""
    bench_dir = d / "bench"
    original = json.loads((bench_dir / "chat__c01.json").read_text())
    for repeat, seed in seeds.items():
        obj = dict(original, repeat=str(repeat), seed=str(seed),
                   ttfts=[t * repeat for t in original["ttfts"]])
        (bench_dir / f"chat__c01__r{repeat}.json").write_text(json.dumps(obj) + "\n")
        for suffix in (".cmd", ".out", ".metrics.before.txt", ".metrics.after.txt"):
            shutil.copy(bench_dir / f"chat__c01{suffix}", bench_dir / f"chat__c01__r{repeat}{suffix}")
    for f in list(bench_dir.glob("chat__c01.*")):
        f.unlink()


@pytest.fixture(scope="module")
def campaign(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("campaign")
    runs = root / "data" / "runs"
    crashed = _folder(runs, CRASHED, image=OLD_IMAGE, version=None, started="2026-11-30T04:00:00Z")
    for name in ("launch.out", "niah.log"):
        (crashed / name).unlink()
    shutil.rmtree(crashed / "bench")
    (crashed / "server.log").write_text("RuntimeError: CUDA error: out of memory\n")
    _folder(runs, OLD, image=OLD_IMAGE, version="0.31.0", started="2026-11-30T05:00:00Z")
    points = bench.points_for(workloads={"chat": {"prompt_tokens": 256, "output_tokens": 64,
                                                  "concurrency": [1], "repeats": 2}}, names=["chat"])
    _repeat_chat(_folder(runs, NEW, image=NEW_IMAGE, version="0.32.0", started="2026-11-30T06:00:00Z"),
                 {p.repeat: p.seed for p in points})
    warehouse = root / "data" / "warehouse.duckdb"
    ingest.run(runs_dir=runs, warehouse=warehouse, root=root)
    settings = config.derive_settings(config.load_params(PROJECT, check=False))
    out = root / "data" / "out"
    derive.run(warehouse=warehouse, campaign_db=out / "campaign.duckdb", derived_dir=out / "derived",
               metrics_file=out / "metrics.json", **settings)
    return out / "campaign.duckdb"


def rows(db: Path, sql: str, params: dict | None = None) -> list[dict]:
    return db_rows(db, sql, params)


def test_one_layout_under_two_images_is_current_once_for_each(campaign):
    got = {r["run_id"]: r for r in rows(campaign, "select * from runs")}
    assert {r: (got[r]["attempt"], got[r]["is_current"]) for r in got} == {
        CRASHED: (1, False), OLD: (2, True), NEW: (1, True)}
    # the launch that died before logging its version counts with the next run of its image
    assert got[CRASHED]["attempt_group"] == got[OLD]["attempt_group"] == f"tiny-seqs4 | {OLD_IMAGE} | 0.31.0"
    assert got[NEW]["attempt_group"] == f"tiny-seqs4 | {NEW_IMAGE} | 0.32.0"
    with duckdb.connect(str(campaign), read_only=True) as con:
        assert run_sets.select(con, {"image": "v0.31.0"}, current_only=True) == [OLD]
        assert run_sets.select(con, {"image": "nightly-abc"}, current_only=True) == [NEW]
        assert run_sets.select(con, {"specs": ["tiny-seqs4"]}, current_only=True) == [OLD, NEW]


def test_two_repeats_are_two_points_with_their_seeds_and_an_old_folder_reads_as_repeat_one(campaign):
    got = rows(campaign, "select run_id, point_id, workload, concurrency, repeat from bench_points "
                         "order by run_id, point_id")
    assert [tuple(r.values()) for r in got] == [
        (OLD, "chat__c01", "chat", 1, 1), (OLD, "long-shared__c04", "long-shared", 4, 1),
        (NEW, "chat__c01__r1", "chat", 1, 1), (NEW, "chat__c01__r2", "chat", 1, 2),
        (NEW, "long-shared__c04", "long-shared", 4, 1)]
    requests = rows(campaign, "select repeat, count(*) as n, max(ttft_s) as ttft from bench_requests "
                              "where run_id = $r and workload = 'chat' group by repeat order by repeat",
                    {"r": NEW})
    assert [(r["repeat"], r["n"]) for r in requests] == [(1, 2), (2, 2)]
    assert requests[1]["ttft"] == pytest.approx(2 * requests[0]["ttft"])
    assert rows(campaign, "select distinct repeat from bench_requests where run_id = $r", {"r": OLD}) == [
        {"repeat": 1}]


def test_each_repeat_keeps_the_seed_its_result_file_records(campaign):
    warehouse = campaign.parents[1] / "warehouse.duckdb"
    got = rows(warehouse, "select point_id, repeat, json_extract_string(metadata_json, '$.seed') as seed "
                          "from raw_bench_points where run_id = $r and workload = 'chat' order by point_id",
               {"r": NEW})
    points = bench.points_for(workloads={"chat": {"prompt_tokens": 256, "output_tokens": 64,
                                                  "concurrency": [1], "repeats": 2}}, names=["chat"])
    assert [(r["point_id"], r["repeat"], r["seed"]) for r in got] == [
        (p.point_id, p.repeat, str(p.seed)) for p in points]


def test_the_pages_show_a_repeated_point_once_by_its_repeats_median_and_spread(campaign):
    from stages.render.queries import ROWS_SQL, SQL_DIR, fact_sql, load_query

    with duckdb.connect(str(campaign), read_only=True) as con:
        con.execute((SQL_DIR / "macros.sql").read_text())
        cur = con.execute(load_query(ROWS_SQL, "chart_points", "row query"), {"profile": "local-cpu"})
        names = [d[0] for d in cur.description]
        charted = [dict(zip(names, r)) for r in cur.fetchall()]
        new_chat = [r for r in charted if r["run_id"] == NEW and r["workload"] == "chat"]
        repeats = con.execute("select ttft_median_s, output_tok_s from bench_points where run_id = $r "
                              "and workload = 'chat' order by repeat", {"r": NEW}).fetchall()
        [p] = new_chat
        assert (p["point_id"], p["repeats"]) == ("chat__c01__r1", 2)
        assert p["ttft_median_s"] == pytest.approx((repeats[0][0] + repeats[1][0]) / 2)
        assert (p["ttft_median_min_s"], p["ttft_median_max_s"]) == pytest.approx(
            (min(r[0] for r in repeats), max(r[0] for r in repeats)))
        assert repeats[0][0] < p["ttft_median_s"] < repeats[1][0]
        # a point that ran once is drawn as it is
        [old] = [r for r in charted if r["run_id"] == OLD and r["workload"] == "chat"]
        assert old["repeats"] == 1 and old["ttft_median_s"] == con.execute(
            "select ttft_median_s from bench_points where run_id = $r and point_id = 'chat__c01'",
            {"r": OLD}).fetchone()[0]
        listed = con.execute(load_query(ROWS_SQL, "model_repeats", "row query"),
                             {"run_ids": [OLD, NEW], "model": "tiny-llama"}).fetchall()
        assert listed == [(NEW, "tiny-seqs4", "chat", 1, 2)]
        # a point's own facts are its first repeat's, one row; the spread facts hold the rest
        key = {"run_id": NEW, "workload": "chat", "concurrency": 1}
        assert con.execute(fact_sql("point_ttft_median_s"), key).fetchall()[0][0] == pytest.approx(repeats[0][0])
        assert len(con.execute(fact_sql("point_ttft_median_s"), key).fetchall()) == 1
        assert con.execute(fact_sql("point_repeats_ttft_max_s"), key).fetchone()[0] == pytest.approx(repeats[1][0])
        assert con.execute(fact_sql("point_repeats"), key).fetchone()[0] == 2


def test_a_profile_counts_a_repeated_point_once(campaign):
    from stages.render.queries import fact_sql

    with duckdb.connect(str(campaign), read_only=True) as con:
        counted = con.execute(fact_sql("profile_points"), {"profile": "local-cpu"}).fetchone()[0]
        rows_of_current = con.execute("select count(*) from bench_points join runs using (run_id) "
                                      "where is_current").fetchone()[0]
    assert (counted, rows_of_current) == (4, 5)
