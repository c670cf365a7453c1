"""Chart files: each chart a page draws, as its Vega-Lite spec, and (when asked) static SVG and PNG.

The browser draws every chart from its spec (vega-embed, whose menu also saves it as SVG or PNG).
Static images (params.yaml `charts.static_images`) are for readers without script and for slides;
at about 0.2 s an image they cost more than the rest of a large campaign's render. They are drawn
in a pool of threads (vl_convert releases the GIL) and kept in a chart cache keyed by the hash of the spec they were drawn from: a render whose chart data did not change
copies them from there instead of drawing them again. The spec itself is cached under the hash of
what makes it (the chart functions' source, Altair's version, the chart's name, rows and series
domain). An entry is written whole (temporary file, then rename), so a cache entry is either
complete or absent, and it is never stale: different inputs are a different key.
"""
from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import shutil
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pandas as pd

from stages.render.errors import FactError
from stages.render.escape import escape_cell
from stages.render.facts import FactBook
from stages.render.queries import sql_params
from stages.render.timing import Phases
from stages.core.params_check import STATIC_IMAGES as STATIC
from stages.core.faults import naming
from stages.core import code
from stages.core.files import write_atomic, write_file
from stages.core.provenance import digest
from stages.core.secrets import redact_value

PNG_SCALE = 2  # pixels per chart unit: sharp on high-density screens and in slides
@functools.lru_cache(maxsize=1)
def chart_modules() -> tuple[Any, ...]:
    """The chart functions: charts.py and the modules that register charts beside it or hold what
    they draw with. Imported when a chart is first made, so that a render whose pages all come
    from the page cache does not load Altair."""
    from stages.render import (chart_notes, chart_parts, charts, charts_metrics, charts_node,
                               charts_pareto, charts_prefill, charts_ramp, charts_requests,
                               charts_timeline)
    return (charts, charts_requests, charts_metrics, charts_node, charts_pareto, charts_prefill,
            charts_ramp, charts_timeline, chart_notes, chart_parts)


def chart_lib() -> Any:
    """charts.py, every chart registered."""
    return chart_modules()[0]


def _redacted(df: pd.DataFrame) -> pd.DataFrame:
    """Chart rows with their text redacted (labels and tooltips print it): each distinct text of
    a column once (a run id repeats on every point of the run), the column rewritten only where
    one changed."""
    for column in df.columns:
        if df[column].dtype.kind not in "biufcmM":   # not numbers, times or booleans
            texts = {v for v in df[column] if isinstance(v, str)}
            changed = {v: r for v, r in ((v, redact_value(v)) for v in texts) if r != v}
            if changed:
                df[column] = df[column].map(lambda v: changed.get(v, v) if isinstance(v, str) else v)
    return df


def file_suffix(params: dict[str, Any]) -> str:
    """What tells a chart's files apart: its scalar parameters, and a digest of its lists (a
    Part's run ids)."""
    parts = []
    for key, value in sorted(params.items()):
        if isinstance(value, (list, tuple)):
            short = hashlib.sha1(json.dumps([str(v) for v in value]).encode()).hexdigest()[:8]
            parts.append(f"-{short}")
        else:
            parts.append(f"-{re.sub(r'[^A-Za-z0-9_.-]', '-', str(value))}")
    return "".join(parts)


def describe(fn: Any, spec: dict[str, Any]) -> tuple[str, str]:
    """A chart's accessible name (its title) and description (title, what the chart function
    draws, the notes under the title), for screen readers and the static image's alt text."""
    title = spec.get("title") or {}
    name = " ".join(_lines(title.get("text") if isinstance(title, dict) else title)) or fn.__name__
    notes = _lines(title.get("subtitle")) if isinstance(title, dict) else []
    doc = " ".join((fn.__doc__ or "").strip().split("\n\n")[0].split())
    return name, " ".join(part for part in [f"Chart: {name}.", doc, *notes] if part)


def _lines(text: Any) -> list[str]:
    return [str(t) for t in text] if isinstance(text, list) else [str(text)] if text else []


def cache_key(spec_json: str) -> str:
    """The cache key of a spec's static images: the spec, the renderer's version and the scale."""
    import vl_convert as vlc

    return digest(getattr(vlc, '__version__', ''), PNG_SCALE, spec_json)


