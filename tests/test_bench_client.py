"""The client section of `make bench` (stages/tools/bench/benchmark_client.py): real points of
`vllm bench serve` against its stand-in server, the client's own time before and after each."""
from __future__ import annotations

import statistics
from pathlib import Path

import yaml

from stages.tools.bench import benchmark_client

ROOT = Path(__file__).resolve().parent.parent


def test_the_client_section_times_every_point_and_reports_against_its_targets():
    model = yaml.safe_load((ROOT / "params.yaml").read_text())["models"]["tiny-llama"]
    said = []
    result = benchmark_client.run(model=model, points=3, prompt_tokens=256, output_tokens=4,
                                  concurrency=2, progress=said.append)
    assert len(result["setup_ms"]) == len(result["finish_ms"]) == 3
    assert all(ms > 0 for ms in result["setup_ms"] + result["finish_ms"])
    # the median of the points after the first (the first is reported apart)
    assert abs(result["setup_ms_median"] - statistics.median(result["setup_ms"][1:])) <= 0.1
    text = benchmark_client.render_markdown(result)
    assert "| set-up before the first request, median |" in text and "≤ 50 ms" in text
    assert said and "stand-in server" in said[0]
