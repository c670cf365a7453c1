"""Ingest: raw run folders -> raw_* tables of the warehouse (DuckDB).

Incremental: a folder whose fingerprint (its files' names, sizes, mtimes, ctimes and inodes, plus
the version of this code and of the raw schema) is unchanged is skipped; changed folders have their
rows replaced in transactions of whole folders (up to BATCH_FOLDERS at a time); a folder gone from
disk has its rows removed. Whatever cannot be read becomes an `ingest_errors` row and ingest goes on.

Write-once: a run folder is sealed (MANIFEST.sha256, every file and folder read-only; see
stages.core.provenance.seal). Each folder read is checked file by file against its manifest (sha256),
and the manifest's own sha256 against the one stored at the folder's first ingest (raw_seals).
A folder that no longer matches keeps the rows stored before the change; only its `raw_tampered`
rows say what changed. One that mismatches at its first ingest is read, and marked the same way.
With `seal_unsealed` (the ingest stage sets it), a folder that has no manifest and never had one
is sealed before it is read, once no run is writing it (`provenance.at_rest`): the only write
ingest makes into the runs folder, and never to a file that exists.

Only regular files inside a run folder are read (stages.core.rawfile: no link, FIFO, socket or
device is opened or followed, each file under a size limit; `name.gz` is read decompressed); a
folder that is a link, or whose name is not a run id, is refused whole with an `ingest_errors` row
of the runs folder (run_id null) and counted as runs_refused. Every text value stored goes
through stages.core.secrets.redact_text first.

Big files are read in bulk: the common shapes of stats lines and /metrics samples become columns
(numpy arrays), not one Python object per row, and reach DuckDB as few, large frames.

Example:
    from stages.ingest.stage import run
    run(runs_dir=Path("data/runs"), warehouse=Path("data/warehouse.duckdb"), root=Path("."))
"""
from __future__ import annotations

import functools
import hashlib
import json
import multiprocessing
import os
import re
import time
from collections import deque
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timezone
from itertools import islice
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

import duckdb
import numpy as np
import pandas as pd
from pandas.api.types import union_categoricals

from stages.core.provenance import RUN_MANIFEST, at_rest, seal
from stages.core import raw_schema
from stages.core import rawfile
from stages.core import secrets
from stages.ingest.parsers import bench_json, cmd as cmd_parser, metrics, lines, run_files, turns
from stages.core.rawfile import Refused
from stages.ingest.parsers.lines import ParseError
from stages.core.secrets import REDACTED, SECRET_FLAGS, is_secret_name, redact_text
from stages.ingest.parsers.sglang_log import parse_sglang_log
from stages.ingest.parsers.vllm_log import parse_vllm_log
from stages.core import warehouse
from stages.core.warehouse import folder_entries, relative, table_columns, text_value, typed_frame

SQL_DIR = Path(__file__).parent / "sql"
SCHEMA_SQL = raw_schema.RAW_SCHEMA
INGEST_SQL = SQL_DIR / "ingest"
CODE_FILES = (Path(__file__), Path(rawfile.__file__), Path(secrets.__file__), Path(warehouse.__file__),
              Path(raw_schema.__file__), *sorted((Path(__file__).parent / "parsers").glob("*.py")), SCHEMA_SQL)

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
LOG_NAMES = ("server.log",)
BENCH_SUFFIXES = (".json", ".jsonl")
METRICS_MARK = ".metrics."
PARALLEL_MIN_BYTES = 64 * 1024 * 1024
MAX_WORKERS = 8
# Folders are written in batches (one transaction each) of at most this many folders or rows
# of the big tables, whichever comes first.
BATCH_FOLDERS = 64
BATCH_ROWS = 1_000_000
BULK_TABLES = ("raw_log_stats", "raw_metrics", "raw_bench_requests")
READ_AHEAD = 8                 # folders read ahead of the writer, per worker process
WRITER_MEMORY = "512MB"        # DuckDB's buffer limit while writing (it spills beyond)
# One DuckDB thread writes: the frames are loaded while the reader processes keep the cores busy,
# and a second thread costs more CPU than it saves time.
WRITER_THREADS = 1

Progress = Callable[[str], None]
_PARAM = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)")


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
                values[name] = _redact(value)
        values.update(run_id=self.run_id, source_file=_redact(source_file), source_line=source_line)
        self.tables[table].append(values)

    def add_block(self, table: str, source_file: str, columns: dict[str, Any]) -> None:
        """Rows given as equal-length columns; `source_line` is one of them. Text is redacted."""
        self.blocks.setdefault(table, []).append(
            (_redact(source_file), {name: _redact_column(values) for name, values in columns.items()}))

    def count(self, table: str) -> int:
        return len(self.tables[table]) + sum(len(c["source_line"]) for _, c in self.blocks.get(table, ()))

    def error(self, source_file: str, err: ParseError | None = None, *, line: int | None = None,
              reason: str | None = None) -> None:
        self.add("ingest_errors", source_file, err.line if err else line,
                 reason=err.reason if err else reason)


# ---------------------------------------------------------------- redaction

@functools.lru_cache(maxsize=65536)
def _redact_short(text: str) -> str:
    return redact_text(text)


def _redact(text: str) -> str:
    """stages.core.secrets.redact_text, remembered for short text (names, labels, times repeat)."""
    return _redact_short(text) if len(text) <= 256 else redact_text(text)


