"""The chart cache: static images drawn once per spec, served again only for the same spec."""
from __future__ import annotations

import ast
import csv
import json
from pathlib import Path

import pandas as pd
import pytest

from stages.render import charts
from stages.render.chart_writer import STATIC, ChartWriter, cache_key, chart_modules, draw
from stages.render.errors import FactError


def spec(title: str = "Time to first token") -> tuple[dict, str]:
    rows = [dict(run_id="run-a", series="tiny-seqs4", workload="long", concurrency=c, sent=2,
                 completed=2, ttft_median_s=0.5 * c, ttft_p90_s=0.7 * c, decode_tok_s_per_user=50.0,
                 output_tok_s=80.0, capacity_limited=False, provisional=False) for c in (1, 2, 4)]
    chart = charts.ttft_chart(pd.DataFrame(rows), ["tiny-seqs4"]).properties(title=title)
    value = chart.to_dict()            # validated here, as the writer skips it
    return value, json.dumps(value, separators=(",", ":"))


def images(docs: Path, cache: Path, value: dict, text: str, name: str = "c") -> ChartWriter:
    writer = ChartWriter(docs, book=None, cache_dir=cache, workers=2, static=STATIC)
    out = docs / name
    out.parent.mkdir(parents=True, exist_ok=True)
    writer.static_images(value, text, out)
    writer.close()
    return writer


