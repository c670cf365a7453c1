"""The caveat counts of a point agree with each other and with the figures they qualify.

The rules (bench_points, invalid_rows): a point's time to first token (median, p90, p99) is
computed over its requests that completed and were not served from the prefix cache; a request
that failed or was (invalid_rows reasons failed, prefix_cache: excludes_ttft) is left out of it,
once however many reasons invalid_rows gives it. short_output and cached_share only flag a request:
it keeps its TTFT. So, for a point whose figures come from its requests (not from the benchmark
tool's summary), every request of its result file is in the TTFT figures or left out of them:

    requests of the result file = ttft_requests + requests left out of the TTFT

and where the file records every request it sent, those are `sent`. invalid_rows holds one row
per request and reason, so a point's distinct invalid requests can be fewer than its rows, and a
count per reason counts each request once.

Checked over the synthetic node campaign (ingest and derive of tests/fixtures/node_campaign, as
the node Parts read it: the doc-256k point of dsv4_pro at one user has a request both served from
the cache and, with the other, flagged by the point's cached share) and over derive's standard
warehouse (test_derive: a failed request, a short output, a burst output), the printed facts
evaluated through FactBook as a Part evaluates them."""
from __future__ import annotations

import shutil
from pathlib import Path

import duckdb
import pytest

from helpers.db_rows import rows_of
from helpers.derive_rows import derive_into
from stages.core.config import derive_settings, load_params
from stages.derive import stage as derive
from stages.ingest import stage as ingest
from stages.render.facts import FactBook

ROOT = Path(__file__).resolve().parent.parent
NODE_RUNS = ROOT / "tests" / "fixtures" / "node_campaign" / "runs"
CACHED_POINT = ("dsv4_pro__tep8__781k__vllm__1116-112000", "doc-256k", 1)

# Each point's first repeat (the facts print it) with the counts its caveats rest on: the requests
# of its result file, and of them those that failed or were served from the prefix cache (the
# rules as README states them, not as invalid_rows flags them), and those invalid_rows lists.
POINTS = """
with requests as (
    select r.run_id, r.point_id,
           count(*)                                                   as requests,
           count(*) filter (where not r.ok or exists (
               select 1 from invalid_rows as i
               where i.run_id = r.run_id and i.point_id = r.point_id
                 and i.request_idx = r.request_idx and i.reason = 'prefix_cache')) as failed_or_cached,
           count(*) filter (where exists (
               select 1 from invalid_rows as i
               where i.run_id = r.run_id and i.point_id = r.point_id
                 and i.request_idx = r.request_idx))                  as listed,
           count(*) filter (where exists (
               select 1 from invalid_rows as i
               where i.run_id = r.run_id and i.point_id = r.point_id
                 and i.request_idx = r.request_idx and i.reason = 'prefix_cache')) as cached
    from bench_requests as r
    group by r.run_id, r.point_id
)
select p.run_id, p.point_id, p.workload, p.concurrency, p.sent, p.failed, p.figures_from,
       p.ttft_requests, p.ttft_median_s, p.invalid_requests, r.requests, r.failed_or_cached,
       r.listed, r.cached, runs.model,
       (select count(*) from invalid_rows as i
        where i.run_id = p.run_id and i.point_id = p.point_id) as invalid_rows
from bench_points as p
inner join requests as r using (run_id, point_id)
inner join runs using (run_id)
where p.repeat = 1
order by p.run_id, p.workload, p.concurrency
"""


def node_campaign(tmp: Path) -> Path:
    """campaign.duckdb of the node fixture, ingested and derived as `campaign ingest && campaign
    derive` with profile h200x8 does, without rendering."""
    runs = tmp / "data" / "runs"
    for folder in NODE_RUNS.iterdir():
        if folder.is_dir():
            shutil.copytree(folder, runs / folder.name)
    data = tmp / "data"
    ingest.run(runs_dir=runs, warehouse=data / "warehouse.duckdb", root=tmp)
    settings = derive_settings({**load_params(ROOT), "profile": "h200x8"})
    derive.run(warehouse=data / "warehouse.duckdb", campaign_db=data / "campaign.duckdb",
               derived_dir=data / "derived", metrics_file=data / "metrics.json", **settings)
    return data / "campaign.duckdb"


@pytest.fixture(scope="module")
def node(tmp_path_factory) -> tuple[Path, Path]:
    tmp = tmp_path_factory.mktemp("node")
    return tmp, node_campaign(tmp)


@pytest.fixture(scope="module")
def standard(tmp_path_factory) -> tuple[Path, Path]:
    tmp = tmp_path_factory.mktemp("standard")
    _, out = derive_into(tmp)
    return tmp, out / "campaign.duckdb"


@pytest.fixture(params=["node", "standard"])
def book(request):
    root, db = request.getfixturevalue(request.param)
    con = duckdb.connect(str(db), read_only=True)
    yield FactBook(con, root=root, sha=None)
    con.close()


def points(book: FactBook) -> list[dict]:
    found = rows_of(book.con, POINTS)
    assert found
    return found


def fact(book: FactBook, name: str, **params):
    return book.evaluate(name, params, page="part-x.md").value


def reasons(book: FactBook, run_id: str, point_id: str) -> dict[str, tuple[int, int]]:
    """reason -> (rows, distinct requests) of invalid_rows for one point."""
    return {r: (n, d) for r, n, d in book.con.execute(
        "select reason, count(*), count(distinct request_idx) from invalid_rows "
        "where run_id = ? and point_id = ? group by reason", [run_id, point_id]).fetchall()}


