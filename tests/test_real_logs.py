"""The parsers against public vLLM and SGLang logs and benchmark result files, held to
../shared/real_logs/MANIFEST.md row by row. The files are read from that folder at test time."""
from __future__ import annotations

import io
import re
import shutil
from pathlib import Path

import duckdb
import pytest

from helpers.shared_folder import REAL_LOGS
from stages.core.config import derive_settings, load_params
from stages.derive import stage as derive
from stages.ingest import stage as ingest
from stages.ingest.parsers.bench_json import parse_bench
from stages.formats.lines import read_chunks
from stages.formats.prefixes import strip_prefixes
from stages.formats.sglang_log import parse_sglang_log
from stages.formats.vllm_log import parse_vllm_log
from stages.render import chart_notes, charts
from stages.render.declared_file import column_facts
from stages.render.errors import FactError
from stages.render.inputs import input_rows, recompute

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.shared
REAL = REAL_LOGS
MISSING = (f"{REAL} is missing: the public logs and result files these tests read (with their "
           "MANIFEST.md) must sit in shared/real_logs beside the project")
_LINE = re.compile(r"\bL(\d+)")
_NUMBER = re.compile(r"\d[\d,]*")


def _manifest_rows() -> dict[str, list[str]]:
    """MANIFEST.md table rows by file name: the cells of each row."""
    rows = {}
    for text in (REAL / "MANIFEST.md").read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in text.split("|")[1:-1]]
        if cells and cells[0].startswith("`") and cells[0].endswith("`"):
            rows[cells[0].strip("`")] = cells
    return rows


ROWS = _manifest_rows() if (REAL / "MANIFEST.md").is_file() else {}
LOGS = sorted(name for name in ROWS if name.endswith(".log")) or ["(shared/real_logs missing)"]
RESULTS = sorted(name for name in ROWS if name.startswith("bench_")) or ["(shared/real_logs missing)"]


def _row(name: str) -> list[str]:
    if not REAL.is_dir() or name not in ROWS:
        pytest.fail(MISSING)
    if not (REAL / name).is_file():
        pytest.fail(f"{REAL / name} is listed in MANIFEST.md but missing")
    return ROWS[name]


def _first_line(cell: str) -> int | None:
    m = _LINE.search(cell)
    return int(m.group(1)) if m else None


def _parse(name: str, data: bytes):
    return (parse_sglang_log if name.startswith("sglang") else parse_vllm_log)(data)


def test_the_folder_and_its_manifest_are_there():
    assert REAL.is_dir(), MISSING
    assert len([n for n in ROWS if n.endswith(".log")]) >= 30
    assert len(RESULTS) == 10


@pytest.mark.parametrize("name", LOGS)
def test_kv_pool_as_printed(name: str):
    cells = _row(name)
    pool = cells[3]
    result = _parse(name, (REAL / name).read_bytes())
    # the pool as printed: vLLM's KV cache size line, SGLang's max_total_num_tokens (not blocks
    # turned into tokens here)
    printed = [f for f in result.facts
               if (f.fact == "kv_tokens" and f.detail in ("GPU", "CPU")) or f.fact == "max_total_num_tokens"]
    blocks = [f for f in result.facts if f.fact == "kv_blocks"]
    if pool.startswith("none in tokens"):
        assert not printed
        expected = int(re.search(r"blocks: (\d+)", pool).group(1))
        assert [int(blocks[0].value_num), blocks[0].line] == [expected, _first_line(pool)]
    elif pool.startswith("none"):
        assert not printed and not blocks
    else:
        first = pool.split("first = ", 1)[-1]
        expected = int(_NUMBER.search(first).group(0).replace(",", ""))
        assert [int(printed[0].value_num), printed[0].line] == [expected, _first_line(first)]
        if pool.startswith("8 lines"):
            assert len(printed) == 8 and min(f.value_num for f in printed) == 1_590_736
    allocated = re.findall(r"(?<![L\d])\d{4,}", pool.split("KV Cache is allocated", 1)[-1])
    if "KV Cache is allocated" in pool:
        got = [int(f.value_num) for f in result.facts if f.fact == "kv_allocated_tokens"]
        assert set(got) == {int(n) for n in allocated}


@pytest.mark.parametrize("name", LOGS)
def test_first_exception_or_none(name: str):
    cells = _row(name)
    expected = cells[4]
    errors = sorted((f for f in _parse(name, (REAL / name).read_bytes()).facts if f.fact == "error"),
                    key=lambda f: f.line)
    if expected.startswith("none"):
        assert errors == [], f"a trap read as an exception: {errors[:1]}"
    else:
        kind = expected.split()[0]
        assert [errors[0].detail, errors[0].line] == [kind, _first_line(expected)]


