"""One query for many model sections: a row query of one model in a Part ($run_ids, $model) run
once for every section a render is about to draw, instead of once per section.

A row query's cost here is DuckDB planning it (~10 ms), not the rows: at 300 runs the model
sections asked 22 row queries each, 3,300 queries for half a minute. The batch form binds the
sections as rows of a list and joins the query to them laterally:

    select __s.i as __set, __q.* exclude (__n)
    from (select unnest($__i) as i, unnest($__run_ids) as run_ids, unnest($__model) as model) as __s,
         lateral (<the query, $run_ids -> __s.run_ids, $model -> __s.model>) as __q
    order by __s.i, __q.__n, __q

A lateral join keeps no order, so each section's rows carry their place: the query's `final` CTE
(the project's shape: `with ... final as (select ... from ... order by K) select ... from final`)
gains a column `rank() over (order by K) as __n` at the end of its select list (no K: the
query has no order of its own either). Rows that tie on K, in no order of the query's, are put in
the order of their values (`__q`, the whole row), so that a render lists them the same way every
time, whichever sections it draws.
A query of another shape (no such CTE, or one with DISTINCT, a set operation, LIMIT or OFFSET)
has no batch form (batch_sql returns None) and runs once per section, as does any batch that fails.
The same form serves a fact's inputs query (stages/render/inputs.py, prefetch), bound by its own
parameters instead of a section's.
"""
from __future__ import annotations

import re
from functools import lru_cache

BATCH_PARAMS = frozenset({"run_ids", "model"})
_ORDER_BY = re.compile(r"\border\s+by\b", re.IGNORECASE)


def _mask(sql: str) -> str:
    """`sql` with comments and string literals blanked to spaces (same length): parentheses and
    keywords inside them do not count."""
    def blank(m: re.Match) -> str:
        return re.sub(r"[^\n]", " ", m.group(0))
    return re.sub(r"--[^\n]*|'(?:[^']|'')*'", blank, sql)


def _closing(masked: str, start: int) -> int | None:
    """Index of the parenthesis closing the one opened just before `start`."""
    depth = 1
    for i in range(start, len(masked)):
        if masked[i] == "(":
            depth += 1
        elif masked[i] == ")":
            depth -= 1
            if depth == 0:
                return i
    return None


def _top_level(masked: str) -> list[int]:
    """The indexes of `masked` outside any parentheses."""
    depth, out = 0, []
    for i, ch in enumerate(masked):
        depth += ch == "("
        depth -= ch == ")"
        if depth == 0 and ch not in "()":
            out.append(i)
    return out


@lru_cache(maxsize=256)
def batch_sql(sql: str, names: tuple[str, ...] = tuple(sorted(BATCH_PARAMS))) -> str | None:
    """The batch form of a query binding the parameters `names` (a section row query's by
    default; see the module's docstring), or None."""
    masked = _mask(sql)
    opened = list(re.finditer(r"\bfinal\s+as\s+\(", masked, re.IGNORECASE))
    if len(opened) != 1:
        return None
    start = opened[0].end()
    end = _closing(masked, start)
    if end is None or not re.fullmatch(r"\s*select\b.*\bfrom\s+final\s*;?\s*", masked[end + 1:],
                                       re.IGNORECASE | re.DOTALL):
        return None
    body = masked[start:end]
    # the CTE's own ORDER BY: the last one at its top level (not inside a window's parentheses)
    top = [i for i in _top_level(body) if _ORDER_BY.match(body, i)]
    keys = sql[start + _ORDER_BY.match(body, top[-1]).end():end] if top else ""
    keys = re.sub(r"('(?:[^']|'')*')|--[^\n]*", lambda m: m.group(1) or "", keys).strip()
    if re.search(r"\b(limit|offset)\b", _mask(body), re.IGNORECASE):
        return None
    # the end of the CTE's select list: its first FROM at the top level; no DISTINCT or UNION
    head = re.match(r"\s*select\s+", body, re.IGNORECASE)
    froms = [i for i in _top_level(body) if re.match(r"from\b", body[i:i + 5], re.IGNORECASE)
             and not re.match(r"\w", body[i - 1])]
    if head is None or not froms or re.match(r"distinct\b", body[head.end():], re.IGNORECASE) \
            or any(re.match(r"(union|intersect|except)\b", body[i:], re.IGNORECASE) for i in _top_level(body)):
        return None
    at = len(masked[:start + froms[0]].rstrip())    # after the list's last word, not in a comment
    order = f"order by {keys}" if keys else ""      # none: the query's own order is none either
    query = sql[:at] + f",\n        rank() over ({order}) as __n" + sql[at:]
    named = re.compile(r"\$(" + "|".join(map(re.escape, names)) + r")\b")
    found = list(named.finditer(_mask(query)))          # not in a comment or a string
    for m in reversed(found):
        query = query[:m.start()] + f"__s.{m.group(1)}" + query[m.end():]
    unnests = ", ".join(f"unnest($__{n}) as {n}" for n in names)
    return ("select __s.i as __set, __q.* exclude (__n)\n"
            f"from (select unnest($__i) as i, {unnests}) as __s,\n"
            f"     lateral (\n{query}\n) as __q\n"
            "order by __s.i, __q.__n, __q")


def batch_params(sets: list[dict], names: tuple[str, ...]) -> dict:
    """The batch query's parameters for `sets`, one dict of the parameters `names` each."""
    return {"__i": list(range(len(sets))), **{f"__{n}": [s[n] for s in sets] for n in names}}


def rows_by_set(rows: list[tuple], count: int) -> list[list[tuple]]:
    """The batch query's rows split by the set they answer (its first column, the set's index),
    each row without that column: one list per set of the `count` asked, in order."""
    found: list[list[tuple]] = [[] for _ in range(count)]
    for row in rows:
        found[row[0]].append(row[1:])
    return found


def section_params(sections: list[tuple[tuple[str, ...], str]]) -> dict:
    """The batch parameters of model sections, (run_ids, model) each."""
    return batch_params([{"run_ids": list(r), "model": m} for r, m in sections], tuple(sorted(BATCH_PARAMS)))