def _redact_column(values: Any) -> Any:
    """A block column with its text redacted: one value, a categorical or an array or list of text."""
    if isinstance(values, str):
        return _redact(values)
    if isinstance(values, pd.Categorical):
        categories = [_redact(c) if isinstance(c, str) else c for c in values.categories]
        if categories == list(values.categories):
            return values
        if len(set(categories)) == len(categories):
            return values.rename_categories(categories)
        return pd.Categorical(np.asarray(categories, dtype=object)[values.codes])
    if isinstance(values, list) or (isinstance(values, np.ndarray) and values.dtype == object):
        changed = {v: r for v in set(values) if isinstance(v, str) and (r := _redact(v)) != v}
        return [changed.get(v, v) for v in values] if changed else values
    return values


def _redact_json(value: Any, key: str = "") -> Any:
    """A parsed JSON value with secrets hidden: the value of a secret-named key or flag
    (`api_key`, `--api-key`) in full, and every string through redact_text."""
    if isinstance(value, dict):
        return {k: _redact_json(v, str(k)) for k, v in value.items()}
    if isinstance(value, list):
        return [_redact_json(v, key) for v in value]
    if key and value is not None and not isinstance(value, bool) and (
            key in SECRET_FLAGS or is_secret_name(key.lstrip("-"))):
        return REDACTED
    return _redact(value) if isinstance(value, str) else value


def _secret_flag(flag: str) -> bool:
    """A command-line flag or environment variable (`env:NAME`) whose value is a secret."""
    if flag.startswith("env:"):
        return is_secret_name(flag[4:])
    return flag in SECRET_FLAGS or (flag.startswith("-") and is_secret_name(flag.lstrip("-")))


# ---------------------------------------------------------------- files and fingerprints

def code_version() -> str:
    digest = hashlib.sha256()
    for path in CODE_FILES:
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def folder_files(folder: Path) -> list[tuple[str, int, int]]:
    """(relative posix name, size, mtime_ns) of every file under `folder`, sorted."""
    return [(name, size, mtime_ns) for name, size, mtime_ns, _, _ in folder_stats(folder)]


def folder_stats(folder: Path) -> list[tuple[str, int, int, int, int]]:
    """(relative posix name, size, mtime_ns, ctime_ns, inode) of every entry under `folder` that
    is not a folder, sorted. Any write or replacement changes a file's ctime or inode, and neither
    can be set back (mtime can), so a fingerprint of these sees every edit without reading the
    files. Links are not followed: a link, to a file or to a folder, is listed with its own
    stat fields, and what it points to is not looked at."""
    out = []
    for dirpath, dirnames, filenames in os.walk(folder):
        links = [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]
        dirnames[:] = sorted(d for d in dirnames if d not in links)
        for name in filenames + links:
            path = Path(dirpath) / name
            try:
                st = os.lstat(path)
            except OSError:
                continue
            out.append((path.relative_to(folder).as_posix(), st.st_size, st.st_mtime_ns,
                        st.st_ctime_ns, st.st_ino))
    out.sort()
    return out


def fingerprint(files: Iterable[tuple[str | int, ...]], version: str) -> str:
    """A hash of the files' stat fields (folder_stats) and the code version."""
    digest = hashlib.sha256(version.encode())
    for entry in files:
        digest.update(("\0".join(str(field) for field in entry) + "\n").encode())
    return digest.hexdigest()


# ---------------------------------------------------------------- reading one folder

def read_folder(folder: Path, root: Path, files: list[tuple[str, int, int]]) -> FolderRows:
    """All raw rows of one run folder. Never raises for what is in the folder; an entry that is
    not a regular file (a link, a FIFO, ...) is an error row and is not read."""
    run_id = folder.name
    rows = FolderRows(run_id)
    rel = lambda name: relative(folder / name, root)  # noqa: E731
    names = set()
    for name, _, _ in files:
        refusal = rawfile.entry_refusal(folder / name)
        if refusal:
            rows.error(rel(name), reason=refusal)
        else:
            names.add(name)
    rid = run_files.parse_run_id(run_id)

    def pick(name: str) -> str | None:
        """`name`, or else `name.gz`; when both are there the .gz is left out, with an error."""
        found = rawfile.present(names, name)
        if found == name and name + rawfile.GZ in names:
            rows.error(rel(name + rawfile.GZ), reason=f"not read: {name} is there too")
        return found

    def guard(name: str, reader: Callable[..., Any], *args: Any) -> Any:
        return _guard(rows, rel(name), lambda: reader(folder, name, rows, rel(name), *args))

    meta_name = pick("meta.json")
    meta = guard(meta_name, _read_meta) if meta_name else None

    cmd_name = pick("cmd.sh")
    command = guard(cmd_name, _read_cmd) if cmd_name else None

    engine = ((meta or {}).get("engine") or rid.engine or (command.engine if command else None)
              or "vllm")
    log_facts: list[lines.Fact] = []
    for log in LOG_NAMES:
        name = pick(log)
        if name:
            got = guard(name, _read_log, engine, command.block_size if command else None)
            log_facts.extend(got or [])

    for small_file, reader in (("launch.out", _read_launch_out), ("niah.log", _read_niah)):
        name = pick(small_file)
        if name:
            guard(name, reader)
    for name in sorted(n for n in names if turns.is_turns_log(n)):
        guard(name, _read_turns)
    for name in sorted(names):
        if not name.startswith("bench/"):
            continue
        base = name.rsplit("/", 1)[-1]
        if METRICS_MARK in base and base.endswith(".txt"):
            guard(name, _read_metrics)
        elif base.endswith(BENCH_SUFFIXES):
            guard(name, _read_bench)

    if MANIFEST in names:
        _guard(rows, rel(MANIFEST), lambda: _check_manifest(folder, rows, rel(MANIFEST), names))
    _add_run_row(rows, folder, root, files, meta, command, rid, log_facts,
                 meta_name if meta is not None else cmd_name)
    return rows


