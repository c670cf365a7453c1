"""The standard raw warehouse of the derive tests (raw_rows: two attempts of a spec, a run ready by
its log only with two engines, an SGLang run), written into a warehouse (make_warehouse) and
derived (derive_into), and the row makers to vary it."""
from __future__ import annotations

from pathlib import Path

import duckdb

from helpers.db_rows import db_rows
from stages.core import raw_schema
from stages.derive import stage as derive

RAW_DDL = raw_schema.RAW_SCHEMA

RULES = {
    "prefix_cache_tok_s": 60000,
    "gate_min_score": 1.0,
    "cached_share_max_pct": 20,
    "default_max_num_seqs": 1024,
    "burst_tpot_ms": 0.5,
    "cached_mark_pct": 10,
}
WORKLOADS = {
    "long": {"prompt_tokens": 250000, "output_tokens": 512, "concurrency": [4, 16]},
    "chat": {"prompt_tokens": 1000, "output_tokens": 100, "concurrency": [64]},
    "huge": {"prompt_tokens": 300000, "output_tokens": 512, "concurrency": [1]},
}

BIG = "big__tp8__256k__vllm__1010-053939"       # ready, second attempt of spec `big`
BIG_OLD = "big__tp8__256k__vllm__1009-120000"   # failed, first attempt of spec `big`
DP = "small__dp2__4k__vllm__1011-080000"        # ready by its log only, two engines, no gate
SG = "small__tp4__4k__sglang__1012-090000"      # SGLang, figures from its own log


def _insert(con: duckdb.DuckDBPyConnection, table: str, defaults: dict, rows: list[dict]) -> None:
    for given in rows:
        row = {**defaults, **given}
        cols = list(row)
        con.execute(
            f"insert into {table} ({', '.join(cols)}) values ({', '.join('$' + c for c in cols)})", row)


def raw_path(run_id: str, name: str) -> str:
    return f"data/runs/{run_id}/{name}"


def _run(run_id: str, spec: str | None, started_at: str | None, **extra) -> dict:
    model, layout, ctx, engine, _ = run_id.split("__")
    return {"run_id": run_id, "spec": spec, "profile": "h200x8", "model": model, "layout": layout,
            "ctx_label": ctx, "engine": engine, "started_at": started_at, "recovered": False,
            "source_file": raw_path(run_id, "meta.json"), "source_line": 1, **extra}


def _fact(run_id: str, fact: str, line: int, value_num=None, value_text=None, **extra) -> dict:
    return {"run_id": run_id, "fact": fact, "value_num": value_num, "value_text": value_text,
            "excerpt": f"{fact} line", "source_file": raw_path(run_id, "server.log"),
            "source_line": line, **extra}


def _request(run_id: str, point_id: str, idx: int, input_tokens: int, output_tokens: int,
             ttft_s: float, tpot_ms: float | None = None, error: str = "") -> dict:
    latency = ttft_s + (output_tokens - 1) * (tpot_ms or 0) / 1000 if output_tokens else ttft_s
    return {"run_id": run_id, "point_id": point_id, "request_idx": idx, "input_tokens": input_tokens,
            "output_tokens": output_tokens, "ttft_s": ttft_s, "latency_s": latency, "error": error,
            "generated_text": "x", "source_file": raw_path(run_id, f"bench/{point_id}.json"),
            "source_line": 1}


def _point(run_id: str, point_id: str, workload: str, concurrency: int, sent: int, completed: int,
           failed: int, output_throughput: float) -> dict:
    return {"run_id": run_id, "point_id": point_id, "workload": workload, "concurrency": concurrency,
            "num_prompts": sent, "completed": completed, "failed": failed,
            "output_throughput": output_throughput,
            "source_file": raw_path(run_id, f"bench/{point_id}.json"), "source_line": 1}


def metrics_rows(run_id: str, point_id: str, phase: str, samples: list[tuple[str, str, float]]) -> list[dict]:
    return [{"run_id": run_id, "point_id": point_id, "phase": phase, "name": name, "labels": labels,
             "value": value, "source_file": raw_path(run_id, f"bench/{point_id}.metrics.{phase}.txt"),
             "source_line": line}
            for line, (name, labels, value) in enumerate(samples, start=1)]


# The c04 point of BIG: (idx, output tokens, ttft s, tpot ms, error)
C04_REQUESTS = [
    (0, 512, 10.0, 20.0, ""),
    (1, 512, 12.0, 30.0, ""),
    (2, 512, 3.7, 25.0, ""),        # 250,000 / 3.7 = 67,568 tok/s: served from the prefix cache
    (3, 512, 20.0, 40.0, ""),
    (4, 512, 14.0, 10.0, ""),
    (5, 0, 0.0, None, "Connection reset by peer"),
    (6, 100, 16.0, 50.0, ""),       # stopped early: short_output, keeps its TTFT
]

