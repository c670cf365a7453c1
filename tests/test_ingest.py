"""Ingest: run folders -> raw tables, with errors recorded and incremental re-reads."""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import duckdb
import pytest

from helpers.db_rows import db_tuples
from stages.ingest import rows as ingest_rows
from stages.ingest import stage as ingest

LOGS = Path(__file__).parent / "fixtures" / "logs"
# A run recorded on an H200 with GPU sampler and /metrics series files (see its README).
H200_RUN = Path(__file__).parent / "fixtures" / "gpu_h200x1_profiled" / "llama-1b__gpu1_seqs64__32k__vllm__1203-000918"
COMPLETE = "tiny-llama__cpu_seqs4__4k__vllm__1130-051200"
CRASHED = "glm53__tp8_dcp8__1024k__vllm__1010-045128"
NO_META = "tiny-llama__cpu_seqs16__4k__vllm__1130-052000"
BAD_BENCH = "tiny-llama__cpu_seqs16__4k__vllm__1130-053000"

CMD_LOCAL = (
    "#!/bin/sh\ncd /srv/campaign\n"
    "VLLM_CPU_KVCACHE_SPACE=1 .venv/bin/python -m vllm.entrypoints.openai.api_server \\\n"
    "  --model data/models/tiny-llama --port 8011 --max-num-seqs {seqs} --max-model-len 4096\n")
CMD_DOCKER = (
    "#!/bin/sh\n"
    "docker run --rm --gpus all -e NCCL_P2P_LEVEL=SYS -v /models:/models:ro vllm/vllm-openai:v0.31.0 \\\n"
    "  serve /models/glm53 --tensor-parallel-size 8 --decode-context-parallel-size 8 \\\n"
    "  --max-model-len 1M --kv-cache-dtype fp8\n")
CRASH_LOG = (
    "(APIServer pid=1) INFO 10-10 05:06:00 [api_server.py:1] vLLM API server version 0.31.0\n"
    "(Worker_TP0 pid=1920) INFO 10-10 05:07:00 [gpu_model_runner.py:1] Model loading took 94.1 GiB memory "
    "and 301.5 seconds\n"
    "(Worker_TP2_DCP2 pid=1926) ERROR 10-10 05:07:25 [multiproc_executor.py:1058] Traceback (most recent "
    "call last):\n"
    "(Worker_TP2_DCP2 pid=1926) ERROR 10-10 05:07:25 [multiproc_executor.py:1058] NotImplementedError: "
    "DCP for FlashMLA sparse\n"
    "(EngineCore_DP0 pid=402) ERROR 10-10 05:07:26 [core.py:1] EngineCore failed to start.\n")
METRICS = (
    "# TYPE vllm:prefix_cache_queries_total counter\n"
    'vllm:prefix_cache_queries_total{{engine="0",model_name="m"}} {q}\n'
    'vllm:prefix_cache_hits_total{{engine="0",model_name="m"}} {h}\n')


def write(path: Path, text: str | bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)


