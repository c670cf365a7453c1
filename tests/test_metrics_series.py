"""The engine's /metrics sampled through each benchmark point (bench/<point_id>.metrics-series.txt):
read by ingest into raw_metrics_series, turned by derive into point_metrics_series and
point_metrics_summary, and published by render beside the point's request timeline.

The series files are in tests/fixtures/metrics_series/: one vLLM engine at four users with a stall
of three seconds while requests run, a failed scrape and a preemption (vllm_stall); a queue that
builds at sixteen users, from an older vLLM, without a requests window (vllm_queue16); two
data-parallel engines (vllm_dp2); SGLang (sglang).
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers.db_rows import db_rows
from stages.derive import stage as derive
from stages.ingest import stage as ingest
from stages.ingest import read
from stages.ingest.parsers import metrics_series

ROOT = Path(__file__).resolve().parent.parent
SERIES = ROOT / "tests" / "fixtures" / "metrics_series"
RUN = "tiny-llama__cpu_seqs4__4k__vllm__1130-053610"
FIXTURE_RUN = ROOT / "tests" / "fixtures" / "runs" / RUN
T0 = 1764690000.0
# fixture file -> the point it is the series of in the run folder
POINTS = {"vllm_stall": "long-shared__c04", "vllm_queue16": "long__c16", "vllm_dp2": "chat__c08",
          "sglang": "chat__c01"}
RULES = {"prefix_cache_tok_s": 60000, "gate_min_score": 1.0, "cached_share_max_pct": 20,
         "default_max_num_seqs": 256, "burst_tpot_ms": 0.5, "cached_mark_pct": 10}


def line_of(path: Path, needle: str, after: int = 0) -> int:
    """The number of the first line of `path` after line `after` that holds `needle`."""
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if number > after and needle in line:
            return number
    raise AssertionError(f"{needle!r} not in {path.name} after line {after}")


# ---------------------------------------------------------------- the parser

def test_parser_reads_settings_samples_and_a_failed_scrape():
    parsed = metrics_series.parse_series_file((SERIES / "vllm_stall.metrics-series.txt").read_bytes())
    assert parsed.errors == []
    settings = {key: value for key, value, _ in parsed.settings}
    assert settings == {"point": "long-shared__c04", "url": "http://127.0.0.1:8011/metrics",
                        "interval_ms": "1000", "clock": "epoch seconds (UTC)",
                        "requests_start": "1764690000.500000", "requests_end": "1764690009.500000",
                        "samples": "11", "sampler_exit": "ok"}
    headers = [s for s in parsed.samples if s["name"] is None]
    assert [h["sample_idx"] for h in headers] == list(range(11))
    assert [h["error"] for h in headers].count("connection refused") == 1
    assert headers[7] == {"sample_idx": 7, "t_s": T0 + 7, "name": None, "labels": None, "value": None,
                          "error": "connection refused", "source_line": 55}
    running = [s for s in parsed.samples if s["name"] == "vllm:num_requests_running"]
    assert len(running) == 10                      # the failed scrape has none
    assert running[1] == {"sample_idx": 1, "t_s": T0 + 1, "name": "vllm:num_requests_running",
                          "labels": 'engine="0",model_name="tiny-llama"', "value": 4.0, "error": None,
                          "source_line": 14}


def test_parser_reports_lines_outside_a_sample_and_bad_times():
    parsed = metrics_series.parse_series_file(
        b"# point=p\nvllm:num_requests_running 1\n@ soon\nvllm:num_requests_running 2\n"
        b"# something odd\n@ 12.5\nvllm:num_requests_running 3\n")
    assert [e.line for e in parsed.errors] == [2, 3, 4, 5]
    assert [(s["sample_idx"], s["t_s"], s["value"]) for s in parsed.samples] == [(1, 12.5, None), (1, 12.5, 3.0)]
    assert metrics_series.parse_series_file(b"# point=p\n").errors[0].reason.startswith("metrics series: no samples")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=300), st.integers(0, 4000), st.sampled_from([b"", b"\0\0", b"@ x\n", b"\xff\xfe",
                                                                      b"vllm:x{a=\"}\n", b"@ nan\n"]))
def test_parser_never_raises_on_damaged_files(junk, at, splice):
    """A damaged file (cut, spliced with junk) gives rows and error rows, never an exception, and
    every row it gives is of a sample it read the time of."""
    original = (SERIES / "vllm_stall.metrics-series.txt").read_bytes()
    parsed = metrics_series.parse_series_file(original[:at] + splice + junk + original[at:])
    assert all(isinstance(e.reason, str) for e in parsed.errors)
    assert all(s["t_s"] is not None and s["sample_idx"] >= 0 for s in parsed.samples)


def test_series_files_are_known_by_their_suffix():
    assert metrics_series.is_series_file("bench/chat__c01.metrics-series.txt")
    assert metrics_series.is_series_file("bench/agents__s02.metrics-series.txt.gz")
    assert not metrics_series.is_series_file("bench/chat__c01.metrics.before.txt")
    assert not metrics_series.is_series_file("gpu/chat__c01.metrics-series.txt")
    assert metrics_series.point_of("bench/agents__s02.metrics-series.txt") == "agents__s02"


# ---------------------------------------------------------------- ingest and derive

@pytest.fixture(scope="module")
def campaign(tmp_path_factory) -> tuple[Path, dict]:
    tmp = tmp_path_factory.mktemp("series")
    folder = tmp / "data" / "runs" / RUN
    shutil.copytree(FIXTURE_RUN, folder)
    (folder / "MANIFEST.sha256").unlink()
    for name, point in POINTS.items():
        shutil.copy(SERIES / f"{name}.metrics-series.txt", folder / "bench" / f"{point}.metrics-series.txt")
    # a point at sixteen users, beyond the run's four sequences: capacity-limited, its queue sampled
    result = json.loads((folder / "bench" / "long-shared__c04.json").read_text())
    result.update(workload="long", concurrency="16", max_concurrency=16)
    (folder / "bench" / "long__c16.json").write_text(json.dumps(result))
    data = tmp / "data"
    summary = ingest.run(runs_dir=data / "runs", warehouse=data / "warehouse.duckdb", root=tmp)
    derive.run(warehouse=data / "warehouse.duckdb", campaign_db=data / "campaign.duckdb",
               derived_dir=data / "derived", metrics_file=data / "metrics.json", rules=RULES,
               workloads={}, energy=None)
    return tmp, summary


def rows(tmp: Path, sql: str, db: str = "campaign.duckdb") -> list[dict]:
    return db_rows(tmp / "data" / db, sql)


def test_ingest_reads_every_series_file_without_an_error(campaign):
    tmp, summary = campaign
    assert summary["errors"] == 0          # not called unrecognised by the result readers
    counts = rows(tmp, "select point_id, count(*) filter (where name is null) as samples, count(*) as n "
                       "from raw_metrics_series group by point_id order by point_id", "warehouse.duckdb")
    assert counts == [{"point_id": "chat__c01", "samples": 4, "n": 4 + 4 * 8},
                      {"point_id": "chat__c08", "samples": 3, "n": 3 + 3 * 12},
                      {"point_id": "long-shared__c04", "samples": 11, "n": 11 + 10 * 6},
                      {"point_id": "long__c16", "samples": 6, "n": 6 + 6 * 6}]
    [setting] = rows(tmp, "select * from raw_sampler_settings where point_id = 'long-shared__c04' "
                          "and key = 'requests_start'", "warehouse.duckdb")
    assert (setting["sampler"], setting["value"]) == ("metrics", "1764690000.500000")
    assert setting["source_file"].endswith("bench/long-shared__c04.metrics-series.txt")


def test_a_reingest_replaces_the_rows_of_the_run():
    sql = (ROOT / "stages" / "ingest" / "sql" / "ingest" / "delete_run.sql").read_text()
    assert "delete from raw_metrics_series where" in sql
    assert "delete from raw_sampler_settings where" in sql
    assert read.metrics_series is metrics_series


def test_series_figures_second_by_second(campaign):
    tmp, _ = campaign
    got = rows(tmp, "select * from point_metrics_series where point_id = 'long-shared__c04' order by sample_idx")
    assert [r["seconds"] for r in got] == [i - 0.5 for i in range(11)]      # from requests_start
    assert [r["running"] for r in got] == [0, 4, 4, 4, 4, 4, 4, None, 3, 4, 0]
    assert [r["waiting"] for r in got] == [0, 0, 0, 0, 0, 0, 0, None, 1, 0, 0]
    assert [r["gen_tok_s"] for r in got] == [None, 0, 100, 100, 0, 0, 0, None, 100, 100, 100]
    assert [r["prompt_tok_s"] for r in got] == [None, 8192, 0, 0, 0, 0, 0, None, 0, 2048, 0]
    assert [r["preemptions"] for r in got] == [0, 0, 0, 0, 0, 0, 0, None, 1, 1, 1]
    assert got[9]["kv_usage_pct"] == pytest.approx(50.0)
    assert got[7]["error"] == "connection refused" and got[7]["kv_usage_pct"] is None
    assert (got[7]["running_line"], got[7]["waiting_line"], got[7]["kv_line"]) == (None, None, None)
    assert got[8]["waiting_line"] == got[8]["source_line"] + 2      # the sample's waiting line
    assert (got[0]["workload"], got[0]["concurrency"]) == ("long-shared", 4)


def test_summary_stall_queue_and_preemption(campaign):
    tmp, _ = campaign
    by_point = {r["point_id"]: r for r in rows(tmp, "select * from point_metrics_summary")}
    stall = by_point["long-shared__c04"]
    path = tmp / stall["source_file"]
    assert (stall["samples"], stall["error_samples"], stall["readings"]) == (11, 1, 10)
    assert stall["stalled_s"] == pytest.approx(3.0)          # samples 3 to 6: running 4, no token
    assert stall["preemptions"] == 1 and stall["preempted"] and stall["queued"]
    assert stall["waiting_max"] == 1
    assert stall["waiting_source_line"] == line_of(path, "vllm:num_requests_waiting", line_of(path, "@ 1764690008"))
    assert stall["kv_usage_max_pct"] == pytest.approx(50.0)
    assert stall["kv_source_line"] == line_of(path, "vllm:kv_cache_usage_perc", line_of(path, "@ 1764690009"))
    assert stall["gen_tok_s_while_running"] == pytest.approx(600 / 10)   # every interval touches a request
    assert (stall["interval_ms"], stall["sampler_exit"]) == (1000, "ok")

    queue = by_point["long__c16"]                              # no requests window: from the first sample
    assert (queue["waiting_max"], queue["queued"], queue["preempted"], queue["stalled_s"]) == (12, True, False, 0)
    assert queue["kv_usage_max_pct"] == pytest.approx(95.0)    # gpu_cache_usage_perc of older releases
    assert queue["gen_tok_s_while_running"] == pytest.approx(400 / 10)
    seconds = [r["seconds"] for r in rows(tmp, "select seconds from point_metrics_series "
                                                "where point_id = 'long__c16' order by sample_idx")]
    assert seconds == [0, 2, 4, 6, 8, 10]

    dp = by_point["chat__c08"]                                 # two engines: summed (KV: the mean)
    assert (dp["running_max"], dp["waiting_max"]) == (4, 1)
    assert dp["kv_usage_max_pct"] == pytest.approx(35.0)
    assert dp["waiting_source_line"] == line_of(tmp / dp["source_file"], "@ ")   # no one line holds a sum
    dp_rates = rows(tmp, "select gen_tok_s, prompt_tok_s from point_metrics_series "
                         "where point_id = 'chat__c08' order by sample_idx")
    assert [r["gen_tok_s"] for r in dp_rates] == [None, 100, 90]
    assert [r["prompt_tok_s"] for r in dp_rates] == [None, 0, 500]

    sg = by_point["chat__c01"]                                 # SGLang's names
    assert (sg["running_max"], sg["waiting_max"], sg["preemptions"], sg["stalled_s"]) == (1, 0, 0, 0)
    assert sg["kv_usage_max_pct"] == pytest.approx(6.0)
    assert sg["gen_tok_s_while_running"] == pytest.approx(40 / 3)
    assert not sg["queued"] and not sg["preempted"]
    assert (sg["workload"], sg["concurrency"]) == ("chat", 1)


# ---------------------------------------------------------------- render and trace

STALL_FACT = f"metrics_stalled_s--4--{RUN}--long-shared"


@pytest.fixture(scope="module")
def rendered(campaign) -> tuple[Path, str, dict]:
    """The campaign rendered with a Part whose model section covers the run (the one-GPU Part,
    pointed at the run's profile)."""
    import sys
    sys.path.insert(0, str(ROOT / "tests"))
    from helpers.render_campaign import render_kwargs
    from stages.render import stage as render

    tmp, _ = campaign
    series = tmp / "series.yaml"
    series.write_text((ROOT / "site" / "series.yaml").read_text()
                      .replace("runs: {profile: h200x1}", "runs: {profile: local-cpu}"))
    render.run(**render_kwargs(tmp, build=False, static_images=(), series_file=series))
    md = (tmp / "data" / "docs" / "posts" / "part-one-gpu.md").read_text()
    facts = {f["id"]: f for f in json.loads((tmp / "data" / "facts.json").read_text())}
    return tmp, md, facts


def test_the_page_charts_the_timeline_points_series_and_states_the_stall(rendered):
    tmp, md, facts = rendered
    assert "request_timeline_chart-tiny-llama" in md
    chart = md.index("metrics_series_chart-tiny-llama")
    assert md.index("request_timeline_chart-tiny-llama") < chart        # beside the point's timeline
    charts = tmp / "data" / "docs" / "assets" / "charts" / "part-one-gpu"
    timeline = next(charts.glob("request_timeline_chart-*.csv")).read_text().splitlines()
    series = next(charts.glob("metrics_series_chart-*.csv")).read_text().splitlines()
    assert "long__c16" in timeline[1]                 # the timeline's point: the most users
    assert len(series) == 1 + 6 and all("long__c16" in line for line in series[1:])
    header = series[0].split(",")
    waiting = [float(line.split(",")[header.index("waiting")]) for line in series[1:]]
    assert waiting == [0, 4, 8, 12, 4, 0]             # the queue that builds
    # the capacity-limited table says what /metrics saw: the point at sixteen users queued
    queueing = md[md.index("By the engine"):].split("\n\n", 1)[0]
    assert "| queued |" in queueing.replace("&#32;", " ")
    stall = facts[STALL_FACT]
    assert stall["value"] == pytest.approx(3.0) and stall["source_line"] is None
    assert STALL_FACT.split("--")[0] in md and "Stalled" in md
    preempted = facts[f"metrics_preemptions--4--{RUN}--long-shared"]
    assert preempted["value"] == 1
    waiting = facts[f"metrics_waiting_max--4--{RUN}--long-shared"]
    assert waiting["source_file"].endswith("bench/long-shared__c04.metrics-series.txt")
    assert waiting["excerpt"] == 'vllm:num_requests_waiting{engine="0",model_name="tiny-llama"} 1.0'


def test_trace_prints_the_stall_facts_chain(rendered):
    import subprocess
    import sys
    tmp, _, _ = rendered
    shutil.copy(ROOT / "params.yaml", tmp / "params.yaml")
    out = subprocess.run([sys.executable, "-m", "stages.cli", "trace", STALL_FACT, "--root", str(tmp)],
                         cwd=tmp, capture_output=True, text=True, timeout=120,
                         env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "HOME": str(tmp)})
    assert out.returncode == 0, out.stderr
    assert f"fact      {STALL_FACT}" in out.stdout
    assert "value     3.00 s" in out.stdout
    assert "columns.yaml (metrics_stalled_s)" in out.stdout
    assert "point_metrics_summary" in out.stdout and "long-shared__c04" in out.stdout
    assert f"run       data/runs/{RUN}" in out.stdout and "stage     derive" in out.stdout
    verify = subprocess.run([sys.executable, "-m", "stages.cli", "trace", "--verify", STALL_FACT, "--root",
                             str(tmp)], cwd=tmp, capture_output=True, text=True, timeout=300,
                            env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "HOME": str(tmp)})
    assert verify.returncode == 0 and "verify    OK: matches" in verify.stdout, verify.stdout + verify.stderr