MANIFEST = RUN_MANIFEST


def _check_manifest(folder: Path, rows: FolderRows, source: str, names: set[str]) -> None:
    """A sealed run folder lists every file's sha256: hash every file and report each one that no
    longer matches (edited after the run), is gone, or was added since, as an ingest_errors row
    and a raw_tampered row. The rows are still read: the writer decides which ones to keep."""
    listed: set[str] = set()
    text = lines.decode(rawfile.read_raw(folder, MANIFEST, rawfile.SMALL_BYTES))
    for number, line in enumerate(text.splitlines(), 1):
        digest, sep, name = line.partition("  ")
        if not sep or len(digest) != 64:
            tampered(rows, source, MANIFEST, "unreadable line", number)
            continue
        listed.add(name)
        if name not in names:
            tampered(rows, source, name, "listed in the manifest but missing", number)
            continue
        try:
            changed = rawfile.sha256(folder, name) != digest
        except Refused as exc:
            tampered(rows, source, name, exc.reason, number)
            continue
        if changed:
            tampered(rows, source, name, "changed after the run (sha256 differs from the manifest)", number)
    for name in sorted(names - listed - {MANIFEST}):
        tampered(rows, source, name, "added after the run (not in the manifest)", None)


def tampered(rows: FolderRows, manifest_source: str, name: str, reason: str, line: int | None) -> None:
    """Record that file `name` of a sealed folder no longer matches its seal."""
    rows.error(manifest_source, line=line, reason=f"{name}: {reason}")
    rows.add("raw_tampered", manifest_source[: -len(MANIFEST)] + name, line, file=name, reason=reason)


def _guard(rows: FolderRows, source_file: str, fn: Callable[[], Any]) -> Any:
    try:
        return fn()
    except Refused as exc:
        rows.error(source_file, reason=exc.reason)
    except OSError as exc:
        rows.error(source_file, reason=f"cannot read: {exc.strerror or type(exc).__name__}")
    except Exception as exc:  # a parser bug must not stop the other folders
        rows.error(source_file, reason=f"{type(exc).__name__}: {exc}"[:500])
    return None


def _read_meta(folder: Path, name: str, rows: FolderRows, source: str) -> dict[str, Any] | None:
    meta, errors = run_files.parse_meta(rawfile.read_raw(folder, name, rawfile.SMALL_BYTES))
    for err in errors:
        rows.error(source, err)
    return None if meta is None else _redact_json(meta)


def _read_cmd(folder: Path, name: str, rows: FolderRows, source: str) -> cmd_parser.Command | None:
    data = rawfile.read_raw(folder, name, rawfile.SMALL_BYTES)
    command, errors = cmd_parser.parse_cmd(lines.decode(data))
    for err in errors:
        rows.error(source, err)
    if command is None:
        return None
    rows.add("raw_commands", source, command.line, wrapper=command.wrapper, image=command.image,
             model_path=command.model_path, tp=command.tp, dp=command.dp, pp=command.pp,
             dcp=command.dcp, pcp=command.pcp, expert_parallel=command.expert_parallel,
             max_model_len=command.max_model_len, max_num_seqs=command.max_num_seqs,
             kv_cache_dtype=command.kv_cache_dtype, prefix_caching=command.prefix_caching,
             command=command.command)
    for position, flag, value in command.flags:
        rows.add("raw_command_flags", source, command.line, position=position, flag=flag,
                 value=REDACTED if value is not None and _secret_flag(flag) else value)
    offset = len(command.flags)
    for n, (env_name, value, line) in enumerate(command.env, start=1):
        flag = f"env:{env_name}"
        rows.add("raw_command_flags", source, line, position=offset + n, flag=flag,
                 value=REDACTED if value is not None and _secret_flag(flag) else value)
    return command


def _read_log(folder: Path, name: str, rows: FolderRows, source: str, engine: str,
              block_size: int | None) -> list[lines.Fact]:
    with rawfile.open_raw(folder, name, rawfile.LOG_BYTES) as fh:
        chunks = lines.read_chunks(fh)
        if engine == "sglang":
            parsed = parse_sglang_log(chunks)
        else:
            parsed = parse_vllm_log(chunks, block_size=block_size)
    for f in parsed.facts:
        rows.add("raw_log_facts", source, f.line, fact=f.fact, value_num=f.value_num,
                 value_text=f.value_text, detail=f.detail, worker=f.worker, log_time=f.log_time,
                 excerpt=f.excerpt)
    for s in parsed.line_stats:
        rows.add("raw_log_stats", source, s.line, engine_idx=s.engine_idx, kind=s.kind,
                 log_time=s.log_time, prompt_tok_s=s.prompt_tok_s, gen_tok_s=s.gen_tok_s,
                 running_reqs=s.running_reqs, waiting_reqs=s.waiting_reqs,
                 kv_usage_pct=s.kv_usage_pct, prefix_hit_pct=s.prefix_hit_pct,
                 new_tokens=s.new_tokens, cached_tokens=s.cached_tokens)
    for block in parsed.blocks:
        columns = {("source_line" if name == "line" else name): values
                   for name, values in block.columns.items()}
        columns["kind"] = block.kind
        rows.add_block("raw_log_stats", source, columns)
    for err in parsed.errors:
        rows.error(source, err)
    return parsed.facts