@pytest.fixture()
def project(tmp_path: Path) -> Path:
    runs = tmp_path / "data" / "runs"
    d = runs / COMPLETE
    write(d / "cmd.sh", CMD_LOCAL.format(seqs=4))
    shutil.copy(LOGS / "sample_server.log", d / "server.log")
    write(d / "launch.out", "status=ready\nready_s=71.3\nengine_kv_tokens=1048576\n")
    write(d / "meta.json", json.dumps({
        "schema_version": 1, "run_id": COMPLETE, "spec": "tiny-seqs4",
        "spec_params": {"model": "tiny-llama", "args": {"--max-num-seqs": 4}}, "profile": "local-cpu",
        "engine": "vllm", "engine_version": "0.32.0", "image": None, "image_digest": None,
        "executor": "local", "gpus": None, "model": "tiny-llama", "layout": "cpu_seqs4",
        "ctx_label": "4k", "git_sha": "abc123", "params_hash": "p1",
        "started_at": "2026-11-30T05:10:00Z", "finished_at": "2026-11-30T05:20:00Z"}))
    write(d / "niah.log",
          '{"key": "k1", "depth": 0.1, "prompt_tokens": 3500, "ok": false, "latency_s": 1.5, "answer": "x"}\n'
          '{"key": "k2", "depth": 0.5, "prompt_tokens": 3500, "ok": false, "latency_s": 1.4, "answer": "",'
          ' "failure": "HTTP 500 from the server: boom", "reasoning_tokens": 812, "timeout_s": 74.4}\n'
          "GATE niah score= 0.0\n")
    write(d / "bench" / "long__c04.json", (LOGS / "sample_bench.json").read_bytes())
    write(d / "bench" / "long__c04.metrics.before.txt", METRICS.format(q=100, h=0))
    write(d / "bench" / "long__c04.metrics.after.txt", METRICS.format(q=12388, h=1536))

    d = runs / CRASHED
    write(d / "cmd.sh", CMD_DOCKER)
    write(d / "server.log", CRASH_LOG)

    d = runs / NO_META
    write(d / "cmd.sh", CMD_LOCAL.format(seqs=16))
    shutil.copy(LOGS / "sample_server.log", d / "server.log")
    write(d / "launch.out", "status=ready\nready_s=80.0\n")

    d = runs / BAD_BENCH
    write(d / "cmd.sh", CMD_LOCAL.format(seqs=16))
    write(d / "bench" / "chat__c02.json", '{"date": "20261130-053100", "completed": 4,\n"ttfts": [0.1,\n')
    write(d / "bench" / "chat__c01.json", (LOGS / "sample_bench.json").read_bytes())
    return tmp_path


def ingest_project(root: Path, lines: list[str] | None = None) -> dict:
    return ingest.run(runs_dir=root / "data" / "runs", warehouse=root / "data" / "warehouse.duckdb",
                      root=root, progress=(lines.append if lines is not None else None))


def query(root: Path, sql: str, params: list | None = None) -> list[tuple]:
    return db_tuples(root / "data" / "warehouse.duckdb", sql, params)


def test_complete_run(project: Path):
    lines: list[str] = []
    summary = ingest_project(project, lines)
    assert (summary["runs_seen"], summary["runs_read"], summary["runs_skipped"]) == (4, 4, 0)
    assert summary["runs_refused"] == 0
    assert len(lines) == 4 and lines[0].startswith("ingest 1/4 ")
    folder = f"data/runs/{COMPLETE}"
    assert query(project, "select spec, engine_version, recovered, started_at::varchar, source_file, "
                          "source_line from raw_runs where run_id = ?", [COMPLETE]) == [
        ("tiny-seqs4", "0.32.0", False, "2026-11-30 05:10:00+00", f"{folder}/meta.json", 1)]
    assert query(project, "select max_num_seqs, max_model_len, model_path, wrapper, source_line "
                          "from raw_commands where run_id = ?", [COMPLETE]) == [
        (4, 4096, "data/models/tiny-llama", "none", 3)]
    flags = query(project, "select flag, value from raw_command_flags where run_id = ? order by position",
                  [COMPLETE])
    assert ("--max-num-seqs", "4") in flags and ("env:VLLM_CPU_KVCACHE_SPACE", "1") in flags
    assert query(project, "select value_num, detail, worker, source_file, source_line from raw_log_facts "
                          "where run_id = ? and fact = 'kv_tokens'", [COMPLETE]) == [
        (1048576.0, "CPU", "EngineCore pid=2228", f"{folder}/server.log", 48)]
    assert query(project, "select source_line from raw_log_facts where run_id = ? and fact = 'ready'",
                 [COMPLETE]) == [(96,)]
    assert query(project, "select prompt_tok_s, source_line from raw_log_stats where run_id = ?",
                 [COMPLETE]) == [(1228.8, 113)]
    assert query(project, "select key, value, source_line from raw_launch_out where run_id = ? "
                          "order by source_line", [COMPLETE])[0] == ("status", "ready", 1)
    assert query(project, "select gate, score, source_line from raw_gates where run_id = ?", [COMPLETE]) == [
        ("niah", 0.0, 3)]
    assert query(project, "select count(*), bool_or(ok) from raw_gate_probes where run_id = ?", [COMPLETE]) == [
        (2, False)]
    assert query(project, "select probe_idx, failure, reasoning_tokens from raw_gate_probes where run_id = ? "
                          "order by probe_idx", [COMPLETE]) == [(0, None, None), (1, "HTTP 500 from the server: boom", 812)]
    assert query(project, "select point_id, workload, concurrency, completed, request_rate, source_file "
                          "from raw_bench_points where run_id = ?", [COMPLETE]) == [
        ("long__c04", "long", 4, 8, float("inf"), f"{folder}/bench/long__c04.json")]
    assert query(project, "select count(*), sum(input_tokens) from raw_bench_requests where run_id = ?",
                 [COMPLETE]) == [(8, 8 * 1536)]
    assert query(project, "select phase, value, source_line from raw_metrics where run_id = ? and "
                          "name = 'vllm:prefix_cache_hits_total' order by phase", [COMPLETE]) == [
        ("after", 1536.0, 3), ("before", 0.0, 3)]
    assert query(project, "select count(*) from ingest_errors where run_id = ?", [COMPLETE]) == [(0,)]