# The c64 point of DP: TPOT ms of its three requests; the last got its 99 tokens after the first in
# one burst (0.003 ms apart), which times the client, not decoding.
C64_TPOT_MS = (10.0, 12.0, 0.003)


def raw_rows() -> dict[str, tuple[dict, list[dict]]]:
    """table -> (defaults, rows) of the standard warehouse."""
    c04 = [_request(BIG, "long__c04", i, 250000, out, ttft, tpot, err)
           for i, out, ttft, tpot, err in C04_REQUESTS]
    c16 = [_request(BIG, "long__c16", i, 250000, 512, 30.0 + i, 20.0) for i in range(4)]
    c64 = [_request(DP, "chat__c64", i, 1000, 100, 0.5, tpot) for i, tpot in enumerate(C64_TPOT_MS)]
    metrics = (
        metrics_rows(BIG, "long__c04", "before", [
            ("vllm:prefix_cache_hits_total", 'engine="0",model_name="m"', 100.0),
            ("vllm:prefix_cache_hits_total", 'engine="1",model_name="m"', 0.0),
            ("vllm:prefix_cache_queries_total", 'engine="0",model_name="m"', 1000.0),
            ("vllm:prefix_cache_queries_total", 'engine="1",model_name="m"', 1000.0)])
        + metrics_rows(BIG, "long__c04", "after", [
            ("vllm:prefix_cache_hits_total", 'engine="0",model_name="m"', 300.0),
            ("vllm:prefix_cache_hits_total", 'engine="1",model_name="m"', 100.0),
            ("vllm:prefix_cache_queries_total", 'engine="0",model_name="m"', 2000.0),
            ("vllm:prefix_cache_queries_total", 'engine="1",model_name="m"', 1500.0)])
        + metrics_rows(BIG, "long__c16", "before", [
            ("vllm:gpu_prefix_cache_hits_total", 'model_name="m"', 1000.0),
            ("vllm:gpu_prefix_cache_queries_total", 'model_name="m"', 4000.0)])
        + metrics_rows(BIG, "long__c16", "after", [
            ("vllm:gpu_prefix_cache_hits_total", 'model_name="m"', 1500.0),
            ("vllm:gpu_prefix_cache_queries_total", 'model_name="m"', 5000.0)])
    )
    return {
        "raw_runs": ({}, [
            _run(BIG, "big", "2026-10-10T05:39:39Z"),
            _run(BIG_OLD, "big", "2026-10-09T12:00:00Z"),
            _run(DP, None, None, recovered=True),
            _run(SG, "sg", "2026-10-12T09:00:00Z"),
        ]),
        "raw_commands": ({}, [
            {"run_id": BIG, "tp": 8, "max_model_len": 262144, "max_num_seqs": 16,
             "command": "vllm serve /models/big --tensor-parallel-size 8 --max-num-seqs 16",
             "source_file": raw_path(BIG, "cmd.sh"), "source_line": 3},
            {"run_id": BIG_OLD, "tp": 8, "max_model_len": 262144, "max_num_seqs": 16,
             "command": "vllm serve /models/big --tensor-parallel-size 8 --max-num-seqs 16",
             "source_file": raw_path(BIG_OLD, "cmd.sh"), "source_line": 3},
            {"run_id": DP, "dp": 2, "max_model_len": 4096,
             "command": "vllm serve /models/small --data-parallel-size 2 --block-size 32",
             "source_file": raw_path(DP, "cmd.sh"), "source_line": 2},
            {"run_id": SG, "tp": 4,
             "command": "python -m sglang.launch_server --model-path /models/small --tp 4",
             "source_file": raw_path(SG, "cmd.sh"), "source_line": 2},
        ]),
        "raw_command_flags": ({}, [
            *({"run_id": run_id, "position": 3, "flag": "--max-num-seqs", "value": "16",
               "source_file": raw_path(run_id, "cmd.sh"), "source_line": 3} for run_id in (BIG, BIG_OLD)),
            {"run_id": DP, "position": 1, "flag": "--block-size", "value": "32",
             "source_file": raw_path(DP, "cmd.sh"), "source_line": 2},
        ]),
        "raw_launch_out": ({}, [
            {"run_id": BIG, "key": "status", "value": "ready",
             "source_file": raw_path(BIG, "launch.out"), "source_line": 1},
            {"run_id": BIG, "key": "ready_s", "value": "609.1",
             "source_file": raw_path(BIG, "launch.out"), "source_line": 2},
            {"run_id": SG, "key": "status", "value": "ready",
             "source_file": raw_path(SG, "launch.out"), "source_line": 1},
        ]),
        "raw_log_facts": ({}, [
            _fact(BIG, "kv_tokens", 120, value_num=1573325),
            _fact(BIG, "kv_tokens", 121, value_num=1573000),   # a second engine line: first wins
            _fact(BIG, "kv_memory_gib", 119, value_num=25.8),
            _fact(BIG, "weights_gib", 80, value_num=102.31),
            _fact(BIG, "load_s", 80, value_num=70.39),
            _fact(BIG, "moe_backend", 60, value_text="MARLIN"),
            _fact(BIG, "ready", 200),
            _fact(BIG_OLD, "error", 95, value_text="DCP is not supported", detail="NotImplementedError",
                  worker="Worker_TP2_DCP2 pid=1926"),
            _fact(BIG_OLD, "error", 140, value_text="Engine core initialization failed",
                  detail="RuntimeError", worker="APIServer pid=1"),
            _fact(DP, "kv_blocks", 50, value_num=1000),
            _fact(DP, "ready", 90),
            _fact(SG, "max_total_num_tokens", 30, value_num=500000),
            _fact(SG, "max_running_requests", 30, value_num=48),
            _fact(SG, "context_len", 30, value_num=8192),
            _fact(SG, "ready", 70),
        ]),
        "raw_gates": ({}, [
            {"run_id": BIG, "gate": "niah", "score": 1.0,
             "source_file": raw_path(BIG, "niah.log"), "source_line": 4},
            {"run_id": SG, "gate": "niah", "score": 0.0,
             "source_file": raw_path(SG, "niah.log"), "source_line": 4},
        ]),
        "raw_gate_probes": ({}, [
            {"run_id": BIG, "probe_idx": i, "depth": d, "prompt_tokens": 230000, "ok": True,
             "latency_s": 40.0, "answer": "k", "reasoning_tokens": 1200,
             "source_file": raw_path(BIG, "niah.log"), "source_line": i + 1}
            for i, d in enumerate([0.1, 0.5, 0.9])
        ] + [
            {"run_id": SG, "probe_idx": 0, "depth": 0.5, "prompt_tokens": 7000, "ok": False,
             "latency_s": 1.0, "answer": "",
             "failure": "no answer within the probe's timeout of 9.0 s (ReadTimeout)",
             "source_file": raw_path(SG, "niah.log"), "source_line": 1},
        ]),
        "raw_bench_points": ({}, [
            _point(BIG, "long__c04", "long", 4, 7, 6, 1, 210.5),
            _point(BIG, "long__c16", "long", 16, 4, 4, 0, 250.0),
            _point(DP, "chat__c64", "chat", 64, 3, 3, 0, 900.0),
        ]),
        "raw_bench_requests": ({}, c04 + c16 + c64),
        "raw_metrics": ({}, metrics),
        "ingest_errors": ({}, [
            {"run_id": BIG, "source_file": raw_path(BIG, "ramp.log"), "source_line": 3,
             "reason": "not JSON"},
        ]),
    }


