"""The series as a blog: mkdocs-material's blog plugin publishes the Parts as posts.

A Part is written to POSTS_DIR of the docs folder (the plugin's default posts folder under
`blog_dir: .`); with `post_url_format: "{file}"` (mkdocs.yml) the plugin publishes it at the site
root under its own name, so `posts/part-node.md` becomes `part-node.html`. The series' authors
(series.yaml `authors:`) go to AUTHORS_FILE, the plugin's authors file. A post opens with its
description, then the excerpt separator: the blog index, archive, category pages and the RSS
feed show the Part up to there.
"""
from __future__ import annotations

import posixpath
import re
from typing import Any

import yaml

from stages.core.config import CampaignError
from stages.render.escape import escape_text

POSTS_DIR = "posts"
AUTHORS_FILE = ".authors.yml"
AVATAR = "assets/images/author.svg"     # written by the render stage (stage.ASSET_FILES)
EXCERPT_SEPARATOR = "<!-- more -->"
AUTHOR_KEYS = ("name", "description")

# Markdown link targets `](target` (inline links and images); raw HTML links are left alone, they
# resolve against the published page, which sits at the site root.
_LINK = re.compile(r"(\]\()([^)\s]+)")
# Where a `](` is not a Markdown link: fenced code and script bodies (chart specs).
_VERBATIM = re.compile(r"(^```.*?^```[ \t]*$|<script\b.*?</script>)", re.S | re.M | re.I)
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")


def post_name(template_stem: str) -> str:
    """The docs path of a Part written from the template `<template_stem>.j2`."""
    return f"{POSTS_DIR}/{template_stem}"


def published_url(page: str) -> str:
    """Where the docs page `page` is published, from the site root: a Part at the root under its
    own name (posts/part-node.md: part-node.html), any other page beside its source."""
    if page.startswith(POSTS_DIR + "/"):
        page = page[len(POSTS_DIR) + 1:]
    return page[: -len(".md")] + ".html" if page.endswith(".md") else page


def load_authors(series: dict[str, Any], origin: str) -> dict[str, dict[str, str]]:
    """The series' `authors:` block: id -> {name, description}."""
    block = series.get("authors") or {}
    if not isinstance(block, dict):
        raise CampaignError(f"{origin}: `authors` must map an author id to its name and description")
    authors = {}
    for key, entry in block.items():
        if not isinstance(entry, dict) or not all(isinstance(entry.get(k), str) for k in AUTHOR_KEYS):
            raise CampaignError(f"{origin}: author {key!r} needs a name and a description")
        unknown = sorted(set(entry) - set(AUTHOR_KEYS))
        if unknown:
            raise CampaignError(f"{origin}: author {key!r}: unknown key(s) {', '.join(map(str, unknown))}")
        authors[str(key)] = {k: entry[k] for k in AUTHOR_KEYS}
    return authors


def author_names(ids: Any, authors: dict[str, dict[str, str]], origin: str) -> list[str]:
    """The names of a Part's `authors:` ids; an id the series does not declare is an error."""
    if not isinstance(ids, list):
        raise CampaignError(f"{origin}: `authors` must be a list of author ids")
    unknown = [str(i) for i in ids if str(i) not in authors]
    if unknown:
        raise CampaignError(f"{origin}: author(s) {', '.join(unknown)} not declared under the "
                            f"series' `authors:` ({', '.join(authors) or 'none declared'})")
    return [authors[str(i)]["name"] for i in ids]


def authors_file(authors: dict[str, dict[str, str]]) -> str:
    """The blog plugin's authors file, every author with the site's own avatar."""
    entries = {key: {"name": a["name"], "description": a["description"], "avatar": AVATAR}
               for key, a in authors.items()}
    return yaml.safe_dump({"authors": entries}, sort_keys=False, allow_unicode=True)


def with_excerpt(body: str, description: Any) -> str:
    """The body with the description and the excerpt separator after its title (first `# ` line),
    or at the top when it has none."""
    lead = f"{escape_text(description)}\n\n{EXCERPT_SEPARATOR}\n"
    lines = body.split("\n")
    for i, line in enumerate(lines):
        if line.startswith("# "):
            return "\n".join(lines[: i + 1] + ["", lead] + lines[i + 1:])
    return lead + "\n" + body


def _rebase(target: str, folder: str) -> str:
    if target.startswith(("#", "/")) or _SCHEME.match(target):
        return target
    path, hash_, fragment = target.partition("#")
    return posixpath.relpath(path, folder) + hash_ + fragment


def rebase_links(text: str, folder: str) -> str:
    """Markdown written with links relative to the docs root, for a page in `folder`: each
    relative link target is made relative to that folder (mkdocs resolves it from there)."""
    if not folder:
        return text
    parts = _VERBATIM.split(text)
    for i in range(0, len(parts), 2):
        parts[i] = _LINK.sub(lambda m: m.group(1) + _rebase(m.group(2), folder), parts[i])
    return "".join(parts)