def _read_launch_out(folder: Path, name: str, rows: FolderRows, source: str) -> None:
    pairs, errors = run_files.parse_launch_out(rawfile.read_raw(folder, name, rawfile.SMALL_BYTES))
    for key, value, line in pairs:
        rows.add("raw_launch_out", source, line, key=key,
                 value=REDACTED if value and is_secret_name(key) else value)
    for err in errors:
        rows.error(source, err)


def _read_niah(folder: Path, name: str, rows: FolderRows, source: str) -> None:
    probes, gates, errors = run_files.parse_niah(rawfile.read_raw(folder, name, rawfile.SMALL_BYTES))
    for probe in probes:
        line = probe.pop("source_line")
        rows.add("raw_gate_probes", source, line, **probe)
    for gate, score, line in gates:
        rows.add("raw_gates", source, line, gate=gate, score=score)
    for err in errors:
        rows.error(source, err)


def _read_turns(folder: Path, name: str, rows: FolderRows, source: str) -> None:
    parsed = turns.parse_turns(rawfile.read_raw(folder, name, rawfile.LOG_BYTES), name)
    for workload in parsed.workloads:
        line = workload.pop("source_line")
        rows.add("raw_turn_workloads", source, line, **workload)
    for request in parsed.requests:
        line = request.pop("source_line")
        rows.add("raw_turn_requests", source, line, **request)
    for err in parsed.errors:
        rows.error(source, err)


def _read_bench(folder: Path, name: str, rows: FolderRows, source: str) -> None:
    point_id = name.rsplit("/", 1)[-1].rsplit(".", 1)[0]
    parsed = bench_json.parse_bench(rawfile.read_raw(folder, name, rawfile.RESULT_BYTES), point_id)
    for point in parsed.points:
        line = point.pop("source_line")
        rows.add("raw_bench_points", source, line, **point)
    for request in parsed.requests:
        line = request.pop("source_line")
        rows.add("raw_bench_requests", source, line, **request)
    for err in parsed.errors:
        rows.error(source, err)


def _read_metrics(folder: Path, name: str, rows: FolderRows, source: str) -> None:
    point_id, _, rest = name.rsplit("/", 1)[-1].partition(METRICS_MARK)
    phase = rest.rsplit(".", 1)[0]
    samples, errors = metrics.parse_columns(rawfile.read_raw(folder, name, rawfile.RESULT_BYTES))
    if samples.lines:
        rows.add_block("raw_metrics", source, {
            "point_id": point_id, "phase": phase, "name": samples.names, "labels": samples.labels,
            "value": np.array(samples.values, dtype=np.float64),
            "source_line": np.array(samples.lines, dtype=np.int64)})
    for err in errors:
        rows.error(source, err)


def _first_text(facts: list[lines.Fact], name: str) -> str | None:
    return next((f.value_text for f in facts if f.fact == name and f.value_text), None)


def _add_run_row(rows: FolderRows, folder: Path, root: Path, files: list[tuple[str, int, int]],
                 meta: dict[str, Any] | None, command: cmd_parser.Command | None,
                 rid: run_files.RunId, log_facts: list[lines.Fact], source_name: str | None) -> None:
    """The raw_runs row: meta.json (`source_name`, already redacted), or else what the run id,
    cmd.sh (`source_name`) and the log say."""
    if meta is not None:
        spec_params = meta.get("spec_params")
        gpus = meta.get("gpus")
        rows.add(
            "raw_runs", relative(folder / source_name, root), 1,
            spec=text_value(meta.get("spec")), profile=text_value(meta.get("profile")),
            model=text_value(meta.get("model")) or rid.model,
            layout=text_value(meta.get("layout")) or rid.layout,
            ctx_label=text_value(meta.get("ctx_label")) or rid.ctx_label,
            engine=text_value(meta.get("engine")) or rid.engine,
            engine_version=text_value(meta.get("engine_version")) or _first_text(log_facts, "engine_version"),
            image=text_value(meta.get("image")), image_digest=text_value(meta.get("image_digest")),
            executor=text_value(meta.get("executor")),
            gpus=",".join(map(str, gpus)) if isinstance(gpus, list) else text_value(gpus),
            git_sha=text_value(meta.get("git_sha")), params_hash=text_value(meta.get("params_hash")),
            started_at=run_files.parse_time(meta.get("started_at")),
            finished_at=run_files.parse_time(meta.get("finished_at")),
            schema_version=meta.get("schema_version"), recovered=False,
            spec_json=json.dumps(spec_params if spec_params is not None else meta.get("spec"),
                                 sort_keys=True, default=str),
        )
        return
    year = datetime.fromtimestamp(min((m for _, _, m in files), default=time.time_ns()) / 1e9,
                                  tz=timezone.utc).year
    source = relative(folder / source_name, root) if command is not None else relative(folder, root)
    rows.add(
        "raw_runs", source, command.line if command is not None else 1,
        spec=None, profile=None, model=rid.model, layout=rid.layout, ctx_label=rid.ctx_label,
        engine=rid.engine or (command.engine if command else None),
        engine_version=_first_text(log_facts, "engine_version"),
        image=command.image if command else None, image_digest=None,
        executor=("docker" if command and command.wrapper == "docker" else "local") if command else None,
        gpus=None, git_sha=None, params_hash=None, started_at=rid.started_at(year),
        finished_at=None, schema_version=None, recovered=True, spec_json=None,
    )


