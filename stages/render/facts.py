"""Facts: every number an article prints, with the query and the raw line it came from.

A template asks for a number by name, `{{ fact("launch_ready_s", run_id=r) }}`. The name is a query
with `$name` bound parameters: `stages/render/sql/facts/<name>.sql`, or, for a fact that prints one column
of one row of a public table, an entry of `stages/render/sql/facts/columns.yaml` whose query is generated
(see ColumnFact). The query returns one row with columns value,
run_id, source_file, source_line (and optionally unit, and display: the printed form of the value
when the query knows it better, e.g. 4 GiB for a size in bytes). The value is formatted, linked to its audit
page and recorded. Tables whose numeric cells are facts, evidence blocks (a command run on a raw
file at build time) and run references work the same way.

Macros return placeholders while the template renders. `check_digits` then scans what the template
itself typed: a digit there, outside the allow-list, is a number nobody can trace, and fails the
build. The placeholders are swapped for their real output afterwards.
"""
from __future__ import annotations

import datetime as dt
import decimal
import hashlib
import html
import json
import os
import re
import shlex
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any
from urllib.parse import quote

import duckdb
import yaml
from markupsafe import Markup

from stages.core import rawfile
from stages.core.config import CampaignError
from stages.derive.stage import PUBLIC_TABLES
from stages.core.secrets import redact_text, redact_value

SQL_DIR = Path(__file__).parent / "sql"
PROJECT = Path(__file__).resolve().parents[2]    # where stage code is shown from
FACTS_SQL = SQL_DIR / "facts"
COLUMN_FACTS = "columns.yaml"  # in the facts folder: the facts declared, not written as SQL
ROWS_SQL = SQL_DIR / "render"
STAGE = "derive"  # the stage whose tables the fact queries read
REQUIRED_COLUMNS = ("value", "run_id", "source_file", "source_line")
EXCERPT_MAX = 400
RAW_MAX = 64 << 20      # bytes read from one raw file at render or trace time
# Digits a template may type itself: part numbers, a few hardware tokens, citation ids.
ALLOWED_PATTERNS = (
    r"\bParts? \d+\b",
    r"\b8 GPUs\b",
    r"\b8-GPU\b",
    r"\bH200\b",
    r"\bp90\b",
    r"\[S\d+\]",
    r"\b2\(n-1\)/n",  # the all-reduce bus factor, as nccl-tests writes it
)
PLACEHOLDER = re.compile(r"@@M[A-Z]+@@")
NAME = re.compile(r"^[a-z][a-z0-9_]*$")
SAFE_ID = re.compile(r"^[A-Za-z0-9_.-]+$")
IDENTIFIER = re.compile(r"^[a-z_][a-z0-9_]*$")   # a column or table name a declaration may give
LITERAL = re.compile(r"^[A-Za-z0-9_.-]+$")       # a fixed filter's value, written as a SQL string
UNIT = re.compile(r"^[A-Za-z0-9%/ ._-]+$")
EXPRESSION_TOKEN = re.compile(r"\s*(?:([a-z_][a-z0-9_]*)|\d+(?:\.\d+)?|[-+*/(),])")
EXPRESSION_FUNCTIONS = frozenset({"nullif"})
RUN_TIME = re.compile(r"__\d{4}-(\d{2})(\d{2})\d{2}$")
RUN_LINK = re.compile(r'<a class="run-ref" href="#([^"]+)" title="([^"]*)">([^<]*)</a>')
# Characters Markdown reads as syntax inside text, code and raw HTML attributes alike (links,
# images, code spans, emphasis, attr_list braces, table cells), written as character references.
MD_SPECIALS = frozenset("\\`*_[](){}!|~$")
ESCAPED = re.compile("|".join([*(f"&#{ord(ch)};" for ch in sorted(MD_SPECIALS)), "&#x27;"]))


class FactError(CampaignError):
    """A fact, table or evidence block that cannot be produced (unknown name, wrong row count)."""


class FactCheckError(CampaignError):
    """A rendered page prints a number that did not come from a fact."""


