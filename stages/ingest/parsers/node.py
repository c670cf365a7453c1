"""The files of a node folder (written by the node probe) as rows with their file and line.

    gpus.csv         nvidia-smi --query-gpu=... --format=csv         -> gpus
    topo.txt         nvidia-smi topo -m                               -> topology (links), affinity
    nvlink.txt       nvidia-smi nvlink --status                       -> nvlinks
    p2p.jsonl        one object per ordered GPU pair                  -> p2p
    allreduce.jsonl  one object per (group, message size)             -> allreduce
    env.json         versions and NCCL_*/CUDA_* variables             -> env, env_vars
    meta.json        what the probe was asked and what it did         -> meta
Each parser takes the file's bytes and returns rows carrying `source_line` plus a list of
ParseError; `read_node_folder` reads a whole folder (only regular files, through
stages.core.rawfile) and adds `source_file` to every row; its text values are redacted.
"""
from __future__ import annotations

import csv
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from stages.core.rawfile import SMALL_BYTES, Refused, read_raw
from stages.ingest.parsers.lines import ParseError, decode
from stages.core.secrets import redact_value

NODE_SCHEMA_VERSIONS = (1,)
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_DEVICE = re.compile(r"^(GPU\d+|NIC\d+|mlx\S+|CPU\d+)$")
_NVLINK = re.compile(r"^NV(\d+)$")
_LEGEND = re.compile(r"^\s*(\S+)\s+=\s+(.+?)\s*$")
_NIC_LEGEND = re.compile(r"^\s*(NIC\d+):\s*(\S+)\s*$")
_NVLINK_GPU = re.compile(r"^GPU (\d+): (.+?)(?: \(UUID: (\S+)\))?\s*$")
_NVLINK_LINK = re.compile(r"^\s*Link (\d+): (.+?)\s*$")
_NUMBER = re.compile(r"^[-+]?\d+(?:\.\d+)?")
# Link kinds of `nvidia-smi topo -m`, from nearest to farthest.
LINK_KINDS = {"X": "self", "PIX": "pcie", "PXB": "pcie", "PHB": "pcie", "NODE": "pcie", "SYS": "pcie"}
# nvidia-smi --query-gpu field -> column name (units come from the header's [unit]).
GPU_FIELDS = {"index": "gpu_index", "name": "name", "uuid": "uuid", "pci.bus_id": "pci_bus_id",
              "memory.total": "memory_total", "driver_version": "driver_version",
              "power.limit": "power_limit", "clocks.max.sm": "clocks_max_sm",
              "clocks.max.sm_clock": "clocks_max_sm"}
_INT_COLUMNS = {"gpu_index"}


# ---------------------------------------------------------------- gpus.csv

def _column(header: str) -> tuple[str, str | None]:
    """`memory.total [MiB]` -> ('memory_total_mib', 'MiB')."""
    name, _, unit = header.strip().partition(" [")
    unit = unit.rstrip("]") or None
    base = GPU_FIELDS.get(name.strip(), re.sub(r"\W+", "_", name.strip()).strip("_").lower())
    return (f"{base}_{unit.lower()}" if unit else base), unit


def _cell(value: str, unit: str | None) -> Any:
    text = value.strip()
    if not text or text.startswith("[") or text in ("N/A", "Not Supported"):
        return None
    if unit:
        m = _NUMBER.match(text)
        return float(m.group(0)) if m else None
    return text


def parse_gpus_csv(data: bytes) -> tuple[list[dict[str, Any]], list[ParseError]]:
    """One row per GPU line of `nvidia-smi --query-gpu=... --format=csv`."""
    rows: list[dict[str, Any]] = []
    errors: list[ParseError] = []
    columns: list[tuple[str, str | None]] | None = None
    # One physical line at a time: line numbers stay true, and a line the csv module refuses
    # (an over-long field, a stray quote) becomes an error row instead of an exception.
    for number, line in enumerate(decode(data).split("\n"), start=1):
        try:
            cells = next(csv.reader([line], skipinitialspace=True), [])
        except csv.Error as exc:
            errors.append(ParseError(number, f"gpus.csv: unreadable line ({exc})"))
            continue
        if not cells or not "".join(cells).strip():
            continue
        if columns is None:
            columns = [_column(c) for c in cells]
            if "gpu_index" not in {c for c, _ in columns}:
                errors.append(ParseError(number, "gpus.csv: header has no index column"))
                return [], errors
            continue
        if len(cells) != len(columns):
            errors.append(ParseError(number, f"gpus.csv: {len(cells)} cells, header has {len(columns)}"))
            continue
        row: dict[str, Any] = {name: _cell(v, unit) for (name, unit), v in zip(columns, cells)}
        for name in _INT_COLUMNS & row.keys():
            try:
                row[name] = int(str(row[name]))
            except (TypeError, ValueError):
                errors.append(ParseError(number, f"gpus.csv: {name} {row[name]!r} is not a number"))
                row = {}
                break
        if row:
            row["source_line"] = number
            rows.append(row)
    if columns is None:
        errors.append(ParseError(None, "gpus.csv: empty"))
    return rows, errors


