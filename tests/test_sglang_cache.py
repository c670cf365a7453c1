"""SGLang's cached share per benchmark point: from its /metrics counters, else from the
`#cached-token` of the `Prefill batch` lines it logged while the point ran (a real SGLang log from
../shared/real_logs, read at test time, in a synthetic run folder ingested and derived)."""
from __future__ import annotations

import datetime as dt
import json
import re
import shutil
from pathlib import Path

import duckdb
import pytest

from helpers.shared_folder import REAL_LOGS
from stages.derive import stage as derive
from stages.ingest import stage as ingest

pytestmark = pytest.mark.shared
LOG = REAL_LOGS / "sglang_01_ready_swa_prefill_decode.log"
BENCH = Path(__file__).parent / "fixtures" / "logs" / "sample_bench.json"
RUN = "small__sglang_tp1__64k__sglang__0801-233700"
RULES = {"prefix_cache_tok_s": 60000, "gate_min_score": 1.0, "cached_share_max_pct": 20,
         "default_max_num_seqs": 1024, "burst_tpot_ms": 0.5, "cached_mark_pct": 10}
WORKLOADS = {"long": {"prompt_tokens": 8192, "output_tokens": 64, "concurrency": [1, 2, 4, 8]}}
# point -> (result file date, duration in s): the long prompts of 00:07:39 onwards, the short
# ones of 00:02:17 to 00:03:40, and a window in which nothing was prefilled.
POINTS = {"long__c01": ("20260802-000806", 27.0), "long__c02": ("20260802-000340", 23.5),
          "long__c04": ("20260802-001500", 5.0), "long__c08": ("20260802-001600", 5.0)}
SGLANG_METRICS = (
    "# TYPE sglang:prompt_tokens_total counter\n"
    'sglang:prompt_tokens_total{{model_name="m",tp_rank="0"}} {p}\n'
    "# TYPE sglang:cached_tokens_total counter\n"
    'sglang:cached_tokens_total{{model_name="m",cache_source="device"}} {c}\n')

TIERS = ('sglang:cached_tokens_total{{model_name="m",cache_source="host"}} {host}\n'
         'sglang:cached_tokens_total{{model_name="m",cache_source="total"}} {total}\n')


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def _prefilled(ended: str, duration_s: float) -> tuple[int, int, int]:
    """(cached tokens, prompt tokens, first line) of the log's Prefill batch lines in a point's
    window, read here with a plain regex."""
    end = dt.datetime.strptime(ended, "%Y%m%d-%H%M%S")
    lo, hi = end - dt.timedelta(seconds=duration_s + 1), end + dt.timedelta(seconds=1)
    cached = prompt = 0
    first = None
    pattern = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)\] Prefill batch, #new-seq: \d+, "
                         r"#new-token: (\d+), #cached-token: (\d+),")
    for n, line in enumerate(LOG.read_bytes().decode(errors="replace").split("\n"), start=1):
        m = pattern.match(line)
        if m and lo <= dt.datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S") <= hi:
            cached += int(m.group(3))
            prompt += int(m.group(2)) + int(m.group(3))
            first = first or n
    return cached, prompt, first


