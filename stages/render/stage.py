"""Render stage: campaign.duckdb + article templates + sources -> mkdocs docs folder -> site.

Each `site/templates/*.md.j2` is one page (front matter in YAML, body in Jinja2). A page prints
numbers only through facts (see stages/render/facts.py), cites sources as [S1], and draws charts by name
(stages/render/charts.py). A page whose front matter names a row query under `needs:` is left out of the
series (index, navigation, prev/next links) while that query returns no rows, e.g. the node article
before any node was probed. `compare.md.j2` is not a part: it is the Compare page, which draws the
pairs of run sets listed under params `compare:` (stages/render/compare_page.py). The stage writes the docs folder from scratch: pages, one audit page per fact,
SOURCES.md, the Warehouse page (stages/render/warehouse_page.py), CSV downloads of the public tables,
chart specs with static SVG and PNG, the site's own Vega bundle; then runs `mkdocs build --strict`;
then data/facts.json.

Docs and site are built into fresh folders beside their targets and renamed into place only when
the whole build succeeded. A target is replaced only when it holds the marker file render writes
(MARKER) or is empty: a site or docs path pointed at the runs refuses, deleting nothing. Every
value printed goes through facts.escape_text (redacted; escaped for HTML and Markdown alike).
"""
from __future__ import annotations

import csv
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import duckdb
import jinja2
import pandas as pd
import yaml
from markupsafe import Markup

from stages.render import charts as chart_lib
from stages.render import compare_page
from stages.derive import stage as derive
from stages.render import warehouse_page
from stages.core.config import CampaignError
from stages.derive.stage import PUBLIC_TABLES
from stages.render.errors import FactError
from stages.render.escape import audit_target, code, escape_text
from stages.render.evidence import render_evidence
from stages.render.facts import Fact, FactBook, PageMacros, check_digits
from stages.render.queries import fact_query_path, sql_params
from stages.core.secrets import redact_text, redact_value
from stages.core.provenance import git_sha

INDEX_TEMPLATE = "index.md.j2"
TEMPLATE_SUFFIX = ".md.j2"
CITATION = re.compile(r"\[(S\d+)\](?!\()")
SOURCE_FIELDS = ("id", "title", "publisher", "url", "accessed")
ASSET_FILES = {"charts.js": "assets/javascripts/charts.js",
               "campaign.css": "assets/stylesheets/campaign.css"}
VEGA_BUNDLE = "assets/javascripts/vega-bundle.js"
MARKER = ".campaign-render"   # in the root of each folder render writes; only such a folder is replaced
PNG_SCALE = 2  # pixels per chart unit: sharp on high-density screens and in slides
EXTERNAL_LOAD = re.compile(
    r"<(?:script|link|img|iframe|source|video|audio|embed)\b[^>]*?\b(?:src|href)\s*=\s*[\"']?(?:https?:)?//",
    re.I)


class SourceError(CampaignError):
    """An article cites a source id that site/sources.yaml does not list."""


@dataclass
class PageSpec:
    template: Path
    name: str          # output file, e.g. part-local-cpu.md
    meta: dict[str, Any]
    body: str


@dataclass
class RenderedPage:
    name: str
    meta: dict[str, Any]
    text: str
    cited: list[str] = field(default_factory=list)
    tables: list[str] = field(default_factory=list)
    charts: list[str] = field(default_factory=list)


# ---------------------------------------------------------------- templates and front matter

def split_front_matter(text: str, origin: str) -> tuple[dict[str, Any], str]:
    if not text.startswith("---\n"):
        return {}, text
    end = text.find("\n---\n", 4)
    if end < 0:
        raise CampaignError(f"{origin}: front matter has no closing ---")
    try:
        meta = yaml.safe_load(text[4:end]) or {}
    except yaml.YAMLError as exc:
        raise CampaignError(f"{origin}: front matter is not valid YAML: {exc}") from None
    return meta, text[end + 5:]


