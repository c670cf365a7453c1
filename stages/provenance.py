"""Provenance helpers shared by the stages: the project's commit, file digests, the run manifest.

A run folder is sealed with RUN_MANIFEST (`sha256sum -c` reads it) by the run stage and checked
by ingest; the published site archive carries its own manifest in the same format.
"""
from __future__ import annotations

import hashlib
import re
import subprocess
from pathlib import Path

RUN_MANIFEST = "MANIFEST.sha256"
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
