"""Reading one run folder into FolderRows: each file by its parser, the raw_runs row, and the
folder's manifest checked file by file (and against the one of its first ingest).
"""
from __future__ import annotations

import json
from contextlib import ExitStack
from pathlib import Path
from typing import Any, Callable

import numpy as np

from stages.core import rawfile
from stages.formats import launch_out, lines, run_folder
from stages.ingest.parsers import bench_json, cmd as cmd_parser, gpu_samples, metrics, run_files, turns
from stages.formats import tailed
from stages.ingest.parsers import metrics_series, profile_trace, tools as bench_tools
from stages.ingest.parsers.tools.common import Siblings
from stages.core.faults import is_storage_fault, storage_fault
from stages.core.rawfile import Refused
from stages.core.secrets import REDACTED, SECRET_FLAGS, is_secret_name
from stages.formats.sglang_log import parse_sglang_log
from stages.formats.vllm_log import parse_vllm_log
from stages.formats.run_folder import (CMD_SH, IMPORT_RECORD, LAUNCH_OUT, META_JSON, NIAH_LOG, PROFILE_FOLDER,
                                       PROFILE_TABLE_SUFFIX, SERVER_LOG)
from stages.core.warehouse import relative
from stages.ingest.folders import MANIFEST
from stages.ingest.infer import infer_run
from stages.ingest.rows import FolderRows, redact
from stages.ingest.run_rows import add_recovered_row, add_run_row
from stages.ingest.seal_check import check_manifest

LOG_NAMES = (SERVER_LOG,)
BENCH_SUFFIXES = (".json", ".jsonl")
METRICS_MARK = ".metrics."
# bench/ files the run writes beside each result that ingest has no use for: the benchmark's
# command and printout.
BENCH_SIDE_FILES = (".cmd", ".out")
# Files of a run folder's top level a reader takes, or that ingest has no use for (Slurm's record
# and output of the job, read by `campaign schedule`); any other file is an unrecognised error row.
KNOWN_FILES = frozenset({META_JSON, IMPORT_RECORD, CMD_SH, *LOG_NAMES, LAUNCH_OUT, NIAH_LOG,
                         MANIFEST, "slurm.json", "slurm.out"})