def test_miss_draws_and_fills_the_cache_then_a_hit_copies(tmp_path):
    value, text = spec()
    first = images(tmp_path / "docs1", tmp_path / "cache", value, text)
    assert (first.drawn, first.reused) == (1, 0)
    svg = (tmp_path / "docs1" / "c.svg").read_bytes()
    assert svg == draw(value, "svg")
    assert (tmp_path / "docs1" / "c.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    key = cache_key(text)
    assert sorted(p.name for p in (tmp_path / "cache" / key[:2]).iterdir()) == [f"{key}.png", f"{key}.svg"]
    second = images(tmp_path / "docs2", tmp_path / "cache", value, text)
    assert (second.drawn, second.reused) == (0, 1)
    for kind in STATIC:
        assert (tmp_path / "docs2" / f"c.{kind}").read_bytes() == (tmp_path / "docs1" / f"c.{kind}").read_bytes()


def test_a_changed_spec_is_drawn_never_served_from_another_entry(tmp_path):
    value, text = spec()
    images(tmp_path / "docs1", tmp_path / "cache", value, text)
    key = cache_key(text)
    (tmp_path / "cache" / key[:2] / f"{key}.svg").write_text("<svg>stale</svg>")   # poison the old entry
    changed, changed_text = spec("Another title")
    assert cache_key(changed_text) != key
    writer = images(tmp_path / "docs2", tmp_path / "cache", changed, changed_text)
    assert (writer.drawn, writer.reused) == (1, 0)
    svg = (tmp_path / "docs2" / "c.svg").read_text()
    assert "stale" not in svg and "Another title" in svg


def test_an_incomplete_entry_is_drawn_again(tmp_path):
    value, text = spec()
    images(tmp_path / "docs1", tmp_path / "cache", value, text)
    key = cache_key(text)
    (tmp_path / "cache" / key[:2] / f"{key}.png").unlink()
    writer = images(tmp_path / "docs2", tmp_path / "cache", value, text)
    assert (writer.drawn, writer.reused) == (1, 0)
    assert (tmp_path / "cache" / key[:2] / f"{key}.png").is_file()
    assert not list((tmp_path / "cache").rglob("*.tmp-*"))     # no scratch file (stages.core.files.scratch) left


def test_without_a_cache_every_chart_is_drawn(tmp_path):
    value, text = spec()
    for docs in ("docs1", "docs2"):
        writer = ChartWriter(tmp_path / docs, book=None, workers=1, static=STATIC)
        writer.static_images(value, text, tmp_path / "c")
        writer.close()
        assert (writer.drawn, writer.reused) == (1, 0)


class Book:
    """The row queries a page's charts run, counted."""

    def __init__(self, rows: list[dict]):
        self.data, self.calls = rows, 0

    def rows(self, name: str, params: dict) -> tuple[str, list[dict]]:
        self.calls += name == "model_points"
        if name == "series_domain":
            return "select 1", [{"run_id": "run-a", "series": "tiny-seqs4", "slot": 0}]
        if name == "workload_order":
            return "select 1", [{"workload": "long", "workload_rank": 0}]
        return "select * from points where model = $model", [dict(r) for r in self.data]


def point_rows(scale: float = 1.0) -> list[dict]:
    return [dict(run_id="run-a", series="tiny-seqs4", workload="long", concurrency=c, sent=2,
                 completed=2, ttft_median_s=scale * c, ttft_p90_s=0.7 * c, decode_tok_s_per_user=50.0,
                 output_tok_s=80.0, capacity_limited=False, provisional=False) for c in (1, 2, 4)]


def write_all(docs: Path, cache: Path, book: Book) -> tuple[ChartWriter, dict[str, bytes]]:
    writer = ChartWriter(docs, book, cache_dir=cache, workers=2, static=STATIC)
    for name in ("ttft_chart", "decode_chart"):
        writer.write("page", name, query="model_points", params={"model": "m"})
    writer.close()
    return writer, {p.name: p.read_bytes() for p in (docs / "assets" / "charts" / "page").iterdir()}


def test_spec_cache_skips_altair_for_the_same_rows_and_redraws_for_new_rows(tmp_path):
    book = Book(point_rows())
    first, files = write_all(tmp_path / "d1", tmp_path / "cache", book)
    assert book.calls == 1                       # the page's charts share one row query
    assert (first.specs_reused, first.drawn) == (0, 2)
    second, again = write_all(tmp_path / "d2", tmp_path / "cache", Book(point_rows()))
    assert (second.specs_reused, second.reused, second.drawn) == (2, 2, 0)
    assert again == files                        # spec, SVG and PNG byte for byte
    third, changed = write_all(tmp_path / "d3", tmp_path / "cache", Book(point_rows(scale=3.0)))
    assert (third.specs_reused, third.drawn) == (0, 1)   # new rows: both specs made again ...
    assert changed["ttft_chart-m.vl.json"] != files["ttft_chart-m.vl.json"]
    # ... and the decode chart, which does not draw the changed median, is the same chart
    assert (third.reused, changed["decode_chart-m.svg"]) == (1, files["decode_chart-m.svg"])


def test_without_static_images_only_the_spec_and_its_rows_are_written_and_the_page_describes_the_chart(tmp_path):
    docs = tmp_path / "docs"
    writer = ChartWriter(docs, Book(point_rows()), cache_dir=tmp_path / "cache", workers=1)
    markup = writer.write("page", "ttft_chart", query="model_points", params={"model": "m"})
    writer.close()
    folder = docs / "assets" / "charts" / "page"
    assert sorted(p.name for p in folder.iterdir()) == ["ttft_chart-m.csv", "ttft_chart-m.vl.json"]
    spec = json.loads((folder / "ttft_chart-m.vl.json").read_text())
    drawn = {(r["run_id"], r["concurrency"]) for r in next(iter(spec["datasets"].values()))}
    csv_rows = list(csv.DictReader((folder / "ttft_chart-m.csv").open()))
    assert {(r["run_id"], int(r["concurrency"])) for r in csv_rows} == drawn   # the rows it draws
    assert writer.drawn == 0 and not (tmp_path / "cache").exists() or not any((tmp_path / "cache").glob("??/*.svg"))
    assert '<p class="chart-fallback">Chart: Time to first token' in markup
    assert ("Download: [Vega-Lite spec](assets/charts/page/ttft_chart-m.vl.json) · "
            "[CSV](assets/charts/page/ttft_chart-m.csv)") in markup
    assert ".svg" not in markup and ".png" not in markup


def test_the_spec_carries_only_the_columns_it_draws_and_draws_the_same_chart(tmp_path):
    rows = [dict(r, unused_note="not drawn " * 5) for r in point_rows()]
    writer = ChartWriter(tmp_path / "docs", Book(rows), cache_dir=tmp_path / "cache", workers=1)
    writer.write("page", "ttft_chart", query="model_points", params={"model": "m"})
    writer.close()
    folder = tmp_path / "docs" / "assets" / "charts" / "page"
    written = json.loads((folder / "ttft_chart-m.vl.json").read_text())
    kept = next(iter(written["datasets"].values()))
    full = writer.spec("ttft_chart", None, pd.DataFrame(rows))     # as the chart function made it
    whole = next(iter(full["datasets"].values()))
    assert "unused_note" in whole[0] and "unused_note" not in kept[0]
    assert len(kept) == len(whole) and {"run_id", "concurrency"} <= set(kept[0])
    assert {**written, "description": None} != {**full, "description": None}
    assert draw(written, "svg") == draw({**full, "description": written["description"]}, "svg")
    csv_rows = list(csv.DictReader((folder / "ttft_chart-m.csv").open()))
    assert csv_rows[0]["unused_note"] == rows[0]["unused_note"]      # the CSV keeps the rows whole


def test_a_static_image_kind_not_known_is_refused(tmp_path):
    with pytest.raises(FactError, match="charts.static_images: unknown gif"):
        ChartWriter(tmp_path, Book(point_rows()), static=("gif",))


def drawn_with(module) -> set[str]:
    """The chart modules of stages/render (chart_*.py and charts*.py, the writer aside) that
    `module` imports."""
    names = set()
    for node in ast.walk(ast.parse(Path(module.__file__).read_text())):
        if isinstance(node, ast.ImportFrom) and node.module == "stages.render":
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("stages.render."):
            names.add(node.module.rpartition(".")[2])
    return {n for n in names if n.startswith("chart") and n != "chart_writer"}


def test_every_module_the_charts_draw_with_keys_the_spec_cache():
    """A cached spec is keyed by the source of chart_writer.chart_modules(): a module the chart
    functions draw with that is not among them could change and the cache serve the old spec."""
    hashed = {module.__name__.rpartition(".")[2] for module in chart_modules()}
    used = set().union(*(drawn_with(module) for module in chart_modules()))
    assert sorted(used - hashed) == [], "not in chart_writer.chart_modules(), so not in the spec cache's key"