# ---------------------------------------------------------------- the warehouse

@functools.cache
def _sql(name: str) -> str:
    """An ingest SQL file, read once per process (the write path runs some for every folder)."""
    return (INGEST_SQL / name).read_text()


def _statements(sql: str) -> list[str]:
    body = "\n".join(line for line in sql.splitlines() if not line.strip().startswith("--"))
    return [s.strip() for s in body.split(";") if s.strip()]


def _execute(con: duckdb.DuckDBPyConnection, name: str, values: dict[str, Any]) -> None:
    """Run each statement of an ingest SQL file with the values it names."""
    for statement in _statements(_sql(name)):
        con.execute(statement, {k: values[k] for k in set(_PARAM.findall(statement))})


def _columns(con: duckdb.DuckDBPyConnection) -> dict[str, list[tuple[str, str]]]:
    return {t: cols for t, cols in table_columns(con).items() if t in RAW_TABLES}


def open_warehouse(warehouse: Path) -> tuple[duckdb.DuckDBPyConnection, bool]:
    """Connect and make the raw tables match raw.sql; True when they had to be rebuilt. The
    tables of KEPT_TABLES are never dropped: see keep_seals."""
    schema = SCHEMA_SQL.read_text()
    expected = duckdb.connect()
    expected.execute(schema)
    want_all = table_columns(expected)
    expected.close()
    want = {t: cols for t, cols in want_all.items() if t in RAW_TABLES}
    warehouse.parent.mkdir(parents=True, exist_ok=True)
    con = duckdb.connect(str(warehouse),
                         config={"memory_limit": WRITER_MEMORY, "threads": WRITER_THREADS})
    have_all = table_columns(con)
    have = {t: cols for t, cols in have_all.items() if t in RAW_TABLES}
    rebuilt = False
    if have and have != want:
        for table in RAW_TABLES:
            con.execute(f"drop table if exists {table}")
        rebuilt = True
    keep_seals(con, schema, have_all, want_all)
    return con, rebuilt


def keep_seals(con: duckdb.DuckDBPyConnection, schema: str, have: dict[str, list[tuple[str, str]]],
               want: dict[str, list[tuple[str, str]]]) -> None:
    """Create the tables of raw.sql, and re-create a kept table (raw_seals) whose columns changed
    there with its old rows copied in (the columns both versions have), so that a change of
    raw.sql never forgets the manifest hashes taken at first ingest. A column added to a kept
    table must allow nulls or have a default."""
    changed = [t for t in KEPT_TABLES if t in have and have[t] != want[t]]
    con.execute("begin transaction")
    try:
        for table in changed:
            con.execute(f"alter table {table} rename to {table}_previous")  # identifier from KEPT_TABLES
        con.execute(schema)
        for table in changed:
            old = {name for name, _ in have[table]}
            common = ", ".join(name for name, _ in want[table] if name in old)
            con.execute(f"insert into {table} ({common}) select {common} from {table}_previous")
            con.execute(f"drop table {table}_previous")
        con.execute("commit")
    except Exception:
        con.execute("rollback")
        raise


def _table_frames(table: str, batch: list[FolderRows], columns: list[tuple[str, str]]
                  ) -> list[pd.DataFrame]:
    """The rows of `table` from every folder of `batch`, as few frames as possible."""
    frames = []
    rows = [row for folder in batch for row in folder.tables[table]]
    if rows:
        frames.append(typed_frame(rows, columns))
    shapes: dict[tuple[str, ...], list[tuple[str, str, dict[str, Any]]]] = {}
    for folder in batch:
        for source, block in folder.blocks.get(table, ()):
            shapes.setdefault(tuple(block), []).append((folder.run_id, source, block))
    for names, blocks in shapes.items():
        frames.append(_blocks_frame(names, blocks))
    return frames


def _blocks_frame(names: tuple[str, ...], blocks: list[tuple[str, str, dict[str, Any]]]) -> pd.DataFrame:
    """Blocks with the same columns as one frame. A column given as one value (a string) holds
    it on every row of its block; such columns, and the text columns of stats blocks, become
    categoricals, cheap to build and to load."""
    sizes = np.array([len(b["source_line"]) for _, _, b in blocks], dtype=np.int64)
    data: dict[str, Any] = {
        "run_id": _repeat([run_id for run_id, _, _ in blocks], sizes),
        "source_file": _repeat([source for _, source, _ in blocks], sizes),
    }
    for name in names:
        values = [b[name] for _, _, b in blocks]
        if isinstance(values[0], str):
            data[name] = _repeat(values, sizes)
        elif isinstance(values[0], pd.Categorical):
            data[name] = union_categoricals(values)
        elif isinstance(values[0], np.ndarray) and values[0].dtype != object:
            data[name] = np.concatenate(values)
        else:
            data[name] = np.concatenate([np.asarray(v, dtype=object) for v in values])
    return pd.DataFrame(data)