# ---------------------------------------------------------------- the CPU rehearsal at its sampling
#
# Series files of the CPU rehearsal's run with a sequence cap of 4 (tests/fixtures/metrics_series,
# vllm_cpu_*), sampled every second on points of one to six seconds:
#   vllm_cpu_short     long-shared at 1 user, as read: 1.3 s of requests, 3 reads, 1 of them inside
#   vllm_cpu_profiled  chat at 4 users, as read: the profiler writing its trace, two reads in a
#                      row with 2 requests running and no token generated
#   vllm_cpu_one_stall the same file with its fourth read left out: one read without a token
#   vllm_cpu_missed    chat at 8 users, with the two reads that caught its queue left out (a
#                      sampler every 3 s): 8 users over the cap of 4, no read saw one waiting

CPU_POINTS = {"vllm_cpu_short": ("long-shared__c01", "long-shared__c04.json"),
              "vllm_cpu_profiled": ("chat__c04", "long-shared__c04.json"),
              "vllm_cpu_one_stall": ("chat__c02", "long-shared__c04.json"),
              "vllm_cpu_missed": ("chat__c08", "long-shared__c04.json")}


@pytest.fixture(scope="module")
def rehearsal(tmp_path_factory) -> Path:
    """The fixture run with the rehearsal's short points and their series files, ingested,
    derived and rendered (the CPU rehearsal's Part)."""
    import sys
    sys.path.insert(0, str(ROOT / "tests"))
    from helpers.render_campaign import render_kwargs
    from stages.render import stage as render

    tmp = tmp_path_factory.mktemp("rehearsal")
    folder = tmp / "data" / "runs" / RUN
    shutil.copytree(FIXTURE_RUN, folder)
    (folder / "MANIFEST.sha256").unlink()
    for name, (point, result_of) in CPU_POINTS.items():
        shutil.copy(SERIES / f"{name}.metrics-series.txt", folder / "bench" / f"{point}.metrics-series.txt")
        workload, users = point.rsplit("__c", 1)
        result = json.loads((folder / "bench" / result_of).read_text())
        result.update(workload=workload, concurrency=str(int(users)), max_concurrency=int(users))
        (folder / "bench" / f"{point}.json").write_text(json.dumps(result))
    data = tmp / "data"
    ingest.run(runs_dir=data / "runs", warehouse=data / "warehouse.duckdb", root=tmp)
    derive.run(warehouse=data / "warehouse.duckdb", campaign_db=data / "campaign.duckdb",
               derived_dir=data / "derived", metrics_file=data / "metrics.json", rules=RULES,
               workloads={}, energy=None)
    render.run(**render_kwargs(tmp, build=False, static_images=()))
    return tmp