def read_folder(folder: Path, root: Path, files: list[tuple[str, int, int]]) -> FolderRows:
    """All raw rows of one run folder. Never raises for what is in the folder; an entry that is
    not a regular file (a link, a FIFO, ...) is an error row and is not read. Raises StorageFault
    when the storage fails or the folder (or a file listed) vanished since it was listed."""
    run_id = folder.name
    rows = FolderRows(run_id)
    rel = lambda name: relative(folder / name, root)  # noqa: E731
    names = set()
    for name, _, _ in files:
        try:
            refusal = rawfile.entry_refusal(folder / name)
        except OSError as exc:      # the folder or the file vanished, the disk failed: stop
            raise storage_fault(rel(name), exc) from None
        if refusal:
            rows.error(rel(name), reason=refusal)
        else:
            names.add(name)
    rid = run_folder.parse_run_id(run_id)

    def pick(name: str) -> str | None:
        """`name`, or else `name.gz`; when both are there the .gz is left out, with an error."""
        found = rawfile.present(names, name)
        if found == name and name + rawfile.GZ in names:
            rows.error(rel(name + rawfile.GZ), reason=f"not read: {name} is there too")
        return found

    def guard(name: str, reader: Callable[..., Any], *args: Any) -> Any:
        return _guard(rows, rel(name), lambda: reader(folder, name, rows, rel(name), *args))

    meta_name = pick(META_JSON)
    meta = guard(meta_name, _read_meta) if meta_name else None
    import_name = pick(IMPORT_RECORD) if meta is None else None
    record = guard(import_name, _read_import) if import_name else None

    cmd_name = pick(CMD_SH)
    command = guard(cmd_name, _read_cmd) if cmd_name else None

    engine = ((meta or {}).get("engine") or rid.engine or (command.engine if command else None)
              or "vllm")
    log_facts: list[lines.Fact] = []
    log_name = None
    for log in LOG_NAMES:
        name = pick(log)
        if name:
            got = guard(name, _read_log, engine, command.block_size if command else None)
            log_facts.extend(got or [])
            log_name = log_name or name

    for small_file, reader in ((LAUNCH_OUT, _read_launch_out), (NIAH_LOG, _read_niah)):
        name = pick(small_file)
        if name:
            guard(name, reader)
    for name in sorted(n for n in names if turns.is_turns_log(n)):
        guard(name, _read_turns)
    bench = frozenset(n for n in names if n.startswith("bench/"))
    for name in sorted(bench):
        folder_of, _, base = name.rpartition("/")
        if metrics_series.is_series_file(name):     # before the result readers, which know it not
            guard(name, _read_metrics_series)
        elif METRICS_MARK in base and base.endswith(".txt"):
            guard(name, _read_metrics)
        elif not _plain(base).endswith(BENCH_SIDE_FILES):
            beside = [n for n in bench if n.rpartition("/")[0] == folder_of and n != name]
            guard(name, _read_bench, Siblings(beside, lambda n: rawfile.read_raw(folder, n, rawfile.RESULT_BYTES)))

    for name in sorted(n for n in names if gpu_samples.is_sampler_file(n)):
        guard(name, _read_gpu_samples)
    for name in sorted(n for n in names if _is_profile(n)):
        guard(name, _read_profile)
    for name in sorted(n for n in names if not _known(n, bench)):
        guard(name, _unrecognised)

    if MANIFEST in names:
        _guard(rows, rel(MANIFEST), lambda: check_manifest(folder, rows, rel(MANIFEST), names))
    if meta is not None:
        add_run_row(rows, folder, root, meta, rid, log_facts, meta_name)
    else:
        inferred = infer_run(command, rel(cmd_name) if command is not None else None, log_facts,
                             rel(log_name) if log_name else None)
        for value in inferred:
            rows.add("raw_run_inferred", value.source_file, value.source_line, field=value.field,
                     value=value.value, how=value.how)
        source = (rel(import_name) if record is not None else rel(cmd_name) if command is not None
                  else relative(folder, root))
        add_recovered_row(rows, files, command, rid, inferred, record, source,
                           1 if record is not None or command is None else command.line)
    return rows


def _guard(rows: FolderRows, source_file: str, fn: Callable[[], Any]) -> Any:
    try:
        return fn()
    except Refused as exc:
        rows.error(source_file, reason=exc.reason)
    except OSError as exc:
        if is_storage_fault(exc):       # the disk failed or the file vanished: stop, record nothing
            raise storage_fault(source_file, exc) from None
        rows.error(source_file, reason=f"cannot read: {exc.strerror or type(exc).__name__}")
    except Exception as exc:  # a parser bug must not stop the other folders
        rows.error(source_file, reason=f"{type(exc).__name__}: {exc}"[:500])
    return None


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
    return redact(value) if isinstance(value, str) else value


def _secret_flag(flag: str) -> bool:
    """A command-line flag or environment variable (`env:NAME`) whose value is a secret."""
    if flag.startswith("env:"):
        return is_secret_name(flag[4:])
    return flag in SECRET_FLAGS or (flag.startswith("-") and is_secret_name(flag.lstrip("-")))


def _read_meta(folder: Path, name: str, rows: FolderRows, source: str) -> dict[str, Any] | None:
    meta, errors = run_files.parse_meta(rawfile.read_raw(folder, name, rawfile.SMALL_BYTES))
    rows.add_errors(source, errors)
    return None if meta is None else _redact_json(meta)


def _read_import(folder: Path, name: str, rows: FolderRows, source: str) -> dict[str, Any] | None:
    record, errors = run_files.parse_import(rawfile.read_raw(folder, name, rawfile.SMALL_BYTES))
    rows.add_errors(source, errors)
    return None if record is None else _redact_json(record)


