"""Building the site and putting it in place: mkdocs build, scratch folders, the swap.

Docs and site are built into fresh folders beside their targets and renamed into place only when
the whole build succeeded. A target is replaced only when it holds the marker file render writes
(MARKER) or is empty: a site or docs path pointed at the runs refuses, deleting nothing. A built
site that would load anything from another host is refused. The 404 page's links are made relative,
as every other page's are.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any

import yaml

from stages.core.config import CampaignError
from stages.core import files
from stages.core.files import scratch, stale_scratch, write_file
from stages.render import blog, site_memo
from stages.core.provenance import digest, file_digest
from stages.render.incremental import code_version

MARKER = ".campaign-render"   # in the root of each folder render writes; only such a folder is replaced
ERROR_PAGE = "404.html"     # at the site root; mkdocs writes its links from the server root
THEME_CONFIG = re.compile(r'(<script id="__config" type="application/json">)(.*?)(</script>)', re.S)
EXTERNAL_LOAD = re.compile(
    # a <link> naming the page's published address (rel canonical, or alternate: the RSS feed)
    # loads nothing; any other element or link pointing at another host does
    r"<(?:script|link(?![^>]*\brel\s*=\s*[\"']?(?:canonical|alternate)\b)|img|iframe|source|video|audio|embed)"
    r"\b[^>]*?\b(?:src|href)\s*=\s*[\"']?(?:https?:)?//",
    re.I)


def _rel(path: Path, root: Path) -> str:
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return path.as_posix()


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


def fresh_dir(target: Path) -> Path:
    """A new empty folder beside `target` (its scratch path, stages.core.files.scratch) to build
    into, marked as render's own. Marked leftovers of a render that was killed (and this thread's
    own, of a render that failed) are removed first."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = scratch(target)
    for stale in [*stale_scratch(target), tmp, scratch(target, "old")]:
        if stale.is_dir() and not stale.is_symlink() and (stale / MARKER).is_file():
            shutil.rmtree(stale)
    tmp.mkdir()
    mark(tmp)
    return tmp


def mark(folder: Path) -> None:
    write_file(folder / MARKER, "Written by `campaign render`, which replaces this folder whole.\n")


def swap_in(new: Path, target: Path) -> None:
    """Put the folder `new` at `target`: swapped with the old one in one step (renameat2), so that
    `target` is a whole site at every instant, old or new; where the file system cannot, the old
    one is renamed aside first. The old one is then removed only when render had written it."""
    check_ours(target)
    try:
        files.swap_in(new, target, remove_old=_remove_ours)
    except OSError as exc:
        raise CampaignError(f"{target}: cannot move the new build in ({exc.strerror})") from None


def _remove_ours(old: Path) -> None:
    if (old / MARKER).is_file():
        shutil.rmtree(old)
    else:
        old.rmdir()     # check_ours let it through empty


def external_loads(site_dir: Path, old_site: Path | None = None) -> list[str]:
    """Resources a built page would fetch from another host (should be none). A page linked from
    the previous site (`old_site`), checked when that was built, is not read again."""
    found = []
    for page in site_dir.rglob("*.html"):
        if old_site is not None and os.stat(page).st_nlink > 1:
            old = old_site / page.relative_to(site_dir)
            if old.is_file() and os.path.samefile(old, page):
                continue
        for m in EXTERNAL_LOAD.finditer(page.read_text(errors="replace")):
            found.append(f"{_rel(page, site_dir)}: {m.group(0)[:100]}")
    return found


def relative_error_page(site_dir: Path) -> None:
    """Make the links of the site's 404 page relative to the site root, where the page lies, so
    that they work when the site is opened from disk: mkdocs writes them from the server root
    (the theme config's `base`, `/` without a site_url), which from file:// is the disk's root."""
    page = site_dir / ERROR_PAGE
    text = page.read_text() if page.is_file() else ""
    found = THEME_CONFIG.search(text)
    if found is None:
        return
    config = json.loads(found.group(2))
    base = config.get("base")
    if not isinstance(base, str) or not base.startswith("/"):
        return
    config["base"] = "."
    if isinstance(config.get("search"), str) and config["search"].startswith(base):
        config["search"] = config["search"][len(base):]
    text = text[:found.start(2)] + json.dumps(config).replace("<", "\\u003c") + text[found.end(2):]
    root_url = re.compile(r"""(\s(?:href|src)=["'])""" + re.escape(base) + "(?!/)")
    write_file(page, root_url.sub(r"\1./", text))


def site_nav(pages: list[str], config: Path) -> list[str] | None:
    """The navigation in series order (index, then the rest), unless the mkdocs config sets its
    own. The Parts, blog posts under blog.POSTS_DIR, stay out of it: the blog index, archive and
    category pages list them."""
    return None if "nav" in own_settings(config) else \
        [p for p in pages if not p.startswith(blog.POSTS_DIR + "/")]


def own_settings(config: Path) -> dict[str, Any]:
    """The mkdocs config's own top-level settings, read as plain text (none when unreadable)."""
    try:
        own = yaml.load(config.read_text(), Loader=yaml.BaseLoader) or {}
    except (OSError, yaml.YAMLError):
        own = {}
    return own if isinstance(own, dict) else {}


def build_site(config: Path, docs_dir: Path, site_dir: Path, nav: list[str] | None = None,
               cache_dir: Path | None = None, old_site: Path | None = None,
               memo: site_memo.SiteMemo | None = None) -> Path:
    """`mkdocs build --strict` on docs_dir into site_dir; the config's other settings apply. Built
    in this process, what it converted remembered in `memo` (or the cache folder's) and unchanged
    static files linked from `old_site` (stages/render/site_memo.py)."""
    with tempfile.TemporaryDirectory() as tmp:
        cfg = Path(tmp) / "mkdocs.yml"
        settings: dict[str, Any] = {"INHERIT": str(config.resolve()), "docs_dir": str(docs_dir.resolve()),
                                    "site_dir": str(site_dir.resolve())}
        if nav:
            settings["nav"] = nav
        hooks = own_settings(config).get("hooks")
        hook_files = []
        if isinstance(hooks, list):   # relative to the config they are named in, not to this one
            hook_files = [(config.parent / h).resolve() for h in hooks]
            settings["hooks"] = [str(h) for h in hook_files]
        write_file(cfg, yaml.safe_dump(settings))
        memo = memo or site_memo.SiteMemo(cache_dir)
        key = digest(code_version(), file_digest(config), nav, [file_digest(h) for h in hook_files])
        problems = site_memo.build(cfg, memo, key, old_site if old_site and old_site.is_dir() else None)
    if problems:
        shown = [l for l in problems if "WARNING" in l or "ERROR" in l or "Error" in l] or problems[-3:]
        raise CampaignError("mkdocs build --strict failed: " + " | ".join(shown[:5]))
    relative_error_page(site_dir)
    loads = external_loads(site_dir, old_site if old_site and old_site.is_dir() else None)
    if loads:
        raise CampaignError("the site loads from other hosts: " + "; ".join(loads[:5]))
    return site_dir / "index.html"
