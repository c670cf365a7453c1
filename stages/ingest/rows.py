"""The raw tables ingest fills, and what it reads from one run folder by raw table (FolderRows),
every text value redacted."""
from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any, Iterable

import numpy as np
import pandas as pd

from stages.core import raw_schema
from stages.formats.lines import ParseError
from stages.core.secrets import redact_text

SCHEMA_SQL = raw_schema.RAW_SCHEMA
# The raw tables, by raw.sql's sections (stages/core/raw_schema.py); identifiers used in SQL come only
# from these. RAW_TABLES are dropped and made again when raw.sql changes their columns; ROW_TABLES
# take the rows read from a folder (FOLDER_TABLES its folder row); FILE_TABLES hold what the
# folder's files say.
FOLDER_TABLES = raw_schema.raw_table_names("folders", path=SCHEMA_SQL)
FILE_TABLES = raw_schema.raw_table_names("run files", path=SCHEMA_SQL)
ROW_TABLES = raw_schema.raw_table_names("run files", "ingest records", path=SCHEMA_SQL)
RAW_TABLES = FOLDER_TABLES + ROW_TABLES
# Tables ingest keeps across a rebuild of the raw tables (see keep_seals).
KEPT_TABLES = raw_schema.raw_table_names("seals", path=SCHEMA_SQL)


@dataclass
class FolderRows:
    """Everything read from one run folder, by raw table: rows one by one, and blocks of rows
    given as columns (the bulk of a big file: stats lines, /metrics samples)."""
    run_id: str
    tables: dict[str, list[dict[str, Any]]] = field(default_factory=lambda: {t: [] for t in ROW_TABLES})
    blocks: dict[str, list[tuple[str, dict[str, Any]]]] = field(default_factory=dict)

    def add(self, table: str, source_file: str, source_line: int | None, **values: Any) -> None:
        """One row; every text value in it redacted."""
        for name, value in values.items():
            if isinstance(value, str):
                values[name] = redact(value)
        values.update(run_id=self.run_id, source_file=redact(source_file), source_line=source_line)
        self.tables[table].append(values)

    def add_all(self, table: str, source_file: str, records: Iterable[dict[str, Any]]) -> None:
        """Rows that each carry their own `source_line`, added one by one."""
        for record in records:
            line = record.pop("source_line")
            self.add(table, source_file, line, **record)

    def add_block(self, table: str, source_file: str, columns: dict[str, Any]) -> None:
        """Rows given as equal-length columns; `source_line` is one of them. Text is redacted."""
        self.blocks.setdefault(table, []).append(
            (redact(source_file), {name: _redact_column(values) for name, values in columns.items()}))

    def count(self, table: str) -> int:
        return len(self.tables[table]) + sum(len(c["source_line"]) for _, c in self.blocks.get(table, ()))

    def add_errors(self, source_file: str, errors: Iterable[ParseError]) -> None:
        """Each parse error of a file, as an ingest_errors row."""
        for err in errors:
            self.error(source_file, err)

    def error(self, source_file: str, err: ParseError | None = None, *, line: int | None = None,
              reason: str | None = None) -> None:
        self.add("ingest_errors", source_file, err.line if err else line,
                 reason=err.reason if err else reason)


# ---------------------------------------------------------------- redaction

@functools.lru_cache(maxsize=65536)
def _redact_short(text: str) -> str:
    return redact_text(text)


def redact(text: str) -> str:
    """stages.core.secrets.redact_text, remembered for short text (names, labels, times repeat)."""
    return _redact_short(text) if len(text) <= 256 else redact_text(text)


def _redact_column(values: Any) -> Any:
    """A block column with its text redacted: one value, a categorical or an array or list of text."""
    if isinstance(values, str):
        return redact(values)
    if isinstance(values, pd.Categorical):
        categories = [redact(c) if isinstance(c, str) else c for c in values.categories]
        if categories == list(values.categories):
            return values
        if len(set(categories)) == len(categories):
            return values.rename_categories(categories)
        return pd.Categorical(np.asarray(categories, dtype=object)[values.codes])
    if isinstance(values, list) or (isinstance(values, np.ndarray) and values.dtype == object):
        changed = {v: r for v in set(values) if isinstance(v, str) and (r := redact(v)) != v}
        return [changed.get(v, v) for v in values] if changed else values
    return values
