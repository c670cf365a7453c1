"""Render stage: campaign.duckdb + article templates + sources -> mkdocs docs folder -> site.

Each `site/templates/*.md.j2` is one page (front matter in YAML, body in Jinja2; loaded and
rendered by stages/render/pages.py). A page prints numbers only through facts (see
stages/render/facts.py), cites sources as [S1] (stages/render/sources.py), and draws charts by name
(stages/render/charts.py, written out by stages/render/chart_writer.py). A page whose front matter
names a row query under `needs:` is left out of the series (index, navigation, prev/next links)
while that query returns no rows, e.g. the node article before any node was probed.
`compare.md.j2` is not a part: it is the Compare page, which draws the comparisons the runs hold
(a setup under two images, a spec and its follow-up) and the pairs of run sets listed under params
`compare:` (stages/render/compare_page.py); a Part links its own with `compare_link`. The stage writes the docs folder from
scratch: pages, one audit page per run with an entry per fact (stages/render/audit.py), SOURCES.md, the Warehouse page
(stages/render/warehouse_page.py), CSV downloads of the public tables (derive's exports, copied
and redacted), chart specs with static SVG
and PNG, the site's own Vega bundle; then runs `mkdocs build --strict`; then data/facts.json.

Docs and site are built into fresh folders beside their targets and renamed into place only when
the whole build succeeded (stages/render/site_build.py). A target is replaced only when it holds
the marker file render writes (MARKER) or is empty: a site or docs path pointed at the runs
refuses, deleting nothing. Every value printed goes through escape.escape_text (redacted; escaped
for HTML and Markdown alike).
"""
from __future__ import annotations

import contextlib
import functools
import gc
import json
import shutil
from pathlib import Path
from typing import Any, Callable, TypeVar

import duckdb
import jinja2
from markupsafe import Markup

from stages.render import blog, compare_page, compare_pairs
from stages.render import warehouse_page
from stages.render.downloads import write_csv_downloads
from stages.core.config import CampaignError
from stages.render.chart_writer import ChartWriter
from stages.render.escape import escape_text
from stages.render.facts import FactBook
from stages.core.provenance import digest, file_digest
from stages.render.incremental import (DocsWriter, PageCache, code_version,
                                       template_digests)
from stages.render.query_memo import QueryMemo
from stages.render.page_loop import render_series, write_audit
from stages.render.quotes import QUOTES_FILE
from stages.render.pages import (PageSpec, arm_labels, load_page, load_series, page_shown,
                                 uncovered_runs)
from stages.render.site_build import build_site, check_ours, fresh_dir, mark, site_nav, swap_in
from stages.render.timing import Phases
from stages.render.sources import load_sources, sources_page
from stages.core.files import paths_fingerprint, user_cache, write_atomic, write_file
from stages.core.provenance import git_sha

ASSET_FILES = {"charts.js": "assets/javascripts/charts.js",
               "campaign.css": "assets/stylesheets/campaign.css",
               "author.svg": blog.AVATAR}
VEGA_BUNDLE = "assets/javascripts/vega-bundle.js"


# ---------------------------------------------------------------- outputs

def write_assets(assets_dir: Path, out: DocsWriter) -> bool:
    """Copy the site's own scripts and styles; write the Vega bundle (kept per vl-convert version
    in the user's cache, files.user_cache, which every project on the machine reads: making it
    takes seconds; a cache that cannot be written is not kept). True when interactive."""
    for src, dest in ASSET_FILES.items():
        out.put_content(dest, (assets_dir / src).read_bytes())
    import vl_convert as vlc

    if not hasattr(vlc, "javascript_bundle"):
        out.put_content(VEGA_BUNDLE, "/* vl-convert has no javascript_bundle(): charts stay static SVG. */\n")
        return False
    kept = user_cache(f"vega-bundle-{getattr(vlc, '__version__', 'unknown')}.js")
    if kept.is_file():
        out.put_content(VEGA_BUNDLE, kept.read_bytes())
        return True
    # A function scope keeps the bundle's top-level names private; it sets window.vegaEmbed.
    bundle = ("(function () {\n" + vlc.javascript_bundle() + "\n})();\n").encode()
    out.put_content(VEGA_BUNDLE, bundle)
    with contextlib.suppress(OSError):
        kept.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(kept, bundle)
    return True