@pytest.mark.parametrize("name", LOGS)
def test_readiness(name: str):
    cells = _row(name)
    ready = [f.line for f in _parse(name, (REAL / name).read_bytes()).facts if f.fact == "ready"]
    if cells[5].startswith("yes"):
        assert ready == [_first_line(cells[5])]
    else:
        assert ready == []


@pytest.mark.parametrize("name", LOGS)
def test_stats_lines(name: str):
    cells = _row(name)
    result = _parse(name, (REAL / name).read_bytes())
    stats = result.line_stats + [s for block in result.blocks for s in block.stats()]
    if name.startswith("sglang"):
        decode = re.search(r"(\d+) decode", cells[6])
        prefill = re.search(r"(\d+) prefill", cells[6])
        assert sum(s.kind == "sglang_decode" for s in stats) == (int(decode.group(1)) if decode else 0)
        assert sum(s.kind == "sglang_prefill" for s in stats) == (int(prefill.group(1)) if prefill else 0)
    else:
        assert len(stats) == int(_NUMBER.match(cells[6]).group(0))


@pytest.mark.parametrize("name", ["vllm_02_v1_ready_stats_then_enginedead.log",
                                  "vllm_14_ansi_two_launches_valueerror_then_ready.log"])
def test_read_in_small_chunks_the_log_gives_the_same_facts(name: str):
    _row(name)
    data = (REAL / name).read_bytes()
    whole = parse_vllm_log(data)
    chunked = parse_vllm_log(read_chunks(io.BytesIO(data), size=2048))
    assert [(f.fact, f.line, f.value_num, f.detail) for f in chunked.facts] == \
        [(f.fact, f.line, f.value_num, f.detail) for f in whole.facts]


def test_an_error_after_readiness_is_read_after_an_earlier_launch_error():
    stats = ("(APIServer pid=2) INFO 10-10 05:10:01 [loggers.py:1] Engine 000: Avg prompt throughput: "
             "1.0 tokens/s, Avg generation throughput: 2.0 tokens/s, Running: 1 reqs, Waiting: 0 reqs, "
             "GPU KV cache usage: 1.0%, Prefix cache hit rate: 0.0%\n")
    log = ("(APIServer pid=1) ERROR 10-10 05:00:00 [core.py:1] ValueError: first launch\n"
           "(APIServer pid=2) INFO 10-10 05:10:00 [launcher.py:1] Application startup complete.\n"
           + stats * 50 +
           "(APIServer pid=2) ERROR 10-10 08:00:00 [async_llm.py:1] "
           "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue.\n").encode()
    for data in (log, read_chunks(io.BytesIO(log), size=300)):
        errors = [(f.detail, f.line) for f in parse_vllm_log(data).facts if f.fact == "error"]
        assert errors == [("ValueError", 1), ("vllm.v1.engine.exceptions.EngineDeadError", 53)]


@pytest.mark.parametrize("line, message, level, log_time", [
    ("vllm-1  | ERROR 11-18 18:07:28 engine.py:366] ValueError: no memory",
     "ValueError: no memory", "ERROR", "11-18 18:07:28"),
    ("vllm_1    | INFO:     Application startup complete.", "Application startup complete.", "INFO", None),
    ("Dec  1 04:30:50 node1 vllm[1234]: (APIServer pid=7) INFO 12-01 04:30:50 [api_server.py:1] "
     "Application startup complete.", "Application startup complete.", "INFO", "12-01 04:30:50"),
    ("Dec 11 04:30:50 node1 docker[99]: RuntimeError: boom", "RuntimeError: boom", None,
     "Dec 11 04:30:50"),
    ("2026-06-09 14:01:52.982 [Error] (Process) (EngineCore pid=4) ERROR 06-09 14:01:52 "
     "[core.py:1136] ValueError: To serve", "ValueError: To serve", "ERROR", "06-09 14:01:52"),
    ("[rank0]: torch.OutOfMemoryError: CUDA out of memory.", "torch.OutOfMemoryError: CUDA out of memory.",
     None, None),
    ("sglang-2  | [2026-04-08 14:05:21 TP0] Decode batch. #running-req: 1",
     "Decode batch. #running-req: 1", None, "2026-04-08 14:05:21"),
    # a message that merely holds a bar or a name is left whole
    ("model | tokens | ok", "model | tokens | ok", None, None),
    ("Mon is a day: 12:00:00 noon", "Mon is a day: 12:00:00 noon", None, None),
])
def test_launcher_and_collector_prefixes_are_stripped(line, message, level, log_time):
    p = strip_prefixes(line)
    assert (p.message, p.level, p.log_time) == (message, level, log_time)


