"""Pages: templates with YAML front matter, loaded into PageSpecs and rendered through Jinja2.

A page prints numbers only through facts (stages/render/facts.py), cites sources as [S1]
(stages/render/sources.py) and draws charts by name (stages/render/chart_writer.py).
"""
from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import jinja2
import yaml

from stages.render import blog
from stages.core import run_sets as core_run_sets
from stages.render import run_sets as run_set_lib
from stages.render.chart_writer import ChartWriter
from stages.core.config import CampaignError, read_yaml
from stages.render.errors import FactError
from stages.render.escape import escape_text
from stages.render.derived import derive
from stages.render.digits import check_digits
from stages.render.facts import FactBook
from stages.render.marks import legend as marks_legend
from stages.render.page_macros import PageMacros
from stages.render.sources import apply_citations, sources_section

INDEX_TEMPLATE = "index.md.j2"
TEMPLATE_SUFFIX = ".md.j2"


@dataclass
class PageSpec:
    template: Path
    name: str          # output file, e.g. part-local-cpu.md
    meta: dict[str, Any]
    body: str
    reference: "PageSpec | None" = None   # a Part's reference page (series.yaml `reference:`)


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


PART_KEYS = ("part", "title", "date", "description", "template")
PART_OPTIONAL = ("authors", "categories", "runs", "needs", "reference")
REFERENCE_DIR = "reference"     # a Part's reference page: reference/<the Part's name>.md


def load_series(series_file: Path, templates_dir: Path, run_sets: dict[str, Any] | None = None
                ) -> tuple[PageSpec | None, list[PageSpec], dict[str, dict[str, str]]]:
    """The index page, the Parts that `series_file` lists, in their order, and the series'
    authors (stages/render/blog.py). A Part's meta is its series entry, with `run_set` the run set
    it covers (resolved against params' run_sets) and `author_names` its authors' names."""
    if not templates_dir.is_dir():
        raise CampaignError(f"{templates_dir}: no templates folder")
    series = read_yaml(series_file, what="the series file lists the Parts")
    entries = series.get("parts") if isinstance(series, dict) else None
    if not isinstance(entries, list):
        raise CampaignError(f"{series_file.name}: needs a list under `parts`")
    authors = blog.load_authors(series, series_file.name)
    parts, numbers, names = [], set(), set()
    for i, entry in enumerate(entries, start=1):
        origin = f"{series_file.name}: part entry {i}"
        if not isinstance(entry, dict):
            raise CampaignError(f"{origin}: not a mapping")
        lacking = [k for k in PART_KEYS if k not in entry]
        unknown = sorted(set(entry) - set(PART_KEYS) - set(PART_OPTIONAL))
        if lacking or unknown:
            raise CampaignError(f"{origin}: " + "; ".join(
                ([f"lacks {', '.join(lacking)}"] if lacking else [])
                + ([f"unknown key(s) {', '.join(unknown)}"] if unknown else [])))
        if entry["part"] in numbers:
            raise CampaignError(f"{origin}: part {entry['part']} is listed twice")
        numbers.add(entry["part"])
        template = str(entry["template"])
        path = templates_dir / template
        if not template.endswith(TEMPLATE_SUFFIX) or "/" in template or not path.is_file():
            raise CampaignError(f"{origin}: template {template!r} is not a {TEMPLATE_SUFFIX} file "
                                f"in {templates_dir.name}/")
        name = blog.post_name(template[: -len(".j2")])
        if name in names:
            raise CampaignError(f"{origin}: template {template!r} is used twice")
        names.add(name)
        meta = {k: v for k, v in entry.items() if k != "runs"}
        meta["author_names"] = blog.author_names(entry.get("authors", []), authors, origin)
        if entry.get("runs") is not None:
            meta["run_set"] = core_run_sets.definition(entry["runs"], run_sets, origin)
            meta["run_set_name"] = entry["runs"] if isinstance(entry["runs"], str) else None
            meta.setdefault("profile", meta["run_set"].get("profile"))
        meta_text, body = split_front_matter(path.read_text(), template)
        if meta_text:
            raise CampaignError(f"{template}: a Part's settings live in {series_file.name}, "
                                "not in front matter")
        part = PageSpec(path, name, meta, body)
        if entry.get("reference") is not None:
            part.reference = _reference_spec(part, str(entry["reference"]), templates_dir, origin)
            meta["reference_page"] = part.reference.name
        parts.append(part)
    index_path = templates_dir / INDEX_TEMPLATE
    index = None
    if index_path.is_file():
        meta, body = split_front_matter(index_path.read_text(), INDEX_TEMPLATE)
        index = PageSpec(index_path, INDEX_TEMPLATE[: -len(".j2")], meta, body)
    return index, parts, authors


