"""A model section's row queries run once for all the sections a render draws
(stages/render/row_batch.py): every such query has a batch form, and it gives each section the
rows, in the order, that the query gives it alone."""
from __future__ import annotations

import json

import duckdb
import pytest

from helpers.node_campaign import scripted_book
from stages.render import inputs, row_batch
from stages.render.facts import FactBook
from stages.render.queries import COLUMN_FACTS, FACTS_SQL, ROWS_SQL, column_facts, sql_params

SECTION_QUERIES = sorted(p.stem for p in ROWS_SQL.glob("*.sql")
                         if set(sql_params(p.read_text())) == row_batch.BATCH_PARAMS)


@pytest.fixture(scope="module")
def book(scripted_node):
    """The scripted node campaign, one group and a half: launches that fail, gates, repeats,
    multi-turn workloads, capacity-limited points (the session's build, tests/conftest.py)."""
    yield from scripted_book(scripted_node)


def test_the_section_queries_are_there():
    assert len(SECTION_QUERIES) >= 20 and "model_points" in SECTION_QUERIES


@pytest.mark.parametrize("name", SECTION_QUERIES)
def test_every_section_query_has_a_batch_form_that_gives_each_section_its_own_rows(book, name):
    sql = (ROWS_SQL / f"{name}.sql").read_text()
    batch = row_batch.batch_sql(sql)
    assert batch is not None, f"{name}: no batch form (see stages/render/row_batch.py)"
    sections = book.sections_here
    columns, rows = book._query(batch, row_batch.section_params(sections), name)
    for i, (run_ids, model) in enumerate(sections):
        own_columns, own = book._query(sql, {"run_ids": list(run_ids), "model": model}, name)
        assert columns[1:] == own_columns
        assert [r[1:] for r in rows if r[0] == i] == own, (name, run_ids)
    # none of those here: no profiled points, no /metrics series, no repeats, and the scripted
    # campaign's sampler windows open at the first request, so no point is client-paced
    if not name.startswith(("model_profile", "model_metrics", "model_repeats", "model_client_paced")):
        assert rows, name


def test_the_book_runs_a_section_query_once_for_the_expected_sections(book):
    first, model = book.sections_here[-2]
    all_runs = book.sections_here[0][0]
    book.expect_sections([(list(all_runs), model), (list(first), model)])
    queries = []
    original = book._query
    book._query = lambda sql, params, what, **kw: queries.append(what) or original(sql, params, what, **kw)
    try:
        _, every = book.rows("model_points", {"run_ids": list(all_runs), "model": model})
        _, one = book.rows("model_points", {"run_ids": list(first), "model": model})
        _, other = book.rows("model_points", {"run_ids": list(all_runs[-1:]), "model": model})
    finally:
        del book._query
    assert len(queries) == 2       # the two expected sections in one query; the other alone
    assert {r["run_id"] for r in one} == set(first) and all(r in every for r in one)
    assert {r["run_id"] for r in other} <= set(all_runs[-1:])


@pytest.mark.parametrize("sql", [
    "select * from runs where model = $model",                                   # no final CTE
    "with final as (select distinct model from runs where list_contains($run_ids, run_id) "
    "and model = $model order by model) select * from final",                    # DISTINCT
    "with final as (select run_id from runs where model = $model and list_contains($run_ids, run_id) "
    "order by run_id limit 1) select * from final",                              # LIMIT
    "with final as (select run_id from runs where model = $model and list_contains($run_ids, run_id) "
    "union all select run_id from launches order by 1) select * from final",     # UNION
])
def test_a_query_of_another_shape_has_no_batch_form(sql):
    assert row_batch.batch_sql(sql) is None