def _assert_completed(points: list[dict], held: str) -> None:
    """`completed N` of the manifest is the first point's; `completed N of M` some points'."""
    m = re.search(r"\bcompleted (\d+)(?: of (\d+))?", held)
    if m.group(2):
        assert any((p["completed"], p.get("num_prompts", p.get("sent"))) == (int(m.group(1)), int(m.group(2)))
                   for p in points)
    else:
        assert points[0]["completed"] == int(m.group(1))


@pytest.mark.parametrize("name", RESULTS)
def test_result_file_gives_points_with_counts_and_figures(name: str):
    cells = _row(name)
    parsed = parse_bench((REAL / name).read_bytes(), "long__c04")
    assert parsed.errors == []
    assert len(parsed.points) == {"bench_05": 2, "bench_06": 12}.get(name[:8], 1)
    held = cells[4]
    first = parsed.points[0]
    _assert_completed(parsed.points, held)
    median = re.search(r"median_ttft_ms ([\d.]+)", held)
    if median:
        assert first["median_ttft_ms"] == float(median.group(1))
    prompts = re.search(r"\bnum_prompts (\d+)", held)
    if prompts:
        assert first["num_prompts"] == int(prompts.group(1))
    elif "no `date`, `model_id` or `num_prompts`" in cells[5]:  # SGLang's bench_serving
        assert "num_prompts" not in first and "failed" not in first
    for point in parsed.points:
        assert point["median_tpot_ms"] is not None
        if point.get("num_prompts") is not None:  # written, or num_prompts - completed
            assert point["failed"] == point["num_prompts"] - point["completed"]


@pytest.fixture(scope="module")
def campaign(tmp_path_factory) -> duckdb.DuckDBPyConnection:
    """Every result file in a run folder of its own, and two engine logs that show the engine
    ready with an error before or after it, ingested and derived as one campaign."""
    if not REAL.is_dir():
        pytest.fail(MISSING)
    root = tmp_path_factory.mktemp("real")
    runs = root / "data" / "runs"
    cmd = "#!/bin/sh\nvllm serve /models/m --max-model-len 4096 --max-num-seqs 64\n"
    names = [n for n in RESULTS] + ["vllm_02_v1_ready_stats_then_enginedead.log",
                                    "vllm_14_ansi_two_launches_valueerror_then_ready.log"]
    for i, name in enumerate(names):
        folder = runs / f"real-model__tp1__4k__vllm__1130-{i:02d}0000"
        folder.mkdir(parents=True)
        (folder / "cmd.sh").write_text(cmd)
        (folder / "launch.out").write_text("status=ready\nready_s=60.0\n")
        if name.endswith(".log"):
            shutil.copy(REAL / name, folder / "server.log")
        else:
            (folder / "bench").mkdir()
            shutil.copy(REAL / name, folder / "bench" / f"long__c04{Path(name).suffix}")
    summary = ingest.run(runs_dir=runs, warehouse=root / "data" / "warehouse.duckdb", root=root)
    assert summary["errors"] == 0
    out = root / "data"
    derive.run(warehouse=out / "warehouse.duckdb", campaign_db=out / "campaign.duckdb",
               derived_dir=out / "derived", metrics_file=out / "metrics.json",
               **derive_settings(load_params(ROOT)))
    con = duckdb.connect(str(out / "campaign.duckdb"), read_only=True)
    yield con
    con.close()


def _points(con, name: str) -> list[dict]:
    cur = con.execute("select * from bench_points where source_file like ? order by source_line",
                      [f"%/real-model__tp1__4k__vllm__1130-{RESULTS.index(name):02d}0000/%"])
    cols = [d[0] for d in cur.description]
    return [dict(zip(cols, r)) for r in cur.fetchall()]


@pytest.mark.parametrize("name", RESULTS)
def test_every_result_file_is_published_with_the_tools_summary(campaign, name: str):
    held = _row(name)[4]
    points = _points(campaign, name)
    assert len(points) == {"bench_05": 2, "bench_06": 12}.get(name[:8], 1)
    first = points[0]
    _assert_completed(points, held)
    if first["completed"] == 0:  # every request failed: no figures, left out of the charts
        assert (first["figures_from"], first["ttft_requests"], first["ttft_median_s"]) == (None, 0, None)
        assert (first["tpot_from"], first["tpot_median_ms"]) == (None, None)
        assert first["failed"] == first["sent"] == 8
        return
    median = re.search(r"median_ttft_ms ([\d.]+)", held)
    assert first["figures_from"] == "tool summary"
    if median:
        assert first["ttft_median_s"] == pytest.approx(float(median.group(1)) / 1000)
    assert all(p["ttft_median_s"] > 0 for p in points)
    assert first["ttft_requests"] == first["completed"]
    assert all(p["tpot_median_ms"] > 0 and p["figures_from"] == "tool summary" for p in points)
    # none of the published files kept per-request times: TPOT is the tool's, and says so
    assert all(p["tpot_from"] == "tool summary" for p in points)


