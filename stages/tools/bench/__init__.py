"""Benchmarks (`campaign bench`, `make bench`): the ingest against `grep -c` on a synthetic
campaign (benchmark*.py) and the render at campaign scale (benchmark_render.py), into
data/bench/report.md."""
