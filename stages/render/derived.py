"""Derived facts: the ratio or the difference of two facts ("2.5 times faster to read").

Both inputs are facts in their own right, evaluated and recorded as any other; the derived fact
names them (`inputs`), and its audit page links to theirs. Its query is the arithmetic over the
two, written out with the inputs' ids. It carries the caveat marks of both (stages/render/marks.py).

Example (in a template):
    {{ ratio("point_ttft_median_s", {"run_id": a, "workload": w, "concurrency": c},
             "point_ttft_median_s", {"run_id": b, "workload": w, "concurrency": c}, decimals=1) }}
"""
from __future__ import annotations

from typing import Any

from stages.render.errors import FactError
from stages.render.fact_record import Fact, fact_id
from stages.render.facts import FactBook
from stages.render.numbers import format_value

OPERATORS = {"ratio": "/", "difference": "-"}


def derive(book: FactBook, op: str, a_name: str, a_params: dict[str, Any], b_name: str,
           b_params: dict[str, Any], *, page: str | None = None,
           decimals: int | None = None) -> Fact:
    """The fact `a op b` (op: ratio or difference), recorded in `book` with both inputs."""
    if op not in OPERATORS:
        raise FactError(f"unknown derived fact {op!r} (known: {', '.join(OPERATORS)})")
    a = book.evaluate(a_name, dict(a_params), page=page)
    b = book.evaluate(b_name, dict(b_params), page=page)
    for side in (a, b):
        if isinstance(side.value, bool) or not isinstance(side.value, (int, float)):
            raise FactError(f"{op} of {a.id} and {b.id}: {side.id} is not a number ({side.value!r})")
    if op == "ratio":
        if b.value == 0:
            raise FactError(f"ratio of {a.id} and {b.id}: {b.id} is zero")
        value, unit = a.value / b.value, "x"
    else:
        if a.unit != b.unit:
            raise FactError(f"difference of {a.id} ({a.unit}) and {b.id} ({b.unit}): units differ")
        value, unit = a.value - b.value, a.unit
    fid = fact_id(op, {"a": a.id, "b": b.id})
    fact = book.facts.get(fid)
    if fact is None:
        sql = (f"-- The {op} of two facts, each audited on its own page:\n"
               f"--   a = {a.id}\n--   b = {b.id}\n"
               f"select a.value {OPERATORS[op]} b.value as value")
        fact = Fact(id=fid, name=op, params={"a": a.id, "b": b.id}, value=value, unit=unit,
                    display=format_value(value), sql=sql,
                    run_ids=sorted(set(a.run_ids) | set(b.run_ids)), source_file=None,
                    source_line=None, excerpt=None, stage=a.stage, git_sha=book.sha,
                    inputs=[a.id, b.id], marks=book.marks.union((a, b)))
        book.facts[fid] = fact
    book.printed_on(fact, page)
    return fact.at_decimals(decimals)
