"""The benchmark's render section at a tiny scale: a row per size, written into report.md."""
from __future__ import annotations

import json

from stages.tools.bench import benchmark


def test_render_section_writes_its_rows(tmp_path):
    report = benchmark.run(out_dir=tmp_path, sections=("render",), render_sizes=(2, 3))
    rows = report["render"]["sizes"]
    assert [r["runs"] for r in rows] == [2, 3]
    for r in rows:
        assert r["render_s"] > 0 and r["ingest_s"] > 0 and r["derive_s"] > 0
        assert r["render_peak_rss"] > 50 * 2**20       # the process tree was sampled
        assert r["site_files"] > 0 and r["site_bytes"] > 0
        assert r["charts"] > 0 and r["charts_drawn"] == 0          # no static images asked for
        assert r["again_specs_reused"] == r["charts"]              # nothing drawn again after the change
    assert report["render"]["growth"][0]["runs_x"] == 1.5
    md = (tmp_path / "report.md").read_text()
    assert "## Render at campaign scale" in md
    assert "| 2 | 1 |" in md and "| 3 | 1 |" in md
    assert "render time's growth over the runs' growth, largest step" in md
    assert json.loads((tmp_path / "report.json").read_text())["render"]["sizes"][1]["runs"] == 3
    assert not (tmp_path / "render" / "root-3").exists()