# ---------------------------------------------------------------- topo.txt

@dataclass
class Topology:
    links: list[dict[str, Any]] = field(default_factory=list)      # one per (device, column device)
    devices: list[dict[str, Any]] = field(default_factory=list)    # one per row: affinity columns
    legend: list[dict[str, Any]] = field(default_factory=list)     # code, meaning (and NIC names)
    errors: list[ParseError] = field(default_factory=list)


def link_kind(code: str) -> tuple[str | None, int | None]:
    """`NV18` -> ('nvlink', 18); `SYS` -> ('pcie', None); `X` -> ('self', None)."""
    m = _NVLINK.match(code)
    if m:
        return "nvlink", int(m.group(1))
    return LINK_KINDS.get(code), None


def _split_header(text: str) -> list[str]:
    cells = text.split("\t") if "\t" in text else re.split(r"\s{2,}", text)
    return [c.strip() for c in cells if c.strip()]


def _split_row(text: str) -> list[str]:
    return [c.strip() for c in (text.split("\t") if "\t" in text else text.split())]


def _snake(name: str) -> str:
    return re.sub(r"\W+", "_", name).strip("_").lower()


def parse_topo(data: bytes) -> Topology:
    """The matrix of `nvidia-smi topo -m`: links between devices, each row's affinity columns,
    and the legends printed under it."""
    topo = Topology()
    lines = [_ANSI.sub("", line).rstrip("\r") for line in decode(data).split("\n")]
    header_at = next((i for i, line in enumerate(lines) if re.match(r"^\s+GPU0\b", line)), None)
    if header_at is None:
        topo.errors.append(ParseError(None, "topo.txt: no matrix header (a line starting with GPU0)"))
        return topo
    header = _split_header(lines[header_at])
    devices = [h for h in header if _DEVICE.match(h)]
    extra = [h for h in header if not _DEVICE.match(h)]
    in_legend = False
    for number, line in enumerate(lines[header_at + 1:], start=header_at + 2):
        if not line.strip():
            continue
        if line.strip().rstrip(":") in ("Legend", "NIC Legend"):
            in_legend = True
            continue
        if in_legend:
            m = _NIC_LEGEND.match(line) or _LEGEND.match(line)
            if m:
                topo.legend.append({"code": m.group(1), "meaning": m.group(2), "source_line": number})
            continue
        cells = _split_row(line)
        if not cells or not _DEVICE.match(cells[0]):
            topo.errors.append(ParseError(number, f"topo.txt: row not understood: {line.strip()[:80]!r}"))
            continue
        device, links, rest = cells[0], cells[1:len(devices) + 1], cells[len(devices) + 1:]
        if len(links) < len(devices):
            topo.errors.append(ParseError(number, f"topo.txt: {device} has {len(links)} link cells, "
                                                  f"header has {len(devices)} devices"))
            continue
        for other, code in zip(devices, links):
            kind, nvlinks = link_kind(code)
            if kind is None:
                topo.errors.append(ParseError(number, f"topo.txt: unknown link {code!r} {device}-{other}"))
            topo.links.append({"device": device, "peer": other, "link": code, "link_kind": kind,
                               "nvlinks": nvlinks, "source_line": number})
        values = [c for c in rest if c]
        row: dict[str, Any] = {"device": device, "source_line": number}
        for name, value in zip(extra, values):
            row[_snake(name)] = None if value == "N/A" else value
        topo.devices.append(row)
    return topo


def gpu_index(device: str) -> int | None:
    return int(device[3:]) if re.fullmatch(r"GPU\d+", device) else None


def nvlink_islands(links: list[dict[str, Any]]) -> list[list[int]]:
    """GPUs joined by NVLink, as sorted groups of GPU indices (connected components)."""
    parent: dict[int, int] = {}

    def find(a: int) -> int:
        while parent.setdefault(a, a) != a:
            a = parent[a]
        return a

    for link in links:
        a, b = gpu_index(link["device"]), gpu_index(link["peer"])
        if a is None or b is None:
            continue
        find(a), find(b)
        if link["link_kind"] == "nvlink":
            parent[find(a)] = find(b)
    groups: dict[int, list[int]] = {}
    for gpu in sorted(parent):
        groups.setdefault(find(gpu), []).append(gpu)
    return sorted(groups.values())


# ---------------------------------------------------------------- nvlink.txt