def _repeat(values: list[str], sizes: np.ndarray) -> pd.Categorical:
    categories = sorted(set(values))
    index = {v: i for i, v in enumerate(categories)}
    codes = np.repeat(np.array([index[v] for v in values], dtype=np.int32), sizes)
    return pd.Categorical.from_codes(codes, categories=categories)


def write_folders(con: duckdb.DuckDBPyConnection, columns: dict[str, list[tuple[str, str]]],
                  batch: list[tuple[FolderRows, dict[str, Any]]], stored: set[str] | None = None
                  ) -> list[dict[str, int]]:
    """Replace the rows of each folder of `batch` in a single transaction; rows of a folder
    already in the warehouse (`stored`; None: look it up) are deleted first, except those of a
    folder found tampered (raw_tampered rows): it keeps the rows stored before, and only its
    tamper record is replaced. A folder's first ingest records its seal (`manifest_sha256`,
    `sealed_at` in its folder row). Returns rows written per table, per folder."""
    now = datetime.now(timezone.utc)
    con.execute("begin transaction")
    try:
        if stored is None:
            stored = {run_id for run_id, _ in con.execute(_sql("folders.sql")).fetchall()}
        fresh, counts = [], []
        for rows, folder_row in batch:
            keep = rows.run_id in stored and bool(rows.tables["raw_tampered"])
            _stamp_tampered(con, rows, keep, now)
            if keep:
                _execute(con, "keep_tampered.sql", folder_row)
                _insert_rows(con, "raw_tampered", [rows], columns)
                counts.append({table: rows.count(table) if table == "raw_tampered" else 0
                               for table in ROW_TABLES})
            else:
                if rows.run_id in stored:
                    _execute(con, "delete_run.sql", folder_row)
                fresh.append((rows, folder_row))
                counts.append({table: rows.count(table) for table in ROW_TABLES})
        for table in ROW_TABLES:
            _insert_rows(con, table, [rows for rows, _ in fresh], columns)
        for _, folder_row in fresh:
            _execute(con, "insert_folder.sql", folder_row)
        for _, folder_row in batch:
            if folder_row.get("manifest_sha256"):
                _execute(con, "insert_seal.sql", {
                    **folder_row, "first_ingested_at": folder_row["ingested_at"],
                    "sealed_by": "ingest" if folder_row.get("sealed_at") else "run"})
        con.execute("commit")
    except Exception:
        con.execute("rollback")
        raise
    return counts


def _insert_rows(con: duckdb.DuckDBPyConnection, table: str, folders: list[FolderRows],
                 columns: dict[str, list[tuple[str, str]]]) -> None:
    for frame in _table_frames(table, folders, columns[table]):
        con.register("ingest_frame", frame)
        try:
            con.execute(f"insert into {table} by name select * from ingest_frame")
        finally:
            con.unregister("ingest_frame")


def _stamp_tampered(con: duckdb.DuckDBPyConnection, rows: FolderRows, kept: bool,
                    now: datetime) -> None:
    """Complete a folder's raw_tampered rows: whether its stored rows are kept, and when each
    change was first seen (an earlier record of the same change keeps its time)."""
    if not rows.tables["raw_tampered"]:
        return
    seen = {(file, reason): at for file, reason, at in
            con.execute(_sql("tampered.sql"), {"run_id": rows.run_id}).fetchall()}
    for row in rows.tables["raw_tampered"]:
        row["rows_kept"] = kept
        row["detected_at"] = seen.get((row["file"], row["reason"]), now)


def _write_batch(con: duckdb.DuckDBPyConnection, columns: dict[str, list[tuple[str, str]]],
                 batch: list[tuple[FolderRows, dict[str, Any]]], stored: set[str]
                 ) -> list[dict[str, int]]:
    """Write a batch in one transaction; when that fails, each folder on its own, and a folder
    whose rows cannot be stored gets an ingest_errors row instead."""
    if not batch:
        return []
    try:
        return write_folders(con, columns, batch, stored)
    except duckdb.Error as exc:
        if len(batch) > 1:
            return [_write_batch(con, columns, [item], stored)[0] for item in batch]
        rows, folder_row = batch[0]
        failed = FolderRows(rows.run_id)
        failed.error(folder_row["folder"], reason=f"could not store the folder's rows: {exc}"[:500])
        return write_folders(con, columns, [(failed, {**folder_row, "fingerprint": "failed"})], stored)


def _check_seal(rows: FolderRows, source: str, found: SealFound, first_sha256: str | None) -> None:
    """Compare a folder's manifest with the one of its first ingest: one rewritten (to match an
    edited file) or removed since is a change to the folder."""
    if found.problem:
        rows.error(source, reason=f"{MANIFEST}: {found.problem}")
    if first_sha256 is None:
        return
    if found.manifest_sha256 is None:
        tampered(rows, source, MANIFEST, "removed after the first ingest", None)
    elif found.manifest_sha256 != first_sha256:
        tampered(rows, source, MANIFEST,
                 "rewritten after the first ingest (sha256 differs from the one stored then)", None)


