"""The nvidia-smi printouts of a node folder as rows with their line.

    gpus.csv         nvidia-smi --query-gpu=... --format=csv         -> gpus
    topo.txt         nvidia-smi topo -m                               -> topology (links), affinity
    nvlink.txt       nvidia-smi nvlink --status                       -> nvlinks
"""
from __future__ import annotations

import csv
import re
from dataclasses import dataclass, field
from typing import Any

from stages.formats.lines import ParseError, decode

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_DEVICE = re.compile(r"^(GPU\d+|NIC\d+|mlx\S+|CPU\d+)$")
_NVLINK = re.compile(r"^NV(\d+)$")
_LEGEND = re.compile(r"^\s*(\S+)\s+=\s+(.+?)\s*$")
_NIC_LEGEND = re.compile(r"^\s*(NIC\d+):\s*(\S+)\s*$")
_NVLINK_GPU = re.compile(r"^GPU (\d+): (.+?)(?: \(UUID: (\S+)\))?\s*$")
_NVLINK_LINK = re.compile(r"^\s*Link (\d+): (.+?)\s*$")
_NVLINK_SPEED = re.compile(r"^(\d+(?:\.\d+)?)\s*GB/s")
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
    errors: list[ParseError] = []
    gpu: int | None = None
    for number, line in enumerate(decode(data).split("\n"), start=1):
        m = _NVLINK_GPU.match(line.strip())
        if m:
            gpu = int(m.group(1))
            continue
        m = _NVLINK_LINK.match(line)
        if m and gpu is not None:
            state = m.group(2)
            speed = _NVLINK_SPEED.match(state)
            if speed is None and state.strip() != "<inactive>":
                errors.append(ParseError(number, f"nvlink.txt: link {m.group(1)} of GPU {gpu}: "
                                                 f"neither a speed nor <inactive>: {state.strip()[:60]!r}"))
                continue
            rows.append({"gpu_index": gpu, "link": int(m.group(1)),
                         "link_gb_s": float(speed.group(1)) if speed else None,
                         "active": speed is not None, "state": state, "source_line": number})
    return rows, errors