def load_pages(templates_dir: Path) -> tuple[PageSpec | None, list[PageSpec]]:
    """The index page and the Parts, ordered by their `part` number (the Compare page, which is
    not a part, is read by `load_page`)."""
    if not templates_dir.is_dir():
        raise CampaignError(f"{templates_dir}: no templates folder")
    index, parts = None, []
    for path in sorted(templates_dir.glob(f"*{TEMPLATE_SUFFIX}")):
        if path.name == compare_page.TEMPLATE:
            continue
        meta, body = split_front_matter(path.read_text(), path.name)
        spec = PageSpec(path, path.name[: -len(".j2")], meta, body)
        if path.name == INDEX_TEMPLATE:
            index = spec
        else:
            for key in ("title", "date", "description", "part"):
                if key not in meta:
                    raise CampaignError(f"{path.name}: front matter lacks {key!r}")
            parts.append(spec)
    parts.sort(key=lambda p: (p.meta["part"], p.name))
    return index, parts


def load_page(path: Path) -> PageSpec | None:
    """A page outside the series of parts (front matter needs a title), or None when absent."""
    if not path.is_file():
        return None
    meta, body = split_front_matter(path.read_text(), path.name)
    if "title" not in meta:
        raise CampaignError(f"{path.name}: front matter lacks 'title'")
    return PageSpec(path, path.name[: -len(".j2")], meta, body)


def dump_front_matter(meta: dict[str, Any]) -> str:
    return "---\n" + yaml.safe_dump(meta, sort_keys=False, allow_unicode=True) + "---\n\n"


# ---------------------------------------------------------------- sources

def load_sources(path: Path) -> dict[str, dict[str, Any]]:
    try:
        records = yaml.safe_load(path.read_text()) or []
    except FileNotFoundError:
        raise CampaignError(f"{path}: not found") from None
    sources: dict[str, dict[str, Any]] = {}
    for i, rec in enumerate(records, start=1):
        missing = [f for f in SOURCE_FIELDS if not rec.get(f)]
        if missing:
            raise SourceError(f"{path.name}: record {i} lacks {', '.join(missing)}")
        if not re.match(r"https?://[^\s<>\"']+$", str(rec["url"])):
            raise SourceError(f"{path.name}: record {i}: url is not an http(s) address")
        if not re.fullmatch(r"S\d+", str(rec["id"])):
            raise SourceError(f"{path.name}: record {i}: id {rec['id']!r} is not like S12")
        if rec["id"] in sources:
            raise SourceError(f"{path.name}: duplicate id {rec['id']}")
        sources[rec["id"]] = {**rec, "accessed": str(rec["accessed"])}
    return sources


def apply_citations(text: str, sources: dict[str, dict], page: str) -> tuple[str, list[str]]:
    """[S3] -> a link to the page's own source list; ids in order of first citation."""
    cited: list[str] = []

    def link(m: re.Match) -> str:
        sid = m.group(1)
        if sid not in sources:
            raise SourceError(f"{page}: unknown source id [{sid}] (not in site/sources.yaml)")
        if sid not in cited:
            cited.append(sid)
        return f"[[{sid}]](#source-{sid.lower()})"

    return CITATION.sub(link, text), cited


def source_line(src: dict[str, Any]) -> str:
    return (f"**[{src['id']}]** {escape_text(src['title'])}. {escape_text(src['publisher'])}. "
            f"<{src['url']}> (accessed {escape_text(src['accessed'])})")


def sources_section(cited: list[str], sources: dict[str, dict]) -> str:
    if not cited:
        return ""
    lines = ["", "## Sources", ""]
    for n, sid in enumerate(cited, start=1):
        lines.append(f'{n}. <a id="source-{sid.lower()}"></a>{source_line(sources[sid])} · '
                     f"[all sources](SOURCES.md#{sid.lower()})")
    return "\n".join(lines) + "\n"


