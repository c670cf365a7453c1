"""The site's Warehouse page: every table an auditor can query, and what each column means.

Three layers, each documented from where it is defined:
- raw tables (warehouse.duckdb): names, types and comments parsed from stages/core/sql/schema/raw.sql;
- staging and intermediate models: the leading comment of each SQL file, and the columns
  campaign.duckdb holds for them;
- public tables (campaign.duckdb): the tables stages/derive/sql/marts/schema.yaml declares public, with
  names and types read from information_schema when the site is built, descriptions and
  invariants from schema.yaml, and a CSV download of each;
- the records of facts.json, described in site/warehouse.yaml.

A public column without a description fails the build (a description of a column that no longer
exists fails the tests). Descriptions are prose and pass the same digit check as the articles.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import duckdb

from stages.core import catalogue
from stages.core.config import CampaignError, read_yaml
from stages.render.escape import code, escape_cell, escape_text
from stages.render.digits import FactCheckError, check_digits
from stages.render.fact_record import Fact
from stages.render.queries import ROWS_SQL, load_query
from stages.core.raw_schema import RAW_SCHEMA, Column, Table, parse_raw_schema

SQL_DIR = catalogue.SQL_DIR
PAGE_NAME = "warehouse.md"
HELD_BACK = "quarantine"          # the public table of rows derive held back (schema.yaml)
HELD_BACK_ROWS = "held_back_rows"  # its row query (stages/render/sql/render/), shared with the Parts
FACTS_KEY = "facts"  # documented beside the tables: the records of facts.json


class WarehouseDocError(CampaignError):
    """The descriptions (schema.yaml, site/warehouse.yaml) and the public tables disagree."""


# ---------------------------------------------------------------- models

def leading_comment(sql: str) -> str:
    """The `--` lines a SQL file opens with, joined."""
    lines = []
    for line in sql.splitlines():
        if not line.startswith("--"):
            break
        lines.append(line[2:].strip())
    return " ".join(lines)


def model_tables(con: duckdb.DuckDBPyConnection) -> dict[str, list[Column]]:
    """Columns of every table in campaign.duckdb, in their order."""
    rows = con.execute(
        "select table_name, column_name, data_type from information_schema.columns "
        "where table_schema = 'main' order by table_name, ordinal_position").fetchall()
    out: dict[str, list[Column]] = {}
    for table, column, dtype in rows:
        out.setdefault(table, []).append(Column(column, dtype.lower()))
    return out


def staging_models(sql_dir: Path = SQL_DIR) -> list[tuple[str, str, str, str]]:
    """(layer, model, what it reads, description) for the staging and intermediate models."""
    models = catalogue.models(sql_dir)
    out = []
    for name, raw in models.staging.items():
        sql = (sql_dir / "staging" / f"{name}.sql").read_text()
        out.append(("staging", name, raw, leading_comment(sql)))
    for name in models.intermediate:
        sql = (sql_dir / "intermediate" / f"{name}.sql").read_text()
        reads = sorted(catalogue.reads(sql, set(models.build_order())) - {name})
        out.append(("intermediate", name, ", ".join(reads), leading_comment(sql)))
    return out


# ---------------------------------------------------------------- descriptions

def load_descriptions(path: Path) -> dict[str, dict[str, Any]]:
    data = read_yaml(path, error=WarehouseDocError)
    for table, spec in data.items():
        if not isinstance(spec, dict) or not spec.get("description") or not isinstance(spec.get("columns"), dict):
            raise WarehouseDocError(f"{path.name}: {table}: needs a description and columns")
    return data


def check_descriptions(docs: dict[str, dict[str, Any]], tables: dict[str, list[str]],
                       origin: str = "warehouse.yaml", stale: bool = True) -> None:
    """Every public table and column described, no digits in the prose, and (stale=True)
    nothing described that does not exist. The build leaves stale entries to the tests: a
    campaign.duckdb derived before a column was dropped still renders."""
    problems = []
    for table, columns in tables.items():
        spec = docs.get(table)
        if spec is None:
            problems.append(f"table {table} has no description")
            continue
        described = spec["columns"]
        problems += [f"no description for {table}.{c}" for c in columns
                     if not str(described.get(c) or "").strip()]
        if stale:
            problems += [f"{table}.{c} is described but the table has no such column"
                         for c in described if c not in columns]
    if stale:
        problems += [f"{t} is described but is not a public table" for t in docs if t not in tables]
    if problems:
        raise WarehouseDocError(f"{origin}: " + "; ".join(problems[:8])
                                + (f" (and {len(problems) - 8} more)" if len(problems) > 8 else ""))
    for table, spec in docs.items():
        texts = [(table, spec["description"])] + [(f"{table}.{c}", d) for c, d in spec["columns"].items()]
        for where, text in texts:
            try:
                check_digits(f"{origin} {where}", str(text))
            except FactCheckError as exc:
                raise WarehouseDocError(str(exc)) from None


def public_columns(con: duckdb.DuckDBPyConnection,
                   public: tuple[str, ...] | None = None) -> dict[str, list[Column]]:
    """Columns of each public table (schema.yaml's, unless given), in its order."""
    public = catalogue.models().public if public is None else public
    found = model_tables(con)
    missing = [t for t in public if t not in found]
    if missing:
        raise WarehouseDocError(f"campaign.duckdb lacks public table(s) {', '.join(missing)}")
    return {t: found[t] for t in public}


def table_docs(schema: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The description and column descriptions of each table of schema.yaml, as entries of the
    descriptions check."""
    docs = {}
    for table, spec in schema.items():
        if not spec.get("description") or not isinstance(spec.get("columns"), dict):
            raise WarehouseDocError(f"schema.yaml: {table}: needs a description and columns")
        docs[table] = {"description": spec["description"], "columns": spec["columns"]}
    return docs


def fact_fields() -> list[Column]:
    hints = {f.name: str(f.type).replace("typing.", "") for f in dataclasses.fields(Fact)}
    return [Column(name, hint) for name, hint in hints.items()]


# ---------------------------------------------------------------- the page

def _column_table(rows: list[tuple[str, str, str]]) -> list[str]:
    lines = ["| Column | Type | Description |", "| --- | --- | --- |"]
    for name, dtype, text in rows:
        lines.append(f"| {code(name)} | {code(dtype)} | {escape_cell(text, redact=False) if text else '-'} |")
    return lines + [""]


def _column_list(columns: list[Column]) -> str:
    return "Columns: " + ", ".join(f"{code(c.name)} <small>{escape_text(c.type, redact=False)}</small>"
                                   for c in columns)


def invariants(spec: dict[str, Any]) -> list[str]:
    lines = []
    if spec.get("unique"):
        lines.append("- Unique key: " + ", ".join(code(c) for c in spec["unique"]))
    if spec.get("not_null"):
        lines.append("- Never null: " + ", ".join(code(c) for c in spec["not_null"]))
    checks = spec.get("checks") or {}
    if checks:
        lines.append("- Checks, each a query that must return no rows:")
        lines.append("")
        for name, sql in checks.items():
            lines += [f'    ??? note "{escape_text(name, redact=False)}"', "",
                      "        ```sql"]
            lines += [f"        {l}" if l else "" for l in str(sql).rstrip().splitlines()]
            lines += ["        ```", ""]
    return lines or ["- None stated."]


def page(*, public: dict[str, list[Column]], docs: dict[str, dict[str, Any]],
         schema: dict[str, dict[str, Any]], raw: list[Table],
         models: list[tuple[str, str, str, str]], model_columns: dict[str, list[Column]],
         mart_comments: dict[str, str], downloads: dict[str, str],
         held_back: list[tuple[str, str, str, str]] = ()) -> str:
    out = ["---", "title: Warehouse", "description: Every table behind the articles, "
           "column by column, with its invariants and a CSV download.", "---", "",
           "# Warehouse", "",
           "The articles print nothing that is not in these tables. The pipeline writes them in "
           "three layers: the ingest stage copies what it finds in the raw run folders into raw "
           "tables (`data/warehouse.duckdb`); the derive stage renames and casts them in staging "
           "models, then builds the public tables (`data/campaign.duckdb`) with the SQL in "
           "`stages/derive/sql/marts/` and checks each against its invariants before anything is "
           "exported. Query the public tables directly:", "",
           "```console", "$ duckdb -readonly data/campaign.duckdb \"select * from launches\"", "```", "",
           "Units live in column names: `_s` seconds, `_ms` milliseconds, `_gib` GiB, `_tok_s` "
           "tokens per second, `_pct` percent. Every row names the raw file and line of its "
           "evidence in `source_file` and `source_line`.", ""]
    out += held_back_box(held_back)
    out += ["## Public tables", ""]
    out.append(" · ".join(f"[{t}](#table-{t})" for t in public) + "")
    out.append("")
    for table, columns in public.items():
        spec = docs[table]
        out += [f"### `{table}` {{#table-{table}}}", "", escape_text(spec["description"], redact=False), ""]
        if table in downloads:
            out += [f"Download: [{table}.csv]({downloads[table]}) · defined in "
                    f"`stages/derive/sql/marts/{table}.sql`", ""]
        if mart_comments.get(table):
            out += [f'??? info "How it is computed (from the model\'s own comment)"', "",
                    "    " + escape_text(mart_comments[table], redact=False), ""]
        out += _column_table([(c.name, c.type, str(spec["columns"][c.name])) for c in columns])
        out += ["**Invariants** (`stages/derive/sql/marts/schema.yaml`, checked by derive):", ""]
        out += invariants(schema.get(table) or {}) + [""]
    if FACTS_KEY in docs:
        spec = docs[FACTS_KEY]
        out += ["### `facts` {#table-facts}", "", escape_text(spec["description"], redact=False), "",
                "Browse them in the [audit trail](audit/index.html).", ""]
        out += _column_table([(c.name, c.type, str(spec["columns"].get(c.name, "")))
                              for c in fact_fields()])
    out += ["## Staging and intermediate models", "",
            "Staging models rename and cast one raw table each; intermediate models compute what "
            "several public tables share. They live in `campaign.duckdb` beside the public tables.", ""]
    for layer, name, reads, text in models:
        cols = model_columns.get(name, [])
        out += [f"### `{name}` {{#model-{name.replace('_', '-')}}}", "",
                f"*{layer}*, reads {code(reads) if reads else '-'}. "
                f"{escape_text(text, redact=False) if text else ''}", ""]
        if cols:
            out += [_column_list(cols), ""]
    out += ["## Raw tables", "",
            "Written by the ingest stage into `data/warehouse.duckdb`, one row per thing found in a "
            "raw run folder. The contract is `stages/core/sql/schema/raw.sql`; the notes below are its "
            "comments.", ""]
    for table in raw:
        out += [f"### `{table.name}` {{#raw-{table.name.replace('_', '-')}}}", "",
                escape_text(table.description, redact=False) if table.description else "", ""]
        out += [_column_list(table.columns), ""]
        notes = [c for c in table.columns if c.note]
        if notes:
            out += [f"- {code(c.name)}: {escape_text(c.note, redact=False)}" for c in notes] + [""]
    return "\n".join(out) + "\n"


def held_back_box(rows: list[tuple[str, str, str, str]]) -> list[str]:
    """A short box listing the rows derive held back (table, key, file and line, reason), or
    nothing when it held none back."""
    if not rows:
        return []
    out = ['!!! warning "Held back"', "",
           "    These rows broke an invariant of their table and are kept out of it, in "
           f"[`{HELD_BACK}`](#table-{HELD_BACK}); everything else is published.", ""]
    out += [f"    - {code(table)}, {escape_text(key)} ({escape_text(source)}): {escape_text(reason)}"
            for table, key, source, reason in rows]
    return out + [""]


def held_back_rows(con: duckdb.DuckDBPyConnection) -> list[tuple[str, str, str, str]]:
    """Every row derive held back, from the row query the Parts use."""
    sql = load_query(ROWS_SQL, HELD_BACK_ROWS, "row query")
    return [tuple(r) for r in con.execute(sql, {"run_ids": None, "node_ids": None}).fetchall()]


def build(*, con: duckdb.DuckDBPyConnection, descriptions_file: Path, downloads: dict[str, str],
          raw_schema: Path = RAW_SCHEMA, sql_dir: Path = SQL_DIR) -> str:
    """The Warehouse page's Markdown: the tables of `sql_dir`, the records of facts.json as
    `descriptions_file` describes them. Raises WarehouseDocError when a column is undocumented."""
    try:
        schema = catalogue.models(sql_dir).schema
    except CampaignError as exc:
        raise WarehouseDocError(str(exc)) from None
    public = public_columns(con, tuple(schema))
    docs = table_docs(schema)
    check_descriptions(docs, {t: [c.name for c in cols] for t, cols in public.items()},
                       "schema.yaml", stale=False)
    facts_docs = load_descriptions(descriptions_file)
    check_descriptions(facts_docs, {FACTS_KEY: [c.name for c in fact_fields()]},
                       descriptions_file.name, stale=False)
    docs.update(facts_docs)
    mart_comments = {t: leading_comment((sql_dir / "marts" / f"{t}.sql").read_text())
                     for t in public if (sql_dir / "marts" / f"{t}.sql").is_file()}
    return page(public=public, docs=docs, schema=schema, raw=parse_raw_schema(raw_schema.read_text()),
                models=staging_models(sql_dir), model_columns=model_tables(con),
                mart_comments=mart_comments, downloads=downloads,
                held_back=held_back_rows(con) if HELD_BACK in public else [])
