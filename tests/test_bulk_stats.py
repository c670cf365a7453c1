"""The bulk stats reader (stages.parsers.bulk) gives exactly what the line reader gives."""
from __future__ import annotations

import dataclasses
import random

from stages.parsers import vllm_log
from stages.parsers.engine_log import scan_log


def _line_reader(data: bytes):
    return scan_log(data, startup=vllm_log.STARTUP_ANCHORS, ready=vllm_log.READY,
                    steady=vllm_log.STEADY_ANCHORS, facts_of=vllm_log.facts_of_line,
                    stats_of=vllm_log.stats_of_line, stats_word="throughput")


def _rows(parsed):
    return [dataclasses.astuple(s)[:-1] for s in parsed.stats]


def _number(rng: random.Random) -> str:
    whole = str(rng.choice((0, rng.randrange(10), rng.randrange(10**6), rng.randrange(10**12))))
    return rng.choice((whole, whole + ".", whole + "." + str(rng.randrange(10**rng.randrange(1, 5)))))


def _stats_line(rng: random.Random) -> str:
    head = rng.choice((
        "(APIServer pid=1) INFO 10-10 05:07:{s:02d} [loggers.py:123] ",
        "2026-10-10T05:07:{s:02d}.{n}Z (APIServer pid=7) INFO 10-10 05:07:{s:02d} [loggers.py:1] ",
        "INFO 10-10 05:07:{s:02d} [loggers.py:1]",
    )).format(s=rng.randrange(60), n=rng.randrange(10**9))
    if rng.random() < 0.2:
        body = (f"Avg prompt throughput: {_number(rng)} tokens/s, Avg generation throughput: "
                f"{_number(rng)} tokens/s, Running: {rng.randrange(100)} reqs, Swapped: 0 reqs, "
                f"Pending: {rng.randrange(100)} reqs, GPU KV cache usage: {_number(rng)}%, "
                f"CPU KV cache usage: 0.0%.")
    else:
        body = (f"Engine {rng.randrange(3):03d}: Avg prompt throughput: {_number(rng)} tokens/s, "
                f"Avg generation throughput: {_number(rng)} tokens/s, Running: {rng.randrange(100)} "
                f"reqs, Waiting: {rng.randrange(100)} reqs, {rng.choice(('GPU', 'CPU'))} KV cache usage: "
                f"{_number(rng)}%, Prefix cache hit rate: {_number(rng)}%")
    return head + body + rng.choice(("", "", "  ", "\r", " \t"))


def test_bulk_reader_agrees_with_the_line_reader_on_varied_lines():
    rng = random.Random(7)
    lines = []
    for _ in range(3000):
        lines.append(_stats_line(rng))
        if rng.random() < 0.3:
            lines.append('INFO:     127.0.0.1:41234 - "POST /v1/completions HTTP/1.1" 200 OK')
    data = ("\n".join(lines)).encode()  # the last line has no newline
    bulk, reference = vllm_log.parse_vllm_log(data), _line_reader(data)
    assert bulk.blocks and len(bulk.line_stats) < 300  # fields of 16+ digits: line reader
    assert _rows(bulk) == _rows(reference)
    assert len(bulk.stats) == 3000


def test_fields_too_long_for_a_double_go_to_the_line_reader():
    line = ("(APIServer pid=1) INFO 10-10 05:07:25 [loggers.py:1] Engine 000: Avg prompt throughput: "
            "12345678901234567.5 tokens/s, Avg generation throughput: 0.1 tokens/s, Running: 4 reqs, "
            "Waiting: 0 reqs, GPU KV cache usage: 0.4%, Prefix cache hit rate: 0.0%\n")
    parsed = vllm_log.parse_vllm_log(line.encode() * 2)
    assert not parsed.blocks
    assert [s.prompt_tok_s for s in parsed.stats] == [12345678901234567.5] * 2
    assert [s.line for s in parsed.stats] == [1, 2]


def test_bulk_lines_keep_their_file_line_numbers_across_chunks():
    rng = random.Random(3)
    lines = [_stats_line(rng) if i % 3 else "INFO:     Waiting" for i in range(300)]
    data = ("\n".join(lines) + "\n").encode()
    cut = data.index(b"\n", len(data) // 2) + 1
    chunks = [(1, data[:cut]), (1 + data[:cut].count(b"\n"), data[cut:])]
    assert _rows(vllm_log.parse_vllm_log(chunks)) == _rows(_line_reader(data))
