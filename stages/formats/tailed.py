"""A job log that tails several services' logs at once: `tail -f logs/*.out` writes a header line
`==> logs/vllm.out <==` each time its output turns to another file, so one file holds blocks of
several services (an HPC job starting the engine beside a router, a retriever, a web app...).

The engine's parser reads only the engine's own blocks: the other services' lines (their own
Uvicorn "Application startup complete", their errors, their "took" and "Using" lines) are not the
engine's readiness, errors or startup facts. Which blocks are the engine's: those under the header
name whose blocks hold the most of the engine's own marks (its name, its KV pool and stats
lines). A log without such headers in its first chunk (4 MB), or whose blocks hold none of the
engine's marks, is read whole as before, in one pass; a tailed one is read twice (once to find
the engine's blocks). Line numbers stay those of the raw file: each block is handed to the parser as a chunk
that starts at its own line. Ingest's engine parsers read a log through engine_view/engine_chunks;
render's launch quotes keep to engine_lines.
"""
from __future__ import annotations

import re
from itertools import chain
from typing import Callable, Iterable, Iterator

Chunk = tuple[int, bytes]  # (1-based number of the chunk's first line, bytes ending at a newline)


def as_chunks(data: bytes | Iterable[Chunk]) -> Iterable[Chunk]:
    if isinstance(data, (bytes, bytearray, memoryview)):
        return [(1, bytes(data))]
    return data


# tail's header: `==> NAME <==` alone on its line (tail -f, tail -n +1, head of several files)
HEADER = re.compile(rb"^==> (.+?) <==[ \t]*\r?$", re.M)
_HEADER_START = b"==> "
# What only the engine's own lines say (case as printed), per engine.
MARKS = {
    "vllm": (b"vLLM", b"vllm", b"KV cache size", b"EngineCore", b"Avg prompt throughput",
             b"kv_cache_utils.py"),
    "sglang": (b"sglang", b"SGLang", b"max_total_num_tokens", b"Decode batch", b"Prefill batch",
               b"fired up and ready"),
}


def _headers(chunk: bytes) -> list[tuple[int, int, str]]:
    """(start, end, name) of each header line of a chunk, in order."""
    if _HEADER_START not in chunk:
        return []
    return [(m.start(), m.end(), m.group(1).decode("utf-8", errors="replace"))
            for m in HEADER.finditer(chunk)]


def survey(chunks: Iterable[Chunk], engine: str) -> str | None:
    """The header name of the engine's blocks in a tailed log; None for a log with no tail
    headers, or none of whose blocks holds one of the engine's marks (read it whole)."""
    marks = MARKS.get(engine, MARKS["vllm"])
    scores: dict[str, int] = {}
    order: list[str] = []
    current: str | None = None
    for _, chunk in as_chunks(chunks):
        headers = _headers(chunk)
        if not headers and current is None:
            continue
        edges = [(0, 0, current)] + headers
        for n, (_, body_start, name) in enumerate(edges):
            body_end = edges[n + 1][0] if n + 1 < len(edges) else len(chunk)
            if name is None:
                continue
            if name not in scores:
                scores[name] = 0
                order.append(name)
            scores[name] += sum(chunk.count(mark, body_start, body_end) for mark in marks)
        current = edges[-1][2]
    if not scores or max(scores.values()) == 0:
        return None
    best = max(scores.values())
    return next(name for name in order if scores[name] == best)


def engine_blocks(chunks: Iterable[Chunk], name: str) -> Iterator[Chunk]:
    """The lines of the blocks under header `name`, each run of them a chunk starting at its own
    line number in the raw file (the headers and every other block left out)."""
    current: str | None = None
    for first_line, chunk in as_chunks(chunks):
        headers = _headers(chunk)
        edges = [(0, 0, current)] + headers
        for n, (_, body_start, block_name) in enumerate(edges):
            body_end = edges[n + 1][0] if n + 1 < len(edges) else len(chunk)
            if block_name != name:
                continue
            if body_start < len(chunk) and chunk[body_start:body_start + 1] == b"\n":
                body_start += 1          # the header line's own newline
            if body_end <= body_start:
                continue
            yield first_line + chunk.count(b"\n", 0, body_start), chunk[body_start:body_end]
        current = edges[-1][2]


def engine_view(data: bytes, engine: str) -> bytes | list[Chunk]:
    """A whole log as the engine's parser should read it: the engine's blocks of a tailed log,
    else the log itself."""
    if _HEADER_START not in data:
        return data
    name = survey([(1, data)], engine)
    return data if name is None else list(engine_blocks([(1, data)], name))


def engine_chunks(open_chunks: Callable[[], Iterator[Chunk]], engine: str) -> Iterator[Chunk]:
    """The chunks of a log file as the engine's parser should read them. `open_chunks` opens the
    file's chunks from its start (stages.formats.lines.read_chunks); it is called a second
    time only for a tailed log, once the first pass has found the engine's blocks."""
    chunks = open_chunks()
    first = next(chunks, None)
    if first is None:
        return
    if not _headers(first[1]):
        yield first
        yield from chunks
        return
    name = survey(chain([first], chunks), engine)
    again = open_chunks()
    yield from again if name is None else engine_blocks(again, name)


def engine_lines(data: bytes, engine: str) -> tuple[str, list[tuple[int, int]]] | None:
    """For a tailed log, the header name of the engine's blocks and the (first, last) raw line
    numbers of each; None for a log read whole."""
    if _HEADER_START not in data:
        return None
    name = survey([(1, data)], engine)
    if name is None:
        return None
    return name, [(first, first + chunk.count(b"\n", 0, len(chunk.rstrip(b"\n"))))
                  for first, chunk in engine_blocks([(1, data)], name)]
