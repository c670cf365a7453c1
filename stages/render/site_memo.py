"""mkdocs build in this process, remembering what it converted (keyed by content).

A full mkdocs build converts every page's Markdown, parses every page's HTML for the search
index and again for the blog's reading time, and copies every file of the docs folder. Most of
that is the same from one render to the next: one template edited changes one page. The build
here is mkdocs' own, whole (navigation, blog views, feeds and search index made as always), with
three of its steps remembered under a key of everything they read:

- a page's conversion (mkdocs' Page.render): its Markdown, where it is, the site's files and the
  Markdown settings; kept: the HTML, table of contents, title and anchors it found;
- a page's search entries (the theme's search index): the page's HTML, address, title and meta;
- a post's reading time: its HTML.

A static file (an audit page, a chart's spec, a download) whose source is no newer than its copy
in the previous site is hard-linked from there rather than copied (mkdocs' own rule for a dirty
build; the file written over, if ever, is unlinked first). So a build after a one-page edit does
the work of that page, and its output is byte for byte the output of a build from scratch.
"""
from __future__ import annotations

import contextlib
import logging
import os
import pickle
from pathlib import Path
from typing import Any, Iterator

import jinja2

from stages.core.faults import is_storage_fault, storage_fault
from stages.core.files import write_atomic
from stages.core.provenance import digest

MEMO_FILE = "site-memo.pickle"   # in the cache folder
SETTINGS = "settings"            # the memo's entry naming the code and config of the last build
LOGGER = "mkdocs"


class SiteMemo:
    """The remembered steps, by key; saved (only the entries the last build used) after a build
    that succeeded."""

    def __init__(self, folder: Path | None):
        self.file = Path(folder) / MEMO_FILE if folder else None
        self.entries: dict[str, Any] = {}
        if self.file is not None and self.file.is_file():
            try:
                loaded = pickle.loads(self.file.read_bytes())
                self.entries = loaded if isinstance(loaded, dict) else {}
            except Exception:    # another version's file: start again
                self.entries = {}
        self.used: dict[str, Any] = {}
        self.hits = self.misses = 0
        # rendered pages by key, held in memory by a process that renders again and again (the
        # preview) so that a page its edit did not touch is not read back from the cache folder
        self.pages: dict[str, Any] = {}

    def get(self, key: str) -> Any:
        found = self.entries.get(key)
        if found is not None:
            self.used[key] = found
            self.hits += 1
        else:
            self.misses += 1
        return found

    def put(self, key: str, value: Any) -> None:
        self.used[key] = value

    def commit(self) -> None:
        """Keep what this build used; write it to the cache folder."""
        self.entries, self.used = self.used, {}
        if self.file is not None:
            write_atomic(self.file, pickle.dumps(self.entries, protocol=pickle.HIGHEST_PROTOCOL))

    def discard(self) -> None:
        self.used = {}


def _files_key(files: Any, cache: dict) -> str:
    if id(files) not in cache:
        cache[id(files)] = digest(sorted((f.src_uri, f.dest_uri, f.url, str(f.inclusion)) for f in files))
    return cache[id(files)]


def _toc(toc: Any) -> list:
    return [(item.id, item.title, item.level, _toc(item.children)) for item in toc]


