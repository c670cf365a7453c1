"""Chart files: each chart a page draws, as its Vega-Lite spec, static SVG and PNG."""
from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

import pandas as pd

from stages.render import charts as chart_lib
from stages.render.errors import FactError
from stages.render.escape import escape_cell
from stages.render.facts import FactBook
from stages.render.queries import sql_params
from stages.core.secrets import redact_value

PNG_SCALE = 2  # pixels per chart unit: sharp on high-density screens and in slides


def _redacted(df: pd.DataFrame) -> pd.DataFrame:
    """Chart rows with their text redacted (labels and tooltips print it)."""
    for column in df.columns:
        if df[column].dtype.kind not in "biufcmM":   # not numbers, times or booleans
            df[column] = df[column].map(redact_value)
    return df


def file_suffix(params: dict[str, Any]) -> str:
    """What tells a chart's files apart: its scalar parameters, and a digest of its lists (a
    Part's run ids)."""
    parts = []
    for key, value in sorted(params.items()):
        if isinstance(value, (list, tuple)):
            digest = hashlib.sha1(json.dumps([str(v) for v in value]).encode()).hexdigest()[:8]
            parts.append(f"-{digest}")
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


class ChartWriter:
    """Writes a chart's Vega-Lite spec, static SVG and PNG under assets/charts/<page>/."""

    def __init__(self, docs_dir: Path, book: FactBook):
        self.docs_dir = docs_dir
        self.book = book
        self._points: dict[str, pd.DataFrame] = {}
        self._domain: list[str] | None = None
        self.written: list[str] = []

    def points(self, profile: str) -> pd.DataFrame:
        if profile not in self._points:
            _, rows = self.book.rows("chart_points", {"profile": profile})
            self._points[profile] = _redacted(pd.DataFrame(rows))
        return self._points[profile]

    def domain(self) -> list[str]:
        if self._domain is None:
            _, rows = self.book.rows("series_domain", {})
            self._domain = [r["spec"] for r in rows]
        return self._domain

    def write(self, page_stem: str, name: str, profile: str | None = None,
              params: dict[str, Any] | None = None, query: str | None = None) -> str:
        """A chart of the bench points of `profile`; or of the rows of its row query (charts
        listed in charts.CHART_ROWS, or any bench-point chart given `query`, e.g. one model's
        points) bound with `params`. Each set of params gets its own files."""
        try:
            fn = chart_lib.chart_by_name(name)
        except KeyError as exc:
            raise FactError(str(exc.args[0])) from None
        params = dict(params or {})
        query = query or chart_lib.CHART_ROWS.get(name)
        if query:
            if profile:
                params.setdefault("profile", profile)
            sql, rows = self.book.rows(query, params)
            params = {k: v for k, v in params.items() if k in sql_params(sql)}   # names the files
            df = _redacted(pd.DataFrame(rows))
            if df.empty:
                return "*No measurements for this chart yet.*"
            chart = fn(df, self.domain())
        else:
            if not profile:
                raise FactError(f"chart {name!r}: no profile (front matter `profile:` or argument)")
            df = self.points(profile)
            if df.empty:
                return "*No benchmark points for this profile yet.*"
            chart = fn(df, self.domain())
        spec = chart.to_dict()
        title, description = describe(fn, spec)
        spec["description"] = description
        suffix = file_suffix(params)
        import vl_convert as vlc

        rel = f"assets/charts/{page_stem}/{name}{suffix}"
        out = self.docs_dir / rel
        out.parent.mkdir(parents=True, exist_ok=True)
        spec_json = json.dumps(spec, separators=(",", ":"), default=str)
        (out.parent / f"{out.name}.vl.json").write_text(spec_json)
        (out.parent / f"{out.name}.svg").write_text(vlc.vegalite_to_svg(spec))
        (out.parent / f"{out.name}.png").write_bytes(vlc.vegalite_to_png(spec, scale=PNG_SCALE))
        self.written.append(rel)
        element = re.sub(r"[^A-Za-z0-9-]", "-", f"spec-{page_stem}-{name}{suffix}")
        inline = spec_json.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
        label, alt_text = escape_cell(title, redact=False), escape_cell(description, redact=False)
        return "\n".join([
            f'<div class="vega-chart" data-spec="{element}" role="figure" aria-label="{label}" markdown>',
            "", f"![{alt_text}]({rel}.svg)", "", "</div>", "",
            f'<script type="application/json" id="{element}">{inline}</script>', "",
            f'<p class="chart-downloads" markdown>Download: [SVG]({rel}.svg) · [PNG]({rel}.png) · '
            f"[Vega-Lite spec]({rel}.vl.json)</p>",
        ])