def parse_nvlink_status(data: bytes) -> tuple[list[dict[str, Any]], list[ParseError]]:
    """`GPU 0: NAME (UUID: ...)` then `Link 0: 26.562 GB/s` (or `<inactive>`) lines."""
    rows: list[dict[str, Any]] = []
    gpu: int | None = None
    for number, line in enumerate(decode(data).split("\n"), start=1):
        m = _NVLINK_GPU.match(line.strip())
        if m:
            gpu = int(m.group(1))
            continue
        m = _NVLINK_LINK.match(line)
        if m and gpu is not None:
            state = m.group(2)
            speed = re.match(r"^([\d.]+)\s*GB/s", state)
            rows.append({"gpu_index": gpu, "link": int(m.group(1)),
                         "link_gb_s": float(speed.group(1)) if speed else None,
                         "active": speed is not None, "state": state, "source_line": number})
    return rows, []


# ---------------------------------------------------------------- JSON lines

P2P_FIELDS = {"src": int, "dst": int, "can_access_peer": bool, "bytes": int, "repeats": int,
              "time_us_median": float, "copy_gbs": float, "copy_gbs_max": float}
ALLREDUCE_FIELDS = {"group": str, "gpus": list, "ranks": int, "backend": str, "device": str,
                    "dtype": str, "bytes": int, "count": int, "iters": int, "warmup": int,
                    "time_us": float, "time_us_min": float, "time_us_max": float,
                    "algbw_gbs": float, "busbw_gbs": float, "correct": bool}
_REQUIRED = {"p2p.jsonl": ("src", "dst", "can_access_peer"),
             "allreduce.jsonl": ("group", "gpus", "bytes", "time_us", "algbw_gbs", "busbw_gbs")}


def _typed(value: Any, kind: type) -> Any:
    if value is None:
        return None
    if kind is bool:
        return value if isinstance(value, bool) else None
    if kind is list:
        return value if isinstance(value, list) else None
    if isinstance(value, bool):
        return None
    try:
        return kind(value)
    except (TypeError, ValueError):
        return None


def _json_lines(data: bytes, name: str, fields: dict[str, type]) -> tuple[list[dict[str, Any]], list[ParseError]]:
    rows, errors = [], []
    for number, line in enumerate(decode(data).split("\n"), start=1):
        text = line.strip()
        if not text:
            continue
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as exc:
            errors.append(ParseError(number, f"{name}: not valid JSON: {exc.msg}"))
            continue
        if not isinstance(obj, dict):
            errors.append(ParseError(number, f"{name}: not a JSON object"))
            continue
        row = {key: _typed(obj.get(key), kind) for key, kind in fields.items()}
        missing = [k for k in _REQUIRED[name] if row[k] is None]
        if missing:
            errors.append(ParseError(number, f"{name}: missing or wrong type: {', '.join(missing)}"))
            continue
        row["source_line"] = number
        rows.append(row)
    return rows, errors


def parse_p2p(data: bytes) -> tuple[list[dict[str, Any]], list[ParseError]]:
    return _json_lines(data, "p2p.jsonl", P2P_FIELDS)


def parse_allreduce(data: bytes) -> tuple[list[dict[str, Any]], list[ParseError]]:
    rows, errors = _json_lines(data, "allreduce.jsonl", ALLREDUCE_FIELDS)
    for row in rows:
        row["gpus"] = ",".join(str(g) for g in row["gpus"])
    return rows, errors


# ---------------------------------------------------------------- env.json, meta.json

def _json_object(data: bytes, name: str) -> tuple[dict[str, Any] | None, list[ParseError]]:
    try:
        obj = json.loads(decode(data))
    except json.JSONDecodeError as exc:
        return None, [ParseError(exc.lineno, f"{name}: not valid JSON: {exc.msg}")]
    if not isinstance(obj, dict):
        return None, [ParseError(1, f"{name}: not a JSON object")]
    version = obj.get("schema_version")
    if version not in NODE_SCHEMA_VERSIONS:
        return None, [ParseError(1, f"{name}: schema_version {version!r} is not one this parser knows "
                                    f"({', '.join(map(str, NODE_SCHEMA_VERSIONS))})")]
    return obj, []


ENV_FIELDS = ("driver", "cuda", "torch", "nccl", "python", "platform", "gpu_count")


def parse_env(data: bytes) -> tuple[dict[str, Any] | None, list[dict[str, Any]], list[ParseError]]:
    """Versions as one row, and every recorded environment variable as a (name, value) row."""
    obj, errors = _json_object(data, "env.json")
    if obj is None:
        return None, [], errors
    row = {k: obj.get(k) for k in ENV_FIELDS}
    row["source_line"] = 1
    variables = obj.get("env") if isinstance(obj.get("env"), dict) else {}
    forced = obj.get("env_forced") if isinstance(obj.get("env_forced"), dict) else {}
    env_rows = [{"name": str(k), "value": None if v is None else str(v), "forced": k in forced,
                 "source_line": 1} for k, v in sorted(variables.items())]
    return row, env_rows, errors


def parse_meta(data: bytes) -> tuple[dict[str, Any] | None, list[ParseError]]:
    return _json_object(data, "meta.json")


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