@dataclass
class Fact:
    id: str
    name: str
    params: dict[str, Any]
    value: Any
    unit: str | None
    display: str
    sql: str
    run_ids: list[str]
    source_file: str | None
    source_line: int | None
    excerpt: str | None
    stage: str
    git_sha: str | None
    pages: list[str] = field(default_factory=list)

    def record(self) -> dict[str, Any]:
        return asdict(self)


# ---------------------------------------------------------------- small pure helpers

def format_value(value: Any, decimals: int | None = None) -> str:
    """Thousands separators, and decimals that suit the magnitude unless given."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, decimal.Decimal):
        value = int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, int):
        return f"{value:,}" if decimals is None else f"{value:,.{decimals}f}"
    if isinstance(value, float):
        if decimals is None:
            size = abs(value)
            if value == 0:
                return "0"
            if size < 1:
                return f"{value:.3g}"
            decimals = 0 if size >= 1000 else 1 if size >= 10 else 2
        return f"{value:,.{decimals}f}"
    if isinstance(value, (dt.date, dt.datetime)):
        return value.isoformat()
    return str(value)


def escape_text(text: Any, *, redact: bool = True) -> str:
    """Data text as it may stand anywhere on a page: redacted, then escaped for HTML and for
    Markdown, so neither a tag nor a link, code span or attribute list can come out of it. The
    result is also safe inside a double-quoted HTML attribute (see escape_attr). redact=False
    only for the project's own prose (schema comments), where `key=value` is not a secret."""
    out = html.escape(redact_text(str(text)) if redact else str(text), quote=True)
    return "".join(f"&#{ord(ch)};" if ch in MD_SPECIALS else ch for ch in out)


def escape_cell(text: Any, max_chars: int | None = None, *, redact: bool = True) -> str:
    """Data text on one line (a table cell), cut to max_chars."""
    flat = " ".join((redact_text(str(text)) if redact else str(text)).split())
    if max_chars and len(flat) > max_chars:
        flat = flat[:max_chars] + "…"
    return escape_text(flat, redact=redact)


def escape_attr(text: Any) -> str:
    """Data text for a double-quoted HTML attribute value (one line; Markdown cannot re-read it)."""
    return escape_cell(text)


def code(text: Any) -> str:
    """Data text as inline code, written as HTML so that Markdown leaves its content alone."""
    return f"<code>{escape_text(text)}</code>"


def audit_target(prefix: str, fid: str) -> str:
    """The link target of a fact's audit page: the fact id URL-quoted."""
    return f"{prefix}{quote(fid, safe='')}.md"


def run_anchor(run_id: str) -> str:
    """The HTML id of a run's section on a page: run-<run id>, other characters than letters,
    digits, '_' and '-' as '-' (safe in an href, an id and attr_list)."""
    return "run-" + re.sub(r"[^A-Za-z0-9_-]", "-", run_id)


def run_label(run_id: str, spec: str | None = None) -> str:
    """A short label for a run: its spec (or the run id without its time) and the HH:MM the
    run id carries, e.g. `tiny-seqs4 · 05:12` for tiny-llama__cpu_seqs4__4k__vllm__1130-051200."""
    m = RUN_TIME.search(run_id)
    name = spec or (run_id[: m.start()].rstrip("_") if m else run_id)
    return f"{name} · {m.group(1)}:{m.group(2)}" if m else name


def run_label_link(run_id: str, spec: str | None = None) -> str:
    """The compact run label, linked to the run's section; the full id is its tooltip."""
    return (f'<a class="run-ref" href="#{run_anchor(run_id)}" '
            f'title="{escape_attr(run_id)}">{escape_text(run_label(run_id, spec))}</a>')


def unlink_missing_runs(text: str, anchors: set[str]) -> str:
    """Run labels whose run has no section on the page keep their tooltip but lose the link."""
    def fix(m: re.Match) -> str:
        if m.group(1) in anchors:
            return m.group(0)
        return f'<span class="run-ref" title="{m.group(2)}">{m.group(3)}</span>'

    return RUN_LINK.sub(fix, text)


def sql_params(sql: str) -> list[str]:
    """Named parameters ($name) a query binds, in order of first use."""
    stripped = re.sub(r"--[^\n]*", "", sql)
    stripped = re.sub(r"'(?:[^']|'')*'", "''", stripped)
    seen: list[str] = []
    for name in re.findall(r"\$([a-z_][a-z0-9_]*)", stripped):
        if name not in seen:
            seen.append(name)
    return seen


