"""Provenance helpers shared by the stages: the project's commit, file digests, and the storage
failing as a folder is walked. A run folder's seal and its manifest: stages/formats/sealed.py."""
from __future__ import annotations

import hashlib
import re
import subprocess
from pathlib import Path

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


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def raise_storage_fault(exc: OSError) -> None:
    """os.walk's onerror: a folder the storage failed to list (an I/O error, a full or read-only
    disk, a folder gone) stops the walk, raised; one this user may not list is left out, as
    os.walk does by default."""
    if not isinstance(exc, PermissionError):
        raise exc
