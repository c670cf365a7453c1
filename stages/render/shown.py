"""How much of one text a page shows.

An engine can write a field of millions of characters: vLLM answered requests of a 1M-token run
with a "generated text" of 1.2 to 4.6 million characters, its prompt echoed back. Such a field is
kept whole where it is stored and shortened where it is shown. Ingest stores it whole in the
warehouse, derive in campaign.duckdb and the CSV downloads (stages/render/downloads.py, redact_csv).
What render shows, it shortens here, to SHOWN_CHARS characters followed by a note of how many it
left out: the rows of every row query and fact (FactBook._query, so table cells and their
tooltips, text(), and a chart's rows, in the Vega-Lite spec inlined into its page and in the
chart's CSV beside it), and each output line of an evidence block. An audit page's excerpt of a
raw line is cut shorter, at evidence.EXCERPT_MAX, by the same function with the same note.
"""
from __future__ import annotations

from typing import Any, Sequence

from stages.core.secrets import redact_text

# The most characters of one text a page shows: above the longest text a page prints whole (a
# launch command, one to two thousand characters; a crash message, which ingest keeps to 2,000),
# and a thousandth of an echoed 1M-token prompt.
SHOWN_CHARS = 4000
# A text is redacted over this many times the characters shown before it is cut (a secret cut in
# two would no longer look like one).
_WINDOW = 4


def left_out_note(count: int) -> str:
    """The note after a shortened text: ` … (1,234 more characters not shown)`."""
    return f" … ({count:,} more character{'' if count == 1 else 's'} not shown)"


def shorten(text: str, limit: int = SHOWN_CHARS) -> str:
    """`text` redacted, and when it is longer than `limit` characters, its first `limit` and the
    note of how many more it has. A long text is redacted over a window of _WINDOW times the cut
    only (a 40 MB text whole takes seconds), unless redaction shrank the window so far that text
    from beyond it could come into view; then over the whole text. The count is of the text as
    redacted where it was (the window) and as stored beyond it."""
    window = limit * _WINDOW
    if len(text) <= window:
        shown, rest = redact_text(text), 0
    else:
        shown, rest = redact_text(text[:window]), len(text) - window
        if len(shown) < window - limit:
            shown, rest = redact_text(text), 0
    if len(shown) + rest <= limit:
        return shown
    return shown[:limit] + left_out_note(len(shown) - limit + rest)


def is_long(value: Any) -> bool:
    return isinstance(value, str) and len(value) > SHOWN_CHARS


def shown_rows(columns: Sequence[Any], rows: list[tuple]) -> list[tuple]:
    """Query rows as a page may show them: each text longer than SHOWN_CHARS shortened. Only the
    text columns (`columns`: a cursor's description) are looked at; the rows are returned as
    they are when none holds such a text (the usual case)."""
    texts = [i for i, column in enumerate(columns) if str(column[1]) in ("VARCHAR", "JSON")]
    if not texts or not any(is_long(row[i]) for row in rows for i in texts):
        return rows
    return [tuple(shorten(v) if is_long(v) else v for v in row) for row in rows]