def tables_in(sql: str) -> list[str]:
    return [t for t in PUBLIC_TABLES if re.search(rf"\b{t}\b", sql)]


def load_query(directory: Path, name: str, kind: str) -> str:
    if not NAME.match(name or ""):
        raise FactError(f"bad {kind} name {name!r}")
    path = directory / f"{name}.sql"
    if not path.is_file():
        known = ", ".join(sorted(p.stem for p in directory.glob("*.sql"))) or "none"
        raise FactError(f"unknown {kind} {name!r} (known: {known})")
    return path.read_text()


@dataclass(frozen=True)
class ColumnFact:
    """A fact declared in columns.yaml: `value` (a column, or arithmetic over columns) of the one
    row of `table` that the bound `keys` and the fixed `where` pick."""
    name: str
    table: str
    value: str
    unit: str | None
    keys: tuple[str, ...]
    where: tuple[tuple[str, str], ...]
    line: str          # the columns <line>_file, <line>_line hold the raw line
    description: str

    def columns(self) -> set[str]:
        """The table's columns the query names."""
        named = {m for m in EXPRESSION_TOKEN.findall(self.value) if m} - EXPRESSION_FUNCTIONS
        return named | set(self.keys) | {c for c, _ in self.where} | \
            {f"{self.line}_file", f"{self.line}_line"}

    def sql(self) -> str:
        """The query, in the shape of a fact's SQL file."""
        conditions = [f"{k} = ${k}" for k in self.keys] + [f"{c} = '{v}'" for c, v in self.where]
        unit = f"'{self.unit}'" if self.unit is not None else "cast(null as varchar)"
        run_id = "run_id" if "run_id" in self.keys else "cast(null as varchar)"
        return (
            f"-- {self.description}\n"
            "with source as (\n"
            "    select *\n"
            f"    from {self.table}\n"
            f"    where {' and '.join(conditions)}\n"
            "),\n"
            "\n"
            "final as (\n"
            "    select\n"
            f"        {self.value} as value,\n"
            f"        {unit} as unit,\n"
            f"        {run_id} as run_id,\n"
            f"        {self.line}_file as source_file,\n"
            f"        {self.line}_line as source_line\n"
            "    from source\n"
            ")\n"
            "\n"
            "select * from final\n")


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


def _column_fact(path: Path, group: dict, name: Any, entry: Any) -> ColumnFact:
    name = _declared(path, "fact", name, NAME, "name")
    if not isinstance(entry, dict) or set(entry) - {"value", "unit", "line", "description"}:
        raise FactError(f"{path.name}: {name}: an entry has value, unit, line and description only")
    description = entry.get("description")
    if not isinstance(description, str) or not description.strip() or "\n" in description.strip():
        raise FactError(f"{path.name}: {name}: the description is one line of text")
    unit = entry.get("unit")
    return ColumnFact(
        name=name, table=group["table"], value=_expression(path, name, entry.get("value")),
        unit=None if unit is None else _declared(path, name, unit, UNIT, "unit"),
        keys=group["keys"], where=group["where"],
        line=_declared(path, name, entry.get("line", "source"), IDENTIFIER, "line"),
        description=description.strip())


@lru_cache(maxsize=8)
def column_facts(path: Path) -> dict[str, ColumnFact]:
    """The facts declared in `path` (a columns.yaml), by name; none when there is no such file."""
    if not path.is_file():
        return {}
    try:
        groups = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise FactError(f"{path.name}: not valid YAML ({exc})".splitlines()[0]) from None
    if not isinstance(groups, list):
        raise FactError(f"{path.name}: expected a list of tables with their facts")
    out: dict[str, ColumnFact] = {}
    for raw in groups:
        if not isinstance(raw, dict) or set(raw) - {"table", "keys", "where", "facts"}:
            raise FactError(f"{path.name}: a group has table, keys, where and facts only")
        table = raw.get("table")
        if table not in PUBLIC_TABLES:
            raise FactError(f"{path.name}: {table!r} is not a public table")
        keys = raw.get("keys")
        if not isinstance(keys, list) or not keys:
            raise FactError(f"{path.name}: {table}: keys is a list of the columns bound as parameters")
        group = {
            "table": table,
            "keys": tuple(_declared(path, table, k, IDENTIFIER, "key") for k in keys),
            "where": tuple((_declared(path, table, c, IDENTIFIER, "filter column"),
                            _declared(path, table, v, LITERAL, "filter value"))
                           for c, v in (raw.get("where") or {}).items()),
        }
        for name, entry in (raw.get("facts") or {}).items():
            if name in out:
                raise FactError(f"{path.name}: fact {name!r} declared twice")
            out[name] = _column_fact(path, group, name, entry)
    return out


