"""columns.yaml read and checked: each group of declared facts becomes a ColumnFact, CountFact
or ChangeFact (stages/render/declared.py)."""
from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

from stages.core.config import SAFE_LOADER
from stages.core.catalogue import public_tables
from stages.render.declared import (DISPLAYS, EXPRESSION_TOKEN, IDENTIFIER, LITERAL, NAME, NOTE, UNIT,
                                    ChangeFact, ColumnFact, CountFact, DeclaredFact)
from stages.render.errors import FactError

ORDER = re.compile(r"^[a-z_][a-z0-9_]*(?: desc)?$")
RUN_COLUMN = re.compile(r"^(?:runs\.)?[a-z_][a-z0-9_]*$")  # a count's column, or its run's


def _declared(path: Path, where: str, value: Any, pattern: re.Pattern, what: str) -> str:
    if not isinstance(value, str) or not pattern.fullmatch(value):
        raise FactError(f"{path.name}: {where}: bad {what} {value!r}")
    return value


def _expression(path: Path, name: str, text: Any) -> str:
    """A value expression: column names, numbers, + - * / ( ) , and the functions allowed."""
    if not isinstance(text, str) or not text.strip() or "--" in text:
        raise FactError(f"{path.name}: {name}: bad value {text!r}")
    pos = 0
    while pos < len(text.rstrip()):
        m = EXPRESSION_TOKEN.match(text, pos)
        if not m:
            raise FactError(f"{path.name}: {name}: value {text!r} is not a column or plain arithmetic")
        pos = m.end()
    return text.strip()


def _description(path: Path, name: str, entry: dict) -> str:
    description = entry.get("description")
    if not isinstance(description, str) or not description.strip() or "\n" in description.strip():
        raise FactError(f"{path.name}: {name}: the description is one line of text")
    return description.strip()


def _unit(path: Path, name: str, entry: dict) -> str | None:
    unit = entry.get("unit")
    return None if unit is None else _declared(path, name, unit, UNIT, "unit")


def _column_fact(path: Path, group: dict, name: str, entry: Any) -> ColumnFact:
    if not isinstance(entry, dict) or \
            set(entry) - {"value", "unit", "line", "line_at", "no_line", "no_line_when", "note",
                          "display", "description"}:
        raise FactError(f"{path.name}: {name}: an entry has value, unit, line, line_at, no_line, "
                        "no_line_when, note, display and description only")
    display = entry.get("display")
    if display is not None and display not in DISPLAYS:
        raise FactError(f"{path.name}: {name}: display is one of {', '.join(DISPLAYS)}")
    no_line = entry.get("no_line")
    if no_line is not None and (not isinstance(no_line, str) or not NOTE.fullmatch(no_line.strip())):
        raise FactError(f"{path.name}: {name}: no_line is one line of text without quotes")
    line = entry.get("line", "source")
    if line == "none" and no_line is None:
        raise FactError(f"{path.name}: {name}: line none needs no_line, saying why no raw line holds it")
    return ColumnFact(
        name=name, table=group["table"], value=_expression(path, name, entry.get("value")),
        unit=_unit(path, name, entry), keys=group["keys"], where=group["where"],
        line=None if line == "none" else _declared(path, name, line, IDENTIFIER, "line"),
        description=_description(path, name, entry), order=group["order"], display=display,
        no_line=None if no_line is None else no_line.strip(),
        no_line_when=_no_line_when(path, name, entry.get("no_line_when"), no_line),
        line_at=None if entry.get("line_at") is None or line == "none"
        else _declared(path, name, entry["line_at"], IDENTIFIER, "line_at"),
        note=group.get("note") if entry.get("note") is None
        else _declared(path, name, entry["note"], IDENTIFIER, "note"))


def _no_line_when(path: Path, name: str, when: Any, no_line: str | None
                  ) -> tuple[str, tuple[tuple[str, str], ...]] | None:
    """`no_line_when: {column: {value: note}}` beside no_line; notes are one line without quotes."""
    if when is None:
        return None
    notes = next(iter(when.values())) if isinstance(when, dict) and len(when) == 1 else None
    if no_line is None or not isinstance(notes, dict) or not notes or not all(
            isinstance(v, str) and isinstance(n, str) and NOTE.fullmatch(v) and NOTE.fullmatch(n.strip())
            for v, n in notes.items()):
        raise FactError(f"{path.name}: {name}: no_line_when is {{column: {{value: note}}}} beside no_line")
    return (_declared(path, name, next(iter(when)), IDENTIFIER, "no_line_when column"),
            tuple((v, n.strip()) for v, n in notes.items()))


