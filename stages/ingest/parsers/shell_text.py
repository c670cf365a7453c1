"""cmd.sh as shell text: its logical lines (backslash-newline continuations joined), the words of
each (as the shell splits them) and the physical line each word is on, so that a flag of a command
continued over several lines cites the line that holds it. The command itself is read by cmd."""
from __future__ import annotations

import shlex

from stages.formats.lines import ParseError


def continued_lines(text: str) -> list[tuple[int, str, list[tuple[int, str]]]]:
    """(first physical line, text, pieces) with backslash-newline continuations joined; pieces
    are (physical line, its text without the continuation) of each line joined."""
    out: list[tuple[int, str, list[tuple[int, str]]]] = []
    buf: list[tuple[int, str]] = []
    start = 1

    def joined() -> str:
        return " ".join(part.strip() for _, part in buf if part.strip())

    for number, raw in enumerate(text.split("\n"), start=1):
        raw = raw.rstrip("\r")
        if not buf:
            start = number
        stripped = raw.rstrip()
        backslashes = len(stripped) - len(stripped.rstrip("\\"))
        if backslashes % 2 == 1:
            buf.append((number, stripped[:-1]))
            continue
        buf.append((number, raw))
        out.append((start, joined(), buf))
        buf = []
    if buf:
        out.append((start, joined(), buf))
    return out


def token_lines(tokens: list[str], pieces: list[tuple[int, str]], start: int) -> list[int]:
    """The physical line of each token of a continued command: each piece split on its own gives
    the same words as the whole line in the common case (no quote or comment across a
    continuation), and then each word's line is its piece's; otherwise every word is said to be
    on the command's first line."""
    if len(pieces) > 1:
        words: list[str] = []
        lines: list[int] = []
        for number, piece in pieces:
            try:
                split = shlex.split(piece, comments=True, posix=True)
            except ValueError:
                break
            words += split
            lines += [number] * len(split)
        else:
            if words == tokens:
                return lines
    return [start] * len(tokens)


def split_words(text: str, line: int, errors: list[ParseError]) -> list[str]:
    """The words of a logical line as the shell splits them (quotes, comments); split on white
    space, with an error, where the shell could not split it (an unclosed quote)."""
    try:
        return shlex.split(text, comments=True, posix=True)
    except ValueError as exc:
        errors.append(ParseError(line, f"cmd.sh: {exc}; split on whitespace instead"))
        return text.split()
