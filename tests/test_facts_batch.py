"""A table's fact column is computed in one query (FactBook.prefetch): the facts it keeps are the
ones evaluate() computes alone, the sets it cannot settle fail as they did, and fewer queries run."""
from __future__ import annotations

import json
from collections import Counter
from dataclasses import asdict

import duckdb
import pytest

from helpers.render_campaign import RUN4, RUN16
from stages.render import facts as facts_module
from stages.render.declared import ColumnFact
from stages.render.errors import FactError
from stages.render.facts import FactBook
from stages.render.page_macros import PageMacros
from stages.render.queries import FACTS_SQL, column_facts

DECLARED = {name: f for name, f in column_facts(FACTS_SQL / "columns.yaml").items()
            if isinstance(f, ColumnFact) and f.keys}
PROBE_COLUMNS = [["Depth", "fact:probe_depth"], ["Prompt", "fact:probe_prompt_tokens"],
                 ["Took", "fact:probe_latency_s"], ["Outcome", "outcome"]]


class Counting:
    """A connection that counts the queries run on it."""

    def __init__(self, con: duckdb.DuckDBPyConnection):
        self.con = con
        self.queries: Counter = Counter()     # by first line
        self.texts: list[str] = []

    def execute(self, sql, *args):
        self.queries[sql.lstrip().splitlines()[0]] += 1
        self.texts.append(sql)
        return self.con.execute(sql, *args)


@pytest.fixture(scope="module")
def rendered(node_render):
    root = node_render.root
    con = duckdb.connect(str(root / "data" / "campaign.duckdb"), read_only=True)
    yield root, con
    con.close()


def book_on(rendered, con=None) -> FactBook:
    root, own = rendered
    return FactBook(con or own, root=root, sha="b" * 40,
                    raw_dirs=(root / "data" / "runs", root / "data" / "nodes"))


def param_sets(rendered) -> dict[str, list[dict]]:
    """Per declared fact: the sets the render published, then every key set its table holds."""
    root, con = rendered
    sets: dict[str, list[dict]] = {}
    for record in json.loads((root / "data" / "facts.json").read_text()):
        if record["name"] in DECLARED:
            sets.setdefault(record["name"], []).append(record["params"])
    for name, fact in DECLARED.items():
        keys = ", ".join(fact.keys)
        rows = con.execute(f"select distinct {keys} from {fact.table} order by {keys}").fetchall()
        sets.setdefault(name, []).extend(dict(zip(fact.keys, r)) for r in rows)
    return sets


def outcome(book: FactBook, name: str, params: dict):
    """What evaluate() gives: the fact's fields, or the error's message."""
    try:
        return asdict(book.evaluate(name, params))
    except FactError as exc:
        return f"FactError: {exc}"


def test_every_prefetched_fact_is_the_one_computed_alone(rendered):
    root, _ = rendered
    batch, alone = book_on(rendered), book_on(rendered)
    prefetched: set[str] = set()
    for name, sets in param_sets(rendered).items():
        before = set(batch.facts)
        assert batch.prefetch(name, sets) == len(set(batch.facts) - before)
        prefetched |= set(batch.facts) - before
        for fact in [f for f in batch.facts.values() if f.name == name]:
            assert asdict(fact) == asdict(alone.evaluate(name, fact.params)), fact.id
        for params in sets:   # the sets it left, and the ones it kept, evaluate alike
            assert outcome(batch, name, params) == outcome(alone, name, params), (name, params)
    published = [r["id"] for r in json.loads((root / "data" / "facts.json").read_text())
                 if r["name"] in DECLARED]
    assert len(prefetched) > len(published) > 100
    assert set(published) <= prefetched    # every declared fact the render printed, in one query a name
    assert any(f.input_rows for f in batch.facts.values()) and any(f.excerpt for f in batch.facts.values())