def _code_version() -> str:
    """What a chart's spec depends on besides its rows: the chart functions' code (charts.py, each
    module that registers charts beside it, and what they import: stages.core.code) and Altair."""
    return code.code_version(tuple(module.__name__ for module in chart_modules()), ("altair",))


def spec_key(name: str, df: pd.DataFrame, domain: list[str]) -> str:
    """The cache key of a chart's spec: the chart, its rows, the series domain, the code."""
    rows = df.to_json(orient="split", date_format="iso", default_handler=str)
    return digest(_code_version(), name, domain, rows)


def without_unused_columns(spec: dict[str, Any]) -> dict[str, Any]:
    """The spec with each dataset row keeping only the columns the spec names outside its data
    (an encoding's field, a tooltip, a transform's expression): what the chart draws, unchanged.
    A column whose name appears anywhere in the spec's text is kept, so nothing drawn is lost; the
    columns left out are still in the chart's CSV, which keeps its rows whole."""
    datasets = spec.get("datasets")
    if not datasets:
        return spec
    text = json.dumps({k: v for k, v in spec.items() if k != "datasets"}, default=str, ensure_ascii=False)
    trimmed = {}
    for name, rows in datasets.items():
        columns = set().union(*rows) if isinstance(rows, list) else set()
        unused = {c for c in columns if c not in text}
        trimmed[name] = [{c: v for c, v in row.items() if c not in unused} for row in rows] \
            if unused else rows
    return {**spec, "datasets": trimmed}


def draw(spec: dict[str, Any], kind: str) -> bytes:
    """A spec drawn as SVG or PNG."""
    import vl_convert as vlc

    if kind == "svg":
        return vlc.vegalite_to_svg(spec).encode()
    return vlc.vegalite_to_png(spec, scale=PNG_SCALE)