def summary_of(tmp: Path) -> dict[str, dict]:
    return {r["point_id"]: r for r in rows(tmp, "select * from point_metrics_summary")}


def test_a_point_of_a_second_or_two_is_too_short_for_its_sampling(rehearsal):
    short = summary_of(rehearsal)["long-shared__c01"]
    assert (short["samples"], short["readings"], short["window_readings"]) == (3, 3, 1)
    assert short["requests_s"] == pytest.approx(1.319, abs=1e-3)
    assert not short["sampled_enough"] and short["series_min_readings"] == 3
    series = rows(rehearsal, "select * from point_metrics_series where point_id = 'long-shared__c01' "
                             "order by sample_idx")
    assert [r["in_requests"] for r in series] == [False, True, False]     # before, inside, after
    # each rate holds over the interval it was measured on, from the read before
    assert series[2]["rate_from_s"] == pytest.approx(series[1]["seconds"])
    assert series[1]["rate_from_s"] == pytest.approx(series[0]["seconds"]) and series[0]["rate_from_s"] is None
    assert series[2]["running"] == 0 and series[2]["gen_tok_s"] > 200    # the read that says 0 running


def test_a_single_sample_without_a_token_is_not_a_stall(rehearsal):
    by_point = summary_of(rehearsal)
    assert by_point["chat__c02"]["stall_min_samples"] == 2
    assert by_point["chat__c02"]["stalled_s"] == 0            # one read: 1.0 s under the old rule
    assert by_point["chat__c04"]["stalled_s"] == pytest.approx(2.0, abs=1e-2)   # two in a row: a stall


