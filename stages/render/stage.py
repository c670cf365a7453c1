"""Render stage: campaign.duckdb + article templates + sources -> mkdocs docs folder -> site.

Each `site/templates/*.md.j2` is one page (front matter in YAML, body in Jinja2; loaded and
rendered by stages/render/pages.py). A page prints numbers only through facts (see
stages/render/facts.py), cites sources as [S1] (stages/render/sources.py), and draws charts by name
(stages/render/charts.py, written out by stages/render/chart_writer.py). A page whose front matter
names a row query under `needs:` is left out of the series (index, navigation, prev/next links)
while that query returns no rows, e.g. the node article before any node was probed.
`compare.md.j2` is not a part: it is the Compare page, which draws the pairs of run sets listed
under params `compare:` (stages/render/compare_page.py). The stage writes the docs folder from
scratch: pages, one audit page per run with an entry per fact (stages/render/audit.py), SOURCES.md, the Warehouse page
(stages/render/warehouse_page.py), CSV downloads of the public tables, chart specs with static SVG
and PNG, the site's own Vega bundle; then runs `mkdocs build --strict`; then data/facts.json.

Docs and site are built into fresh folders beside their targets and renamed into place only when
the whole build succeeded (stages/render/site_build.py). A target is replaced only when it holds
the marker file render writes (MARKER) or is empty: a site or docs path pointed at the runs
refuses, deleting nothing. Every value printed goes through escape.escape_text (redacted; escaped
for HTML and Markdown alike).
"""
from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path
from typing import Any

import duckdb
import jinja2
from markupsafe import Markup

from stages.render import blog, compare_page
from stages.derive import stage as derive
from stages.render import warehouse_page
from stages.core.config import CampaignError
from stages.render.audit import audit_index, audit_pages
from stages.render.chart_writer import ChartWriter
from stages.derive.stage import PUBLIC_TABLES
from stages.render.escape import escape_text
from stages.render.facts import FactBook
from stages.render.pages import (PageSpec, arm_labels, load_page, load_series, page_shown,
                                 render_page, uncovered_runs)
from stages.render.site_build import build_site, check_ours, fresh_dir, mark, site_nav, swap_in
from stages.render.sources import load_sources, sources_page
from stages.core.secrets import redact_text
from stages.core.files import write_atomic
from stages.core.provenance import git_sha

ASSET_FILES = {"charts.js": "assets/javascripts/charts.js",
               "campaign.css": "assets/stylesheets/campaign.css",
               "author.svg": blog.AVATAR}
VEGA_BUNDLE = "assets/javascripts/vega-bundle.js"


# ---------------------------------------------------------------- outputs

def write_csv_downloads(con: duckdb.DuckDBPyConnection, docs_dir: Path) -> list[str]:
    """The public tables as the site's CSV downloads: the same files derive exports."""
    derive.export_csv(con, docs_dir / "downloads", derive.load_schema())
    for table in PUBLIC_TABLES:
        redact_csv(docs_dir / "downloads" / f"{table}.csv")
    return [f"downloads/{table}.csv" for table in PUBLIC_TABLES]


def redact_csv(path: Path) -> None:
    """Rewrite a CSV file with every cell redacted (the site publishes it)."""
    with path.open(newline="") as fh:
        rows = list(csv.reader(fh))
    redacted = [[redact_text(cell) for cell in row] for row in rows]
    if redacted != rows:
        with path.open("w", newline="") as fh:
            csv.writer(fh, lineterminator="\n").writerows(redacted)


def write_assets(assets_dir: Path, docs_dir: Path, cache_dir: Path | None = None) -> bool:
    """Copy the site's own scripts and styles; write the Vega bundle (kept in `cache_dir` per
    vl-convert version: making it takes seconds). True when interactive."""
    for src, dest in ASSET_FILES.items():
        target = docs_dir / dest
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(assets_dir / src, target)
    bundle = docs_dir / VEGA_BUNDLE
    import vl_convert as vlc

    if not hasattr(vlc, "javascript_bundle"):
        bundle.write_text("/* vl-convert has no javascript_bundle(): charts stay static SVG. */\n")
        return False
    kept = Path(cache_dir) / f"vega-bundle-{getattr(vlc, '__version__', 'unknown')}.js" if cache_dir else None
    if kept is not None and kept.is_file():
        shutil.copyfile(kept, bundle)
        return True
    # A function scope keeps the bundle's top-level names private; it sets window.vegaEmbed.
    bundle.write_text("(function () {\n" + vlc.javascript_bundle() + "\n})();\n")
    if kept is not None:
        write_atomic(kept, bundle.read_bytes())
    return True