def test_crashed_launch_gives_its_error(project: Path):
    ingest_project(project)
    log = f"data/runs/{CRASHED}/server.log"
    assert query(project, "select detail, value_text, worker, source_file, source_line from raw_log_facts "
                          "where run_id = ? and fact = 'error'", [CRASHED]) == [
        ("NotImplementedError", "DCP for FlashMLA sparse", "Worker_TP2_DCP2 pid=1926", log, 4)]
    assert query(project, "select value_num from raw_log_facts where run_id = ? and fact = 'load_s'",
                 [CRASHED]) == [(301.5,)]
    assert query(project, "select recovered, model, layout, ctx_label, engine, engine_version, image, "
                          "executor from raw_runs where run_id = ?", [CRASHED]) == [
        (True, "glm53", "tp8_dcp8", "1024k", "vllm", "0.31.0", "vllm/vllm-openai:v0.31.0", "docker")]
    assert query(project, "select tp, dcp, max_model_len, kv_cache_dtype, wrapper from raw_commands "
                          "where run_id = ?", [CRASHED]) == [(8, 8, 1024 * 1024, "fp8", "docker")]
    started = query(project, "select started_at from raw_runs where run_id = ?", [CRASHED])[0][0]
    assert (started.month, started.day, started.hour, started.minute) == (10, 10, 4, 51)


def test_run_without_meta_is_recovered(project: Path):
    ingest_project(project)
    assert query(project, "select recovered, spec, model, layout, engine, engine_version, source_file, "
                          "source_line from raw_runs where run_id = ?", [NO_META]) == [
        (True, None, "tiny-llama", "cpu_seqs16", "vllm", "0.32.0", f"data/runs/{NO_META}/cmd.sh", 3)]
    assert query(project, "select max_num_seqs from raw_commands where run_id = ?", [NO_META]) == [(16,)]


def test_corrupt_bench_json_becomes_an_error_and_the_rest_is_read(project: Path):
    summary = ingest_project(project)
    errors = query(project, "select source_file, source_line, reason from ingest_errors where run_id = ?",
                   [BAD_BENCH])
    assert len(errors) == 1
    assert errors[0][0] == f"data/runs/{BAD_BENCH}/bench/chat__c02.json"
    assert "not valid JSON" in errors[0][2]
    assert summary["errors"] == 1
    assert query(project, "select point_id from raw_bench_points where run_id = ?", [BAD_BENCH]) == [
        ("chat__c01",)]


