"""Sources: site/sources.yaml, the [S1] citations that link to it, and the SOURCES.md page."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Protocol

import yaml

from stages.core.config import CampaignError
from stages.render.escape import escape_text


CITATION = re.compile(r"\[(S\d+)\](?!\()")
SOURCE_FIELDS = ("id", "title", "publisher", "url", "accessed")


class Citing(Protocol):
    """A rendered page as the sources page lists it (stages/render/pages.RenderedPage)."""
    name: str
    meta: dict[str, Any]
    cited: list[str]


class SourceError(CampaignError):
    """An article cites a source id that site/sources.yaml does not list."""


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


def sources_page(sources: dict[str, dict], pages: list[Citing]) -> str:
    cited_by: dict[str, list[Citing]] = {}
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