FACTS_KEY = "facts-key.json"   # in the cache folder: the key of the facts file last written


def write_facts(facts_file: Path, book: FactBook, key: str, cache_dir: Path | None) -> None:
    """data/facts.json (a JSON array, one fact a line), unless the one there was written from the
    same facts on the same pages."""
    kept = Path(cache_dir) / FACTS_KEY if cache_dir else None
    try:
        same = kept is not None and json.loads(kept.read_text()) == [key, facts_file.stat().st_size]
    except (OSError, ValueError):
        same = False
    if same:
        return
    # a JSON array, one fact a line: greppable by fact id, and written by json's C encoder (an
    # indented dump takes its pure-Python path: seconds at campaign scale)
    lines = ",\n".join(json.dumps(record, default=str) for record in book.records())
    write_atomic(facts_file, f"[\n{lines}\n]\n" if lines else "[]\n")
    if kept is not None:
        write_atomic(kept, json.dumps([key, facts_file.stat().st_size]))


# ---------------------------------------------------------------- entry point

def _print(value: Any) -> Markup:
    """What a template prints without a macro is data text: redacted and escaped like it."""
    return value if isinstance(value, Markup) else Markup(escape_text(value))


def write_docs(docs_dir: Path, *, campaign_db: Path, derived_dir: Path, templates_dir: Path, sources: dict,
               index: PageSpec | None, parts: list[PageSpec], compare_spec: PageSpec | None,
               runs_dir: Path, root: Path, nodes_dir: Path | None, compare: list[dict] | None,
               run_sets: dict | None, warehouse_file: Path, notices: list[str],
               diff_settings: dict | None = None, arms: dict | None = None, chart_cache: Path | None = None,
               static_images: tuple[str, ...] = (), phases: Phases | None = None,
               old_docs: Path, settings: Any = None, kept_pages: dict | None = None):
    """The docs folder's content, written into the (empty) folder `docs_dir`; a file unchanged
    since the render that wrote `old_docs` is linked from there (stages/render/incremental.py). A
    Part left out (nothing to show) adds its one-line reason to `notices`. `settings`: what else
    the pages depend on (params), for their keys. `kept_pages`: rendered pages a long-running
    caller (the preview) holds in memory between renders (incremental.PageCache)."""
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(templates_dir)), autoescape=True,
                             undefined=jinja2.StrictUndefined, keep_trailing_newline=True,
                             trim_blocks=True, lstrip_blocks=True, finalize=_print)
    phases = phases or Phases()
    con = duckdb.connect(str(campaign_db), read_only=True)
    try:
        sha = git_sha(root)
        with phases("keys"):
            db_key = digest(code_version(), file_digest(campaign_db))
        book = FactBook(con, root=root, sha=sha, raw_dirs=(runs_dir, nodes_dir), phases=phases,
                        memo=QueryMemo(chart_cache, db_key))
        shown = []
        with phases("series"):
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
        with phases("keys"):
            base = digest(db_key, sha, paths_fingerprint((runs_dir, nodes_dir)),
                          file_digest(warehouse_file), file_digest(QUOTES_FILE), sources,
                          settings, static_images,
                          [_rel(p, root) for p in (runs_dir, nodes_dir, root) if p is not None])
            references = [p.reference for p in parts if p.reference is not None]
            pages = [p for p in (*parts, *references, index, compare_spec) if p is not None]
            cache = PageCache(chart_cache, base, template_digests(templates_dir),
                              {p.template.relative_to(templates_dir).as_posix() for p in pages},
                              kept=kept_pages)
            out = DocsWriter(docs_dir, old_docs, chart_cache)
        writer = ChartWriter(docs_dir, book, cache_dir=chart_cache, static=tuple(static_images))
        writer.base = base
        kwargs = dict(env=env, book=book, parts=parts, writer=writer, sources=sources,
                      runs_dir=runs_dir, root=root, nodes_dir=nodes_dir, arms=arm_labels(arms))

        # the Compare page's comparisons, found and listed: their sides now (a Part links its
        # comparison; a listed pair that selects nothing is a notice), their points when the page renders
        comparisons = compare_pairs.plan(con, pairs=compare, run_sets=run_sets, arms=arms,
                                         notices=notices) if compare_spec is not None else []

        def compare_globals():
            compare_pairs.draw(comparisons, con=con, diff_settings=diff_settings)
            return lambda macros: compare_page.page_globals(macros, comparisons)

        def part_globals():
            return lambda macros: compare_page.part_globals(macros, comparisons)

        specs = [(p, part_globals) for p in (*parts, *references)] \
            + ([(index, None)] if index is not None else []) \
            + ([(compare_spec, compare_globals)] if compare_spec is not None else [])
        made = render_series(specs, book=book, parts=parts, writer=writer, cache=cache, out=out,
                             page_kwargs=kwargs, phases=phases)
        by_name = {page.name: page for page in made}
        # the index, each Part followed by its reference page, the Compare page
        rendered = ([by_name[index.name]] if index is not None else []) \
            + [by_name[p.name] for part in parts for p in (part, part.reference) if p is not None] \
            + ([by_name[compare_spec.name]] if compare_spec is not None else [])
        with phases("write pages"):
            for page in rendered:
                out.put_content(page.name, page.text)
            out.put_content("SOURCES.md", sources_page(sources, rendered))
        titles = {p.name: str(p.meta.get("title", p.name)) for p in rendered}
        with phases("audit"):
            write_audit(out, book, titles, base, runs_dir=runs_dir, root=root)
        with phases("downloads"):
            downloads = write_csv_downloads(derived_dir, docs_dir, out, db_key)
        with phases("warehouse page"):
            out.put(warehouse_page.PAGE_NAME, digest(db_key, file_digest(warehouse_file), downloads),
                    lambda: warehouse_page.build(con=con, descriptions_file=warehouse_file,
                                                 downloads={Path(d).stem: d for d in downloads}))
    finally:
        con.close()
    with phases("assets"):
        interactive = write_assets(templates_dir.parent / "assets", out)
    facts = sorted(book.facts.values(), key=lambda f: f.id)
    cache.prune()
    out.base, out.pages_reused = base, cache.hits
    return rendered, facts, downloads, interactive, book, writer, out


