"""The bulk stats reader (stages.formats.bulk) gives exactly what the line reader gives."""
from __future__ import annotations

import dataclasses
import random
from typing import Callable

from stages.formats import sglang_log, vllm_log
from stages.formats.engine_log import scan_log


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


def _log(seed: int, line: Callable[[random.Random], str], access: str) -> bytes:
    """Three thousand generated lines, an access line after about a third of them; the last line
    has no newline."""
    rng = random.Random(seed)
    lines = []
    for _ in range(3000):
        lines.append(line(rng))
        if rng.random() < 0.3:
            lines.append(access)
    return "\n".join(lines).encode()


def test_bulk_reader_agrees_with_the_line_reader_on_varied_lines():
    data = _log(7, _stats_line, 'INFO:     127.0.0.1:41234 - "POST /v1/completions HTTP/1.1" 200 OK')
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


def _sglang_line_reader(data: bytes):
    return scan_log(data, startup=sglang_log.STARTUP_ANCHORS, ready=sglang_log.READY,
                    steady=sglang_log.STEADY_ANCHORS, facts_of=sglang_log.facts_of_line,
                    stats_of=sglang_log.stats_of_line, stats_word="batch", lookback=False)


def _fraction(rng: random.Random) -> str:
    return rng.choice(("0", "1", "0.5", "0.57", "0.3", "12.25", "0.123456789", "0.1234567890123",
                       "123456.7", f"0.{rng.randrange(100):02d}", f"{rng.random():.{rng.randrange(1, 8)}f}"))


def _sglang_line(rng: random.Random) -> str:
    head = rng.choice(("[2026-04-08 14:05:{s:02d}] ", "[2026-04-08 14:05:{s:02d} TP{t}] ",
                       "[2026-04-08 14:05:{s:02d} DP1 TP{t}] ")).format(s=rng.randrange(60), t=rng.randrange(8))
    if rng.random() < 0.5:
        graph = rng.choice(("", "cuda graph: True, ", "cuda graph: False, "))
        body = (f"Decode batch{rng.choice('.,')} #running-req: {rng.randrange(100)}, #token: "
                f"{rng.randrange(10**6)}, token usage: {_fraction(rng)}, {graph}gen throughput (token/s): "
                f"{_number(rng)}, #queue-req: {rng.randrange(9)}")
    else:
        body = (f"Prefill batch{rng.choice('.,')} #new-seq: {rng.randrange(4)}, #new-token: "
                f"{rng.randrange(10**6)}, #cached-token: {rng.randrange(10**4)}, token usage: "
                f"{_fraction(rng)}, #running-req: {rng.randrange(64)}, #queue-req: {rng.randrange(8)}")
    return head + body + rng.choice(("", ", ", ",", "  ", " \t", "\r"))


def test_sglang_batch_lines_in_bulk_agree_with_the_line_reader():
    data = _log(11, _sglang_line,
                '[2026-04-08 14:05:21] INFO:     127.0.0.1:41234 - "POST /generate HTTP/1.1" 200 OK')
    bulk, reference = sglang_log.parse_sglang_log(data), _sglang_line_reader(data)
    assert bulk.blocks and {b.kind for b in bulk.blocks} == {"sglang_decode", "sglang_prefill"}
    assert 0 < len(bulk.line_stats) < 2000  # DP ranks, long fields, carriage returns: line reader
    assert _rows(bulk) == _rows(reference)
    assert len(bulk.stats) == 3000
