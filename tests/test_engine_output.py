"""Engine output checks (invalid_rows text_not_output and output_count): a request whose generated
text holds more characters per output token than rules.max_chars_per_token, or more output tokens
than its workload asks for. Planted in a copy of a real vLLM 0.26 result file (the one-GPU fixture
run), and checked on the committed fixtures: the CPU rehearsal run, the one-GPU run and the node
campaign flag exactly the requests whose text is their prompt sent back, and nothing else."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import duckdb
import pytest

from stages.core.config import derive_settings, load_params
from stages.derive import stage as derive
from stages.ingest import stage as ingest

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
GPU_RUN = FIXTURES / "gpu_h200x1" / "llama-1b__gpu1_seqs64__32k__vllm__1202-160157"
CPU_RUN = FIXTURES / "runs" / "tiny-llama__cpu_seqs4__4k__vllm__1130-053610"
NODE_RUNS = FIXTURES / "node_campaign" / "runs"
CHECKS = ("text_not_output", "output_count")


def _copy(src: Path, runs: Path) -> Path:
    folder = runs / src.name
    shutil.copytree(src, folder)
    for p in [folder, *folder.rglob("*")]:
        p.chmod(p.stat().st_mode | 0o200)
    (folder / "MANIFEST.sha256").unlink(missing_ok=True)
    return folder


def _derived(tmp_path: Path, profile: str) -> duckdb.DuckDBPyConnection:
    data = tmp_path / "data"
    ingest.run(runs_dir=data / "runs", warehouse=data / "warehouse.duckdb", root=tmp_path)
    settings = derive_settings({**load_params(ROOT), "profile": profile})
    derive.run(warehouse=data / "warehouse.duckdb", campaign_db=data / "campaign.duckdb",
               derived_dir=data / "derived", metrics_file=data / "metrics.json", **settings)
    return duckdb.connect(str(data / "campaign.duckdb"), read_only=True)


def _flags(con, reasons=CHECKS) -> dict[tuple[str, int], dict]:
    cur = con.execute("select * from invalid_rows where list_contains(?, reason) order by all",
                      [list(reasons)])
    names = [d[0] for d in cur.description]
    return {(r["point_id"], r["request_idx"]): r for r in (dict(zip(names, row)) for row in cur.fetchall())}


def _echoes(folder: Path, limit: float) -> set[tuple[str, int]]:
    """The requests of a run's result files whose text holds more than `limit` characters a token,
    read straight from the JSON."""
    found = set()
    for f in sorted((folder / "bench").glob("*__c*.json")):
        d = json.loads(f.read_text())
        for i, (text, n) in enumerate(zip(d.get("generated_texts") or [], d.get("output_lens") or [])):
            if text and n and len(text) / n > limit:
                found.add((f.stem, i))
    return found


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    """The one-GPU run with chat__c04's result file given a request that sent its prompt back
    (its text: a prompt's worth of another request's text), one with more output tokens than asked,
    and one whose text is long but within the rule."""
    tmp = tmp_path_factory.mktemp("planted")
    folder = _copy(GPU_RUN, tmp / "data" / "runs")
    path = folder / "bench" / "chat__c04.json"
    d = json.loads(path.read_text())
    asked = d["output_lens"][0]
    prompt_like = "".join(d["generated_texts"])[:d["input_lens"][2] * 5]     # about 5 characters a token
    d["generated_texts"][2] = prompt_like + d["generated_texts"][2]
    d["output_lens"][5] = asked + 7
    d["generated_texts"][6] = d["generated_texts"][6] * 2                   # about 10 a token: kept
    path.write_text(json.dumps(d))
    return _derived(tmp, "h200x1"), d


def test_planted_echo_flagged_with_its_field(planted):
    con, d = planted
    flags = _flags(con)
    echo = flags[("chat__c04", 2)]
    assert echo["reason"] == "text_not_output"
    assert echo["excludes_ttft"] and not echo["excludes_tpot"]
    assert echo["source_file"].endswith("bench/chat__c04.json") and echo["source_line"] == 1
    assert echo["detail"].startswith(f"generated_texts[2] holds {len(d['generated_texts'][2]):,} characters")
    assert echo["value"] == pytest.approx(len(d["generated_texts"][2]) / d["output_lens"][2])
    assert echo["threshold"] == load_params(ROOT)["rules"]["max_chars_per_token"]
    ratio = float(echo["detail"].split("; ")[1].split(" times")[0])
    assert 0.8 < ratio < 1.5                # about the length of its prompt at the run's characters a token
    count = flags[("chat__c04", 5)]
    assert count["reason"] == "output_count" and count["excludes_tpot"] and not count["excludes_ttft"]
    assert count["detail"] == (f"output_lens[5] is {d['output_lens'][5]:,} output tokens, more than the "
                               f"{d['output_lens'][0]:,} its workload asks for")
    assert ("chat__c04", 6) not in flags


def test_planted_echo_left_out_of_ttft_kept_in_tpot(planted):
    con, _ = planted
    point = con.execute("select ttft_requests, ttft_left_out, completed from bench_points "
                        "where point_id = 'chat__c04'").fetchone()
    assert point == (7, 1, 8)
    # the point's TPOT median is over the requests no excludes_tpot reason names: all but output_lens[5]
    tpots = [r[0] for r in con.execute(
        "select tpot_ms from bench_requests where point_id = 'chat__c04' and request_idx <> 5 "
        "order by tpot_ms").fetchall()]
    median = con.execute("select tpot_median_ms from bench_points where point_id = 'chat__c04'").fetchone()[0]
    assert median == pytest.approx((tpots[3] + tpots[4]) / 2 if len(tpots) % 2 == 0 else tpots[len(tpots) // 2])


def test_one_gpu_fixture_flags_exactly_its_echoes(planted):
    con, _ = planted
    limit = load_params(ROOT)["rules"]["max_chars_per_token"]
    flags = {k: v for k, v in _flags(con, ["text_not_output"]).items() if k != ("chat__c04", 2)}
    assert set(flags) == _echoes(GPU_RUN, limit)
    assert len(flags) == 26
    # every one is about as long as its prompt: 0.6 to 1.2 times it at the run's characters a token
    ratios = [float(r["detail"].split("; ")[1].split(" times")[0]) for r in flags.values()]
    assert min(ratios) > 0.6 and max(ratios) < 1.2


def test_cpu_and_node_fixtures(tmp_path):
    """The CPU rehearsal run has one request that sent its prompt back (long-shared__c04, request
    4: 9,529 characters for 64 tokens of a 2,050-token prompt); the node campaign has none."""
    _copy(CPU_RUN, tmp_path / "cpu" / "data" / "runs")
    con = _derived(tmp_path / "cpu", "local-cpu")
    assert set(_flags(con)) == {("long-shared__c04", 4)} == _echoes(CPU_RUN, 16)
    for run in sorted(NODE_RUNS.iterdir()):
        _copy(run, tmp_path / "node" / "data" / "runs")
    con = _derived(tmp_path / "node", "h200x8")
    assert _flags(con) == {}


def test_rule_off_without_it(tmp_path):
    """A derive given rules without max_chars_per_token (an older params) leaves the check off."""
    _copy(CPU_RUN, tmp_path / "data" / "runs")
    data = tmp_path / "data"
    ingest.run(runs_dir=data / "runs", warehouse=data / "warehouse.duckdb", root=tmp_path)
    settings = derive_settings({**load_params(ROOT), "profile": "local-cpu"})
    settings["rules"] = {k: v for k, v in settings["rules"].items() if k != "max_chars_per_token"}
    settings["profiles"] = {n: {**p, "rules": {k: v for k, v in p["rules"].items() if k != "max_chars_per_token"}}
                            for n, p in settings["profiles"].items()}
    derive.run(warehouse=data / "warehouse.duckdb", campaign_db=data / "campaign.duckdb",
               derived_dir=data / "derived", metrics_file=data / "metrics.json", **settings)
    con = duckdb.connect(str(data / "campaign.duckdb"), read_only=True)
    assert _flags(con, ["text_not_output"]) == {}
