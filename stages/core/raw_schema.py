"""The raw tables, declared once: the `create table` statements of `stages/core/sql/schema/raw.sql`,
in their order, each in the section its header comment opens (`-- ------ node probes`); the
comment block above a table describes it, a line's trailing comment its last column. Ingest
writes these tables; derive's staging models read them (stages/core/catalogue.py).

Example:
    from stages.core import raw_schema
    raw_schema.raw_table_names("node probes")      # ("raw_nodes", "raw_node_groups", ...)
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from stages.core.config import CampaignError

RAW_SCHEMA = Path(__file__).parent / "sql" / "schema" / "raw.sql"
CREATE = re.compile(r"create\s+table\s+(?:if\s+not\s+exists\s+)?([a-z_][a-z0-9_]*)\s*\(", re.I)
SECTION = re.compile(r"--\s*-{8,}\s*(\S.*)$")
CONSTRAINT_WORDS = {"primary", "not", "null", "default", "references", "unique", "check"}


@dataclass
class Column:
    name: str
    type: str
    note: str = ""


@dataclass
class Table:
    name: str
    description: str
    columns: list[Column] = field(default_factory=list)
    section: str = ""


def _split_top_level(code: str) -> list[str]:
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(code):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(code[start:i])
            start = i + 1
    parts.append(code[start:])
    return [p.strip() for p in parts if p.strip()]


def _column(piece: str) -> Column | None:
    words = piece.split()
    if len(words) < 2 or words[0].lower() in CONSTRAINT_WORDS:
        return None
    type_words = []
    for w in words[1:]:
        if w.lower() in CONSTRAINT_WORDS:
            break
        type_words.append(w)
    return Column(words[0], " ".join(type_words).lower())


def parse_raw_schema(text: str) -> list[Table]:
    """Tables of a DDL file: the comment block right above each `create table` describes it (a
    table with none shares the one before), and a line's trailing comment its last column."""
    tables: list[Table] = []
    comment: list[str] = []
    current: Table | None = None
    section = ""
    for line in text.splitlines():
        stripped = line.strip()
        if current is not None:
            if stripped.startswith(")"):
                tables.append(current)
                current = None
                continue
            definition, _, note = stripped.partition("--")
            cols = [c for c in (_column(p) for p in _split_top_level(definition)) if c]
            if cols:
                cols[-1].note = note.strip()
                current.columns.extend(cols)
            continue
        m = CREATE.match(stripped)
        header = SECTION.match(stripped)
        if m:
            description = " ".join(comment) or (tables[-1].description if tables else "")
            current = Table(m.group(1), description, section=section)
            comment = []
        elif header:
            section = header.group(1).strip()
            comment = []
        elif stripped.startswith("--"):
            comment.append(stripped[2:].strip())
        elif not stripped:
            comment = []
    return tables


def raw_tables(path: Path = RAW_SCHEMA) -> list[Table]:
    return parse_raw_schema(path.read_text())


def raw_table_names(*sections: str, path: Path = RAW_SCHEMA) -> tuple[str, ...]:
    """Names of the raw tables in these sections of raw.sql, in its order."""
    tables = raw_tables(path)
    unknown = set(sections) - {t.section for t in tables}
    if unknown:
        raise CampaignError(f"{path.name}: no section {', '.join(sorted(unknown))}")
    return tuple(t.name for t in tables if t.section in sections)
