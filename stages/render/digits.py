"""The digit check: a number a template typed itself, outside a fact, is a number nobody can trace.

While a page renders, every macro's output is a placeholder (PLACEHOLDER); `check_digits` then
scans what the template itself typed and fails the build on a digit outside the allow-list.
"""
from __future__ import annotations

import re

from stages.core.config import CampaignError
from stages.render.escape import ESCAPED

# Digits a template may type itself: part numbers, a few hardware tokens, citation ids.
ALLOWED_PATTERNS = (
    r"\bParts? \d+\b",
    r"\b8 GPUs\b",
    r"\b8-GPU\b",
    r"\bH200\b",
    r"\bp90\b",
    r"\bp99\b",
    r"\[S\d+\]",
    r"\b(?:FP|BF)(?:4|8|16)\b",     # number formats by name (an FP8 KV cache)
    r"\b16-bit\b",
    r"\b2\(n-1\)/n",  # the all-reduce bus factor, as nccl-tests writes it
)
PLACEHOLDER = re.compile(r"@@M[A-Z]+@@")


class FactCheckError(CampaignError):
    """A rendered page prints a number that did not come from a fact."""


def check_digits(page: str, text: str, allowed: tuple[str, ...] = ALLOWED_PATTERNS) -> None:
    """Fail when the template typed a digit outside a fact (macro outputs are placeholders)."""
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = PLACEHOLDER.sub(" ", raw)
        line = ESCAPED.sub(" ", line)  # characters escape_text wrote as references
        line = re.sub(r"\]\([^)\s]*(?:\s+\"[^\"]*\")?\)", "]()", line)  # link targets
        line = re.sub(r"\{#[A-Za-z0-9_-]+\}", "", line)  # heading ids
        for pattern in allowed:
            line = re.sub(pattern, " ", line)
        m = re.search(r"\S*\d\S*", line)
        if m:
            raise FactCheckError(
                f"{page}: line {lineno} prints a number outside a fact: {m.group(0)!r} in {raw.strip()[:120]!r}")
