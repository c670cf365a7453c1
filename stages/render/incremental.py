"""Rendering only what changed, keyed by content.

A render's inputs are hashed into keys: the render code and the libraries it runs, the campaign
database, the raw folders (file names, sizes and times: run folders are write-once), the git commit
facts cite, the sources, the shared templates and the settings (`base_key`). A page's key adds its
own template, its place in the series and the series' titles (navigation), so that a page whose key
is unchanged is not rendered again: its text, the facts it printed and its chart files come from
the cache (`PageCache`, under the chart cache folder). An audit page's key is the ids of its facts
and the pages that print them, so an audit page whose facts are unchanged is not written again.

The docs folder is still built fresh beside the old one and swapped in (site_build.py); a file
whose key matches the one the old folder's manifest records is hard-linked from the old folder
instead of written again (`DocsWriter`). Keys are never stale: different inputs are a different
key, and a from-scratch render (no cache, no old folder) writes the same bytes.
"""
from __future__ import annotations

import json
import os
import pickle
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from stages.core import code
from stages.core.files import write_atomic, write_file
from stages.core.provenance import data_sha256, digest, file_digest
from stages.render.fact_record import Fact
from stages.render.pages import PageSpec, RenderedPage

ENTRIES = ("stages.render.stage",)   # the render stage's modules: what they import and read follows
LIBRARIES = ("jinja2", "markupsafe", "altair", "pandas", "duckdb", "vl-convert-python", "markdown",
             "mkdocs", "mkdocs-material", "pymdown-extensions", "mkdocs-rss-plugin")
PAGES_FOLDER = "pages"           # under the cache folder: one entry per page key
INDEX = "index.json"             # in the pages folder: each page's last key, by page name
MANIFEST = "docs-manifest.json"  # under the cache folder: the docs folder's files and their keys
CACHE_VERSION = 1


def code_version() -> str:
    """What every output depends on besides its data: the render stage's code (its modules and
    all they import, the SQL and templates they read: stages.core.code), and the versions of the
    libraries that turn them into pages."""
    return code.code_version(ENTRIES, LIBRARIES, str(CACHE_VERSION))


def template_digests(templates_dir: Path) -> dict[str, str]:
    """Every template's digest, by its path under the templates folder."""
    return {p.relative_to(templates_dir).as_posix(): file_digest(p)
            for p in sorted(templates_dir.rglob("*")) if p.is_file()}


@dataclass
class PageResult:
    """What rendering one page made: the page, the facts it printed (in order, each as it was when
    the page was rendered), its chart files (docs path -> bytes) and its chart calls."""
    page: RenderedPage
    facts: list[Fact]        # every fact the page made or printed
    printed: list[str]       # the ids of those it printed, in order
    charts: dict[str, bytes] = field(default_factory=dict)
    calls: dict[str, tuple[str, str | None]] = field(default_factory=dict)   # its charts (ChartWriter.calls)


class PageCache:
    """Rendered pages by key, in `folder` (none: nothing kept). A page's key is the base key, its
    own template and front matter, and what it shows of the other pages (their names and meta)."""

    def __init__(self, folder: Path | None, base: str, templates: dict[str, str], own: set[str],
                 kept: dict[str, PageResult] | None = None):
        self.folder = Path(folder) / PAGES_FOLDER if folder else None
        self.kept = kept    # entries held in memory between renders (the preview's), or None
        self.base = base
        self.templates = templates
        # what every page may import: each template that is not one page's own
        self.shared = {k: v for k, v in templates.items() if k not in own}
        self.used: set[str] = set()
        self.hits = 0
        # each page's last entry, by page name: a page rendered again finds its previous charts there
        self.index_file = self.folder / INDEX if self.folder else None
        try:
            self.index = json.loads(self.index_file.read_text()) if self.index_file else {}
        except (OSError, ValueError):
            self.index = {}

    def key(self, spec: PageSpec, parts: list[PageSpec]) -> str:
        own = spec.template.name
        return digest(self.base, self.shared, own, self.templates.get(own), spec.body, spec.name,
                      spec.meta, [(p.name, p.meta) for p in parts])

    def _path(self, key: str) -> Path:
        return self.folder / key[:2] / f"{key}.pickle"

    def _load(self, key: str) -> PageResult | None:
        """Entry `key`: held in memory, else read from the folder; None when there is none (or
        it is another version's)."""
        if self.kept is not None and key in self.kept:
            return self.kept[key]
        try:
            found = pickle.loads(self._path(key).read_bytes()) if self.folder is not None else None
        except Exception:   # absent, or an entry from another version of the code
            return None
        return found if isinstance(found, PageResult) else None

    def get(self, key: str) -> PageResult | None:
        self.used.add(key)
        result = self._load(key)
        if result is not None:
            self.hits += 1
            if self.kept is not None:
                self.kept[key] = result
        return result

    def previous(self, name: str) -> PageResult | None:
        """Page `name`'s entry of the render before (another key: its template was edited), if
        it is still there."""
        key = self.index.get(name)
        return self._load(key) if isinstance(key, str) and key not in self.used else None

    def put(self, key: str, result: PageResult) -> None:
        self.index[result.page.name] = key
        if self.kept is not None:
            self.kept[key] = result
        if self.folder is not None:
            write_atomic(self._path(key), pickle.dumps(result, protocol=pickle.HIGHEST_PROTOCOL))

    def prune(self) -> None:
        """Drop the entries this render did not use (a page edited again has a new key)."""
        if self.kept is not None:
            for key in set(self.kept) - self.used:
                del self.kept[key]
        if self.folder is None or not self.folder.is_dir():
            return
        for path in self.folder.glob("*/*.pickle"):
            if path.stem not in self.used:
                path.unlink(missing_ok=True)
        self.index = {name: key for name, key in self.index.items() if key in self.used}
        write_atomic(self.index_file, json.dumps(self.index, sort_keys=True))


