"""The one escaping path: data text as it may stand on a page (redacted, then escaped for HTML
and Markdown), inline code, audit link targets, and the compact run labels with their anchors."""
from __future__ import annotations

import html
import hashlib
import re
from typing import Any
from urllib.parse import quote

from stages.core.secrets import redact_text

RUN_TIME = re.compile(r"__\d{4}-(\d{2})(\d{2})\d{2}$")
RUN_LINK = re.compile(r'<a class="(run-ref[^"]*)" href="#([^"]+)" title="([^"]*)">(.*?)</a>')
# Characters Markdown reads as syntax inside text, code and raw HTML attributes alike (links,
# images, code spans, emphasis, attr_list braces, table cells), written as character references.
MD_SPECIALS = frozenset("\\`*_[](){}!|~$")
ESCAPED = re.compile("|".join([*(f"&#{ord(ch)};" for ch in sorted(MD_SPECIALS)), "&#x27;"]))
_MD_REFERENCES = str.maketrans({ch: f"&#{ord(ch)};" for ch in MD_SPECIALS})


def escape_text(text: Any, *, redact: bool = True) -> str:
    """Data text as it may stand anywhere on a page: redacted, then escaped for HTML and for
    Markdown, so neither a tag nor a link, code span or attribute list can come out of it. The
    result is also safe inside a double-quoted HTML attribute (see escape_attr). redact=False
    only for the project's own prose (schema comments), where `key=value` is not a secret."""
    out = html.escape(redact_text(str(text)) if redact else str(text), quote=True)
    return out.translate(_MD_REFERENCES)


def escape_cell(text: Any, max_chars: int | None = None, *, redact: bool = True) -> str:
    """Data text on one line (a table cell), cut to max_chars."""
    flat = " ".join((redact_text(str(text)) if redact else str(text)).split())
    if max_chars and len(flat) > max_chars:
        flat = flat[:max_chars] + "…"
    return escape_text(flat, redact=redact)


HEX_RUN = re.compile(r"([0-9a-f]{8})[0-9a-f]{8,}")


def escape_label(text: Any, max_chars: int | None = None, *, redact: bool = True) -> str:
    """A table cell's text on one line, shortened for the column: a hexadecimal run of 16
    characters or more (a commit or digest in an image tag) cut to its first 8, and the text cut
    to max_chars, each cut marked `…`. A shortened cell carries the whole text as its tooltip."""
    flat = " ".join((redact_text(str(text)) if redact else str(text)).split())
    short = HEX_RUN.sub(r"\1…", flat)
    if max_chars and len(short) > max_chars:
        short = short[:max_chars] + "…"
    if short == flat:
        return escape_text(flat, redact=False)
    return f'<span class="cut" title="{escape_text(flat, redact=False)}">{escape_text(short, redact=False)}</span>'


def escape_attr(text: Any) -> str:
    """Data text for a double-quoted HTML attribute value (one line; Markdown cannot re-read it)."""
    return escape_cell(text)


def escape_html(text: Any) -> str:
    """Data text on a finished HTML page that no Markdown reads (an audit page): redacted, then
    escaped for HTML; Markdown's characters stay as they are."""
    return html.escape(redact_text(str(text)), quote=True)


def html_code(text: Any) -> str:
    """Data text as inline code on a finished HTML page (escape_html)."""
    return f"<code>{escape_html(text)}</code>"


def code(text: Any) -> str:
    """Data text as inline code, written as HTML so that Markdown leaves its content alone."""
    return f"<code>{escape_text(text)}</code>"


def audit_location(fid: str, name: str, run_ids: list[str], params: dict) -> tuple[str, str]:
    """(audit page, anchor) of a fact. A fact of one run is audited on that run's page, a node's
    fact on the node's page, any other on its name's page; its anchor is its name and a digest
    of its id (unique, and safe in a URL and an HTML id)."""
    if len(run_ids) == 1:
        page = run_ids[0]
    elif isinstance(params.get("node_id"), str):
        page = params["node_id"]
    else:
        page = name
    page = re.sub(r"[^A-Za-z0-9._-]", "-", page).lstrip(".") or "facts"
    anchor = f"{re.sub(r'[^A-Za-z0-9_-]', '-', name)}-{hashlib.sha1(fid.encode()).hexdigest()[:10]}"
    return page, anchor


def audit_target(prefix: str, page: str, anchor: str) -> str:
    """The link target of a fact's entry: its audit page (HTML, see audit.py), at its anchor."""
    return f"{prefix}{quote(page, safe='')}.html#{anchor}"


def run_anchor(run_id: str) -> str:
    """The HTML id of a run's section on a page: run-<run id>, other characters than letters,
    digits, '_' and '-' as '-' (safe in an href, an id and attr_list)."""
    return "run-" + re.sub(r"[^A-Za-z0-9_-]", "-", run_id)


def run_label(run_id: str, spec: str | None = None) -> str:
    """A short label for a run: its spec (or the run id without its time) and the HH:MM the
    run id carries, e.g. `tiny-seqs4 · 05:12` for tiny-llama__cpu_seqs4__4k__vllm__1130-051200."""
    m = RUN_TIME.search(run_id)
    name = spec or (run_id[: m.start()].rstrip("_") if m else run_id)
    return f"{name} · {m.group(1)}:{m.group(2)}" if m else name


def run_label_link(run_id: str, spec: str | None = None) -> str:
    """The compact run label, linked to the run's section; the full id is its tooltip. A label of
    a run without a spec (its id's fields joined by `__`) may wrap after a `__`, so that a narrow
    column holds it (class run-ref-parts: each field on one line)."""
    label = run_label(run_id, spec)
    parts = [p for p in re.split(r"(?<=__)", label) if p]
    cls, shown = "run-ref", escape_text(label)
    if len(parts) > 1:
        cls, shown = "run-ref run-ref-parts", "<wbr>".join(f"<span>{escape_text(p)}</span>" for p in parts)
    return (f'<a class="{cls}" href="#{run_anchor(run_id)}" '
            f'title="{escape_attr(run_id)}">{shown}</a>')


def setup_label(setup: str) -> str:
    """A short label for a setup (pareto_points.setup: model, layout, engine and image joined by
    ' | '): the four joined by ' · ', the image by its tag alone and a long hexadecimal run in it
    cut to 8 characters, e.g. `qwen3_235b · tp4 · vllm · nightly-7c41e9a0`."""
    parts = str(setup).split(" | ")
    if len(parts) != 4:
        return HEX_RUN.sub(r"\1", str(setup))
    image = parts[3].rsplit("/", 1)[-1]
    tag = image.split(":", 1)[1] if ":" in image else image
    return " · ".join([*parts[:3], HEX_RUN.sub(r"\1", tag)])


def setup_label_text(setup: str) -> str:
    """The setup's short label for a table cell, the whole setup its tooltip."""
    return f'<span class="setup-ref" title="{escape_attr(setup)}">{escape_text(setup_label(setup))}</span>'


def unlink_missing_runs(text: str, anchors: set[str]) -> str:
    """Run labels whose run has no section on the page keep their tooltip but lose the link."""
    def fix(m: re.Match) -> str:
        if m.group(2) in anchors:
            return m.group(0)
        return f'<span class="{m.group(1)}" title="{m.group(3)}">{m.group(4)}</span>'

    return RUN_LINK.sub(fix, text)