@contextlib.contextmanager
def remembered(memo: SiteMemo, settings: str, old_site: Path | None) -> Iterator[None]:
    """mkdocs' page conversion, search entries, reading time and static copies, remembered in
    `memo` (keys include `settings`: the config and the code) and linked from `old_site`."""
    from material.plugins.blog import plugin as blog_plugin
    from material.plugins.search.plugin import SearchIndex, SearchPlugin
    from mkdocs.structure.files import File
    from mkdocs.structure.pages import Page

    from mkdocs.theme import Theme

    render, add_entry, readtime, copy_file = (Page.render, SearchIndex.add_entry_from_context,
                                              blog_plugin.readtime, File.copy_file)
    index_page = SearchPlugin.on_page_context
    get_env = Theme.get_env
    files_keys: dict = {}

    def page_render(self, config, files):
        key = digest("render", settings, self.markdown, self.file.src_uri, self.file.dest_uri,
                     self.file.url, _files_key(files, files_keys))
        kept = memo.get(key)
        if kept is None:
            render(self, config, files)
            links = {f.src_uri: v for f, v in (self.links_to_anchors or {}).items()} \
                if self.links_to_anchors is not None else None
            memo.put(key, (self.content, self.toc, self._title_from_render,
                           self.present_anchor_ids, links))
            return
        self.content, self.toc, self._title_from_render, self.present_anchor_ids, links = kept
        if links is not None:
            self.links_to_anchors = {files.get_file_from_path(uri): v for uri, v in links.items()}

    def search_entries(self, page):
        key = digest("search", settings, page.content, page.url, page.title, page.meta,
                     _toc(page.toc), self.config)
        kept = memo.get(key)
        if kept is None:
            before = len(self.entries)
            add_entry(self, page)
            memo.put(key, self.entries[before:])
            return
        self.entries.extend(dict(entry) for entry in kept)

    def search_page(self, context, *, page, config, nav):
        """The theme's own step (index the page, then strip its data-search attributes), the
        strip skipped on a page that has none: its pattern scans the whole page, charts' data
        included, for nothing."""
        if "data-search-" in (page.content or ""):
            return index_page(self, context, page=page, config=config, nav=nav)
        if self.config.enabled:
            self.search_index.add_entry_from_context(page)

    def reading_time(html, *args):
        key = digest("readtime", html, args)
        kept = memo.get(key)
        if kept is None:
            kept = readtime(html, *args)
            memo.put(key, kept)
        return kept

    def copy_static(self, dirty: bool = False):
        dest = self.abs_dest_path
        if self._content is None and self.abs_src_path and old_site is not None and not os.path.lexists(dest):
            old = old_site / self.dest_uri
            try:
                src_st, old_st = os.stat(self.abs_src_path), os.lstat(old)
                if os.path.isfile(old) and not os.path.islink(old) and src_st.st_size == old_st.st_size \
                        and src_st.st_mtime_ns <= old_st.st_mtime_ns:
                    os.makedirs(os.path.dirname(dest), exist_ok=True)
                    os.link(old, dest)
                    return
            except OSError:
                pass
        if os.path.lexists(dest):
            os.unlink(dest)   # never write through a link into the previous site
        copy_file(self, dirty)

    def theme_env(self):
        """The theme's templates, compiled once and kept (Jinja's bytecode cache)."""
        env = get_env(self)
        if memo.file is not None:
            folder = memo.file.parent / "theme-bytecode"
            folder.mkdir(parents=True, exist_ok=True)
            env.bytecode_cache = jinja2.FileSystemBytecodeCache(str(folder))
        return env

    Page.render = page_render
    Theme.get_env = theme_env
    SearchIndex.add_entry_from_context = search_entries
    SearchPlugin.on_page_context = search_page
    blog_plugin.readtime = reading_time
    File.copy_file = copy_static
    try:
        yield
    finally:
        Page.render, SearchIndex.add_entry_from_context = render, add_entry
        blog_plugin.readtime, File.copy_file, Theme.get_env = readtime, copy_file, get_env
        SearchPlugin.on_page_context = index_page


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(f"{record.levelname}: {record.getMessage()}")


def build(config_file: Path, memo: SiteMemo, settings: str, old_site: Path | None) -> list[str]:
    """`mkdocs build --strict` of `config_file`, in this process; the problems it logged (the
    build failed when there are any)."""
    from mkdocs.commands import build as mkdocs_build
    from mkdocs.config import load_config
    from mkdocs.exceptions import Abort, ConfigurationError

    if memo.entries.get(SETTINGS) != settings:
        old_site = None      # built by other code or settings: copy everything afresh
    memo.put(SETTINGS, settings)
    logger = logging.getLogger(LOGGER)
    handler, level, propagate = _Collect(), logger.level, logger.propagate
    logger.addHandler(handler)
    logger.setLevel(logging.WARNING)
    logger.propagate = False
    config = None
    try:
        with remembered(memo, settings, old_site):   # before the plugins load: they keep their methods
            config = load_config(str(config_file), strict=True)
            config.plugins.on_startup(command="build", dirty=False)
            try:
                mkdocs_build.build(config)
            finally:
                config.plugins.on_shutdown()
    except (Abort, ConfigurationError, OSError) as exc:
        memo.discard()
        if isinstance(exc, OSError) and is_storage_fault(exc):   # a full or failing disk: one line, its path
            raise storage_fault(exc.filename or (config["site_dir"] if config else config_file), exc) from None
        return handler.lines or [str(exc)]
    except Exception as exc:   # a plugin's or a hook's error: the build failed, say why
        memo.discard()
        return handler.lines + [f"ERROR: {exc.__class__.__name__}: {exc}"]
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
        logger.propagate = propagate
    if handler.lines:
        memo.discard()
        return handler.lines
    memo.commit()
    return []
