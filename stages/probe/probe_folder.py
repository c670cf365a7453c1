"""The node folder: its id and probe.log (its files written once: stages.formats.sealed.write_once)."""
from __future__ import annotations

import datetime as dt
import re
from pathlib import Path

from stages.core.progress import Progress
from stages.core.config import CampaignError
from stages.formats.run_folder import iso, utc_now

_KIND = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


def node_id(kind: str, now: dt.datetime) -> str:
    if not _KIND.match(kind) or "__" in kind:
        raise CampaignError(f"node kind {kind!r} cannot be part of a node id "
                            "(letters, digits, '.', '_', '-'; no '__')")
    return f"{kind}__{now.astimezone(dt.timezone.utc):%m%d-%H%M%S}"


class NodeLog:
    """probe.log: one UTC-stamped line per step, also passed to `progress`."""

    def __init__(self, path: Path, progress: Progress):
        self.file = path.open("x", buffering=1)
        self.progress = progress

    def __call__(self, msg: str) -> None:
        self.file.write(f"{iso(utc_now())} {msg}\n")
        self.progress(msg)

    def close(self) -> None:
        self.file.close()

