"""A sealed run folder checked against its seal: every file against the manifest's sha256 (edited,
gone or added since the run), and the manifest against the one of the folder's first ingest
(rewritten or removed since). Each mismatch is an ingest_errors row and a raw_tampered row; the
folder's rows are still read (the writer decides which ones to keep).
"""
from __future__ import annotations

from pathlib import Path

from stages.core import rawfile
from stages.core.rawfile import Refused
from stages.ingest.folders import MANIFEST, SealFound
from stages.formats import lines
from stages.ingest.rows import FolderRows


def check_manifest(folder: Path, rows: FolderRows, source: str, names: set[str]) -> None:
    """A sealed run folder lists every file's sha256: hash every file and report each one that no
    longer matches (edited after the run), is gone, or was added since, as an ingest_errors row
    and a raw_tampered row. The rows are still read: the writer decides which ones to keep."""
    listed: set[str] = set()
    text = lines.decode(rawfile.read_raw(folder, MANIFEST, rawfile.SMALL_BYTES))
    for number, line in enumerate(text.splitlines(), 1):
        digest, sep, name = line.partition("  ")
        if not sep or len(digest) != 64:
            tampered(rows, source, MANIFEST, "unreadable line", number)
            continue
        listed.add(name)
        if name not in names:
            tampered(rows, source, name, "listed in the manifest but missing", number)
            continue
        try:
            changed = rawfile.sha256(folder, name) != digest
        except Refused as exc:
            tampered(rows, source, name, exc.reason, number)
            continue
        if changed:
            tampered(rows, source, name, "changed after the run (sha256 differs from the manifest)", number)
    for name in sorted(names - listed - {MANIFEST}):
        tampered(rows, source, name, "added after the run (not in the manifest)", None)


def tampered(rows: FolderRows, manifest_source: str, name: str, reason: str, line: int | None) -> None:
    """Record that file `name` of a sealed folder no longer matches its seal."""
    rows.error(manifest_source, line=line, reason=f"{name}: {reason}")
    rows.add("raw_tampered", manifest_source[: -len(MANIFEST)] + name, line, file=name, reason=reason)


def check_seal(rows: FolderRows, source: str, found: SealFound, first_sha256: str | None) -> None:
    """Compare a folder's manifest with the one of its first ingest: one rewritten (to match an
    edited file) or removed since is a change to the folder."""
    if found.problem:
        rows.error(source, reason=f"{MANIFEST}: {found.problem}")
    if first_sha256 is None:
        return
    if found.manifest_sha256 is None:
        tampered(rows, source, MANIFEST, "removed after the first ingest", None)
    elif found.manifest_sha256 != first_sha256:
        tampered(rows, source, MANIFEST,
                 "rewritten after the first ingest (sha256 differs from the one stored then)", None)