def test_more_users_than_the_cap_queued_though_no_read_saw_a_queue(rehearsal):
    missed = summary_of(rehearsal)["chat__c08"]
    assert (missed["concurrency"], missed["seq_cap"], missed["waiting_max"]) == (8, 4, 0)
    assert missed["over_seq_cap"] and missed["queued"] and not missed["queue_seen"] and missed["queue_missed"]
    assert (missed["window_readings"], missed["interval_ms"]) == (0, 3000)
    within = summary_of(rehearsal)["chat__c04"]                  # 4 users, a cap of 4: nothing to judge
    assert not within["over_seq_cap"] and not within["queued"] and not within["queue_missed"]


def test_the_cpu_part_says_what_its_sampling_could_see(rehearsal):
    md = (rehearsal / "data" / "docs" / "posts" / "part-local-cpu.md").read_text()
    facts = {f["id"]: f for f in json.loads((rehearsal / "data" / "facts.json").read_text())}

    def fact(name: str, users: int, workload: str = "chat") -> dict:
        return facts[f"{name}--{users}--{RUN}--{workload}"]

    # the timeline's point (the most users) was read too seldom: said, with its reads, not drawn
    assert "request_timeline_chart-tiny-llama" in md and "metrics_series_chart" not in md
    inside = md[md.index("scraped through this point too"):].split("\n\n", 1)[0]
    assert "too seldom to draw" in inside and "not drawn" in inside
    for name, value in (("metrics_window_readings", 0), ("metrics_interval_ms", 3000),
                        ("metrics_series_min_readings", 3)):
        assert fact(name, 8)["value"] == value and f"#{name}-" in inside
    assert fact("metrics_requests_s", 8)["value"] == pytest.approx(2.908, abs=1e-3)
    # 8 users over a cap of 4: queued, and the counters said to have missed it, never "neither"
    queueing = md[md.index("By the engine"):].split("\n\n", 1)[0].replace("&#32;", " ")
    assert "| queued, missed by the counters |" in queueing
    assert "neither queued nor preempted" not in md
    missed = md[md.index("more than the sequence cap of"):].split("\n\n", 1)[0]
    assert "no read caught a request waiting" in missed
    assert f"#metrics_seq_cap-" in missed and fact("metrics_seq_cap", 8)["value"] == 4
    # the stalls: the profiled point's two reads in a row, not the single read of the 2-user point
    stalls = md[md.index("Stalled"):].split("\n\n", 1)[0]
    assert fact("metrics_stalled_s", 4)["value"] == pytest.approx(2.0, abs=1e-2)
    assert len([line for line in stalls.splitlines() if line.startswith("| <a")]) == 1
    rule = md[md.index("A\nstall is"):].split("\n\n", 1)[0] if "A\nstall is" in md else md[md.index("stall is"):]
    assert "#metrics_stall_min_samples-" in rule.split("\n\n", 1)[0]
    assert fact("metrics_stall_min_samples", 4)["value"] == 2


