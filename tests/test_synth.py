"""The synthetic campaign (stages/tools/synth/campaign.py), the bulk readers it exercises, and the benchmark report."""
from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from pathlib import Path

import duckdb
import pytest

from stages.tools.bench import benchmark
from stages.ingest import stage as ingest
from stages.tools.synth import campaign as synth
from stages.formats import vllm_log
from stages.ingest.parsers import cmd, metrics
from stages.formats.engine_log import scan_log

RUNS = 20          # one whole cycle of run kinds
TOTAL_BYTES = 4_000_000


def digest(runs_dir: Path) -> str:
    h = hashlib.sha256()
    for path in sorted(runs_dir.rglob("*")):
        if path.is_file():
            h.update(path.relative_to(runs_dir).as_posix().encode())
            h.update(path.read_bytes())
    return h.hexdigest()


@pytest.fixture(scope="module")
def campaign(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    root = tmp_path_factory.mktemp("synth")
    written = synth.run(out_dir=root / "runs", runs=RUNS, total_bytes=TOTAL_BYTES, seed=3)
    return root, written


def test_same_seed_same_bytes_other_seed_other_bytes(tmp_path: Path):
    a = synth.run(out_dir=tmp_path / "a", runs=6, total_bytes=1_000_000, seed=5)
    b = synth.run(out_dir=tmp_path / "b", runs=6, total_bytes=1_000_000, seed=5)
    c = synth.run(out_dir=tmp_path / "c", runs=6, total_bytes=1_000_000, seed=6)
    assert a == b
    assert digest(tmp_path / "a") == digest(tmp_path / "b")
    assert digest(tmp_path / "a") != digest(tmp_path / "c")
    assert len(set(a["run_ids"])) == 6


def test_campaign_has_every_kind_of_run(campaign):
    root, written = campaign
    kinds = written["kinds"]
    assert (kinds["ready"], kinds["failed"], kinds["interrupted"]) == (17, 2, 1)
    assert (kinds["no_meta"], kinds["docker"], kinds["v0"], kinds["sglang"]) == (4, 5, 3, 1)
    runs = root / "runs"
    crashed = [p for p in runs.iterdir() if not (p / "launch.out").exists()]
    assert len(crashed) == 2
    assert all(sorted(f.name for f in p.iterdir()) == ["cmd.sh", "server.log"] for p in crashed)
    assert all("Traceback" in (p / "server.log").read_text() for p in crashed)
    assert written["total_bytes"] == sum(f.stat().st_size for f in runs.rglob("*") if f.is_file())
    bench = json.loads(next(runs.glob("*/bench/chat__c04.json")).read_text())
    assert len(bench["itls"]) == 8 and len(bench["itls"][0]) == 127
    assert bench["workload"] == "chat" and bench["concurrency"] == "4"


def test_campaign_ingests_with_errors_only_where_files_are_broken(campaign, tmp_path: Path):
    root, written = campaign
    summary = ingest.run(runs_dir=root / "runs", warehouse=tmp_path / "w.duckdb", root=root)
    assert summary["runs_read"] == RUNS
    con = duckdb.connect(str(tmp_path / "w.duckdb"), read_only=True)
    errors = con.execute("select source_file from ingest_errors").fetchall()
    assert sorted(f for (f,) in errors) == sorted(f"runs/{f}" for f in written["broken_files"])
    recovered = con.execute("select count(*) from raw_runs where recovered").fetchone()[0]
    assert recovered == sum(1 for p in (root / "runs").iterdir() if not (p / "meta.json").exists()) == 5
    crash = con.execute("select count(*) from raw_log_facts where fact = 'error'").fetchone()[0]
    assert crash == written["kinds"]["failed"]
    # every launched run gives stats rows, whatever the shape of its log
    without = con.execute(
        "select count(*) from raw_folders f where not exists (select 1 from raw_log_stats s "
        "where s.run_id = f.run_id) and exists (select 1 from raw_launch_out l where l.run_id = f.run_id)"
    ).fetchone()[0]
    assert without == 0
    kv = con.execute("select count(*) from raw_log_facts where fact = 'kv_tokens'").fetchone()[0]
    assert kv == written["kinds"]["ready"] + written["kinds"]["interrupted"] - written["kinds"]["sglang"]
    con.close()


def test_bulk_stats_reader_agrees_with_the_line_reader(campaign):
    root, _ = campaign
    logs = sorted((root / "runs").glob("*__vllm__*/server.log"))
    assert len(logs) == 19
    for log in logs:
        data = log.read_bytes()
        bulk = vllm_log.parse_vllm_log(data)
        lines = scan_log(data, startup=vllm_log.STARTUP_ANCHORS, ready=vllm_log.READY,
                         steady=vllm_log.STEADY_ANCHORS, facts_of=vllm_log.facts_of_line,
                         stats_of=vllm_log.stats_of_line, stats_word="throughput")
        assert not lines.blocks
        assert [dataclasses.astuple(s)[:-1] for s in bulk.stats] == \
               [dataclasses.astuple(s)[:-1] for s in lines.stats]
        assert [(f.fact, f.line) for f in bulk.facts] == [(f.fact, f.line) for f in lines.facts]
    # the logs of the shapes met in the campaign are read in bulk, not line by line
    assert all(not vllm_log.parse_vllm_log(log.read_bytes()).line_stats for log in logs)


def test_bulk_stats_leave_odd_lines_to_the_line_reader():
    text = (
        "(APIServer pid=1) INFO 10-10 05:07:25 [loggers.py:1] Engine 000: Avg prompt throughput: "
        "409.6 tokens/s, Avg generation throughput: 7.9 tokens/s, Running: 4 reqs, Waiting: 0 reqs, "
        "GPU KV cache usage: 0.4%, Prefix cache hit rate: 0.0%\n"
        "(APIServer pid=1) INFO 10-10 05:07:35 [loggers.py:1] Engine 001: Avg prompt throughput: "
        "1,409.6 tokens/s, Avg generation throughput: 7.9 tokens/s, Running: 4 reqs, Waiting: 0 reqs, "
        "GPU KV cache usage: 0.4%, Prefix cache hit rate: 0.0%\n"
        "\x1b[0;36m(APIServer pid=1)\x1b[0m INFO 10-10 05:07:45 [loggers.py:1] Engine 000: Avg prompt "
        "throughput: 1.0 tokens/s, Avg generation throughput: 2.0 tokens/s, Running: 1 reqs, Waiting: "
        "0 reqs, GPU KV cache usage: 0.1%, Prefix cache hit rate: 0.0%\n")
    p = vllm_log.parse_vllm_log(text.encode())
    assert [len(b) for b in p.blocks] == [1]
    assert [s.line for s in p.line_stats] == [2, 3]
    assert [(s.line, s.engine_idx, s.prompt_tok_s) for s in p.stats] == [
        (1, 0, 409.6), (2, 1, 1409.6), (3, 0, 1.0)]


def test_metrics_bulk_reader_agrees_with_the_line_reader(campaign):
    root, _ = campaign
    for path in sorted((root / "runs").glob("*/bench/*.metrics.*"))[:40]:
        text = metrics.decode(path.read_bytes())
        assert metrics._bulk(text, text.split("\n")) is not None
        assert metrics.parse_metrics(path.read_bytes())[0] == metrics._read_lines(text.split("\n"))[0]
    odd = (b'a{x="1}2",y="z"} 3\n'                     # a brace inside quotes
           b'b{x="q\\"r"} 4 1700000000\n'               # an escaped quote, a timestamp
           b'c 5\n# comment\n\nd{e="f"} NaN\n')
    samples, errors = metrics.parse_metrics(odd)
    assert errors == []
    assert [(s.name, s.labels, s.line) for s in samples] == [
        ("a", 'x="1}2",y="z"', 1), ("b", 'x="q\\"r"', 2), ("c", None, 3), ("d", 'e="f"', 6)]
    assert metrics.parse_metrics(b"a 1\nb oops\n")[1][0].line == 2


def test_benchmark_report_has_every_figure(tmp_path: Path):
    lines: list[str] = []
    report = benchmark.run(out_dir=tmp_path, scale=1.0, repeats=2, scale_points=(0.5, 1.0, 2.0),
                           runs_at_1x=6, bytes_at_1x=3_000_000, keep_data=False, progress=lines.append,
                           sections=("ingest",))     # the render section: tests/test_bench_render.py
    figures = report["figures"]
    for key in ("full_ingest_mb_s", "logs_only_ingest_mb_s", "grep_mb_s", "logs_only_over_grep_time",
                "peak_rss_gib", "noop_s_median", "growth_spread"):
        assert figures[key] > 0, key
    assert len(figures["noop_s"]) == 2
    assert set(report["passed"]) == {"log_mb_s", "peak_rss_gib", "noop_s", "growth_spread"}
    assert [p["factor"] for p in report["scale_points"]] == [0.5, 1.0, 2.0]
    assert report["scale_points"][2]["folders"] == 12
    # the sixth run of a campaign was interrupted: its last result file is cut short
    assert len(report["ingest_errors"]) == len(report["expected_errors"]) == 1
    assert report["ingest_errors"][0].startswith("campaign/runs/" + report["expected_errors"][0])
    md = (tmp_path / "report.md").read_text()
    for needle in ("MB/s", "grep -c", "peak memory", "no-op re-ingest", "| 2x |", "CPUs, Python"):
        assert needle in md, needle
    assert json.loads((tmp_path / "report.json").read_text())["figures"] == json.loads(json.dumps(figures))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.json", "report.md"]
    assert any(line.startswith("bench: ingest full campaign") for line in lines)


def test_each_log_states_the_max_model_len_its_command_asks_for(campaign):
    root, _ = campaign
    checked = 0
    for folder in sorted((root / "runs").glob("*__vllm__*")):
        flags, _ = cmd.parse_cmd((folder / "cmd.sh").read_text())
        stated = [int(m) for m in re.findall(r"'max_model_len': (\d+)", (folder / "server.log").read_text())]
        if stated and flags.max_model_len:
            assert stated[0] == flags.max_model_len, folder.name      # 128k is 128,000 to vLLM
            checked += 1
    assert checked >= 10