def _read_cmd(folder: Path, name: str, rows: FolderRows, source: str) -> cmd_parser.Command | None:
    data = rawfile.read_raw(folder, name, rawfile.SMALL_BYTES)
    command, errors = cmd_parser.parse_cmd(lines.decode(data))
    rows.add_errors(source, errors)
    if command is None:
        return None
    rows.add("raw_commands", source, command.line, wrapper=command.wrapper, image=command.image,
             model_path=command.model_path, tp=command.tp, dp=command.dp, pp=command.pp,
             dcp=command.dcp, pcp=command.pcp, expert_parallel=command.expert_parallel,
             max_model_len=command.max_model_len, max_num_seqs=command.max_num_seqs,
             kv_cache_dtype=command.kv_cache_dtype, prefix_caching=command.prefix_caching,
             command=command.command)
    flag_lines = (command.flag_lines if len(command.flag_lines) == len(command.flags)
                  else [command.line] * len(command.flags))
    for (position, flag, value), line in zip(command.flags, flag_lines):
        # a command continued over several lines: the line that holds the flag's value
        rows.add("raw_command_flags", source, line, position=position, flag=flag,
                 value=REDACTED if value is not None and _secret_flag(flag) else value)
    offset = len(command.flags)
    for n, (env_name, value, line) in enumerate(command.env, start=1):
        flag = f"env:{env_name}"
        rows.add("raw_command_flags", source, line, position=offset + n, flag=flag,
                 value=REDACTED if value is not None and _secret_flag(flag) else value)
    return command


def _read_log(folder: Path, name: str, rows: FolderRows, source: str, engine: str,
              block_size: int | None) -> list[lines.Fact]:
    with ExitStack() as opened:
        def open_chunks():    # a log tailing several services' is read twice (stages/formats/tailed.py)
            return lines.read_chunks(opened.enter_context(rawfile.open_raw(folder, name, rawfile.LOG_BYTES)))
        chunks = tailed.engine_chunks(open_chunks, engine)
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
    rows.add_errors(source, parsed.errors)
    return parsed.facts


def _read_launch_out(folder: Path, name: str, rows: FolderRows, source: str) -> None:
    pairs, errors = launch_out.parse_launch_out(rawfile.read_raw(folder, name, rawfile.SMALL_BYTES))
    for key, value, line in pairs:
        rows.add("raw_launch_out", source, line, key=key,
                 value=REDACTED if value and is_secret_name(key) else value)
    rows.add_errors(source, errors)


def _read_niah(folder: Path, name: str, rows: FolderRows, source: str) -> None:
    # a result file's limit: each probe's answer is the engine's text, which can be its 1M-token
    # prompt echoed back (millions of characters a probe)
    probes, gates, errors = run_files.parse_niah(rawfile.read_raw(folder, name, rawfile.RESULT_BYTES))
    rows.add_all("raw_gate_probes", source, probes)
    for gate, score, line in gates:
        rows.add("raw_gates", source, line, gate=gate, score=score)
    rows.add_errors(source, errors)


def _read_turns(folder: Path, name: str, rows: FolderRows, source: str) -> None:
    parsed = turns.parse_turns(rawfile.read_raw(folder, name, rawfile.LOG_BYTES), name)
    rows.add_all("raw_turn_workloads", source, parsed.workloads)
    rows.add_all("raw_turn_requests", source, parsed.requests)
    rows.add_errors(source, parsed.errors)


def _read_bench(folder: Path, name: str, rows: FolderRows, source: str, siblings: Siblings) -> None:
    """A file of bench/: a benchmark tool's result recognised by its content (stages/ingest/
    parsers/tools/), else vLLM's or SGLang's result shape, else one unrecognised error row."""
    data = rawfile.read_raw(folder, name, rawfile.RESULT_BYTES)
    tool = bench_tools.recognised(name, data)
    if tool is not None:
        parsed = bench_tools.parse(tool, name, data, siblings)
    elif _plain(name).endswith(BENCH_SUFFIXES) and bench_json.recognise(data):
        parsed = bench_json.parse_bench(data, _plain(name).rsplit("/", 1)[-1].rsplit(".", 1)[0])
    else:
        rows.error(source, reason=f"unrecognised: {content_kind(data)}, not a result file of a "
                                  "benchmark tool ingest reads; not read")
        return
    rows.add_all("raw_bench_points", source, parsed.points)
    rows.add_all("raw_bench_requests", source, parsed.requests)
    rows.add_errors(source, parsed.errors)


def _unrecognised(folder: Path, name: str, rows: FolderRows, source: str) -> None:
    """A file of a run folder that no reader takes: one error row naming what its first bytes are."""
    with rawfile.open_raw(folder, name, rawfile.RESULT_BYTES) as fh:
        head = fh.read(4096)
    rows.error(source, reason=f"unrecognised: {content_kind(head)}, not a file of a run folder "
                              "ingest reads; not read")


