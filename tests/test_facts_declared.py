"""Facts declared in stages/render/sql/facts/columns.yaml print what their SQL files printed.

The reference (tests/fixtures/facts_reference.json) was written from the SQL files before they
became declarations: the facts the render stage publishes for the fixture campaign with its node
probe, and every declared fact evaluated on the first rows of its table.
"""
from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest

from stages.render.facts import FactBook

REFERENCE = json.loads((Path(__file__).parent / "fixtures" / "facts_reference.json").read_text())
FIELDS = ("id", "value", "display", "unit", "source_file", "source_line", "run_ids")


@pytest.fixture(scope="module")
def campaign(node_render):
    return node_render.root


def test_published_facts_are_the_reference(campaign):
    records = json.loads((campaign / "data" / "facts.json").read_text())
    got = sorted(({k: r[k] for k in FIELDS} for r in records), key=lambda r: r["id"])
    assert [r["id"] for r in got] == [r["id"] for r in REFERENCE["rendered"]]
    for fact, expected in zip(got, REFERENCE["rendered"]):
        assert fact == expected


def test_each_fact_on_the_first_rows_of_its_table_is_the_reference(campaign):
    con = duckdb.connect(str(campaign / "data" / "campaign.duckdb"), read_only=True)
    try:
        book = FactBook(con, root=campaign, sha=None)
        for expected in REFERENCE["declared"]:
            fact = book.evaluate(expected["name"], expected["params"])
            got = {"name": fact.name, "params": fact.params, **{k: getattr(fact, k) for k in FIELDS}}
            assert got == expected
    finally:
        con.close()