def test_the_series_chart_starts_at_the_first_request_and_draws_rates_over_their_intervals(rehearsal):
    from stages.render import charts_metrics

    frame = db_rows(rehearsal / "data" / "campaign.duckdb",
                    "select s.run_id, 'tiny-seqs4' as series, s.point_id, s.workload, s.concurrency, "
                    "s.sample_idx, s.seconds, s.in_requests, s.running, s.waiting, s.kv_usage_pct, "
                    "s.gen_tok_s, s.rate_from_s, m.requests_s from point_metrics_series as s "
                    "join point_metrics_summary as m using (run_id, point_id) "
                    "where s.point_id = 'chat__c04' and s.error is null order by s.sample_idx")
    import pandas as pd
    df = pd.DataFrame(frame)
    assert df["seconds"].min() < 0                              # the read before the requests
    spec = charts_metrics.metrics_series_chart(df).to_dict()
    upper, lower = spec["vconcat"]
    assert upper["encoding"]["x"]["scale"]["domain"] == [0, pytest.approx(3.640, abs=1e-3)]
    assert lower["encoding"]["x"]["scale"]["domain"][0] == 0
    datasets = list(spec["datasets"].values())
    reads = next(d for d in datasets if d and "requests" in d[0])
    bars = next(d for d in datasets if d and "from_s" in d[0])
    assert min(r["seconds"] for r in reads) >= 0 and max(r["seconds"] for r in reads) <= 3.641
    assert [r["count"] for r in reads if r["requests"] == "running"] == [2, 2, 2]
    assert min(b["from_s"] for b in bars) == 0 and all(b["to_s"] > b["from_s"] for b in bars)
    assert [round(b["gen_tok_s"]) for b in bars][:3] == [254, 0, 0]