def _count_fact(path: Path, group: dict, name: str, entry: Any) -> CountFact:
    if not isinstance(entry, dict) or set(entry) - {"where", "of", "unit", "description"}:
        raise FactError(f"{path.name}: {name}: a count has where, of, unit and description only")
    if entry.get("of", "rows") not in ("rows", "runs"):
        raise FactError(f"{path.name}: {name}: of is rows or runs")
    where = entry.get("where") or {}
    if not isinstance(where, dict):
        raise FactError(f"{path.name}: {name}: where maps columns to values")
    return CountFact(
        name=name, table=group["table"], keys=group["keys"],
        where=tuple((_declared(path, name, c, RUN_COLUMN, "filter column"),
                     True if v is True else _declared(path, name, v, LITERAL, "filter value"))
                    for c, v in where.items()),
        runs=entry.get("of") == "runs", unit=_unit(path, name, entry),
        description=_description(path, name, entry))


def _change_fact(path: Path, by: str, name: str, entry: Any, declared: dict) -> ChangeFact:
    if not isinstance(entry, dict) or set(entry) - {"of", "description"} or \
            not isinstance(entry.get("of"), dict) or not entry["of"]:
        raise FactError(f"{path.name}: {name}: a change has of (item: fact) and description only")
    items = []
    for item, fact_name in entry["of"].items():
        fact = declared.get(fact_name)
        if not isinstance(fact, ColumnFact) or "run_id" not in fact.keys or fact.order:
            raise FactError(f"{path.name}: {name}: {fact_name!r} is not a declared column fact of a run")
        if items and fact.keys != items[0][1].keys:
            raise FactError(f"{path.name}: {name}: its facts are keyed alike")
        items.append((_declared(path, name, item, LITERAL, "item"), fact))
    return ChangeFact(name=name, by=by, items=tuple(items), description=_description(path, name, entry))


def _group(path: Path, raw: Any) -> dict:
    """A group of facts, its table, keys and fixed filters checked."""
    kinds = {"table", "count", "change"} & set(raw) if isinstance(raw, dict) else set()
    if len(kinds) != 1 or set(raw) - {"table", "count", "change", "keys", "where", "order", "note",
                                      "facts"}:
        raise FactError(f"{path.name}: a group has table (or count, or change), keys, where, order, "
                        "note and facts only")
    [kind] = kinds
    if kind == "change":
        if set(raw) != {"change", "facts"}:
            raise FactError(f"{path.name}: a change group has change (its parameter) and facts only")
        return {"kind": kind, "by": _declared(path, "change", raw["change"], IDENTIFIER, "parameter")}
    table = raw[kind]
    if table not in public_tables():
        raise FactError(f"{path.name}: {table!r} is not a public table")
    keys = raw.get("keys")
    if not isinstance(keys, list) or not keys:
        raise FactError(f"{path.name}: {table}: keys is a list of the columns bound as parameters")
    if kind == "count" and (raw.get("where") or raw.get("order")):
        raise FactError(f"{path.name}: {table}: a count group's facts each give their own where")
    return {
        "kind": kind, "table": table,
        "keys": tuple(_declared(path, table, k, RUN_COLUMN if kind == "count" else IDENTIFIER, "key")
                      for k in keys),
        "where": tuple((_declared(path, table, c, IDENTIFIER, "filter column"),
                        _declared(path, table, v, LITERAL, "filter value"))
                       for c, v in (raw.get("where") or {}).items()),
        "order": tuple(_declared(path, table, o, ORDER, "order") for o in raw.get("order") or ()),
        "note": None if raw.get("note") is None else _declared(path, table, raw["note"], IDENTIFIER, "note"),
    }


@lru_cache(maxsize=8)
def column_facts(path: Path) -> dict[str, DeclaredFact]:
    """The facts declared in `path` (a columns.yaml), by name; none when there is no such file."""
    if not path.is_file():
        return {}
    try:
        groups = yaml.load(path.read_text(), Loader=SAFE_LOADER)
    except yaml.YAMLError as exc:
        raise FactError(f"{path.name}: not valid YAML ({exc})".splitlines()[0]) from None
    if not isinstance(groups, list):
        raise FactError(f"{path.name}: expected a list of tables with their facts")
    out: dict[str, DeclaredFact] = {}
    changes = []   # read once the facts they compare are
    for raw in groups:
        group = _group(path, raw)
        for name, entry in (raw.get("facts") or {}).items():
            name = _declared(path, "fact", name, NAME, "name")
            if name in out or name in dict(changes):
                raise FactError(f"{path.name}: fact {name!r} declared twice")
            if group["kind"] == "change":
                changes.append((name, (group["by"], entry)))
            else:
                out[name] = (_count_fact if group["kind"] == "count" else _column_fact)(
                    path, group, name, entry)
    for name, (by, entry) in changes:
        out[name] = _change_fact(path, by, name, entry, out)
    return out
