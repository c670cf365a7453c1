"""A profiled point on the page, from a real run on one H200 (tests/fixtures/gpu_h200x1_profiled):
the run stage started vLLM with its profiler armed, profiled the 16-user point of `long` and moved
the worker's trace into the run folder. The one-GPU Part splits that point's kernel time by kind,
the shares facts that sum to 100%, each audit entry naming the trace file, the kind's longest
kernels and where one of their events is.
"""
from __future__ import annotations

import re
import shutil
from pathlib import Path

import duckdb
import pytest

from helpers.node_campaign import build, campaign, node_project, plain

FIXTURES = Path(__file__).parent / "fixtures"
GPU_RUN = next((FIXTURES / "gpu_h200x1_profiled").glob("llama-1b__*"))
POINT = "long__c16"
TRACE = next((GPU_RUN / "profile").glob(f"{POINT}.*.pt.trace.json.gz")).name


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("profiled")
    node_project(root, profile="h200x1")
    shutil.copytree(GPU_RUN, root / "data" / "runs" / GPU_RUN.name)
    made = build(root)
    made["page"] = plain(made["pages"]["part-one-gpu"])
    made["run"] = GPU_RUN.name
    return made


def test_the_point_s_kernel_time_is_split_by_kind_into_shares_that_sum_to_100(site):
    shares = {f["params"]["kind"]: f["value"] for f in site["facts"].values()
              if f["name"] == "point_profile_share_pct"}
    assert set(shares) == {"collective", "gemm", "attention", "moe", "memcpy", "other"}
    assert sum(shares.values()) == pytest.approx(100.0, abs=1e-9)
    # the split the fixture's README gives, read from the trace as the engine wrote it
    assert {k: round(v, 2) for k, v in shares.items()} == {
        "collective": 0.0, "gemm": 41.16, "attention": 51.72, "moe": 0.0, "memcpy": 0.17, "other": 6.95}


def test_each_share_s_audit_entry_names_the_trace_and_an_event_of_its_longest_kernels(site):
    fact = next(f for f in site["facts"].values()
                if f["name"] == "point_profile_share_pct" and f["params"]["kind"] == "gemm")
    note = fact["source_note"]
    assert f"profile/{TRACE}" in note and "nvjet" in note, note
    assert re.search(r"event \d+\)", note), note
    out = campaign(site["root"], "trace", fact["id"]).stdout
    assert "note      " in out and "nvjet" in out and TRACE in out


def test_the_part_shows_where_the_time_went(site):
    page = site["page"]
    assert "### Where the time went inside a point" in page
    section = page[page.index("### Where the time went inside a point"):]
    for kind in ("collective", "gemm", "attention", "moe", "memcpy", "other"):
        assert f"| {kind} |" in section, kind
    assert "profiler recording" in section
    con = duckdb.connect(str(site["root"] / "data" / "campaign.duckdb"), read_only=True)
    assert con.execute("select count(*) from ingest_errors").fetchone()[0] == 0
    assert con.execute("select count(*) from run_events where event = 'profile_failed'").fetchone()[0] == 0
