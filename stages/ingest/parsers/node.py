"""The files of a node folder (written by the node probe) as rows with their file and line.

    gpus.csv         nvidia-smi --query-gpu=... --format=csv         -> gpus
    topo.txt         nvidia-smi topo -m                               -> topology (links), affinity
    nvlink.txt       nvidia-smi nvlink --status                       -> nvlinks
    p2p.jsonl        one object per ordered GPU pair                  -> p2p
    allreduce.jsonl  one object per (group, message size)             -> allreduce
    env.json         versions and NCCL_*/CUDA_* variables             -> env, env_vars
    meta.json        what the probe was asked and what it did         -> meta
Each parser (the nvidia-smi printouts in stages.formats.node_smi, the JSON files in
stages.ingest.parsers.node_json) takes the file's bytes and returns rows carrying `source_line`
plus a list of ParseError; `read_node_folder` reads a whole folder (only regular files, through
stages.core.rawfile) and adds `source_file` to every row; its text values are redacted.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from stages.core.rawfile import SMALL_BYTES, Refused, read_raw
from stages.formats.lines import ParseError
from stages.ingest.parsers.node_json import parse_allreduce, parse_env, parse_meta, parse_p2p
from stages.formats.node_smi import parse_gpus_csv, parse_nvlink_status, parse_topo
from stages.core.secrets import redact_value


# ---------------------------------------------------------------- a whole folder

@dataclass
class NodeFolder:
    node_id: str
    meta: dict[str, Any] | None = None
    env: dict[str, Any] | None = None
    env_vars: list[dict[str, Any]] = field(default_factory=list)
    gpus: list[dict[str, Any]] = field(default_factory=list)
    links: list[dict[str, Any]] = field(default_factory=list)
    affinity: list[dict[str, Any]] = field(default_factory=list)
    legend: list[dict[str, Any]] = field(default_factory=list)
    nvlinks: list[dict[str, Any]] = field(default_factory=list)
    p2p: list[dict[str, Any]] = field(default_factory=list)
    allreduce: list[dict[str, Any]] = field(default_factory=list)
    errors: list[dict[str, Any]] = field(default_factory=list)   # source_file, source_line, reason


def _redacted(value: Any) -> Any:
    """A parsed value with every string in it redacted."""
    if isinstance(value, dict):
        return {k: _redacted(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_redacted(v) for v in value]
    return redact_value(value)


def read_node_folder(folder: Path, root: Path) -> NodeFolder:
    """Every file of a node folder; a file that is absent gives no rows, one that cannot be read
    (or is not a regular file: a link, a FIFO, ...) gives rows in `errors`. Rows carry node_id,
    source_file (relative to root) and source_line."""
    node = NodeFolder(node_id=folder.name)

    def read(name: str) -> tuple[bytes | None, str]:
        path = folder / name
        rel = path.relative_to(root).as_posix() if path.is_relative_to(root) else path.as_posix()
        try:
            return read_raw(folder, name, SMALL_BYTES), rel
        except FileNotFoundError:
            return None, rel
        except Refused as exc:
            fail([ParseError(None, exc.reason)], rel)
        except OSError as exc:
            fail([ParseError(None, f"cannot read: {exc.strerror or type(exc).__name__}")], rel)
        return None, rel

    def tag(rows: list[dict[str, Any]], rel: str) -> list[dict[str, Any]]:
        return [{"node_id": node.node_id, **_redacted(r), "source_file": rel} for r in rows]

    def fail(errors: list[ParseError], rel: str) -> None:
        node.errors += [{"node_id": node.node_id, "source_file": rel, "source_line": e.line,
                         "reason": redact_value(e.reason)} for e in errors]

    data, rel = read("meta.json")
    if data is not None:
        meta, errors = parse_meta(data)
        node.meta = None if meta is None else {**_redacted(meta), "source_file": rel, "source_line": 1}
        fail(errors, rel)
    data, rel = read("env.json")
    if data is not None:
        env, env_rows, errors = parse_env(data)
        node.env = None if env is None else tag([env], rel)[0]
        node.env_vars = tag(env_rows, rel)
        fail(errors, rel)
    data, rel = read("gpus.csv")
    if data is not None:
        rows, errors = parse_gpus_csv(data)
        node.gpus = tag(rows, rel)
        fail(errors, rel)
    data, rel = read("topo.txt")
    if data is not None:
        topo = parse_topo(data)
        node.links, node.affinity, node.legend = (tag(topo.links, rel), tag(topo.devices, rel),
                                                  tag(topo.legend, rel))
        fail(topo.errors, rel)
    data, rel = read("nvlink.txt")
    if data is not None:
        rows, errors = parse_nvlink_status(data)
        node.nvlinks = tag(rows, rel)
        fail(errors, rel)
    for name, parser, attr in (("p2p.jsonl", parse_p2p, "p2p"), ("allreduce.jsonl", parse_allreduce, "allreduce")):
        data, rel = read(name)
        if data is not None:
            rows, errors = parser(data)
            setattr(node, attr, tag(rows, rel))
            fail(errors, rel)
    return node