def fact_sql(name: str, directory: Path = FACTS_SQL) -> str:
    """The query of fact `name`: generated from its columns.yaml entry, or its .sql file."""
    if not NAME.match(name or ""):
        raise FactError(f"bad fact name {name!r}")
    declared = column_facts(directory / COLUMN_FACTS)
    path = directory / f"{name}.sql"
    if name in declared:
        if path.exists():
            raise FactError(f"fact {name!r} is both declared in {COLUMN_FACTS} and a .sql file")
        return declared[name].sql()
    if path.is_file():
        return path.read_text()
    known = sorted({p.stem for p in directory.glob("*.sql")} | set(declared))
    raise FactError(f"unknown fact {name!r} (known: {', '.join(known) or 'none'})")


def fact_query_path(name: str, directory: Path = FACTS_SQL) -> str:
    """Where fact `name`'s query is written, as a reader finds it: its .sql file, or its entry
    in columns.yaml."""
    project = PROJECT
    shown = directory.relative_to(project) if directory.is_relative_to(project) else directory
    if name in column_facts(directory / COLUMN_FACTS):
        return f"{(shown / COLUMN_FACTS).as_posix()} ({name})"
    return (shown / f"{name}.sql").as_posix()


def fact_id(name: str, params: dict[str, Any]) -> str:
    values = [str(params[k]) for k in sorted(params)]
    if all(SAFE_ID.match(v) for v in values) and len("--".join(values)) <= 140:
        return "--".join([name, *values])
    digest = hashlib.sha1(json.dumps(params, sort_keys=True, default=str).encode()).hexdigest()
    return f"{name}--{digest[:12]}"


class RawFileRefused(CampaignError):
    """A raw file that render or trace will not read (a link, not a regular file, outside its folder)."""


def open_raw(path: Path, within: tuple[Path, ...]):
    """A raw file opened for reading (binary; a .gz decompressed), as ingest opens it
    (stages.core.rawfile): only a regular file inside one of the folders `within`, no link on the way.
    The refusal says why without quoting the target."""
    path = Path(os.path.abspath(path))       # absolute, links not resolved
    for folder in map(os.path.abspath, within):
        try:
            name = path.relative_to(folder).as_posix()
        except ValueError:
            continue
        try:
            return rawfile.open_stream(Path(folder), name)
        except rawfile.Refused as exc:
            raise RawFileRefused(f"{path}: refused ({exc.reason})") from None
    raise RawFileRefused(f"{path}: refused (outside the raw folders)")


def read_raw(path: Path, within: tuple[Path, ...], limit: int = RAW_MAX) -> tuple[bytes, bool]:
    """Up to `limit` bytes of a raw file (see open_raw), and whether there was more."""
    with open_raw(path, within) as fh:
        data = fh.read(limit + 1)
    return data[:limit], len(data) > limit


def read_line(root: Path, source_file: str, line: int, within: tuple[Path, ...] | None = None) -> str:
    """Line `line` of a raw file (relative to root, inside one of `within`), redacted and cut; a
    short note in its place when the file is refused (a link, a FIFO, outside the raw folders)."""
    path = root / source_file
    try:
        with open_raw(path, within or (root,)) as fh:
            seen = 0
            for i, raw in enumerate(fh, start=1):
                seen += len(raw)
                if i == line:
                    text = redact_text(raw.decode("utf-8", errors="replace").rstrip("\r\n"))
                    return text if len(text) <= EXCERPT_MAX else text[:EXCERPT_MAX] + " …"
                if seen > RAW_MAX:
                    break
    except RawFileRefused as exc:
        return f"(not shown: {str(exc).split(': ', 1)[-1]})"
    except OSError as exc:
        raise FactError(f"{source_file}: cannot read the fact's source ({exc.strerror})") from None
    raise FactError(f"{source_file}: has no line {line}")