def _reference_spec(part: PageSpec, template: str, templates_dir: Path, origin: str) -> PageSpec:
    """The reference page behind a Part's story: everything a careful reader or an auditor may
    want that the story does not need, over the same run set. It is a page, not a post, at
    reference/<the Part's name>.md, and links back to the story (`page.story_page`)."""
    path = templates_dir / template
    if not template.endswith(TEMPLATE_SUFFIX) or "/" in template or not path.is_file():
        raise CampaignError(f"{origin}: reference {template!r} is not a {TEMPLATE_SUFFIX} file "
                            f"in {templates_dir.name}/")
    if path == part.template:
        raise CampaignError(f"{origin}: reference {template!r} is the Part's own template")
    meta_text, body = split_front_matter(path.read_text(), template)
    if meta_text:
        raise CampaignError(f"{template}: a reference page's settings live with its Part")
    meta = {k: v for k, v in part.meta.items() if k not in ("part", "categories", "authors")}
    meta.update(title=f"{part.meta['title']}: the reference", story_page=part.name,
                story_title=part.meta["title"])
    return PageSpec(path, f"{REFERENCE_DIR}/{posixpath.basename(part.name)}", meta, body)


def load_page(path: Path) -> PageSpec | None:
    """A page outside the series of parts (front matter needs a title), or None when absent."""
    if not path.is_file():
        return None
    meta, body = split_front_matter(path.read_text(), path.name)
    if "title" not in meta:
        raise CampaignError(f"{path.name}: front matter lacks 'title'")
    return PageSpec(path, path.name[: -len(".j2")], meta, body)


PUBLIC_META = ("title", "date", "authors", "description", "categories", "part")


def dump_front_matter(meta: dict[str, Any]) -> str:
    """The front matter mkdocs reads: what a reader may see, not the run set behind it."""
    shown = {k: meta[k] for k in PUBLIC_META if k in meta}
    return "---\n" + yaml.safe_dump(shown, sort_keys=False, allow_unicode=True) + "---\n\n"

# ---------------------------------------------------------------- pages

def _part_label(meta: dict[str, Any]) -> str:
    return str(meta.get("title", ""))


def arm_labels(arms: dict[str, Any] | None) -> dict[str, str]:
    """Each labelled spec's arm label, from params.yaml `arms`: follow-up of another spec,
    superseded by another, or a later phase."""
    labels = {}
    for name, s in (arms or {}).items():
        if not isinstance(s, dict):
            continue
        words = []
        if s.get("follow_up_of"):
            words.append(f"follow-up of {s['follow_up_of']}")
        if s.get("superseded_by"):
            words.append(f"superseded by {s['superseded_by']}")
        if s.get("phase"):
            words.append(f"phase {s['phase']}")
        if words:
            labels[str(name)] = "; ".join(words)
    return labels


def page_globals(macros: PageMacros, spec: PageSpec, parts: list[PageSpec],
                 writer: ChartWriter, arms: dict[str, str] | None = None) -> dict[str, Any]:
    meta = spec.meta
    stem = posixpath.basename(spec.name)[: -len(".md")]
    arms = arms or {}

    said: set[str] = set()

    def once(key: str) -> bool:
        """True the first time the page asks for `key`, then False: a method paragraph or a note
        that several blocks of a page carry is said once per page."""
        first = key not in said
        said.add(key)
        return first

    def chart(name: str, profile: str | None = None, query: str | None = None, **params: Any):
        markup = writer.write(stem, name, profile or meta.get("profile"), params, query=query)
        return macros.hold(caption_said_once(markup, once))

    def arm(spec_name: str | None):
        """The spec's arm label in brackets, or nothing."""
        label = arms.get(str(spec_name)) if spec_name else None
        return macros.hold(f" *({escape_text(label)})*" if label else "")

    def derived(op: str):
        def make(a_name: str, a_params: dict, b_name: str, b_params: dict,
                 decimals: int | None = None, show_unit: bool = False):
            fact = derive(macros.book, op, a_name, a_params, b_name, b_params, page=macros.page,
                          decimals=decimals)
            return macros.hold(macros.fact_markup(fact, show_unit))
        return make

    def nav():
        names = [p.name for p in parts]
        i = names.index(spec.name) if spec.name in names else -1
        prev = ("Series index", "index.md") if i <= 0 else (_part_label(parts[i - 1].meta), parts[i - 1].name)
        links = [f"← [{escape_text(prev[0])}]({prev[1]})"]
        if 0 <= i < len(parts) - 1:
            links.append(f"[{escape_text(_part_label(parts[i + 1].meta))}]({parts[i + 1].name}) →")
        return macros.hold(" · ".join(links))

    def byline():
        authors = meta.get("author_names") or []
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
        "launch_quote": macros.launch_quote,
        "run_ref": macros.run_ref,
        "text": macros.text, "chart": chart, "nav": nav, "byline": byline,
        "parts_list": parts_list, "arm": arm, "ratio": derived("ratio"),
        "difference": derived("difference"), "once": once,
    }


