"""The series' pages and audit pages, each made only when its key changed (incremental.py).

`render_series` renders the pages in series order (the Parts, then the index and the Compare page:
the order in which the facts learn the pages that print them); a page whose key the cache holds is
not rendered: its facts are put back in the fact book as the render would have left them, and its
chart files written from the cache. `write_audit` writes the audit pages, each made only when the
ids of its facts or the pages printing them changed.
"""
from __future__ import annotations

from itertools import islice
from pathlib import Path
from typing import Any, Callable

from stages.render.audit import QUERIES_PAGE, audit_groups, audit_index, audit_page, audit_queries
from stages.render.chart_writer import ChartWriter
from stages.render.facts import FactBook
from stages.core.provenance import digest
from stages.render.incremental import DocsWriter, PageCache, PageResult
from stages.render.pages import PageSpec, RenderedPage, render_page
from stages.render.timing import Phases

CHART_FILES = (".vl.json", ".csv")   # beside each chart; and its static images, when drawn


def _restore(book: FactBook, name: str, result: PageResult) -> None:
    """The cached page's facts back in the book, as rendering it would have left them. The
    facts are the cache entry's own copies (unpickled for this render), so they are taken as they
    are, their pages cleared: the book notes the pages that print them again."""
    for fact in result.facts:
        if fact.id not in book.facts:
            fact.pages = []
            book.facts[fact.id] = fact
    for fid in result.printed:
        book.printed_on(book.facts[fid], name)


def render_series(specs: list[tuple[PageSpec, Callable[[], Any] | None]], *, book: FactBook,
                  parts: list[PageSpec], writer: ChartWriter, cache: PageCache, out: DocsWriter,
                  page_kwargs: dict[str, Any], phases: Phases) -> list[RenderedPage]:
    """Each page of `specs` (a spec and, for a page with macros of its own, a function giving its
    extra_globals maker), rendered or taken from the cache; their files put in the docs folder."""
    made: list[tuple[str, PageResult]] = []
    rendered = []
    keys = [cache.key(spec, parts) for spec, _ in specs]
    with phases("cached pages"):
        cached = [cache.get(key) for key in keys]
    book.expect_sections((spec.meta["run_ids"], model) for (spec, _), hit in zip(specs, cached)
                         if hit is None for model in spec.meta.get("models") or ())
    for (spec, extra), key, result in zip(specs, keys, cached):
        if result is not None:
            with phases("cached pages"):
                _restore(book, spec.name, result)
                for rel, data in result.charts.items():
                    out.put_content(rel, data)
                writer.specs_reused += len(result.page.charts)
                writer.reused += len(result.page.charts) if writer.static else 0
        else:
            before = len(book.facts)
            previous = cache.previous(spec.name)     # its charts, where called the same way again
            writer.recall = (previous.calls, previous.charts) if previous is not None else None
            writer.calls = {}
            with phases("pages"):
                page = render_page(spec, **page_kwargs,
                                   **({"extra_globals": extra()} if extra is not None else {}))
            printed = list(book.touched.get(spec.name, ()))
            new = list(islice(book.facts, before, None))
            facts = [book.facts[f] for f in dict.fromkeys(new + printed)]
            result = PageResult(page, facts, printed, calls=writer.calls)
            writer.recall = None
            made.append((key, result))
        rendered.append(result.page)
    with phases("charts"):
        writer.close()
    with phases("cached pages"):
        kinds = CHART_FILES + tuple(f".{kind}" for kind in writer.static)
        for key, result in made:
            for rel in result.page.charts:
                for suffix in kinds:
                    if (out.new / f"{rel}{suffix}").is_file():
                        result.charts[f"{rel}{suffix}"] = (out.new / f"{rel}{suffix}").read_bytes()
                        out.written_outside(f"{rel}{suffix}")
            cache.put(key, result)
    return rendered


def write_audit(out: DocsWriter, book: FactBook, titles: dict[str, str], base: str, *,
                runs_dir: Path, root: Path) -> None:
    """Every audit page and the index, each made only when its facts or their pages changed."""
    facts = sorted(book.facts.values(), key=lambda f: f.id)
    inferred: dict[str, list[dict]] = {}
    for row in book.rows("run_inferred_rows", {})[1]:
        inferred.setdefault(row["run_id"], []).append(row)
    grouped, by_id = audit_groups(facts)
    for page, group in grouped.items():
        shown = sorted({p for f in group for p in f.pages})
        linked = sorted({i for f in group for i in f.inputs})
        key = digest(base, "audit", page, [(f.id, f.pages) for f in group], [titles.get(p) for p in shown],
                     [(i, by_id[i].audit_page, by_id[i].audit_anchor) if i in by_id else i for i in linked],
                     inferred.get(page))
        out.put(f"audit/{page}.html", key, lambda page=page, group=group: audit_page(
            page, group, runs_dir=runs_dir, root=root, titles=titles, by_id=by_id,
            inferred=inferred.get(page)))
    out.put_content("audit/index.html", audit_index(facts, titles))
    out.put_content(f"audit/{QUERIES_PAGE}", audit_queries(facts))