class ChartWriter:
    """Writes a chart's Vega-Lite spec, and its static images of the kinds in `static` (of
    STATIC), under assets/charts/<page>/. `cache_dir` (optional) keeps the static images between
    renders; `workers` threads draw them. Call close() once every chart is written: it waits for
    the drawings."""

    def __init__(self, docs_dir: Path, book: FactBook, cache_dir: Path | None = None,
                 workers: int | None = None, static: tuple[str, ...] = ()):
        unknown = [kind for kind in static if kind not in STATIC]
        if unknown:
            raise FactError(f"charts.static_images: unknown {', '.join(map(str, unknown))} "
                            f"(known: {', '.join(STATIC)})")
        self.static = tuple(kind for kind in STATIC if kind in static)
        self.docs_dir = docs_dir
        self.book = book
        self.phases = getattr(book, "phases", None) or Phases()   # where the time goes (timing.py)
        self.cache_dir = Path(cache_dir) if cache_dir else None
        self._points: dict[str, pd.DataFrame] = {}
        self._rows: dict[str, tuple[str, pd.DataFrame]] = {}   # a page's charts share their rows
        self._domain: list[str] | None = None
        self._run_series: dict[str, str] | None = None
        self._ranks: dict[str, int] | None = None
        self._pool = ThreadPoolExecutor(max_workers=workers or os.cpu_count() or 1)
        self._pending: list[Future] = []
        self.written: list[str] = []
        # a page's charts as its previous render made them: set around one page's render
        # (page_loop.py), a call the same as one of the previous render's, on the same data and
        # code (`base`, the render's base key), gives its markup and files again
        self.base = ""
        self.recall: tuple[dict[str, tuple[str, str | None]], dict[str, bytes]] | None = None
        self.calls: dict[str, tuple[str, str | None]] = {}   # this page's: key -> (markup, files' path)
        self.drawn = 0      # charts whose images were drawn in this render
        self.reused = 0     # charts whose images came from the cache
        self.specs_reused = 0   # charts whose spec came from the cache (Altair not run)

    def close(self) -> None:
        """Wait for every drawing; the first failure is raised."""
        try:
            for job in self._pending:
                job.result()
        finally:
            self._pending = []
            self._pool.shutdown(wait=True, cancel_futures=True)

    def static_images(self, spec: dict[str, Any], spec_json: str, out: Path) -> None:
        """The static images of `spec` (out.svg, out.png): from the cache or drawn."""
        targets = {kind: out.parent / f"{out.name}.{kind}" for kind in self.static}
        entry = None
        if self.cache_dir is not None:
            key = cache_key(spec_json)
            entry = {kind: self.cache_dir / key[:2] / f"{key}.{kind}" for kind in self.static}
            if all(path.is_file() for path in entry.values()):
                for kind in self.static:
                    shutil.copyfile(entry[kind], targets[kind])
                self.reused += 1
                return
        self.drawn += 1
        self._pending.append(self._pool.submit(self._draw, spec, targets, entry))

    @staticmethod
    def _draw(spec: dict[str, Any], targets: dict[str, Path], entry: dict[str, Path] | None) -> None:
        for kind in targets:
            data = draw(spec, kind)
            write_file(targets[kind], data)
            if entry is not None:
                write_atomic(entry[kind], data)

    def points(self, profile: str) -> pd.DataFrame:
        if profile not in self._points:
            _, rows = self.book.rows("chart_points", {"profile": profile})
            self._points[profile] = self._with_series(_redacted(pd.DataFrame(rows)))
        return self._points[profile]

    def _series(self) -> dict[str, str]:
        """Each run's series (row query series_domain): its spec, with its image where the spec
        ran under two; read once a render."""
        if self._run_series is None:
            _, rows = self.book.rows("series_domain", {})
            self._run_series = {r["run_id"]: redact_value(r["series"]) for r in rows}
            self._domain = list(dict.fromkeys(redact_value(r["series"])
                                              for r in sorted(rows, key=lambda r: r["slot"])))
        return self._run_series

    def domain(self) -> list[str]:
        """The campaign's series in palette order (their place is their colour on every page)."""
        self._series()
        return self._domain

    def _workload_ranks(self) -> dict[str, int]:
        """Each workload's place in prompt-length order (row query workload_order), read once."""
        if self._ranks is None:
            _, rows = self.book.rows("workload_order", {})
            self._ranks = {r["workload"]: int(r["workload_rank"]) for r in rows}
        return self._ranks

    def _with_series(self, df: pd.DataFrame) -> pd.DataFrame:
        """Rows with `series` set from their run, so that every chart names and colours a run
        alike (rows of no run, a node's probes, are as they were), and with `workload_rank`, the
        campaign's order of workloads, so that every chart's panels follow it."""
        if "run_id" in df.columns and not df.empty:
            named = df["run_id"].map(self._series())
            df["series"] = named.fillna(df["series"]) if "series" in df.columns else named
        if "workload" in df.columns and not df.empty:
            ranks = self._workload_ranks()
            df["workload_rank"] = df["workload"].map(ranks).fillna(len(ranks)).astype(int)
        return df

    def query_rows(self, query: str, params: dict[str, Any], scaling: bool = False
                   ) -> tuple[str, pd.DataFrame]:
        """A row query's SQL and redacted rows, run once per set of params; `scaling`: as the
        scaling charts prepare them (charts.prepare), also once."""
        key = json.dumps([query, sorted(params.items()), scaling], default=str)
        if key not in self._rows:
            if scaling:
                sql, df = self.query_rows(query, params)
                self._rows[key] = sql, chart_lib().prepare(df) if not df.empty else df
            else:
                sql, rows = self.book.rows(query, params)
                self._rows[key] = sql, self._with_series(_redacted(pd.DataFrame(rows)))
        sql, df = self._rows[key]
        return sql, df.copy()

    def spec(self, name: str, fn: Any, df: pd.DataFrame) -> dict[str, Any]:
        """The chart's Vega-Lite spec: from the cache when the same code drew the same rows."""
        path = None
        if self.cache_dir is not None:
            key = spec_key(name, df, self.domain())
            path = self.cache_dir / "specs" / key[:2] / f"{key}.json"
            if path.is_file():
                self.specs_reused += 1
                return json.loads(path.read_text())
        spec = chart_lib().spec(name, df.copy(), self.domain())   # checked in tests/test_charts.py
        if path is not None:
            text = json.dumps(spec, default=str)
            spec = json.loads(text)   # as it is read back on a hit
            write_atomic(path, text)
        return spec

    def write(self, page_stem: str, name: str, profile: str | None = None,
              params: dict[str, Any] | None = None, query: str | None = None) -> str:
        """A chart's files, and the Markdown that shows it (see _write), timed as `charts`; the
        previous render's, where this page made the same call then (`recall`)."""
        with self.phases("charts"):
            key = digest(self.base, page_stem, name, profile, params, query)
            made = self._recalled(key)
            if made is None:
                before = len(self.written)
                markup = self._write(page_stem, name, profile, params, query)
                made = markup, self.written[-1] if len(self.written) > before else None
            self.calls[key] = made
            return made[0]

    def _recalled(self, key: str) -> tuple[str, str | None] | None:
        """The markup of call `key` as the page's previous render made it, its files written
        again from there; None when it made no such call (or its files are not at hand)."""
        if self.recall is None or key not in self.recall[0]:
            return None
        markup, rel = self.recall[0][key]
        if rel is not None:
            files = {r: data for r, data in self.recall[1].items() if r.startswith(f"{rel}.")}
            if not files:
                return None
            for r, data in files.items():
                (self.docs_dir / r).parent.mkdir(parents=True, exist_ok=True)
                write_file(self.docs_dir / r, data)
            self.written.append(rel)
            self.specs_reused += 1
            self.reused += 1 if self.static else 0
        return markup, rel

    def _write(self, page_stem: str, name: str, profile: str | None = None,
               params: dict[str, Any] | None = None, query: str | None = None) -> str:
        """A chart of the bench points of `profile`; or of the rows of its row query (charts
        listed in charts.CHART_ROWS, or any bench-point chart given `query`, e.g. one model's
        points) bound with `params`. Each set of params gets its own files."""
        try:
            fn = chart_lib().chart_by_name(name)
        except KeyError as exc:
            raise FactError(str(exc.args[0])) from None
        params = dict(params or {})
        query = query or chart_lib().CHART_ROWS.get(name)
        if query:
            if profile:
                params.setdefault("profile", profile)
            sql, df = self.query_rows(query, params, scaling=name in chart_lib().LAYOUTS)
            params = {k: v for k, v in params.items() if k in sql_params(sql)}   # names the files
            if df.empty:
                return "*No measurements for this chart yet.*"
        else:
            if not profile:
                raise FactError(f"chart {name!r}: no profile (front matter `profile:` or argument)")
            df = self.points(profile)
            if df.empty:
                return "*No benchmark points for this profile yet.*"
        spec = self.spec(name, fn, df)
        title, description = describe(fn, spec)
        spec["description"] = description
        suffix = file_suffix(params)
        rel = f"assets/charts/{page_stem}/{name}{suffix}"
        out = self.docs_dir / rel
        out.parent.mkdir(parents=True, exist_ok=True)
        drawn = list((spec.get("datasets") or {}).values())   # the rows as the chart draws them
        rows_file = out.parent / f"{out.name}.csv"
        with naming(rows_file):
            (pd.DataFrame(drawn[0]) if len(drawn) == 1 else df).to_csv(rows_file, index=False)
        spec = without_unused_columns(spec)
        spec_json = json.dumps(spec, separators=(",", ":"), default=str)
        write_file(out.parent / f"{out.name}.vl.json", spec_json)
        if self.static:
            self.static_images(spec, spec_json, out)
        self.written.append(rel)
        element = re.sub(r"[^A-Za-z0-9-]", "-", f"spec-{page_stem}-{name}{suffix}")
        inline = spec_json.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
        label, alt_text = escape_cell(title, redact=False), escape_cell(description, redact=False)
        # without script: the static image where one is drawn, else the chart's description
        fallback = f"![{alt_text}]({rel}.svg)" if "svg" in self.static else \
            f'<p class="chart-fallback">{alt_text}</p>'
        downloads = [f"[{kind.upper()}]({rel}.{kind})" for kind in self.static]
        return "\n".join([
            f'<div class="vega-chart" data-spec="{element}" role="figure" aria-label="{label}" markdown>',
            "", fallback, "", "</div>", "",
            f'<script type="application/json" id="{element}">{inline}</script>', "",
            f'<p class="chart-downloads" markdown>Download: '
            f"{' · '.join(downloads + [f'[Vega-Lite spec]({rel}.vl.json)', f'[CSV]({rel}.csv)'])}</p>",
        ])