def _seal_note(rows: FolderRows, folder_row: dict[str, Any], was_stored: bool) -> str:
    """What the progress line says of a folder's seal."""
    note = ""
    if folder_row["sealed_at"] is not None:
        note += f", sealed at ingest {folder_row['sealed_at']:%Y-%m-%d %H:%M:%S} UTC"
    changed = sorted({row["file"] for row in rows.tables["raw_tampered"]})
    if changed:
        kept = "rows of its first ingest kept" if was_stored else "read as it is, marked tampered"
        note += f", TAMPERED ({', '.join(changed)}): {kept}"
    return note


def remove_run(con: duckdb.DuckDBPyConnection, run_id: str) -> None:
    con.execute("begin transaction")
    try:
        _execute(con, "delete_run.sql", {"run_id": run_id})
        con.execute("commit")
    except Exception:
        con.execute("rollback")
        raise


def _size(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"


def run_folders(runs_dir: Path) -> tuple[list[Path], list[str]]:
    """The run folders under runs_dir, and why each other entry there is not one (a link; a
    name that is not a run id, shown inert): nothing in those is read."""
    folders, refused = [], []
    for path, refusal in folder_entries(runs_dir):
        name = run_files.shown(path.name)
        if refusal:
            refused.append(f"{name}: {refusal}")
        elif not run_files.is_run_id(path.name) or redact_text(path.name) != path.name:
            refused.append(f"folder name is not a run id: {name} (expected "
                           "<model>__<layout>__<ctx>__<engine>__<MMDD-HHMMSS>, letters, digits, "
                           "'.', '_', '-'); not read")
        else:
            folders.append(path)
    return folders, refused


def _record_refused(con: duckdb.DuckDBPyConnection, runs_dir: Path, root: Path,
                    refused: list[str]) -> None:
    """Replace the rows of the entries of runs_dir refused last time by this time's: ingest_errors
    rows with no run id, of the runs folder itself."""
    source = relative(runs_dir, root)
    rows = [{"run_id": None, "source_file": source, "source_line": None, "reason": _redact(reason)}
            for reason in refused]
    con.execute("begin transaction")
    try:
        con.execute(_sql("delete_refused.sql"), {"folder": source})
        if rows:
            con.register("refused_frame", typed_frame(rows, _columns(con)["ingest_errors"]))
            try:
                con.execute("insert into ingest_errors by name select * from refused_frame")
            finally:
                con.unregister("refused_frame")
        con.execute("commit")
    except Exception:
        con.execute("rollback")
        raise


def _workers(plans: list[tuple[Path, list, str]]) -> int:
    """Processes to read folders with: one per core when there is enough to read."""
    total = sum(size for _, files, _ in plans for _, size, _ in files)
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:
        cores = os.cpu_count() or 1
    if len(plans) < 2 or total < PARALLEL_MIN_BYTES or cores < 2:
        return 1
    return min(cores, len(plans), MAX_WORKERS)


def _read_planned(plan: tuple[Path, list, str], root: Path) -> FolderRows:
    folder, files, _ = plan
    return read_folder(folder, root, files)


def _in_order(pool: ProcessPoolExecutor, plans: list[tuple[Path, list, str]], root: Path,
              ahead: int) -> Iterator[FolderRows]:
    """The folders read by the pool, in plan order, with at most `ahead` read or being read
    beyond the one consumed (so a slow writer does not pile results up in memory)."""
    pending: deque = deque()
    todo = iter(plans)
    for plan in islice(todo, ahead):
        pending.append(pool.submit(_read_planned, plan, root))
    while pending:
        done = pending.popleft().result()
        plan = next(todo, None)
        if plan is not None:
            pending.append(pool.submit(_read_planned, plan, root))
        yield done


@dataclass
class SealFound:
    """A planned folder's seal as ingest found it before reading the folder."""
    manifest_sha256: str | None          # None: the folder has no manifest
    sealed_at: datetime | None = None    # when ingest sealed it just now
    problem: str | None = None           # why ingest could not seal it


def _plan(folders: list[Path], known: dict[str, str], version: str,
          seals: dict[str, str] | None = None, seal_unsealed: bool = False
          ) -> tuple[list[Path], list[tuple[Path, list, str]], dict[str, SealFound]]:
    """The run folders, those to read (changed since their fingerprint in `known`), and the seal
    of each one to read. With `seal_unsealed`, a folder without a manifest that never had one
    (not in `seals`) is sealed first; a folder whose manifest was removed is left as it is."""
    seals = seals or {}
    plans, found = [], {}
    for folder in folders:
        sealed_at, problem = None, None
        if (seal_unsealed and folder.name not in seals and not folder.is_symlink()
                and not os.path.lexists(folder / MANIFEST) and at_rest(folder)):
            try:
                seal(folder)
                sealed_at = datetime.now(timezone.utc)
            except OSError as exc:
                problem = f"could not seal the folder: {exc.strerror or exc}"
        stats = folder_stats(folder)
        fp = fingerprint(stats, version)
        if known.get(folder.name) != fp:
            plans.append((folder, [(n, size, mtime) for n, size, mtime, _, _ in stats], fp))
            found[folder.name] = SealFound(_manifest_sha256(folder), sealed_at, problem)
    return folders, plans, found


def _manifest_sha256(folder: Path) -> str | None:
    """The sha256 of the folder's manifest; None when it has none (or it is not a regular file)."""
    try:
        return rawfile.sha256(folder, MANIFEST)
    except (Refused, OSError):
        return None


def _known(warehouse: Path) -> tuple[dict[str, str], bool, dict[str, str]]:
    """Fingerprints already stored, whether the raw tables had to be rebuilt first, and the
    manifest sha256 of every folder's first ingest."""
    con, rebuilt = open_warehouse(warehouse)
    try:
        return (dict(con.execute(_sql("folders.sql")).fetchall()), rebuilt,
                dict(con.execute(_sql("seals.sql")).fetchall()))
    finally:
        con.close()


def run(*, runs_dir: Path, warehouse: Path, root: Path, progress: Progress | None = None,
        seal_unsealed: bool = False) -> dict:
    """Read every changed run folder under `runs_dir` into the raw tables of `warehouse`.
    `seal_unsealed` seals each folder that arrives without a manifest first (the ingest stage
    sets it; a reader of someone else's folders, such as `trace --verify`, does not).

    Returns counts: runs_seen, runs_read, runs_skipped, runs_removed, runs_refused (entries of
    runs_dir that are not read: links, names that are not run ids), runs_sealed (sealed by this
    ingest), runs_tampered (read this time and found changed since sealed), rows (per table,
    written this time), errors (ingest_errors rows written this time, refusals included),
    bytes_read, workers, seconds.
    """
    started = time.perf_counter()
    runs_dir, warehouse, root = Path(runs_dir), Path(warehouse), Path(root)
    say = progress or (lambda _line: None)
    version = code_version()
    known, rebuilt, seals = _known(warehouse)
    run_dirs, refused = run_folders(runs_dir)
    folders, plans, found = _plan(run_dirs, known, version, seals, seal_unsealed)
    workers = _workers(plans)
    # The worker processes start before the warehouse is opened for writing.
    pool = (ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("fork"))
            if workers > 1 else None)
    try:
        con, _ = open_warehouse(warehouse)
        try:
            summary = _ingest(con, folders, plans, root, say, pool, workers, found)
            _record_refused(con, runs_dir, root, refused)
            for reason in refused:
                say(f"ingest refused {reason}")
            summary["runs_refused"] = len(refused)
            summary["errors"] += len(refused)
        finally:
            con.close()
    finally:
        if pool is not None:
            pool.shutdown(cancel_futures=True)
    summary.update(rebuilt=rebuilt, workers=workers,
                   seconds=round(time.perf_counter() - started, 3))
    return summary