def _rel(path: Path, root: Path) -> str:
    try:
        return Path(path).resolve().relative_to(Path(root).resolve()).as_posix()
    except ValueError:
        return Path(path).as_posix()


T = TypeVar("T")


def collector_paused(fn: Callable[..., T]) -> Callable[..., T]:
    """`fn` with Python's cyclic garbage collector paused while it runs (and resumed after, as it
    was). A render makes hundreds of thousands of objects that live until it ends (facts, rows,
    pages); the collector's passes over them took a sixth of a render's time at 300 runs (44 s ->
    38 s from scratch, 4.6 s -> 4.1 s after a one-template edit) for 0.1 GiB of memory."""
    @functools.wraps(fn)
    def paused(*args: Any, **kwargs: Any) -> T:
        collecting = gc.isenabled()
        gc.disable()
        try:
            return fn(*args, **kwargs)
        finally:
            if collecting:
                gc.enable()
    return paused


@collector_paused
def run(*, campaign_db: Path, derived_dir: Path, docs_dir: Path, site_dir: Path, facts_file: Path,
        runs_dir: Path, root: Path, build: bool = True, templates_dir: Path | None = None,
        sources_file: Path | None = None, mkdocs_config: Path | None = None,
        warehouse_file: Path | None = None, nodes_dir: Path | None = None,
        compare: list[dict] | None = None, run_sets: dict | None = None,
        diff_settings: dict | None = None, series_file: Path | None = None, arms: dict | None = None,
        chart_cache: Path | None = None, static_images: tuple[str, ...] = (),
        phases: Phases | None = None, memo: Any = None) -> dict[str, Any]:
    """Render the article series from campaign.duckdb and (when build) build the site, its CSV
    downloads copied from derive's exports in `derived_dir`.
    `nodes_dir` holds the node probe folders that node evidence blocks read. `compare` is
    params.yaml's list of {base, head, title} pairs for the Compare page (which finds more in the
    runs, and in `arms`' follow-ups); `run_sets` the run sets a side may name
    (stages/render/compare_pairs.py); `diff_settings` params.yaml's `diff:` block,
    how the page tells a change from noise (stages/render/diff_stats.py). `static_images`: the kinds of static image
    (svg, png) drawn of each chart besides its spec; `chart_cache` keeps them between renders
    (stages/render/chart_writer.py).

    Example: run(campaign_db=p.campaign_db, derived_dir=p.derived, docs_dir=p.docs, site_dir=p.site,
                 facts_file=p.facts, runs_dir=p.runs, root=p.root, nodes_dir=p.nodes)
    """
    root = Path(root)
    phases = phases or Phases()
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
        rendered, facts, downloads, interactive, book, writer, out = write_docs(
            docs_tmp, campaign_db=campaign_db, derived_dir=Path(derived_dir), templates_dir=templates_dir,
            sources=sources,
            index=index, parts=parts, compare_spec=compare_spec, runs_dir=runs_dir, root=root,
            nodes_dir=nodes_dir, compare=compare, run_sets=run_sets, diff_settings=diff_settings,
            warehouse_file=warehouse_file,
            notices=notices, arms=arms, chart_cache=chart_cache,
            static_images=static_images, phases=phases,
            settings=[compare, run_sets, diff_settings, arms], old_docs=docs_dir,
            kept_pages=getattr(memo, "pages", None))
        nav = site_nav([p.name for p in rendered] + ["SOURCES.md", warehouse_page.PAGE_NAME], mkdocs_config)
        # The Parts are the blog's posts (written under posts/); the plugin reads their authors here.
        write_file(docs_tmp / blog.AUTHORS_FILE, blog.authors_file(authors))
        if build:
            site_tmp = fresh_dir(site_dir)
            with phases("mkdocs"):
                build_site(mkdocs_config, docs_tmp, site_tmp, nav, cache_dir=chart_cache, old_site=site_dir,
                           memo=memo)
            mark(site_tmp)   # mkdocs --clean emptied the fresh folder
        with phases("swap"):
            swap_in(docs_tmp, docs_dir)
            docs_tmp = None
            out.save(docs_dir)
            if site_tmp is not None:
                swap_in(site_tmp, site_dir)
                site_tmp = None
    finally:
        for tmp in (docs_tmp, site_tmp):
            if tmp is not None and tmp.exists():
                shutil.rmtree(tmp)
    with phases("facts.json"):
        write_facts(facts_file, book, digest(out.base, [(f.id, f.pages) for f in facts]), chart_cache)
    with phases("query memo"):
        book.memo.save()
    site_index = site_dir / "index.html" if build else None
    return {
        "pages": [p.name for p in rendered] + ["SOURCES.md", warehouse_page.PAGE_NAME],
        "facts": len(facts),
        "charts": [c for p in rendered for c in p.charts],
        "charts_drawn": writer.drawn,
        "charts_reused": writer.reused,
        "chart_specs_reused": writer.specs_reused,
        "pages_reused": out.pages_reused,
        "docs_files_linked": out.linked,
        "docs_files_written": out.written,
        "downloads": downloads,
        "interactive_charts": interactive,
        "facts_file": str(facts_file),
        "site_index": str(site_index) if site_index else None,
        "notices": notices,
        "phases": phases.seconds(),
    }


def run_params(params: dict[str, Any], paths: Any, *, build: bool = True, memo: Any = None) -> dict[str, Any]:
    """run() with its folders from `paths` (stages.core.config.Paths) and its settings from params."""
    return run(campaign_db=paths.campaign_db, derived_dir=paths.derived, docs_dir=paths.docs, site_dir=paths.site,
               facts_file=paths.facts, runs_dir=paths.runs, nodes_dir=paths.nodes, root=paths.root,
               build=build, templates_dir=paths.templates, series_file=paths.series,
               sources_file=paths.sources, warehouse_file=paths.table_docs, mkdocs_config=paths.mkdocs,
               compare=params.get("compare"), run_sets=params.get("run_sets"),
               diff_settings=params.get("diff"), arms=params.get("arms"), chart_cache=paths.chart_cache,
               static_images=tuple((params.get("charts") or {}).get("static_images") or ()), memo=memo)