def test_incremental(project: Path):
    ingest_project(project)
    before = query(project, "select count(*) from raw_log_facts")[0][0]
    lines: list[str] = []
    again = ingest_project(project, lines)
    assert (again["runs_read"], again["runs_skipped"], lines) == (0, 4, [])
    assert query(project, "select count(*) from raw_log_facts")[0][0] == before

    # a changed file re-reads only its folder, and its rows are replaced, not added
    launch = project / "data" / "runs" / NO_META / "launch.out"
    launch.write_text("status=failed\n")
    st = launch.stat()
    os.utime(launch, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    lines = []
    third = ingest_project(project, lines)
    assert (third["runs_read"], third["runs_skipped"]) == (1, 3)
    assert len(lines) == 1 and NO_META in lines[0]
    assert query(project, "select key, value from raw_launch_out where run_id = ?", [NO_META]) == [
        ("status", "failed")]
    assert query(project, "select count(*) from raw_log_facts")[0][0] == before
    assert query(project, "select count(*) from raw_runs")[0][0] == 4

    # a folder gone from disk has its rows removed
    shutil.rmtree(project / "data" / "runs" / CRASHED)
    fourth = ingest_project(project)
    assert fourth["runs_removed"] == 1
    for table in ingest_rows.ROW_TABLES + ("raw_folders",):
        assert query(project, f"select count(*) from {table} where run_id = ?", [CRASHED]) == [(0,)]


def test_a_folder_read_again_replaces_the_rows_of_every_table(tmp_path: Path):
    """delete_run.sql names every table ingest fills from a folder, and a re-read folder with GPU
    sampler and /metrics series files has each of its rows once."""
    sql = (Path(ingest.__file__).parent / "sql" / "ingest" / "delete_run.sql").read_text()
    for table in ingest_rows.ROW_TABLES + ingest_rows.FOLDER_TABLES:
        assert f"delete from {table} where run_id = $run_id;" in sql, table
    folder = tmp_path / "data" / "runs" / H200_RUN.name
    shutil.copytree(H200_RUN, folder)
    (folder / "MANIFEST.sha256").unlink()       # unsealed: a changed file is read again
    ingest_project(tmp_path)
    count = ("select (select count(*) from raw_sampler_settings), (select count(*) from raw_gpu_samples), "
             "(select count(*) from raw_metrics_series), (select count(distinct sampler) from raw_sampler_settings)")
    before = query(tmp_path, count)
    assert all(n > 0 for n in before[0]) and before[0][3] == 2
    launch = folder / "launch.out"
    launch.write_text(launch.read_text() + "note=read again\n")
    st = launch.stat()
    os.utime(launch, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    assert ingest_project(tmp_path)["runs_read"] == 1
    assert query(tmp_path, count) == before


def test_parallel_read_gives_the_same_rows(project: Path, monkeypatch: pytest.MonkeyPatch):
    serial = ingest_project(project)
    tables = {t: query(project, f"select * exclude (ingested_at) from {t} order by all")
              if t == "raw_folders" else query(project, f"select * from {t} order by all")
              for t in ingest_rows.RAW_TABLES}
    (project / "data" / "warehouse.duckdb").unlink()
    monkeypatch.setattr(ingest, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: {0, 1}, raising=False)
    parallel = ingest_project(project)
    assert parallel["workers"] == 2 and serial["workers"] == 1
    for table, rows in tables.items():
        sql = (f"select * exclude (ingested_at) from {table} order by all" if table == "raw_folders"
               else f"select * from {table} order by all")
        assert query(project, sql) == rows, table


def test_changed_schema_rebuilds_the_tables(project: Path):
    ingest_project(project)
    con = duckdb.connect(str(project / "data" / "warehouse.duckdb"))
    con.execute("alter table raw_gates add column stale integer")
    con.close()
    summary = ingest_project(project)
    assert summary["rebuilt"] is True and summary["runs_read"] == 4
    columns = [c for (c,) in query(project, "select column_name from information_schema.columns "
                                            "where table_name = 'raw_gates'")]
    assert "stale" not in columns