def test_a_set_with_no_row_is_left_to_evaluate_and_fails_as_alone(rendered):
    book = book_on(rendered)
    missing = {"run_id": "no-such-run", "probe_idx": 0}
    assert book.prefetch("probe_depth", [{"run_id": RUN4, "probe_idx": 0}, missing]) == 1
    assert len(book.facts) == 1
    with pytest.raises(FactError) as batch_error:
        book.evaluate("probe_depth", missing)
    with pytest.raises(FactError) as alone_error:
        book_on(rendered).evaluate("probe_depth", missing)
    assert str(batch_error.value) == str(alone_error.value) and "0 rows, expected one" in str(alone_error.value)


def test_a_set_the_batch_does_not_hold_is_left_to_evaluate(rendered):
    book = book_on(rendered)
    mixed = [{"run_id": RUN4, "probe_idx": 0}, {"run_id": RUN4, "probe_idx": "first"}]
    assert book.prefetch("probe_depth", mixed) == 1 and len(book.facts) == 1
    assert outcome(book, "probe_depth", mixed[1]) == outcome(book_on(rendered), "probe_depth", mixed[1])
    point = {"run_id": RUN4, "workload": "long", "concurrency": 1}
    assert book.prefetch("point_prefill_tok_s", [point]) == 0   # a .sql file's fact, one set: asked alone
    assert book.prefetch("no_such_fact", [point]) == 0


def test_a_fact_column_costs_one_batch_per_render_however_many_tables_print_it(rendered, monkeypatch):
    root, con = rendered
    printed, counted = {}, {}
    for how in ("batch", "alone"):
        if how == "alone":
            monkeypatch.setattr(FactBook, "_batched", lambda self, name: None)
            monkeypatch.setattr(FactBook, "_batched_query", lambda self, *args: {})
        counting = Counting(con)
        macros = PageMacros(book_on(rendered, counting), page="p.md", runs_dir=root / "data" / "runs",
                            root=root)
        printed[how] = [macros.substitute(str(macros.table("probe_rows", run_id=run, columns=PROBE_COLUMNS)))
                        for run in (RUN4, RUN16)]
        counted[how] = counting.queries
    probes = con.execute("select count(*) from gate_probes where run_id in ($a, $b)",
                         {"a": RUN4, "b": RUN16}).fetchone()[0]
    assert printed["batch"] == printed["alone"] and probes >= 4
    described = [f"-- {DECLARED[c[1][5:]].description}" for c in PROBE_COLUMNS if c[1].startswith("fact:")]
    assert sum(counted["batch"][f"{d} (many parameter sets)"] for d in described) == 3   # one per column
    assert sum(counted["batch"][d] for d in described) == 0
    assert sum(counted["alone"][d] for d in described) == 3 * probes


def test_facts_that_share_their_inputs_and_raw_line_read_them_once(rendered, monkeypatch):
    root, con = rendered
    counting = Counting(con)
    book = book_on(rendered, counting)
    point = con.execute("select run_id, workload, concurrency from bench_points order by all limit 1").fetchone()
    params = dict(zip(("run_id", "workload", "concurrency"), point))
    median = book.evaluate("point_ttft_median_s", params)
    p90 = book.evaluate("point_ttft_p90_s", params)
    assert (median.statistic, p90.statistic) == ("median", "p90")
    assert [r["file"] for r in median.input_rows] == [r["file"] for r in p90.input_rows]
    assert asdict(p90) == asdict(book_on(rendered).evaluate("point_ttft_p90_s", params))
    # one query: the inputs of every point of the fact's batch (stages/render/row_batch.py)
    assert sum("requests of a benchmark point" in q for q in counting.texts) == 1
    reads: Counter = Counter()
    original = facts_module.read_line

    def counted(*args):
        reads[args[1:3]] += 1
        return original(*args)
    monkeypatch.setattr(facts_module, "read_line", counted)
    records = json.loads((root / "data" / "facts.json").read_text())
    by_line: dict[tuple, list[dict]] = {}
    for record in records:
        if record["source_file"]:
            by_line.setdefault((record["source_file"], record["source_line"]), []).append(record)
    line, shared = max(by_line.items(), key=lambda item: len(item[1]))
    fresh = book_on(rendered)
    shown = [fresh.evaluate(r["name"], r["params"]) for r in shared]
    assert len(shared) > 1 and reads[line] == 1
    assert [f.excerpt for f in shown] == [r["excerpt"] for r in shared]