def _run_ids(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        return [str(v) for v in value if v is not None]
    return [s for s in str(value).split(",") if s]


def _plain(value: Any) -> Any:
    if isinstance(value, decimal.Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, (dt.date, dt.datetime)):
        return value.isoformat()
    return value


# ---------------------------------------------------------------- the fact book

class FactBook:
    """Evaluates named queries against campaign.duckdb and keeps every fact it printed."""

    def __init__(self, con: duckdb.DuckDBPyConnection, *, root: Path, sha: str | None,
                 facts_sql: Path = FACTS_SQL, rows_sql: Path = ROWS_SQL,
                 raw_dirs: tuple[Path, ...] | None = None):
        self.con = con
        self.root = root
        self.raw_dirs = tuple(d for d in raw_dirs or () if d is not None) or (root,)
        self.sha = sha
        self.facts_sql = facts_sql
        self.rows_sql = rows_sql
        self.facts: dict[str, Fact] = {}
        self._table_columns: dict[str, set[str]] = {}

    def fact_sql(self, name: str) -> str:
        declared = column_facts(self.facts_sql / COLUMN_FACTS).get(name)
        if declared is not None:
            lacking = sorted(declared.columns() - self._columns(declared.table))
            if lacking:
                raise FactError(f"fact {name!r}: {declared.table} has no column(s) {', '.join(lacking)}")
        return fact_sql(name, self.facts_sql)

    def _columns(self, table: str) -> set[str]:
        """The columns of a public table in the campaign database (looked up once)."""
        if table not in self._table_columns:
            rows = self.con.execute(
                "select column_name from information_schema.columns where table_name = $t",
                {"t": table}).fetchall()
            self._table_columns[table] = {r[0] for r in rows}
        return self._table_columns[table]

    def evaluate(self, name: str, params: dict[str, Any], page: str | None = None,
                 decimals: int | None = None) -> Fact:
        sql = self.fact_sql(name)
        wanted = sql_params(sql)
        missing = [p for p in wanted if p not in params]
        extra = [p for p in params if p not in wanted]
        if missing or extra:
            raise FactError(f"fact {name!r} binds {wanted or 'nothing'}; got {sorted(params)}")
        params = {k: _plain(params[k]) for k in wanted}
        fid = fact_id(name, params)
        if fid in self.facts:
            fact = self.facts[fid]
        else:
            fact = self._compute(fid, name, sql, params)
            self.facts[fid] = fact
        if page and page not in fact.pages:
            fact.pages.append(page)
        if decimals is not None:
            return Fact(**{**asdict(fact), "display": format_value(fact.value, decimals)})
        return fact

    def _compute(self, fid: str, name: str, sql: str, params: dict[str, Any]) -> Fact:
        try:
            cur = self.con.execute(sql, params) if params else self.con.execute(sql)
            rows = cur.fetchall()
        except duckdb.Error as exc:
            raise FactError(f"fact {name!r}: query failed: {exc}".splitlines()[0]) from None
        columns = [d[0] for d in cur.description]
        lacking = [c for c in REQUIRED_COLUMNS if c not in columns]
        if lacking:
            raise FactError(f"fact {name!r}: query lacks columns {', '.join(lacking)}")
        if len(rows) != 1:
            raise FactError(f"fact {name!r} with {params}: {len(rows)} rows, expected one")
        row = dict(zip(columns, rows[0]))
        source_file, source_line = row["source_file"], row["source_line"]
        excerpt = read_line(self.root, source_file, int(source_line), self.raw_dirs) \
            if source_file else None
        value = redact_value(_plain(row["value"]))
        display = row.get("display")
        return Fact(
            id=fid, name=name, params={k: redact_value(v) for k, v in params.items()}, value=value,
            unit=row.get("unit"),
            display=redact_text(format_value(value) if display is None else str(display)), sql=sql,
            run_ids=_run_ids(row["run_id"]),
            source_file=source_file, source_line=int(source_line) if source_line else None,
            excerpt=excerpt, stage=STAGE, git_sha=self.sha)

    def rows(self, name: str, params: dict[str, Any]) -> tuple[str, list[dict[str, Any]]]:
        """A named row query (stages/render/sql/render/<name>.sql): the SQL and its rows as dicts."""
        sql = load_query(self.rows_sql, name, "row query")
        wanted = sql_params(sql)
        missing = [p for p in wanted if p not in params]
        if missing:
            raise FactError(f"row query {name!r} needs {', '.join(missing)}")
        bound = {k: params[k] for k in wanted}
        try:
            cur = self.con.execute(sql, bound) if bound else self.con.execute(sql)
            data = cur.fetchall()
        except duckdb.Error as exc:
            raise FactError(f"row query {name!r}: {exc}".splitlines()[0]) from None
        columns = [d[0] for d in cur.description]
        return sql, [dict(zip(columns, r)) for r in data]

    def records(self) -> list[dict[str, Any]]:
        return [f.record() for f in sorted(self.facts.values(), key=lambda f: f.id)]


# ---------------------------------------------------------------- page macros

def _token(n: int) -> str:
    letters = ""
    n += 1
    while n:
        n, r = divmod(n - 1, 26)
        letters = chr(65 + r) + letters
    return f"@@M{letters}@@"


class PageMacros:
    """The macros one page's template may call; outputs are held behind placeholders."""

    def __init__(self, book: FactBook, *, page: str, runs_dir: Path, root: Path,
                 audit_prefix: str = "audit/", nodes_dir: Path | None = None):
        self.book = book
        self.page = page
        self.runs_dir = runs_dir
        self.nodes_dir = nodes_dir
        self.root = root
        self.audit_prefix = audit_prefix
        self.outputs: dict[str, str] = {}
        self.tables_used: list[str] = []
        self.anchors: set[str] = set()

    # -- placeholder bookkeeping
    def hold(self, text: str) -> Markup:
        token = _token(len(self.outputs))
        self.outputs[token] = text
        return Markup(token)

    def substitute(self, text: str) -> str:
        text = PLACEHOLDER.sub(lambda m: self.outputs[m.group(0)], text)
        return unlink_missing_runs(text, self.anchors)

    def _uses(self, sql: str) -> None:
        for t in tables_in(sql):
            if t not in self.tables_used:
                self.tables_used.append(t)

    # -- facts
    def fact_markup(self, fact: Fact, show_unit: bool = False) -> str:
        text = fact.display + (f" {fact.unit}" if show_unit and fact.unit else "")
        return f'[{escape_text(text)}]({audit_target(self.audit_prefix, fact.id)} "audit trail"){{.fact}}'

    def fact(self, name: str, decimals: int | None = None, show_unit: bool = False,
             **params: Any) -> Markup:
        fact = self.book.evaluate(name, params, page=self.page, decimals=decimals)
        self._uses(fact.sql)
        return self.hold(self.fact_markup(fact, show_unit))

    def value(self, name: str, **params: Any) -> Any:
        """A fact's raw value, for template logic (if/for); printing it is caught by the check."""
        return self.book.evaluate(name, params, page=self.page).value

    # -- rows, run references, tables
    def rows(self, name: str, **params: Any) -> list[dict[str, Any]]:
        sql, data = self.book.rows(name, params)
        self._uses(sql)
        return data

    def run_ref(self, run_id: str, anchor: bool = False) -> Markup:
        """A run id as code. With anchor=True (a heading), it becomes the run's section, the
        target of the compact run labels in this page's tables."""
        shown = code(run_id)
        if not anchor:
            return self.hold(shown)
        slug = run_anchor(str(run_id))
        self.anchors.add(slug)
        return self.hold(f"{shown} {{#{slug}}}")

    def text(self, value: Any, max_chars: int | None = None) -> Markup:
        """Data text (an id, a label, an error message) printed escaped; numbers are refused."""
        if isinstance(value, (int, float, decimal.Decimal)) and not isinstance(value, bool):
            raise FactError(f"{self.page}: text() got the number {value!r}; use fact()")
        return self.hold(escape_cell("-" if value is None else value, max_chars))

    def table(self, name: str, columns: list, **params: Any) -> Markup:
        """A Markdown table from row query `name`. Column specs: [title, spec] or
        [title, spec, max_chars]; spec is a column name (text), "run:<col>" (a run id, shown
        as `<spec> · HH:MM` and linked to the run's section when the page has one),
        or "fact:<fact name>" (bound from the row's columns)."""
        sql, data = self.book.rows(name, params)
        self._uses(sql)
        if not data:
            return self.hold("*No rows.*")
        specs = [tuple(c) for c in columns]
        head = "| " + " | ".join(escape_text(c[0]) for c in specs) + " |"
        align = "| " + " | ".join("---:" if c[1].startswith("fact:") else "---" for c in specs) + " |"
        lines = [head, align]
        for row in data:
            lines.append("| " + " | ".join(self._cell(row, c) for c in specs) + " |")
        return self.hold("\n".join(lines))

    def _cell(self, row: dict[str, Any], spec: tuple) -> str:
        title, key, *rest = spec
        if key.startswith("fact:"):
            name = key[5:]
            wanted = sql_params(self.book.fact_sql(name))
            missing = [p for p in wanted if p not in row]
            if missing:
                raise FactError(f"{self.page}: column {title!r}: rows lack {', '.join(missing)}")
            fact = self.book.evaluate(name, {p: row[p] for p in wanted}, page=self.page)
            self._uses(fact.sql)
            return self.fact_markup(fact)
        if key.startswith("run:"):
            return run_label_link(str(row[key[4:]]), row.get("spec"))
        if key not in row:
            raise FactError(f"{self.page}: column {title!r}: no column {key!r} in the rows")
        value = row[key]
        if isinstance(value, (int, float, decimal.Decimal)) and not isinstance(value, bool):
            raise FactError(f"{self.page}: column {title!r} is numeric; make it a fact:<name> column")
        if isinstance(value, bool):
            return "yes" if value else "no"
        if value is None:
            return "-"
        return escape_cell(value, rest[0] if rest else None)

    # -- evidence
    def evidence(self, command: str, run_id: str, file: str, pattern: str | None = None,
                 lines: int | None = None, cut: int | None = None) -> Markup:
        return self.hold(render_evidence(command, run_id, file, runs_dir=self.runs_dir,
                                         root=self.root, pattern=pattern, lines=lines, cut=cut))

    def node_evidence(self, command: str, node_id: str, file: str, pattern: str | None = None,
                      lines: int | None = None, cut: int | None = None) -> Markup:
        """An evidence block on a file of a node probe folder (nodes_dir/<node_id>/<file>)."""
        if self.nodes_dir is None:
            raise FactError(f"{self.page}: node_evidence needs the nodes folder (render nodes_dir)")
        return self.hold(render_evidence(command, node_id, file, runs_dir=self.nodes_dir,
                                         root=self.root, pattern=pattern, lines=lines, cut=cut))


def _shown(path: Path, root: Path) -> str:
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return path.as_posix()


def evidence_output(command: str, text: str, pattern: str | None, lines: int | None) -> list[str]:
    content = text.splitlines()
    if command == "cat":
        return content
    if command == "head":
        return content[: lines or 10]
    if command == "grep -m1":
        if not pattern:
            raise FactError("evidence grep -m1 needs a pattern")
        rx = re.compile(pattern)
        return next(([line] for line in content if rx.search(line)), [])
    raise FactError(f"unknown evidence command {command!r} (known: cat, head, grep -m1)")


def cat_v(data: bytes) -> str:
    """The bytes as `cat -v` shows them: control characters as ^X (tab and newline kept), bytes
    above 127 as M- and the character below."""
    out = []
    for b in data:
        prefix = ""
        if b >= 128:
            prefix, b = "M-", b - 128
        if b in (9, 10) and not prefix:
            out.append(chr(b))
        elif b < 32:
            out.append(f"{prefix}^{chr(b + 64)}")
        elif b == 127:
            out.append(f"{prefix}^?")
        else:
            out.append(prefix + chr(b))
    return "".join(out)


def render_evidence(command: str, run_id: str, file: str, *, runs_dir: Path, root: Path,
                    pattern: str | None = None, lines: int | None = None,
                    cut: int | None = None) -> str:
    """`$ command path` and its output, computed from the raw file now, HTML-escaped.
    `runs_dir` is the folder that holds `run_id` (run folders, or node probe folders); `cat -v`
    shows control characters (a terminal's escape codes) as visible text."""
    if "/" in str(run_id) or ".." in Path(file).parts:
        raise FactError(f"evidence: bad run id or file {run_id!r} {file!r}")
    path = runs_dir / run_id / file
    shown = shlex.quote(_shown(path, root))
    if command == "grep -m1":
        shell = f"grep -m1 {'-E ' if re.search(r'[]|()+?{}[]', pattern or '') else ''}" \
                f"{shlex.quote(pattern or '')} {shown}"
    elif command == "head":
        shell = f"head -n {lines or 10} {shown}"
    else:
        shell = f"{command} {shown}"
    if cut:
        shell += f" | cut -c1-{int(cut)}"
    try:
        data, more = read_raw(path, (runs_dir,))
    except FileNotFoundError:
        if command != "cat -v":
            evidence_output(command, "", pattern, lines)  # still reject unknown commands
        out = [f"{command.split()[0]}: {_shown(path, root)}: No such file or directory"]
    except (RawFileRefused, OSError) as exc:
        reason = str(exc).split(": ", 1)[-1] if isinstance(exc, RawFileRefused) else exc.strerror
        out = [f"(not shown: {_shown(path, root)}: {reason})"]
    else:
        if command == "cat -v":
            out = cat_v(data).splitlines()
        else:
            out = evidence_output(command, data.decode("utf-8", errors="replace"), pattern, lines)
        if cut:
            out = [line[: int(cut)] for line in out]
        if more:
            out.append(f"(cut at {RAW_MAX:,} bytes)")
    body = "\n".join(escape_text(line) for line in out)
    return (f'<pre class="evidence"><code><span class="evidence-cmd">$ {escape_text(shell)}'
            f"</span>\n{body}</code></pre>")


# ---------------------------------------------------------------- the check

def check_digits(page: str, text: str, allowed: tuple[str, ...] = ALLOWED_PATTERNS) -> None:
    """Fail when the template typed a digit outside a fact (macro outputs are placeholders)."""
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = PLACEHOLDER.sub(" ", raw)
        line = ESCAPED.sub(" ", line)  # characters escape_text wrote as references
        line = re.sub(r"\]\([^)\s]*(?:\s+\"[^\"]*\")?\)", "]()", line)  # link targets
        line = re.sub(r"\{#[A-Za-z0-9_-]+\}", "", line)  # heading ids
        for pattern in allowed:
            line = re.sub(pattern, " ", line)
        m = re.search(r"\S*\d\S*", line)
        if m:
            raise FactCheckError(
                f"{page}: line {lineno} prints a number outside a fact: {m.group(0)!r} in {raw.strip()[:120]!r}")


def trace(fact_id_: str, facts_file: Path) -> str:
    """The chain behind a fact, as text (for `campaign trace`)."""
    try:
        records = json.loads(facts_file.read_text())
    except FileNotFoundError:
        raise CampaignError(f"{facts_file}: not found (run the render stage first)") from None
    found = next((r for r in records if r["id"] == fact_id_ or r["name"] == fact_id_), None)
    if found is None:
        raise CampaignError(f"unknown fact {fact_id_!r}")
    lines = [
        f"fact     {found['id']}",
        f"value    {format_value(found['value'])}{' ' + found['unit'] if found.get('unit') else ''}",
        f"query    {fact_query_path(found['name'])} {json.dumps(found['params'])}",
        f"runs     {', '.join(found['run_ids']) or '-'}",
        f"source   {found['source_file']}:{found['source_line']}" if found["source_file"] else "source   -",
        f"excerpt  {found['excerpt']}" if found.get("excerpt") else "excerpt  -",
        f"stage    {found['stage']} (re-run: dvc repro {found['stage']})",
        f"git      {found['git_sha'] or '-'}",
    ]
    return redact_text("\n".join(lines))
