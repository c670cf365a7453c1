"""Result files of benchmark tools other than `vllm bench serve` and SGLang's `bench_serving`
(whose shapes bench_json.py reads): one package per tool, each recognising the tool's files by
their content, whatever their names, and reading them into the same benchmark points and
requests (raw_bench_points, raw_bench_requests), every figure keeping the JSON path it came from.

A tool package has (its modules reading one format or release family each):
    TOOL = "<name>"                       # raw_bench_points.tool
    def recognise(name: str, data: bytes) -> bool
    def parse(name: str, data: bytes, siblings: frozenset[str]) -> BenchParse

`name` is the file's path in its run folder (`bench/profile_export_aiperf.json`), `siblings` the
paths of the other files beside it (so that a CSV export is not read twice beside its JSON), a
common.Siblings whose `read(path)` gives a sibling's bytes (so that a per-request file can take
its point from the summary beside it).
common.py holds what every reader shares (point ids, units, JSON paths, JSON documents and
lines read with their errors). TOOLS is every tool package here, by name; the first that
recognises a file reads it.

Example:
    tool = recognised("bench/benchmarks.json", data)
    parsed = parse(tool, "bench/benchmarks.json", data, frozenset()) if tool else None
"""
from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType

TOOLS: tuple[ModuleType, ...] = tuple(
    importlib.import_module(f"{__name__}.{info.name}")
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name) if info.name != "common")


def parse(tool: ModuleType, name: str, data: bytes, siblings: frozenset[str]):
    """`tool`'s BenchParse of file `name`, each point given a workload: a point id of the tool's
    own naming (`<stem>__i1`, which names none) takes its stem."""
    parsed = tool.parse(name, data, siblings)
    for point in parsed.points:
        if point.get("workload") is None:
            point["workload"] = point["point_id"].rsplit("__", 1)[0]
    return parsed


def recognised(name: str, data: bytes) -> ModuleType | None:
    """The tool module that recognises file `name`, or None."""
    return next((tool for tool in TOOLS if tool.recognise(name, data)), None)