def sources_page(sources: dict[str, dict], pages: list[RenderedPage]) -> str:
    cited_by: dict[str, list[RenderedPage]] = {}
    for page in pages:
        for sid in page.cited:
            cited_by.setdefault(sid, []).append(page)
    lines = ["---", "title: Sources", "---", "", "# Sources", "",
             "Every outside source the series cites, by id. Each article lists its own in order "
             "of first citation.", ""]
    for sid in sorted(sources, key=lambda s: int(s[1:])):
        used = ", ".join(f"[{escape_text(p.meta.get('title', p.name))}]({p.name})"
                         for p in cited_by.get(sid, [])) or "not cited yet"
        lines.append(f'- <a id="{sid.lower()}"></a>{source_line(sources[sid])}. Cited in: {used}')
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- charts

def _redacted(df: pd.DataFrame) -> pd.DataFrame:
    """Chart rows with their text redacted (labels and tooltips print it)."""
    for column in df.columns:
        if df[column].dtype.kind not in "biufcmM":   # not numbers, times or booleans
            df[column] = df[column].map(redact_value)
    return df


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
              params: dict[str, Any] | None = None) -> str:
        """A chart of the bench points of `profile`, or (charts listed in charts.CHART_ROWS) of
        its row query bound with `params`; each set of params gets its own files."""
        try:
            fn = chart_lib.chart_by_name(name)
        except KeyError as exc:
            raise FactError(str(exc.args[0])) from None
        params = dict(params or {})
        if name in chart_lib.CHART_ROWS:
            if profile:
                params.setdefault("profile", profile)
            sql, rows = self.book.rows(chart_lib.CHART_ROWS[name], params)
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
        import vl_convert as vlc

        spec = chart.to_dict()
        suffix = "".join(f"-{re.sub(r'[^A-Za-z0-9_.-]', '-', str(v))}" for _, v in sorted(params.items()))
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
        alt_text = escape_text(fn.__doc__.strip().splitlines()[0] if fn.__doc__ else name)
        return "\n".join([
            f'<div class="vega-chart" data-spec="{element}" markdown>', "",
            f"![{alt_text}]({rel}.svg)", "", "</div>", "",
            f'<script type="application/json" id="{element}">{inline}</script>', "",
            f'<p class="chart-downloads" markdown>Download: [SVG]({rel}.svg) · [PNG]({rel}.png) · '
            f"[Vega-Lite spec]({rel}.vl.json)</p>",
        ])


# ---------------------------------------------------------------- pages

def _part_label(meta: dict[str, Any]) -> str:
    return str(meta.get("title", ""))


def page_globals(macros: PageMacros, spec: PageSpec, parts: list[PageSpec],
                 writer: ChartWriter) -> dict[str, Any]:
    meta = spec.meta
    stem = spec.name[: -len(".md")]

    def chart(name: str, profile: str | None = None, **params: Any):
        return macros.hold(writer.write(stem, name, profile or meta.get("profile"), params))

    def nav():
        names = [p.name for p in parts]
        i = names.index(spec.name) if spec.name in names else -1
        prev = ("Series index", "index.md") if i <= 0 else (_part_label(parts[i - 1].meta), parts[i - 1].name)
        links = [f"← [{escape_text(prev[0])}]({prev[1]})"]
        if 0 <= i < len(parts) - 1:
            links.append(f"[{escape_text(_part_label(parts[i + 1].meta))}]({parts[i + 1].name}) →")
        return macros.hold(" · ".join(links))

    def byline():
        authors = meta.get("authors") or []
        who = ", ".join(escape_text(a) for a in authors)
        return macros.hold(f"*{escape_text(meta.get('date', ''))}{' · ' + who if who else ''}*")

    def parts_list():
        lines = []
        for p in parts:
            lines.append(f"- **[{escape_text(_part_label(p.meta))}]({p.name})** · "
                         f"{escape_text(p.meta['date'])}  \n  {escape_text(p.meta['description'])}")
        return macros.hold("\n".join(lines) if lines else "*No parts yet.*")

    return {
        "page": meta, "fact": macros.fact, "value": macros.value, "table": macros.table,
        "rows": macros.rows, "evidence": macros.evidence, "node_evidence": macros.node_evidence,
        "run_ref": macros.run_ref,
        "text": macros.text, "chart": chart, "nav": nav, "byline": byline,
        "parts_list": parts_list,
    }