def test_parentheses_and_keywords_in_comments_and_strings_do_not_count(book):
    sql = ("with final as (\n"
           "    select run_id, 'from (x' as note,  -- a comment ) from final order by\n"
           "           row_number() over (order by started_at desc) as k\n"
           "    from runs where model = $model and list_contains($run_ids::varchar[], run_id)\n"
           "    order by started_at, run_id  -- oldest first (then by id)\n"
           ")\n\nselect * from final\n")
    batch = row_batch.batch_sql(sql)
    assert "$model" not in batch and "$run_ids" not in batch
    sections = book.sections_here
    _, rows = book._query(batch, row_batch.section_params(sections), "comments")
    for i, (run_ids, model) in enumerate(sections):
        _, own = book._query(sql, {"run_ids": list(run_ids), "model": model}, "comments")
        assert [r[1:] for r in rows if r[0] == i] == own
    assert rows


def test_most_facts_with_inputs_are_batched():
    assert len(BATCHED) >= 10 and "point_ttft_median_s" in BATCHED


BATCHED = [n for n in sorted(inputs.declared()) if n in column_facts(FACTS_SQL / COLUMN_FACTS)]


@pytest.mark.parametrize("name", BATCHED)
def test_a_facts_inputs_fetched_for_its_whole_batch_are_those_fetched_one_by_one(book, name):
    book._batched(name)
    sets = book._batch_sets[name]
    together: dict = {}
    inputs.prefetch(book.con, name, sets, together)
    assert len(together) == len({json.dumps(s, sort_keys=True, default=repr) for s in sets}) > 1
    for params in sets:
        alone: dict = {}
        assert inputs.input_rows(book.con, name, params, cache=together) \
            == inputs.input_rows(book.con, name, params, cache=alone), params


# the fact queries with a batch form; the node probe's facts are not among those tested here: the
# scripted campaign has no node probe (test_node_part renders them)
# Facts of a run set ($run_ids: a Part's GPU-hours) are made once a Part, one by one: prefetching
# is for the many facts keyed by single values.
QUERY_FACTS = sorted(p.stem for p in FACTS_SQL.glob("*.sql") if not p.stem.startswith("node_")
                     and "run_ids" not in sql_params(p.read_text())
                     and row_batch.batch_sql(p.read_text(), tuple(sorted(sql_params(p.read_text())))))
SET_TABLES = ("bench_points", "invalid_rows", "ramp_turns", "point_cost", "pareto_compare",
              "(select profile, event from (select distinct profile from runs), "
              "(select distinct event from run_events union select 'point_failed' union select 'profile_failed'))")


def fact_sets(con: duckdb.DuckDBPyConnection, wanted: list[str]) -> list[dict]:
    """Parameter sets for a fact: each distinct set a public table holds, and one of no run."""
    for table in SET_TABLES:
        columns = [d[0] for d in con.execute(f"select * from {table} limit 0").description]
        if set(wanted) <= set(columns):
            rows = con.execute(f"select distinct {', '.join(wanted)} from {table}").fetchall()
            sets = [dict(zip(wanted, r)) for r in rows]
            key = "run_id" if "run_id" in wanted else wanted[0]
            return sets + [{**sets[0], key: "no-such-value"}] if sets else []
    return []


def test_most_fact_queries_have_a_batch_form():
    assert len(QUERY_FACTS) >= 7 and "point_prefill_tok_s" in QUERY_FACTS


@pytest.mark.parametrize("name", QUERY_FACTS)
def test_a_fact_query_prefetched_for_many_sets_gives_the_facts_evaluated_one_by_one(book, name):
    wanted = sorted(sql_params(FACTS_SQL.joinpath(f"{name}.sql").read_text()))
    sets = fact_sets(book.con, wanted)
    assert len(sets) >= 3, name
    together, alone = (FactBook(book.con, root=book.root, sha=None) for _ in range(2))
    made = together.prefetch(name, sets)
    assert made >= 2
    for params in sets:
        try:
            one = alone.evaluate(name, params).record()
        except Exception:                      # one by one it fails: the batch made none either
            assert not any(f.params == params for f in together.facts.values()), params
            continue
        assert together.evaluate(name, params).record() == one, params