class DocsWriter:
    """Writes the files of a fresh docs folder. A file whose key is the one the old folder's
    manifest records for it is hard-linked from the old folder, not made and written again."""

    def __init__(self, new: Path, old: Path, cache: Path | None):
        self.new, self.old = Path(new), Path(old)
        self.manifest_file = Path(cache) / MANIFEST if cache else None
        self.before: dict[str, list] = {}
        if self.manifest_file is not None and self.manifest_file.is_file() and self.old.is_dir():
            try:
                data = json.loads(self.manifest_file.read_text())
                if data.get("folder") == os.stat(self.old).st_ino:   # still the folder it describes
                    self.before = data.get("files") or {}
            except (OSError, ValueError, AttributeError):
                self.before = {}
        self.after: dict[str, list] = {}
        self.linked = 0
        self.written = 0
        self.base = ""            # the render's base key, and how many pages came from the cache
        self.pages_reused = 0

    def can_link(self, rel: str, key: str) -> bool:
        kept = self.before.get(rel)
        if not kept or kept[0] != key:
            return False
        old = self.old / rel
        try:
            st = os.lstat(old)
        except OSError:
            return False
        return os.path.isfile(old) and not os.path.islink(old) and st.st_size == kept[1]

    def put(self, rel: str, key: str, make: Callable[[], str | bytes]) -> None:
        """The file `rel` (a docs path) with `key`: linked when unchanged, else made and written."""
        target = self.new / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if self.can_link(rel, key):
            try:
                os.link(self.old / rel, target)
                self.after[rel] = self.before[rel]
                self.linked += 1
                return
            except OSError:
                pass
        data = make()
        data = data.encode() if isinstance(data, str) else data
        write_file(target, data)
        self.after[rel] = [key, len(data)]
        self.written += 1

    def put_content(self, rel: str, data: str | bytes) -> None:
        """A file whose content is at hand: keyed by its bytes' sha256, the key written_outside
        gives a file another writer put there (a chart), so either finds the other's."""
        raw = data.encode() if isinstance(data, str) else data
        self.put(rel, data_sha256(raw), lambda: raw)

    def written_outside(self, rel: str) -> None:
        """A file put in the new folder by other code (a chart): keyed by its content."""
        path = self.new / rel
        self.after[rel] = [file_digest(path), path.stat().st_size]

    def link_all(self, rels: list[str], key: Callable[[str], str]) -> bool:
        """Link every file of `rels` when each is unchanged; False, and nothing linked, otherwise."""
        if not rels or not all(self.can_link(rel, key(rel)) for rel in rels):
            return False
        done = []
        try:
            for rel in rels:
                (self.new / rel).parent.mkdir(parents=True, exist_ok=True)
                os.link(self.old / rel, self.new / rel)
                done.append(rel)
        except OSError:
            for rel in done:
                (self.new / rel).unlink()
            return False
        for rel in rels:
            self.after[rel] = self.before[rel]
        self.linked += len(rels)
        return True

    def save(self, folder: Path) -> None:
        """Record the new folder's files (call once it is in place at `folder`)."""
        if self.manifest_file is not None:
            write_atomic(self.manifest_file, json.dumps(
                {"folder": os.stat(folder).st_ino, "files": self.after}, sort_keys=True))

