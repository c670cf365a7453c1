"""Where a run's time went: run_timeline, run_phases and point_client_time from launch.out's
engine_times, gate_times and step_times lines (a copy of the one-GPU fixture run given those lines),
the fallback for a run written before them (the fixture as committed: estimated from meta.json,
ready_s and its GPU sampler files), the client_paced rule, the GPU-hours fact and the chart's rows."""
from __future__ import annotations

import datetime as dt
import shutil
from pathlib import Path

import duckdb
import pytest

from stages.core.config import derive_settings, load_params
from stages.derive import stage as derive
from stages.ingest import stage as ingest
from stages.render import chart_writer
from stages.render.charts_timeline import PHASES, run_time_rows

ROOT = Path(__file__).resolve().parent.parent
RUN = "llama-1b__gpu1_seqs64__32k__vllm__1202-160157"
FIXTURE = ROOT / "tests" / "fixtures" / "gpu_h200x1" / RUN
T0 = dt.datetime(2026, 12, 2, 16, 1, 57, tzinfo=dt.timezone.utc)   # meta.json started_at


def iso(seconds: float) -> str:
    return (T0 + dt.timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


# (step, start, requests_start, requests_end, end, prompts_waited_s), seconds after T0
STEPS = [("long__c01", 205.0, 224.0, 225.0, 225.5, "18.500"),     # the client set the pace
         ("long__c04", 226.0, 226.05, 228.0, 228.04, "0.000"),    # within the rule
         ("ramp", 229.0, None, None, 240.0, "-")]                 # requests not timed


def _derived(tmp: Path) -> duckdb.DuckDBPyConnection:
    data = tmp / "data"
    ingest.run(runs_dir=data / "runs", warehouse=data / "warehouse.duckdb", root=tmp)
    settings = derive_settings({**load_params(ROOT), "profile": "h200x1"})
    derive.run(warehouse=data / "warehouse.duckdb", campaign_db=data / "campaign.duckdb",
               derived_dir=data / "derived", metrics_file=data / "metrics.json", **settings)
    return duckdb.connect(str(data / "campaign.duckdb"), read_only=True)


def _copy(tmp: Path) -> Path:
    folder = tmp / "data" / "runs" / RUN
    shutil.copytree(FIXTURE, folder)
    for p in [folder, *folder.rglob("*")]:
        p.chmod(p.stat().st_mode | 0o200)
    (folder / "MANIFEST.sha256").unlink()
    return folder


def _rows(con, sql: str, params=None) -> list[dict]:
    cur = con.execute(sql, params or [])
    names = [d[0] for d in cur.description]
    return [dict(zip(names, r)) for r in cur.fetchall()]


@pytest.fixture(scope="module")
def timed(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("timed")
    folder = _copy(tmp)
    launch = folder / "launch.out"
    lines = [f"engine_times=start={iso(0)} ready={iso(199.9)}",
             f"gate_times=start={iso(200.0)} end={iso(204.0)}"]
    for step, start, sent, ended, end, waited in STEPS:
        lines.append(f"step_times={step} start={iso(start)} requests_start={iso(sent) if sent else '-'} "
                     f"requests_end={iso(ended) if ended else '-'} end={iso(end)} prompts_waited_s={waited}")
    text = launch.read_text()
    first = text.count("\n") + 1
    launch.write_text(text + "\n".join(lines) + "\n")
    return _derived(tmp), first


@pytest.fixture(scope="module")
def old(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("old")
    _copy(tmp)
    return _derived(tmp)


def test_timeline_from_launch_out(timed):
    con, first = timed
    rows = _rows(con, "select * from run_timeline order by phase_order")
    phases = [(r["phase"], r["step"], round(r["seconds"], 3)) for r in rows]
    assert phases[:11] == [
        ("engine_start", None, 199.9), ("gap", None, 0.1), ("gate", None, 4.0), ("gap", None, 1.0),
        ("client_prep", "long__c01", 19.0), ("requests", "long__c01", 1.0), ("tail", "long__c01", 0.5),
        ("gap", None, 0.5), ("client_prep", "long__c04", 0.05), ("requests", "long__c04", 1.95),
        ("tail", "long__c04", 0.04)]
    assert ("step", "ramp", 11.0) in phases
    assert phases[-1][0] == "end"
    assert not any(r["estimated"] for r in rows)
    by = {(r["phase"], r["step"]): r for r in rows}
    assert by[("engine_start", None)]["source_file"] == f"data/runs/{RUN}/launch.out"
    assert by[("engine_start", None)]["source_line"] == first
    assert by[("gate", None)]["source_line"] == first + 1
    assert by[("client_prep", "long__c01")]["source_line"] == first + 2
    assert by[("client_prep", "long__c01")]["prompts_waited_s"] == 18.5
    # the phases make the run: run_phases sums them, its shares add to the whole
    total = con.execute("select sum(seconds), any_value(run_s), sum(share_pct) from run_phases").fetchone()
    assert total[0] == pytest.approx(total[1]) and total[2] == pytest.approx(100)
    assert total[1] == pytest.approx(
        (dt.datetime(2026, 12, 2, 16, 6, 49, tzinfo=dt.timezone.utc) - T0).total_seconds())   # finished_at


def test_client_paced_rule(timed):
    con, _ = timed
    rule = load_params(ROOT)["rules"]["client_pace_max_pct"]
    rows = {r["point_id"]: r for r in _rows(con, "select * from point_client_time")}
    c01, c04 = rows["long__c01"], rows["long__c04"]
    assert (c01["step_s"], c01["client_prep_s"], c01["requests_s"], c01["tail_s"]) == pytest.approx((20.5, 19, 1, 0.5))
    assert c01["client_share_pct"] == pytest.approx(100 * 19.5 / 20.5) and c01["client_paced"]
    assert c04["client_share_pct"] == pytest.approx(100 * 0.09 / 2.04) and not c04["client_paced"]
    assert c01["client_pace_max_pct"] == rule and not c01["estimated"]
    # the other points ran no step_times line: no row of theirs (the run has lines, so no estimate)
    assert set(rows) == {"long__c01", "long__c04"}


def test_old_run_estimated(old):
    rows = _rows(old, "select * from run_timeline order by phase_order")
    assert rows and all(r["estimated"] for r in rows)
    assert rows[0]["phase"] == "engine_start" and rows[0]["seconds"] == pytest.approx(199.9)
    assert rows[0]["source_file"].endswith("launch.out")                       # its ready_s line
    assert rows[1]["phase"] == "gate"                                           # a gated run
    prep = [r for r in rows if r["phase"] == "client_prep"]
    assert len(prep) == 12 and all(r["source_file"].endswith(f"gpu/{r['step']}.csv") for r in prep)
    c01 = _rows(old, "select * from point_client_time where point_id = 'long__c01'")[0]
    assert c01["estimated"] and c01["client_paced"] and c01["client_prep_s"] == pytest.approx(19.26, abs=0.01)
    assert old.execute("select count(*) from point_client_time").fetchone()[0] == 10


def test_gpu_hours_fact_and_chart_rows(old):
    sql = (ROOT / "stages/render/sql/facts/part_gpu_hours.sql").read_text()
    value, unit, runs = old.execute(sql, {"run_ids": [RUN]}).fetchone()[:3]
    run_s = old.execute("select any_value(run_s) from run_phases").fetchone()[0]
    assert unit == "GPU-hours" and runs == [RUN] and value == pytest.approx(1 * run_s / 3600)
    rows_sql = (ROOT / "stages/render/sql/render/part_run_phases.sql").read_text()
    df = old.execute(rows_sql, {"run_ids": [RUN]}).df()
    drawn = run_time_rows(df)
    assert list(drawn["phase"]) == [p for p in PHASES if p in set(df["phase"])]
    assert drawn["seconds"].sum() == pytest.approx(run_s)
    spec = chart_writer.chart_lib().spec("run_time_chart", df)
    assert spec["title"]["text"] == "Where each run's time went"
    assert len(next(iter(spec["datasets"].values()))) == len(drawn)