def _known(name: str, bench: frozenset[str]) -> bool:
    """A file some reader above takes, or one a run writes that ingest has no use for."""
    plain = _plain(name)
    return (plain in KNOWN_FILES or name in bench or turns.is_turns_log(plain)
            or gpu_samples.is_sampler_file(name) or _is_profile(name)
            or (name.startswith(f"{PROFILE_FOLDER}/") and name.endswith(PROFILE_TABLE_SUFFIX)))


def _is_profile(name: str) -> bool:
    """profile/<point_id>...pt.trace.json(.gz): the engine profiler's trace of a point."""
    folder, _, base = name.partition("/")
    return folder == PROFILE_FOLDER and "/" not in base and profile_trace.is_trace_file(base)


def _read_profile(folder: Path, name: str, rows: FolderRows, source: str) -> None:
    """A profiled point's trace: its kernel time by kind, one row per kind."""
    split = profile_trace.read_profile_trace(folder, name)
    point_id = name.rsplit("/", 1)[-1].split(".", 1)[0]
    for row in profile_trace.as_rows(split):
        rows.add("raw_profile_kinds", source, 1, point_id=point_id, counted=split.source,
                 kind=row["kind"], events=row["events"], total_us=row["total_us"],
                 share_pct=row["share_pct"], window_us=split.window_us,
                 top_json=json.dumps(row["top"], ensure_ascii=False))
    rows.add_errors(source, split.errors)


def _plain(name: str) -> str:
    """A file's name without the .gz it may be stored with."""
    return name[: -len(rawfile.GZ)] if name.endswith(rawfile.GZ) else name


def content_kind(data: bytes) -> str:
    """What a file's first bytes are, in words: empty, gzip, a JSON object or array, text, binary."""
    head = data[:4096]
    if not head:
        return "an empty file"
    if head.startswith(b"\x1f\x8b"):
        return "gzip data"
    if b"\x00" in head:
        return "binary data"
    text = head.lstrip()
    if text[:1] == b"{":
        return "a JSON object"
    if text[:1] == b"[":
        return "a JSON array"
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.start < len(head) - 3:      # not just a character cut at the 4 KiB mark
            return "binary data"
    return "text"


def _read_metrics(folder: Path, name: str, rows: FolderRows, source: str) -> None:
    point_id, _, rest = name.rsplit("/", 1)[-1].partition(METRICS_MARK)
    phase = rest.rsplit(".", 1)[0]
    samples, errors = metrics.parse_columns(rawfile.read_raw(folder, name, rawfile.RESULT_BYTES))
    if samples.lines:
        rows.add_block("raw_metrics", source, {
            "point_id": point_id, "phase": phase, "name": samples.names, "labels": samples.labels,
            "value": np.array(samples.values, dtype=np.float64),
            "source_line": np.array(samples.lines, dtype=np.int64)})
    rows.add_errors(source, errors)


def _add_sampled(rows: FolderRows, source: str, sampler: str, point_id: str, parsed: lines.SampledFile,
                 samples_table: str) -> None:
    """A sampler's file of a point: its settings (raw_sampler_settings, under the sampler's name)
    and its samples, each row with the point it names."""
    for key, value, line in parsed.settings:
        rows.add("raw_sampler_settings", source, line, point_id=point_id, sampler=sampler, key=key, value=value)
    rows.add_all(samples_table, source, ({**s, "point_id": point_id} for s in parsed.samples))
    rows.add_errors(source, parsed.errors)


def _read_metrics_series(folder: Path, name: str, rows: FolderRows, source: str) -> None:
    parsed = metrics_series.parse_series_file(rawfile.read_raw(folder, name, rawfile.RESULT_BYTES))
    _add_sampled(rows, source, "metrics", metrics_series.point_of(name), parsed, "raw_metrics_series")


def _read_gpu_samples(folder: Path, name: str, rows: FolderRows, source: str) -> None:
    parsed = gpu_samples.parse_sampler_file(rawfile.read_raw(folder, name, rawfile.RESULT_BYTES))
    _add_sampled(rows, source, "gpu", gpu_samples.point_of(name), parsed, "raw_gpu_samples")