_FALLBACK = re.compile(r'(<p class="chart-fallback">)(.*?)(</p>)', re.S)
_SENTENCE_END = re.compile(r"(?<=[.;:])\s+")


def caption_said_once(markup: str, once: Callable[[str], bool]) -> str:
    """A chart's markup with its caption (the description shown where the chart is not drawn)
    keeping only the sentences its page has not said yet (`once`, the page's), else pointing to
    the chart above it."""
    def shorten(m: re.Match) -> str:
        sentences = [s for s in _SENTENCE_END.split(m.group(2).strip()) if s]
        new = [s for s in sentences if once(f"caption: {s}")]
        if len(new) == len(sentences):
            return m.group(0)
        body = " ".join(new + ["Its marks read as in the charts above."]) if new else \
            "Read as the chart above."
        return m.group(1) + body + m.group(3)

    return _FALLBACK.sub(shorten, markup)


def downloads_section(tables: list[str]) -> str:
    if not tables:
        return ""
    links = " · ".join(f"[{t}.csv](downloads/{t}.csv)" for t in tables)
    return ("\n## Data behind this page\n\nThe public tables this page reads, as CSV "
            f"exported from the campaign database: {links}\n")


def render_page(spec: PageSpec, *, env: jinja2.Environment, book: FactBook, parts: list[PageSpec],
                writer: ChartWriter, sources: dict[str, dict], runs_dir: Path,
                root: Path, nodes_dir: Path | None = None, arms: dict[str, str] | None = None,
                extra_globals: Callable[[PageMacros], dict[str, Any]] | None = None) -> RenderedPage:
    """One page. `extra_globals` gives a page macros of its own, built on its PageMacros."""
    macros = PageMacros(book, page=spec.name, runs_dir=runs_dir, root=root, nodes_dir=nodes_dir)
    charts_before = len(writer.written)
    try:
        template = env.from_string(spec.body)
        names = page_globals(macros, spec, parts, writer, arms)
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
    text = text.rstrip() + "\n" + marks_legend(macros.marks_used) + downloads_section(macros.tables_used) \
        + sources_section(cited, sources)
    folder = posixpath.dirname(spec.name)
    if folder == blog.POSTS_DIR:
        text = blog.with_excerpt(text, spec.meta.get("description", ""))
    text = blog.rebase_links(text, folder)
    return RenderedPage(spec.name, spec.meta, dump_front_matter(spec.meta) + text, cited,
                        macros.tables_used, writer.written[charts_before:])


def page_shown(spec: PageSpec, book: FactBook) -> str | None:
    """None when the Part has something to show; else the one-line reason it is left out: its run
    set selects no runs, or its `needs:` row query returns no rows. A shown Part's meta gains
    `run_ids` (every attempt in its run set, oldest first) and `models` (in order of first run)."""
    needs = spec.meta.get("needs")
    if needs:
        try:
            _, rows = book.rows(str(needs), {})
        except FactError as exc:
            raise FactError(f"{spec.template.name}: needs: {exc}") from None
        if not rows:
            return f"{spec.name}: left out, its row query {needs!r} returns no rows"
    run_set = spec.meta.get("run_set")
    if run_set is not None:
        run_ids = run_set_lib.select(book.con, run_set)
        if not run_ids:
            label = spec.meta.get("run_set_name") or " ".join(
                f"{k}={','.join(map(str, v)) if isinstance(v, list) else v}" for k, v in run_set.items())
            return f"{spec.name}: left out, its run set ({label}) selects no runs"
        spec.meta["run_ids"] = run_ids
        _, rows = book.rows("run_set_models", {"run_ids": run_ids})
        spec.meta["models"] = [r["model"] for r in rows]
    if spec.reference is not None:
        spec.reference.meta.update(run_ids=spec.meta.get("run_ids"), models=spec.meta.get("models"))
    return None


def uncovered_runs(book: FactBook, parts: list[PageSpec]) -> str | None:
    """One line naming the runs that no shown Part's run set covers (a run of a profile no Part
    selects, or imported without one), or None when every run is on a page."""
    covered = {run_id for part in parts for run_id in part.meta.get("run_ids") or ()}
    _, rows = book.rows("all_runs", {})
    left = [r for r in rows if r["run_id"] not in covered]
    if not left:
        return None
    by_profile: dict[str, int] = {}
    for r in left:
        key = r["profile"] or "no profile"
        by_profile[key] = by_profile.get(key, 0) + 1
    counts = ", ".join(f"{n} of {profile}" for profile, n in sorted(by_profile.items()))
    shown = ", ".join(r["run_id"] for r in left[:5]) + (f" and {len(left) - 5} more" if len(left) > 5 else "")
    return (f"{len(left)} run(s) belong to no Part of the series ({counts}): {shown}; "
            "a Part's run set (site/series.yaml) or params.yaml run_sets must select them")