def downloads_section(tables: list[str]) -> str:
    if not tables:
        return ""
    links = " · ".join(f"[{t}.csv](downloads/{t}.csv)" for t in tables)
    return ("\n## Data behind this page\n\nThe public tables this page reads, as CSV "
            f"exported from the campaign database: {links}\n")


def render_page(spec: PageSpec, *, env: jinja2.Environment, book: FactBook, parts: list[PageSpec],
                writer: ChartWriter, sources: dict[str, dict], runs_dir: Path,
                root: Path, nodes_dir: Path | None = None,
                extra_globals: Callable[[PageMacros], dict[str, Any]] | None = None) -> RenderedPage:
    """One page. `extra_globals` gives a page macros of its own, built on its PageMacros."""
    macros = PageMacros(book, page=spec.name, runs_dir=runs_dir, root=root, nodes_dir=nodes_dir)
    charts_before = len(writer.written)
    try:
        template = env.from_string(spec.body)
        names = page_globals(macros, spec, parts, writer)
        if extra_globals is not None:
            names.update(extra_globals(macros))
        text = template.render(**names)
    except FactError as exc:
        raise FactError(f"{spec.template.name}: {exc}") from None
    except jinja2.TemplateError as exc:
        raise CampaignError(f"{spec.template.name}: {exc.__class__.__name__}: {exc}") from None
    check_digits(spec.template.name, text)
    text, cited = apply_citations(text, sources, spec.template.name)
    text = macros.substitute(text)
    text = text.rstrip() + "\n" + downloads_section(macros.tables_used) + sources_section(cited, sources)
    return RenderedPage(spec.name, spec.meta, dump_front_matter(spec.meta) + text, cited,
                        macros.tables_used, writer.written[charts_before:])


# ---------------------------------------------------------------- audit pages

def _rel(path: Path, root: Path) -> str:
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return path.as_posix()


def audit_page(fact: Fact, *, runs_dir: Path, root: Path, titles: dict[str, str]) -> str:
    unit = f" {escape_text(fact.unit)}" if fact.unit else ""
    params = ", ".join(f"{code(k)} = {code(v)}" for k, v in fact.params.items()) or "none"
    runs = ", ".join(code(r) for r in fact.run_ids) or "-"
    used = ", ".join(f"[{escape_text(titles.get(p, p))}](../{p})" for p in fact.pages) or "-"
    source = (f"{code(fact.source_file)}, line {fact.source_line}"
              if fact.source_file else "computed over the runs listed (no single raw line)")
    lines = [
        "---", f"title: {json.dumps('Audit: ' + fact.id)}", "---", "",
        f"# Audit: {code(fact.name)}", "",
        "| | |", "| --- | --- |",
        f"| Value | **{escape_text(fact.display)}**{unit} |",
        f"| Stored value | {code(json.dumps(fact.value, default=str))} |",
        f"| Fact id | {code(fact.id)} |",
        f"| Query | `{fact_query_path(fact.name)}` |",
        f"| Parameters | {params} |",
        f"| Runs | {runs} |",
        f"| Raw source | {source} |",
        f"| Computed by stage | `{fact.stage}` (re-run with `dvc repro {fact.stage}`); printed by `render` |",
        f"| Git commit | `{fact.git_sha or 'none (uncommitted tree)'}` |",
        f"| Printed on | {used} |",
        "",
    ]
    if fact.source_file:
        shell = f"sed -n '{fact.source_line}p' {fact.source_file}"
        lines += ["## The raw line", "",
                  f'<pre class="evidence"><code><span class="evidence-cmd">$ {escape_text(shell)}</span>\n'
                  f"{escape_text(fact.excerpt or '')}</code></pre>", ""]
    lines += ["## The query", "", "Evaluated against `campaign.duckdb` with the parameters above:", "",
              "```sql", fact.sql.rstrip(), "```", ""]
    shown = fact.run_ids[:5]
    if shown:
        lines += ["## The command that started the engine", ""]
        for run_id in shown:
            lines += [render_evidence("cat", run_id, "cmd.sh", runs_dir=runs_dir, root=root), ""]
        if len(fact.run_ids) > len(shown):
            lines += [f"…and {len(fact.run_ids) - len(shown)} more runs.", ""]
    lines += ["## Check it yourself", "", "```console", f"$ campaign trace {fact.id}",
              f"$ dvc repro {fact.stage}", "```", ""]
    return "\n".join(lines)