def make_warehouse(path: Path, rows: dict[str, tuple[dict, list[dict]]]) -> Path:
    con = duckdb.connect(str(path))
    con.execute(RAW_DDL.read_text())
    for table, (defaults, table_rows) in rows.items():
        _insert(con, table, defaults, table_rows)
    con.close()
    return path


def derive_into(tmp_path: Path, rows=None, rules=None, workloads=None) -> tuple[dict, Path]:
    warehouse = make_warehouse(tmp_path / "warehouse.duckdb", raw_rows() if rows is None else rows)
    out = tmp_path / "out"
    summary = derive.run(warehouse=warehouse, campaign_db=out / "campaign.duckdb",
                         derived_dir=out / "derived", metrics_file=out / "metrics.json",
                         rules=rules or RULES, workloads=workloads or WORKLOADS)
    return summary, out


def query(out: Path, sql: str, params: dict | None = None) -> list[dict]:
    return db_rows(out / "campaign.duckdb", sql, params)


def ingest_and_derive(root: Path, rules: dict) -> Path:
    """The run folders of root/data/runs ingested (the ingest reading every file without an error)
    and derived with `rules`, no workloads and no energy settings, into root/data; its
    campaign.duckdb."""
    from stages.ingest import stage as ingest
    data = root / "data"
    summary = ingest.run(runs_dir=data / "runs", warehouse=data / "warehouse.duckdb", root=root)
    assert summary["errors"] == 0, summary
    derive.run(warehouse=data / "warehouse.duckdb", campaign_db=data / "campaign.duckdb",
               derived_dir=data / "derived", metrics_file=data / "metrics.json", rules=rules,
               workloads={}, energy=None)
    return data / "campaign.duckdb"
