"""What a reader reads of a built page: the article's text (its prose, tables and quoted logs;
not the chart specs), its word count, and the long sentences it says more than once."""
from __future__ import annotations

import html
import re
from collections import Counter
from pathlib import Path

LONG = 12    # words: a sentence this long said twice is a repeated paragraph, not a phrase


def article_text(page: Path) -> str:
    """The visible text of a built page's article (mkdocs-material's md-content)."""
    source = page.read_text()
    m = re.search(r'<article class="md-content__inner[^"]*">(.*?)</article>', source, re.S)
    body = m.group(1) if m else source
    body = re.sub(r"<(script|svg|style)\b.*?</\1>", " ", body, flags=re.S)
    return html.unescape(re.sub(r"<[^>]+>", " ", body))


def words(text: str) -> int:
    return len(text.split())


def repeated_sentences(text: str) -> dict[str, int]:
    """Each sentence of LONG words or more that the text says more than once, with its count."""
    flat = re.sub(r"\s+", " ", text)
    sentences = [s.strip() for s in re.split(r"(?<=[.!?])\s+", flat) if len(s.split()) >= LONG]
    return {s: n for s, n in Counter(sentences).items() if n > 1}