def audit_index(facts: list[Fact], titles: dict[str, str]) -> str:
    lines = ["---", "title: Audit trail", "---", "", "# Audit trail", "",
             "Every number printed in the series, with the query and raw line behind it.", "",
             "| Fact | Value | Printed on |", "| --- | ---: | --- |"]
    for f in facts:
        used = ", ".join(f"[{escape_text(titles.get(p, p))}](../{p})" for p in f.pages)
        lines.append(f"| [{escape_text(f.id)}]({audit_target('', f.id)}) | {escape_text(f.display)} | {used} |")
    return "\n".join(lines) + "\n"


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


def write_assets(assets_dir: Path, docs_dir: Path) -> bool:
    """Copy the site's own scripts and styles; write the Vega bundle. True when interactive."""
    for src, dest in ASSET_FILES.items():
        target = docs_dir / dest
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(assets_dir / src, target)
    bundle = docs_dir / VEGA_BUNDLE
    import vl_convert as vlc

    if hasattr(vlc, "javascript_bundle"):
        # A function scope keeps the bundle's top-level names private; it sets window.vegaEmbed.
        bundle.write_text("(function () {\n" + vlc.javascript_bundle() + "\n})();\n")
        return True
    bundle.write_text("/* vl-convert has no javascript_bundle(): charts stay static SVG. */\n")
    return False


def check_ours(target: Path) -> None:
    """Refuse to replace `target` unless render wrote it (its marker file) or it is an empty
    folder: a misconfigured path must never empty a folder of runs."""
    if not (target.exists() or target.is_symlink()):
        return
    if target.is_dir() and not target.is_symlink() and ((target / MARKER).is_file()
                                                       or not any(target.iterdir())):
        return
    raise CampaignError(f"{target}: exists and was not written by render (no {MARKER} in it); "
                        "refusing to replace it")


def _scratch(target: Path, kind: str) -> Path:
    return target.parent / f".{target.name}.{kind}-{uuid.uuid4().hex[:8]}"


def fresh_dir(target: Path) -> Path:
    """A new empty folder beside `target` (same parent) to build into, marked as render's own.
    Marked leftovers of a render that was killed are removed first."""
    target.parent.mkdir(parents=True, exist_ok=True)
    for stale in [*target.parent.glob(f".{target.name}.tmp-*"), *target.parent.glob(f".{target.name}.old-*")]:
        if stale.is_dir() and not stale.is_symlink() and (stale / MARKER).is_file():
            shutil.rmtree(stale)
    tmp = _scratch(target, "tmp")
    tmp.mkdir()
    mark(tmp)
    return tmp


def mark(folder: Path) -> None:
    (folder / MARKER).write_text("Written by `campaign render`, which replaces this folder whole.\n")


def swap_in(new: Path, target: Path) -> None:
    """Put the folder `new` at `target`: the old one is renamed aside, the new one renamed in, and
    the old one removed only when render had written it."""
    check_ours(target)
    old = None
    if target.exists():
        old = _scratch(target, "old")
        os.rename(target, old)
    try:
        os.rename(new, target)
    except OSError as exc:
        if old is not None:
            os.rename(old, target)
        raise CampaignError(f"{target}: cannot move the new build in ({exc.strerror})") from None
    if old is not None:
        if (old / MARKER).is_file():
            shutil.rmtree(old)
        else:
            old.rmdir()     # check_ours let it through empty


