"""Query answers remembered between renders of one database (stages/render/query_memo.py): a
book with the memo of an earlier book asks the database nothing it asked before and gets the same
rows and facts; a section asked alone finds the rows a batch of sections fetched; another database
or a damaged memo file is a miss, never a wrong answer."""
from __future__ import annotations

import duckdb
import pytest

from helpers.node_campaign import scripted_book
from stages.render.facts import FactBook
from stages.render.query_memo import MEMO_FILE, QueryMemo


@pytest.fixture(scope="module")
def book(scripted_node):
    """The scripted node campaign (the session's build, tests/conftest.py), as test_row_batch reads it."""
    yield from scripted_book(scripted_node)


class Counting:
    """A DuckDB connection that counts the questions a book asks (not its set-up: the macros it
    creates, the column names it checks a declared fact against)."""

    SETUP = ("-- Table macros", "select column_name from information_schema.columns")

    def __init__(self, con: duckdb.DuckDBPyConnection):
        self.con, self.statements = con, 0

    def execute(self, *args):
        self.statements += not str(args[0]).startswith(self.SETUP)
        return self.con.execute(*args)


def fresh(book, memo: QueryMemo) -> tuple[FactBook, Counting]:
    counting = Counting(book.con)
    return FactBook(counting, root=book.root, sha=None, memo=memo), counting


def ask(b: FactBook, sections: list, runs: list[str]) -> tuple:
    """What a Part asks: its sections' rows (expected together, as a render expects them) and a
    few facts of a run."""
    b.expect_sections(sections)
    rows = [b.rows("model_points", {"run_ids": list(r), "model": m})[1] for r, m in sections]
    facts = [b.evaluate("launch_ready_s", {"run_id": r}).record() for r in runs]
    return rows, facts


def test_a_second_book_asks_nothing_the_first_asked_and_gets_the_same(book, tmp_path):
    sections = book.sections_here[:2]
    runs = [book.sections_here[0][0][0]]
    first, counted = fresh(book, QueryMemo(tmp_path, "db-1"))
    answers = ask(first, sections, runs)
    assert counted.statements > 0
    first.memo.save()
    assert (tmp_path / MEMO_FILE).is_file()
    second, counted = fresh(book, QueryMemo(tmp_path, "db-1"))
    assert ask(second, sections, runs) == answers and counted.statements == 0
    # one section asked alone finds the rows the batch of two fetched, section by section
    third, counted = fresh(book, QueryMemo(tmp_path, "db-1"))
    assert ask(third, sections[1:], runs) == (answers[0][1:], answers[1]) and counted.statements == 0


def test_another_database_is_a_miss_and_its_save_drops_the_old_answers(book, tmp_path):
    sections, runs = book.sections_here[:1], [book.sections_here[0][0][0]]
    first, _ = fresh(book, QueryMemo(tmp_path, "db-1"))
    answers = ask(first, sections, runs)
    first.memo.save()
    other, counted = fresh(book, QueryMemo(tmp_path, "db-2"))
    assert ask(other, sections, runs) == answers and counted.statements > 0
    other.memo.save()
    again, counted = fresh(book, QueryMemo(tmp_path, "db-1"))
    ask(again, sections, runs)
    assert counted.statements > 0          # db-1's answers went when db-2's were saved


@pytest.mark.parametrize("damage", [b"not a database at all", b""])
def test_a_damaged_memo_file_is_a_miss_and_is_made_again(book, tmp_path, damage):
    (tmp_path / MEMO_FILE).write_bytes(damage)
    sections, runs = book.sections_here[:1], [book.sections_here[0][0][0]]
    first, counted = fresh(book, QueryMemo(tmp_path, "db-1"))
    answers = ask(first, sections, runs)
    assert counted.statements > 0
    first.memo.save()
    second, counted = fresh(book, QueryMemo(tmp_path, "db-1"))
    assert ask(second, sections, runs) == answers and counted.statements == 0


def test_without_a_folder_nothing_is_kept(tmp_path):
    memo = QueryMemo(None, "db-1")
    memo.put("select 1", {}, (["x"], [(1,)]))
    memo.save()
    assert QueryMemo(None, "db-1").get("select 1", {}) is None and not any(tmp_path.iterdir())
