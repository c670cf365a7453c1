"""Faults of the storage, told apart from bad input: a disk that is full or failing, storage that
went read-only, an input that vanished while a stage read it. A stage stops on one with one line
naming the path and the error (`campaign: error: <path>: <error>`), and records nothing about it
as data: a bad file is a row of `ingest_errors`, a bad disk is not.
"""
from __future__ import annotations

import contextlib
import errno
from typing import Iterator

from stages.core.config import CampaignError

# errnos that say the storage failed, not the file's content
DISK_ERRNOS = frozenset({errno.EIO, errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.ENOENT,
                         errno.ESTALE, errno.ENXIO, errno.ENODEV})


class StorageFault(CampaignError):
    """A read or write that the storage refused: `<path>: <error>`."""


def storage_fault(path: object, exc: OSError) -> StorageFault:
    return StorageFault(f"{path}: {exc.strerror or exc}")


@contextlib.contextmanager
def naming(path: object) -> Iterator[None]:
    """Within the block, an OSError that names no file is given `path`. Python names the file of a
    failed open, not that of a failed write or close of a file already open: a disk that fills up
    while a file is written would otherwise stop a stage with an error and no path."""
    try:
        yield
    except OSError as exc:
        if exc.filename is None:
            exc.filename = str(path)
        raise


def is_storage_fault(exc: BaseException) -> bool:
    return isinstance(exc, OSError) and exc.errno in DISK_ERRNOS


def one_line(exc: BaseException) -> str:
    """An OSError or a DuckDB I/O error as one line naming its path and the error."""
    if isinstance(exc, OSError):
        where = exc.filename if exc.filename is not None else None
        what = exc.strerror or str(exc)
        return f"{where}: {what}" if where is not None else what
    text = str(exc)
    if "Original error:" in text:            # a database invalidated by an earlier I/O error
        text = text.split("Original error:", 1)[1]
    return " ".join(text.split())[:500]
