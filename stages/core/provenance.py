"""Provenance helpers shared by the stages: the project's commit, digests (of a file's bytes, of
a list of parts), and the storage failing as a folder is walked. A run folder's seal and its
manifest: stages/formats/sealed.py."""
from __future__ import annotations

import hashlib
import json
import re
import subprocess
from pathlib import Path
from typing import Any, BinaryIO

_SHA = re.compile(r"[0-9a-f]{40}")


def git_sha(root: Path) -> str | None:
    """The commit checked out at root; None outside git, or in a copy of the tree without its
    history (where `git rev-parse HEAD` answers with the literal word HEAD)."""
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True,
                             check=False, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    sha = out.stdout.strip()
    return sha if out.returncode == 0 and _SHA.fullmatch(sha) else None


def stream_sha256(fh: BinaryIO) -> str:
    """sha256 of what is left to read of a binary stream, read a MiB at a time."""
    h = hashlib.sha256()
    for block in iter(lambda: fh.read(1 << 20), b""):
        h.update(block)
    return h.hexdigest()


def data_sha256(data: bytes) -> str:
    """sha256 of bytes in hand: what file_sha256 gives for a file holding them."""
    return hashlib.sha256(data).hexdigest()


def file_sha256(path: Path) -> str:
    """sha256 of a file's bytes (the digest `sha256sum` prints)."""
    with open(path, "rb") as fh:
        return stream_sha256(fh)


def file_digest(path: Path | None) -> str:
    """file_sha256 of a file; `absent` when there is none."""
    if path is None or not Path(path).is_file():
        return "absent"
    return file_sha256(Path(path))


def digest(*parts: Any) -> str:
    """sha256 of the parts: bytes as they are, text as UTF-8 (a page's HTML is hashed without
    being escaped as JSON first), anything else as JSON; each tagged with its kind and length."""
    h = hashlib.sha256()
    for part in parts:
        if isinstance(part, bytes):
            kind, data = b"b", part
        elif isinstance(part, str):
            kind, data = b"s", part.encode("utf-8", "surrogatepass")
        else:
            kind, data = b"j", json.dumps(part, sort_keys=True, default=str).encode()
        h.update(kind + str(len(data)).encode() + b":")
        h.update(data)
    return h.hexdigest()


def raise_storage_fault(exc: OSError) -> None:
    """os.walk's onerror: a folder the storage failed to list (an I/O error, a full or read-only
    disk, a folder gone) stops the walk, raised; one this user may not list is left out, as
    os.walk does by default."""
    if not isinstance(exc, PermissionError):
        raise exc