def write_atomic(path: Path, text: str) -> None:
    """Write a file through a temporary file beside it, renamed into place."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.tmp-", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def external_loads(site_dir: Path) -> list[str]:
    """Resources a built page would fetch from another host (should be none)."""
    found = []
    for page in site_dir.rglob("*.html"):
        for m in EXTERNAL_LOAD.finditer(page.read_text(errors="replace")):
            found.append(f"{_rel(page, site_dir)}: {m.group(0)[:100]}")
    return found


def site_nav(pages: list[str], config: Path) -> list[str] | None:
    """The navigation in series order (index, the parts by number, then the rest), unless the
    mkdocs config sets its own."""
    try:
        own = yaml.load(config.read_text(), Loader=yaml.BaseLoader) or {}
    except (OSError, yaml.YAMLError):
        own = {}
    return None if "nav" in own else pages


def build_site(config: Path, docs_dir: Path, site_dir: Path, nav: list[str] | None = None) -> Path:
    """`mkdocs build --strict` on docs_dir into site_dir; the config's other settings apply."""
    with tempfile.TemporaryDirectory() as tmp:
        cfg = Path(tmp) / "mkdocs.yml"
        settings: dict[str, Any] = {"INHERIT": str(config.resolve()), "docs_dir": str(docs_dir.resolve()),
                                    "site_dir": str(site_dir.resolve())}
        if nav:
            settings["nav"] = nav
        cfg.write_text(yaml.safe_dump(settings))
        proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--clean",
                               "--config-file", str(cfg)], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        problems = [l for l in (proc.stderr + proc.stdout).splitlines()
                    if "WARNING" in l or "ERROR" in l or "Error" in l] or proc.stderr.splitlines()[-3:]
        raise CampaignError("mkdocs build --strict failed: " + " | ".join(problems[:5]))
    loads = external_loads(site_dir)
    if loads:
        raise CampaignError("the site loads from other hosts: " + "; ".join(loads[:5]))
    return site_dir / "index.html"


# ---------------------------------------------------------------- entry point

def page_shown(spec: PageSpec, book: FactBook) -> bool:
    """False when the page's `needs:` row query returns no rows (nothing to write about yet)."""
    needs = spec.meta.get("needs")
    if not needs:
        return True
    try:
        _, rows = book.rows(str(needs), {})
    except FactError as exc:
        raise FactError(f"{spec.template.name}: needs: {exc}") from None
    return bool(rows)


def _print(value: Any) -> Markup:
    """What a template prints without a macro is data text: redacted and escaped like it."""
    return value if isinstance(value, Markup) else Markup(escape_text(value))


def write_docs(docs_dir: Path, *, campaign_db: Path, templates_dir: Path, sources: dict,
               index: PageSpec | None, parts: list[PageSpec], compare_spec: PageSpec | None,
               runs_dir: Path, root: Path, nodes_dir: Path | None, compare: list[dict] | None,
               run_sets: dict | None, warehouse_file: Path):
    """The docs folder's content, written into the (empty) folder `docs_dir`."""
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(templates_dir)), autoescape=True,
                             undefined=jinja2.StrictUndefined, keep_trailing_newline=True,
                             trim_blocks=True, lstrip_blocks=True, finalize=_print)
    con = duckdb.connect(str(campaign_db), read_only=True)
    try:
        book = FactBook(con, root=root, sha=git_sha(root), raw_dirs=(runs_dir, nodes_dir))
        parts = [p for p in parts if page_shown(p, book)]
        writer = ChartWriter(docs_dir, book)
        kwargs = dict(env=env, book=book, parts=parts, writer=writer, sources=sources,
                      runs_dir=runs_dir, root=root, nodes_dir=nodes_dir)
        rendered = [render_page(p, **kwargs) for p in parts]
        if index is not None:
            rendered.insert(0, render_page(index, **kwargs))
        if compare_spec is not None:
            comparisons = compare_page.resolve_pairs(compare or [], con=con, run_sets=run_sets)
            rendered.append(render_page(
                compare_spec, **kwargs,
                extra_globals=lambda macros: compare_page.page_globals(macros, comparisons)))
        for page in rendered:
            (docs_dir / page.name).write_text(page.text)
        (docs_dir / "SOURCES.md").write_text(sources_page(sources, rendered))
        titles = {p.name: str(p.meta.get("title", p.name)) for p in rendered}
        facts = sorted(book.facts.values(), key=lambda f: f.id)
        audit = docs_dir / "audit"
        audit.mkdir()
        for fact in facts:
            (audit / f"{fact.id}.md").write_text(
                audit_page(fact, runs_dir=runs_dir, root=root, titles=titles))
        (audit / "index.md").write_text(audit_index(facts, titles))
        downloads = write_csv_downloads(con, docs_dir)
        (docs_dir / warehouse_page.PAGE_NAME).write_text(warehouse_page.build(
            con=con, descriptions_file=warehouse_file,
            downloads={Path(d).stem: d for d in downloads}))
    finally:
        con.close()
    interactive = write_assets(templates_dir.parent / "assets", docs_dir)
    return rendered, facts, downloads, interactive, book