def test_counts_of_results_written_before_failed_was(campaign):
    points = _points(campaign, "bench_06_vllm_append_result_12_objects.jsonl")
    assert [(p["sent"], p["completed"], p["failed"]) for p in points if p["sent"] == 2000] == \
        [(2000, 1015, 985)] * 2
    sglang = _points(campaign, "bench_08_sglang_bench_serving_agg.jsonl")[0]
    # SGLang's bench_serving records neither requests sent nor failed; its measured concurrency
    # (7.77) is not the point's concurrency
    assert (sglang["sent"], sglang["failed"], sglang["concurrency"]) == (None, None, 4)


def test_p90_from_the_tool_where_it_wrote_one(campaign):
    point = _points(campaign, "bench_07_vllm_p999_with_input_output_lens.json")[0]
    assert point["ttft_p90_s"] > point["ttft_median_s"] > 0


def test_engine_errors_in_a_ready_log_are_run_events_not_launch_failures(campaign):
    rows = campaign.execute(
        "select l.status, l.error_type, e.event, e.detail, e.source_file, e.source_line "
        "from launches as l join run_events as e using (run_id) "
        "where e.source_file like '%server.log' order by e.source_line").fetchall()
    assert [(r[0], r[1], r[2], r[5]) for r in rows] == [
        ("ready", None, "engine_error", 51), ("ready", None, "engine_error", 182)]
    assert rows[0][3].startswith("ValueError: Free memory on device") and "did not become ready" in rows[0][3]
    assert rows[1][3].startswith("vllm.v1.engine.exceptions.EngineDeadError")
    assert rows[1][3].endswith("(after the engine became ready)")


@pytest.mark.parametrize("fact", ["point_ttft_median_s", "point_ttft_p90_s", "point_tpot_median_ms",
                                  "point_decode_tok_s"])
def test_facts_of_a_summary_point_say_where_their_figure_comes_from(campaign, fact: str):
    declared = column_facts(ROOT / "stages" / "render" / "sql" / "facts" / "columns.yaml")[fact]
    column, notes = declared.no_line_when
    tpot = fact in ("point_tpot_median_ms", "point_decode_tok_s")      # TPOT has sources of its own
    assert (column, [v for v, _ in notes]) == (("tpot_from", ["tool summary", "itls"]) if tpot
                                               else ("figures_from", ["tool summary"]))
    assert f"else '{declared.no_line}' end, tool_note), '') as source_note" in declared.sql()
    bench_07 = RESULTS.index("bench_07_vllm_p999_with_input_output_lens.json")
    run_id = f"real-model__tp1__4k__vllm__1130-{bench_07:02d}0000"
    value, note, source_file = campaign.execute(
        f"select value, source_note, source_file from ({declared.sql()})",
        {"run_id": run_id, "workload": "long", "concurrency": 4}).fetchone()
    assert value > 0 and source_file is None
    assert note == notes[0][1] and "summary of the benchmark tool" in note
    # its audit inputs are the tool's summary, and give the value again
    statistic, rows = input_rows(campaign, fact, {"run_id": run_id, "workload": "long", "concurrency": 4})
    used = [r for r in rows if r["used"]]
    assert len(used) == 1 and used[0]["reason"] == "the benchmark tool summary"
    assert used[0]["path"].startswith(("median_", "p90_"))
    assert recompute(statistic, rows) == pytest.approx(value)


def test_charts_mark_the_tools_summary(campaign):
    points = campaign.execute("select *, run_id as series from bench_points").df()
    for chart in (charts.ttft_chart(points), charts.decode_chart(points)):
        spec = chart.to_dict()
        assert chart_notes.SUMMARY_NOTE in spec["title"]["subtitle"]
    prepared = charts.prepare(points)
    assert [("tool summary" in n) for n in prepared["note"]] == \
        [f == "tool summary" for f in prepared["figures_from"]]
    requests_only = points[points["figures_from"] != "tool summary"].assign(figures_from="requests")
    assert chart_notes.SUMMARY_NOTE not in charts.ttft_chart(requests_only).to_dict()["title"]["subtitle"]


@pytest.mark.parametrize("when", ["{figures_from: tool summary}", "{a: {x: y}, b: {x: y}}",
                                  "{figures_from: {tool summary: \"it's quoted\"}}"])
def test_a_malformed_no_line_when_is_refused(tmp_path: Path, when: str):
    (tmp_path / "columns.yaml").write_text(
        "- table: bench_points\n  keys: [run_id, workload, concurrency]\n  facts:\n    f:\n"
        "      value: ttft_median_s\n      unit: s\n      line: none\n      no_line: Computed.\n"
        f"      no_line_when: {when}\n      description: A figure.\n")
    with pytest.raises(FactError, match="no_line_when"):
        column_facts(tmp_path / "columns.yaml")