# ---------------------------------------------------------------- entry point

def _print(value: Any) -> Markup:
    """What a template prints without a macro is data text: redacted and escaped like it."""
    return value if isinstance(value, Markup) else Markup(escape_text(value))


def write_docs(docs_dir: Path, *, campaign_db: Path, templates_dir: Path, sources: dict,
               index: PageSpec | None, parts: list[PageSpec], compare_spec: PageSpec | None,
               runs_dir: Path, root: Path, nodes_dir: Path | None, compare: list[dict] | None,
               run_sets: dict | None, warehouse_file: Path, notices: list[str],
               diff_settings: dict | None = None, arms: dict | None = None, chart_cache: Path | None = None,
               static_images: tuple[str, ...] = ()):
    """The docs folder's content, written into the (empty) folder `docs_dir`. A Part left out
    (nothing to show) adds its one-line reason to `notices`."""
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(templates_dir)), autoescape=True,
                             undefined=jinja2.StrictUndefined, keep_trailing_newline=True,
                             trim_blocks=True, lstrip_blocks=True, finalize=_print)
    con = duckdb.connect(str(campaign_db), read_only=True)
    try:
        book = FactBook(con, root=root, sha=git_sha(root), raw_dirs=(runs_dir, nodes_dir))
        shown = []
        for part in parts:
            reason = page_shown(part, book)
            if reason is None:
                shown.append(part)
            else:
                notices.append(reason)
        parts = shown
        uncovered = uncovered_runs(book, parts)
        if uncovered:
            notices.append(uncovered)
        writer = ChartWriter(docs_dir, book, cache_dir=chart_cache, static=tuple(static_images))
        kwargs = dict(env=env, book=book, parts=parts, writer=writer, sources=sources,
                      runs_dir=runs_dir, root=root, nodes_dir=nodes_dir, arms=arm_labels(arms))
        rendered = [render_page(p, **kwargs) for p in parts]
        if index is not None:
            rendered.insert(0, render_page(index, **kwargs))
        if compare_spec is not None:
            comparisons = compare_page.resolve_pairs(compare or [], con=con, run_sets=run_sets,
                                                     diff_settings=diff_settings)
            rendered.append(render_page(
                compare_spec, **kwargs,
                extra_globals=lambda macros: compare_page.page_globals(macros, comparisons)))
        writer.close()
        for page in rendered:
            (docs_dir / page.name).parent.mkdir(parents=True, exist_ok=True)
            (docs_dir / page.name).write_text(page.text)
        (docs_dir / "SOURCES.md").write_text(sources_page(sources, rendered))
        titles = {p.name: str(p.meta.get("title", p.name)) for p in rendered}
        facts = sorted(book.facts.values(), key=lambda f: f.id)
        audit = docs_dir / "audit"
        audit.mkdir()
        inferred: dict[str, list[dict]] = {}
        for row in book.rows("run_inferred_rows", {})[1]:
            inferred.setdefault(row["run_id"], []).append(row)
        for page, text in audit_pages(facts, runs_dir=runs_dir, root=root, titles=titles,
                                      inferred=inferred).items():
            (audit / f"{page}.html").write_text(text)
        (audit / "index.html").write_text(audit_index(facts, titles))
        downloads = write_csv_downloads(con, docs_dir)
        (docs_dir / warehouse_page.PAGE_NAME).write_text(warehouse_page.build(
            con=con, descriptions_file=warehouse_file,
            downloads={Path(d).stem: d for d in downloads}))
    finally:
        con.close()
    interactive = write_assets(templates_dir.parent / "assets", docs_dir, chart_cache)
    return rendered, facts, downloads, interactive, book, writer


