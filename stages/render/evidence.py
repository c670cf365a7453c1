"""Raw evidence: a raw file read as ingest reads it (a regular file inside its folder, no link on
the way), the line a fact rests on, and evidence blocks (a command run on a raw file at build time)."""
from __future__ import annotations

import os
import re
import shlex
from pathlib import Path

from stages.core import rawfile
from stages.core.config import CampaignError
from stages.render.errors import FactError
from stages.render.escape import escape_text
from stages.render.shown import SHOWN_CHARS, shorten

EXCERPT_MAX = 400       # characters of a raw line shown beside a fact (a shown text, see shown.py)
RAW_MAX = 64 << 20      # bytes read from one raw file at render or trace time


class RawFileRefused(CampaignError):
    """A raw file that render or trace will not read (a link, not a regular file, outside its folder)."""


def open_raw(path: Path, within: tuple[Path, ...]):
    """A raw file opened for reading (binary; a .gz decompressed), as ingest opens it
    (stages.core.rawfile): only a regular file inside one of the folders `within`, no link on the way.
    The refusal says why without quoting the target."""
    path = Path(os.path.abspath(path))       # absolute, links not resolved
    for folder in map(os.path.abspath, within):
        try:
            name = path.relative_to(folder).as_posix()
        except ValueError:
            continue
        try:
            return rawfile.open_stream(Path(folder), name)
        except rawfile.Refused as exc:
            raise RawFileRefused(f"{path}: refused ({exc.reason})") from None
    raise RawFileRefused(f"{path}: refused (outside the raw folders)")


def read_raw(path: Path, within: tuple[Path, ...], limit: int = RAW_MAX) -> tuple[bytes, bool]:
    """Up to `limit` bytes of a raw file (see open_raw), and whether there was more."""
    with open_raw(path, within) as fh:
        data = fh.read(limit + 1)
    return data[:limit], len(data) > limit


def excerpt(text: str) -> str:
    """A raw line redacted and cut to EXCERPT_MAX characters, with a note of how many more it has
    (a result file's one line of JSON can be tens of MB); the raw file keeps it whole. Redacted
    over a window of the line only (shown.shorten)."""
    return shorten(text, EXCERPT_MAX)


def read_line(root: Path, source_file: str, line: int, within: tuple[Path, ...] | None = None) -> str:
    """Line `line` of a raw file (relative to root, inside one of `within`), redacted and cut; a
    short note in its place when the file is refused (a link, a FIFO, outside the raw folders)."""
    path = root / source_file
    try:
        with open_raw(path, within or (root,)) as fh:
            seen = 0
            for i, raw in enumerate(fh, start=1):
                seen += len(raw)
                if i == line:
                    return excerpt(raw.decode("utf-8", errors="replace").rstrip("\r\n"))
                if seen > RAW_MAX:
                    break
    except RawFileRefused as exc:
        return f"(not shown: {str(exc).split(': ', 1)[-1]})"
    except OSError as exc:
        raise FactError(f"{source_file}: cannot read the fact's source ({exc.strerror})") from None
    raise FactError(f"{source_file}: has no line {line}")


def _shown(path: Path, root: Path) -> str:
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return path.as_posix()


EVIDENCE_COMMANDS = ("cat", "head", "grep -m1", "grep -n -m1", "grep", "sed -n")


def evidence_output(command: str, text: str, pattern: str | None, lines: int | None,
                    line: int | None = None) -> list[str]:
    """What `command` prints for `text`: cat, head (`lines`, default 10), grep -m1 and
    grep -n -m1 (the first line matching `pattern`, the latter numbered), grep (every matching
    line, at most `lines`), sed -n (line number `line`)."""
    content = text.splitlines()
    if command == "cat":
        return content
    if command == "head":
        return content[: lines or 10]
    if command == "sed -n":
        if not line or line < 1:
            raise FactError("evidence sed -n needs a line number")
        return content[line - 1: line]
    if command in ("grep -m1", "grep -n -m1", "grep"):
        if not pattern:
            raise FactError(f"evidence {command} needs a pattern")
        rx = re.compile(pattern)
        found = [(i, text_) for i, text_ in enumerate(content, start=1) if rx.search(text_)]
        if command == "grep":
            return [text_ for _, text_ in found[: lines or 10]]
        found = found[:1]
        if command == "grep -n -m1":
            return [f"{i}:{text_}" for i, text_ in found]
        return [text_ for _, text_ in found]
    raise FactError(f"unknown evidence command {command!r} (known: {', '.join(EVIDENCE_COMMANDS)})")


def cat_v(data: bytes) -> str:
    """The bytes as `cat -v` shows them: control characters as ^X (tab and newline kept), bytes
    above 127 as M- and the character below."""
    out = []
    for b in data:
        prefix = ""
        if b >= 128:
            prefix, b = "M-", b - 128
        if b in (9, 10) and not prefix:
            out.append(chr(b))
        elif b < 32:
            out.append(f"{prefix}^{chr(b + 64)}")
        elif b == 127:
            out.append(f"{prefix}^?")
        else:
            out.append(prefix + chr(b))
    return "".join(out)


def render_evidence(command: str, run_id: str, file: str, *, runs_dir: Path, root: Path,
                    pattern: str | None = None, lines: int | None = None,
                    cut: int | None = None, line: int | None = None) -> str:
    """`$ command path` and its output, computed from the raw file now, HTML-escaped.
    `runs_dir` is the folder that holds `run_id` (run folders, or node probe folders); `cat -v`
    shows control characters (a terminal's escape codes) as visible text."""
    if "/" in str(run_id) or ".." in Path(file).parts:
        raise FactError(f"evidence: bad run id or file {run_id!r} {file!r}")
    path = runs_dir / run_id / file
    shown = shlex.quote(_shown(path, root))
    if command.startswith("grep"):
        extended = "-E " if re.search(r"[]|()+?{}[]", pattern or "") else ""
        shell = f"{command} {extended}{shlex.quote(pattern or '')} {shown}"
        if command == "grep":
            shell += f" | head -n {lines or 10}"
    elif command == "sed -n":
        shell = f"sed -n {int(line or 0)}p {shown}"
    elif command == "head":
        shell = f"head -n {lines or 10} {shown}"
    else:
        shell = f"{command} {shown}"
    if cut:
        shell += f" | cut -c1-{int(cut)}"
    try:
        data, more = read_raw(path, (runs_dir,))
    except FileNotFoundError:
        if command != "cat -v":
            evidence_output(command, "", pattern, lines, line)  # still reject unknown commands
        out = [f"{command.split()[0]}: {_shown(path, root)}: No such file or directory"]
    except (RawFileRefused, OSError) as exc:
        reason = str(exc).split(": ", 1)[-1] if isinstance(exc, RawFileRefused) else exc.strerror
        out = [f"(not shown: {_shown(path, root)}: {reason})"]
    else:
        if command == "cat -v":
            out = cat_v(data).splitlines()
        else:
            out = evidence_output(command, data.decode("utf-8", errors="replace"), pattern, lines, line)
        if cut:
            out = [line[: int(cut)] for line in out]
        out = [shorten(line) if len(line) > SHOWN_CHARS else line for line in out]
        if more:
            out.append(f"(cut at {RAW_MAX:,} bytes)")
    return evidence_block(shell, out)


def evidence_block(command: str, out: list[str]) -> str:
    """`$ command` and its output lines as an evidence block, HTML-escaped."""
    body = "\n".join(escape_text(line) for line in out)
    return (f'<pre class="evidence"><code><span class="evidence-cmd">$ {escape_text(command)}'
            f"</span>\n{body}</code></pre>")