def run(*, campaign_db: Path, docs_dir: Path, site_dir: Path, facts_file: Path, runs_dir: Path,
        root: Path, build: bool = True, templates_dir: Path | None = None,
        sources_file: Path | None = None, mkdocs_config: Path | None = None,
        warehouse_file: Path | None = None, nodes_dir: Path | None = None,
        compare: list[dict] | None = None, run_sets: dict | None = None) -> dict[str, Any]:
    """Render the article series from campaign.duckdb and (when build) build the site.
    `nodes_dir` holds the node probe folders that node evidence blocks read. `compare` is
    params.yaml's list of {base, head, title} pairs for the Compare page; `run_sets` the run sets
    a side may name (stages/render/compare_page.py).

    Example: run(campaign_db=p.campaign_db, docs_dir=p.docs, site_dir=p.site,
                 facts_file=p.facts, runs_dir=p.runs, root=p.root, nodes_dir=p.nodes)
    """
    root = Path(root)
    templates_dir = templates_dir or root / "site" / "templates"
    sources_file = sources_file or root / "site" / "sources.yaml"
    mkdocs_config = mkdocs_config or root / "mkdocs.yml"
    warehouse_file = warehouse_file or templates_dir.parent / "warehouse.yaml"
    if not Path(campaign_db).is_file():
        raise CampaignError(f"{campaign_db}: not found (run the derive stage first)")
    sources = load_sources(sources_file)
    index, parts = load_pages(templates_dir)
    compare_spec = load_page(templates_dir / compare_page.TEMPLATE)
    docs_dir, site_dir = Path(docs_dir), Path(site_dir)
    for target in (docs_dir, site_dir) if build else (docs_dir,):
        check_ours(target)
    if build and (docs_dir.resolve().is_relative_to(site_dir.resolve())
                  or site_dir.resolve().is_relative_to(docs_dir.resolve())):
        raise CampaignError(f"{site_dir}: the site and docs folders must not hold one another")
    docs_tmp, site_tmp = fresh_dir(docs_dir), None
    try:
        rendered, facts, downloads, interactive, book = write_docs(
            docs_tmp, campaign_db=campaign_db, templates_dir=templates_dir, sources=sources,
            index=index, parts=parts, compare_spec=compare_spec, runs_dir=runs_dir, root=root,
            nodes_dir=nodes_dir, compare=compare, run_sets=run_sets, warehouse_file=warehouse_file)
        nav = site_nav([p.name for p in rendered] + ["SOURCES.md", warehouse_page.PAGE_NAME], mkdocs_config)
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
        "downloads": downloads,
        "interactive_charts": interactive,
        "facts_file": str(facts_file),
        "site_index": str(site_index) if site_index else None,
    }