def test_every_request_is_in_the_ttft_figures_or_left_out_of_them(book):
    for p in points(book):
        if p["figures_from"] == "tool summary":
            continue
        assert p["requests"] == p["ttft_requests"] + p["failed_or_cached"], p
        # bench_points.failed counts the failed requests, which are among those left out
        assert p["failed_or_cached"] == (p["failed"] or 0) + p["cached"], p
        # a point whose requests are all left out has no TTFT, not a median of those
        assert (p["ttft_median_s"] is None) == (p["ttft_requests"] == 0), p
        # distinct requests listed: those left out, and those only flagged (they keep their TTFT)
        assert p["invalid_requests"] == p["listed"] >= p["failed_or_cached"], p


def test_the_node_campaign_sent_every_request_its_result_file_records(node):
    _, db = node
    with duckdb.connect(str(db), read_only=True) as con:
        for p in rows_of(con, POINTS):
            assert p["sent"] == p["requests"], p


def test_invalid_rows_says_which_figures_each_reason_leaves_a_request_out_of(book):
    flags = {r: (ttft, tpot) for r, ttft, tpot in book.con.execute(
        "select distinct reason, excludes_ttft, excludes_tpot from invalid_rows").fetchall()}
    assert len(flags) == len({r for r, *_ in book.con.execute(
        "select distinct reason from invalid_rows").fetchall()})      # one pair per reason
    stated = {"failed": (True, True), "prefix_cache": (True, False), "burst_output": (False, True),
              "short_output": (False, False), "cached_share": (False, False)}
    assert flags == {r: stated[r] for r in flags}


def test_printed_counts_are_the_requests_they_name(book):
    for p in points(book):
        key = {"run_id": p["run_id"], "workload": p["workload"], "concurrency": p["concurrency"]}
        requests = fact(book, "point_ttft_requests", **key)
        left_out = fact(book, "point_ttft_left_out", **key)
        assert requests == p["ttft_requests"], p
        if p["figures_from"] != "tool summary":
            assert left_out == p["failed_or_cached"], p
            assert requests + left_out == p["requests"], p
        assert fact(book, "point_cache_left_out", **key) == p["cached"], p
        for reason, (_rows, distinct) in reasons(book, p["run_id"], p["point_id"]).items():
            assert fact(book, "point_invalid_count", run_id=p["run_id"], point_id=p["point_id"],
                        reason=reason) == distinct, (p, reason)


def test_the_caveat_tables_agree_with_the_facts_they_print(book):
    sections = {(p["run_id"], p["model"]) for p in points(book)}
    by_point = {(p["run_id"], p["workload"], p["concurrency"]): p for p in points(book)}
    seen_invalid = seen_cached = 0
    for run_id, model in sorted(sections):
        params = {"run_ids": [run_id], "model": model}
        _, invalid = book.rows("model_invalid", params)
        for row in invalid:
            p = by_point[(row["run_id"], row["workload"], row["concurrency"])]
            assert row["point_id"] == p["point_id"]
            flags = book.con.execute(
                "select bool_or(excludes_ttft), bool_or(excludes_tpot) from invalid_rows "
                "where reason = ?", [row["reason"]]).fetchone()
            assert row["left_out_of"] == {
                (True, True): "first token and per token", (True, False): "first token",
                (False, True): "per token", (False, False): "neither: flagged only"}[flags], row
            seen_invalid += 1
        _, cached = book.rows("model_cache_rows", params)
        for row in cached:
            key = {"run_id": row["run_id"], "workload": row["workload"], "concurrency": row["concurrency"]}
            assert row["any_left_out"] == (fact(book, "point_ttft_left_out", **key) > 0), row
            seen_cached += 1
    assert seen_invalid and seen_cached


def test_the_point_a_reader_saw_disagree(node):
    """dsv4_pro, doc-256k, one user: two requests, both flagged cached_share (the engine served
    half the point's prompt tokens from its cache), one of them also answered faster than the
    cache rule (prefix_cache). Its TTFT median rests on one request; one is left out of it; the
    three rows of invalid_rows are two requests. The cache table said two were left out."""
    root, db = node
    run_id, workload, concurrency = CACHED_POINT
    key = {"run_id": run_id, "workload": workload, "concurrency": concurrency}
    with duckdb.connect(str(db), read_only=True) as con:
        book = FactBook(con, root=root, sha=None)
        [p] = [p for p in points(book) if (p["run_id"], p["workload"], p["concurrency"]) == CACHED_POINT]
        assert (p["sent"], p["ttft_requests"], p["invalid_requests"], p["invalid_rows"]) == (2, 1, 2, 3)
        assert reasons(book, run_id, p["point_id"]) == {"prefix_cache": (1, 1), "cached_share": (2, 2)}
        assert fact(book, "point_ttft_requests", **key) == 1
        assert fact(book, "point_ttft_left_out", **key) == 1
        assert fact(book, "point_cache_left_out", **key) == 1
        assert [fact(book, "point_invalid_count", run_id=run_id, point_id=p["point_id"], reason=r)
                for r in ("prefix_cache", "cached_share")] == [1, 2]
        assert fact(book, "point_ttft_median_s", **key) is not None