@pytest.fixture(scope="module")
def derived(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("sglang")
    folder = root / "data" / "runs" / RUN
    folder.mkdir(parents=True)
    shutil.copyfile(LOG, folder / "server.log")          # as stored: its CR bytes kept
    _write(folder / "cmd.sh", "#!/bin/sh\ndocker run --rm lmsysorg/sglang:v0.5.4 \\\n"
                              "  -m sglang.launch_server --model-path /models/small --tp 1\n")
    _write(folder / "launch.out", "status=ready\nready_s=60.0\n")
    _write(folder / "meta.json", json.dumps({
        "schema_version": 1, "run_id": RUN, "spec": "small-sglang", "spec_params": {"args": {}},
        "profile": "h200x8", "engine": "sglang", "engine_version": None,
        "image": "lmsysorg/sglang:v0.5.4", "image_digest": None, "executor": "docker", "gpus": "0",
        "model": "small", "layout": "sglang_tp1", "ctx_label": "64k", "git_sha": "abc",
        "params_hash": "p", "started_at": "2026-08-01T23:37:00Z", "finished_at": "2026-08-02T00:17:49Z"}))
    bench = json.loads(BENCH.read_text())
    for point, (date, duration) in POINTS.items():
        _write(folder / "bench" / f"{point}.json", json.dumps({**bench, "date": date, "duration": duration}))
    # the first point also has SGLang's counters: they win over the log
    _write(folder / "bench" / "long__c01.metrics.before.txt", SGLANG_METRICS.format(p=1000, c=100))
    _write(folder / "bench" / "long__c01.metrics.after.txt", SGLANG_METRICS.format(p=5000, c=1100))
    # another has tiers and their total: the total alone counts, not tiers and total summed
    _write(folder / "bench" / "long__c08.metrics.before.txt",
           SGLANG_METRICS.format(p=0, c=0) + TIERS.format(host=0, total=0))
    _write(folder / "bench" / "long__c08.metrics.after.txt",
           SGLANG_METRICS.format(p=1000, c=100) + TIERS.format(host=200, total=300))
    warehouse = root / "data" / "warehouse.duckdb"
    ingest.run(runs_dir=root / "data" / "runs", warehouse=warehouse, root=root)
    out = root / "data" / "campaign.duckdb"
    derive.run(warehouse=warehouse, campaign_db=out, derived_dir=root / "data" / "derived",
               metrics_file=root / "data" / "metrics.json", rules=RULES, workloads=WORKLOADS,
               profiles={"h200x8": {"rules": RULES, "workloads": WORKLOADS}}, strict=False)
    return out


def _points(out: Path) -> dict[str, tuple]:
    con = duckdb.connect(str(out), read_only=True)
    try:
        rows = con.execute("select point_id, hits_delta, queries_delta, cache_hit_pct, source_file, "
                           "source_line from int_point_cache where run_id = ?", [RUN]).fetchall()
        shown = dict(con.execute("select point_id, cache_hit_pct from bench_points where run_id = ?",
                                 [RUN]).fetchall())
    finally:
        con.close()
    return {r[0]: (*r[1:], shown.get(r[0])) for r in rows} | {
        p: (None,) * 5 + (shown.get(p),) for p in shown if p not in {r[0] for r in rows}}


def test_sglang_counters_give_the_share_when_scraped(derived):
    hits, queries, pct, source, _, shown = _points(derived)["long__c01"]
    assert (hits, queries) == (1000, 4000)
    assert pct == pytest.approx(25.0) and shown == pytest.approx(25.0)
    assert source == f"data/runs/{RUN}/bench/long__c01.metrics.after.txt"


def test_without_counters_the_prefill_lines_of_the_window_give_it(derived):
    cached, prompt, first = _prefilled(*POINTS["long__c02"])
    assert prompt > cached > 0          # the window holds prefills that were partly cached
    hits, queries, pct, source, line, shown = _points(derived)["long__c02"]
    assert (hits, queries) == (cached, prompt)
    assert pct == pytest.approx(100.0 * cached / prompt) and shown == pytest.approx(pct)
    assert (source, line) == (f"data/runs/{RUN}/server.log", first)


def test_a_window_without_prefills_has_no_share(derived):
    assert _prefilled(*POINTS["long__c04"])[1] == 0
    assert _points(derived)["long__c04"][-1] is None


def test_a_total_beside_the_cache_tiers_is_counted_alone(derived):
    hits, queries, pct, *_ = _points(derived)["long__c08"]
    assert (hits, queries, pct) == (300, 1000, pytest.approx(30.0))


def test_sglang_points_get_the_engine_stats_of_their_window(derived):
    """SGLang's log times carry their date: its batch lines of the window are the point's stats."""
    con = duckdb.connect(str(derived), read_only=True)
    try:
        rows = dict(con.execute("select point_id, stats_lines from point_engine_stats where run_id = ?",
                                [RUN]).fetchall())
    finally:
        con.close()
    assert rows.get("long__c02", 0) > 0 and "long__c04" not in rows