def _ingest(con: duckdb.DuckDBPyConnection, folders: list[Path], plans: list[tuple[Path, list, str]],
            root: Path, say: Progress, pool: ProcessPoolExecutor | None, workers: int = 1,
            found: dict[str, SealFound] | None = None) -> dict[str, Any]:
    columns = _columns(con)
    known = dict(con.execute(_sql("folders.sql")).fetchall())
    seals = dict(con.execute(_sql("seals.sql")).fetchall())
    found = found or {}
    summary: dict[str, Any] = {
        "runs_seen": len(folders), "runs_read": 0, "runs_skipped": len(folders) - len(plans),
        "runs_removed": 0, "runs_sealed": 0, "runs_tampered": 0, "rows": {t: 0 for t in ROW_TABLES},
        "errors": 0, "bytes_read": 0,
    }
    on_disk = {f.name for f in folders}
    for run_id in sorted(set(known) - on_disk):
        remove_run(con, run_id)
        summary["runs_removed"] += 1
        say(f"ingest removed {run_id} (folder gone)")
    if pool is not None:
        results = _in_order(pool, plans, root, READ_AHEAD * workers)
    else:
        results = (_read_planned(plan, root) for plan in plans)
    stored = set(known)
    batch: list[tuple[FolderRows, dict[str, Any]]] = []
    done = 0

    def flush() -> None:
        nonlocal done
        for (rows, folder_row), counts in zip(batch, _write_batch(con, columns, batch, stored)):
            for table, count in counts.items():
                summary["rows"][table] += count
            summary["errors"] += counts.get("ingest_errors", 0)
            summary["runs_read"] += 1
            summary["bytes_read"] += folder_row["bytes"]
            summary["runs_sealed"] += folder_row["sealed_at"] is not None
            summary["runs_tampered"] += bool(rows.tables["raw_tampered"])
            done += 1
            say(f"ingest {done}/{len(plans)} {rows.run_id} {_size(folder_row['bytes'])}"
                + _seal_note(rows, folder_row, rows.run_id in stored))
        batch.clear()

    for (folder, files, fp), rows in zip(plans, results):
        seal_found = found.get(folder.name) or SealFound(_manifest_sha256(folder))
        _check_seal(rows, relative(folder / MANIFEST, root), seal_found, seals.get(folder.name))
        folder_row = {"run_id": folder.name, "folder": relative(folder, root), "fingerprint": fp,
                      "files": len(files), "bytes": sum(s for _, s, _ in files),
                      "ingested_at": datetime.now(timezone.utc),
                      "manifest_sha256": seal_found.manifest_sha256, "sealed_at": seal_found.sealed_at}
        batch.append((rows, folder_row))
        if (len(batch) >= BATCH_FOLDERS
                or sum(rows.count(t) for rows, _ in batch for t in BULK_TABLES) >= BATCH_ROWS):
            flush()
    flush()
    con.execute("checkpoint")
    return summary