def run(*, campaign_db: Path, docs_dir: Path, site_dir: Path, facts_file: Path, runs_dir: Path,
        root: Path, build: bool = True, templates_dir: Path | None = None,
        sources_file: Path | None = None, mkdocs_config: Path | None = None,
        warehouse_file: Path | None = None, nodes_dir: Path | None = None,
        compare: list[dict] | None = None, run_sets: dict | None = None,
        diff_settings: dict | None = None, series_file: Path | None = None, arms: dict | None = None,
        chart_cache: Path | None = None, static_images: tuple[str, ...] = ()) -> dict[str, Any]:
    """Render the article series from campaign.duckdb and (when build) build the site.
    `nodes_dir` holds the node probe folders that node evidence blocks read. `compare` is
    params.yaml's list of {base, head, title} pairs for the Compare page; `run_sets` the run sets
    a side may name (stages/render/compare_page.py); `diff_settings` params.yaml's `diff:` block,
    how the page tells a change from noise (stages/render/diff_stats.py). `static_images`: the kinds of static image
    (svg, png) drawn of each chart besides its spec; `chart_cache` keeps them between renders
    (stages/render/chart_writer.py).

    Example: run(campaign_db=p.campaign_db, docs_dir=p.docs, site_dir=p.site,
                 facts_file=p.facts, runs_dir=p.runs, root=p.root, nodes_dir=p.nodes)
    """
    root = Path(root)
    templates_dir = templates_dir or root / "site" / "templates"
    sources_file = sources_file or root / "site" / "sources.yaml"
    mkdocs_config = mkdocs_config or root / "mkdocs.yml"
    warehouse_file = warehouse_file or templates_dir.parent / "warehouse.yaml"
    series_file = series_file or templates_dir.parent / "series.yaml"
    if not Path(campaign_db).is_file():
        raise CampaignError(f"{campaign_db}: not found (run the derive stage first)")
    sources = load_sources(sources_file)
    index, parts, authors = load_series(series_file, templates_dir, run_sets)
    notices: list[str] = []
    compare_spec = load_page(templates_dir / compare_page.TEMPLATE)
    docs_dir, site_dir = Path(docs_dir), Path(site_dir)
    for target in (docs_dir, site_dir) if build else (docs_dir,):
        check_ours(target)
    if build and (docs_dir.resolve().is_relative_to(site_dir.resolve())
                  or site_dir.resolve().is_relative_to(docs_dir.resolve())):
        raise CampaignError(f"{site_dir}: the site and docs folders must not hold one another")
    docs_tmp, site_tmp = fresh_dir(docs_dir), None
    try:
        rendered, facts, downloads, interactive, book, writer = write_docs(
            docs_tmp, campaign_db=campaign_db, templates_dir=templates_dir, sources=sources,
            index=index, parts=parts, compare_spec=compare_spec, runs_dir=runs_dir, root=root,
            nodes_dir=nodes_dir, compare=compare, run_sets=run_sets, diff_settings=diff_settings,
            warehouse_file=warehouse_file,
            notices=notices, arms=arms, chart_cache=chart_cache,
            static_images=static_images)
        nav = site_nav([p.name for p in rendered] + ["SOURCES.md", warehouse_page.PAGE_NAME], mkdocs_config)
        # The Parts are the blog's posts (written under posts/); the plugin reads their authors here.
        (docs_tmp / blog.AUTHORS_FILE).write_text(blog.authors_file(authors))
        if build:
            site_tmp = fresh_dir(site_dir)
            build_site(mkdocs_config, docs_tmp, site_tmp, nav)
            mark(site_tmp)   # mkdocs --clean emptied the fresh folder
        swap_in(docs_tmp, docs_dir)
        docs_tmp = None
        if site_tmp is not None:
            swap_in(site_tmp, site_dir)
            site_tmp = None
    finally:
        for tmp in (docs_tmp, site_tmp):
            if tmp is not None and tmp.exists():
                shutil.rmtree(tmp)
    write_atomic(facts_file, json.dumps(book.records(), indent=1, default=str) + "\n")
    site_index = site_dir / "index.html" if build else None
    return {
        "pages": [p.name for p in rendered] + ["SOURCES.md", warehouse_page.PAGE_NAME],
        "facts": len(facts),
        "charts": [c for p in rendered for c in p.charts],
        "charts_drawn": writer.drawn,
        "charts_reused": writer.reused,
        "chart_specs_reused": writer.specs_reused,
        "downloads": downloads,
        "interactive_charts": interactive,
        "facts_file": str(facts_file),
        "site_index": str(site_index) if site_index else None,
        "notices": notices,
    }
