"""Opening a file of a raw folder: only a regular file inside it, never more than a size limit.

Every reader of run and node folders (ingest, and render and trace quoting raw lines) opens
through `open_fd`, `open_raw` or `read_raw`. Each component of the path is opened with O_NOFOLLOW
relative to the one before (no check-then-open race), the file with O_NONBLOCK too (a FIFO can
never block), and the opened file is checked with fstat: a symbolic link, FIFO, socket or device
is refused with a `Refused` whose reason names the kind of refusal and
quotes nothing from the target. `name.gz` is read decompressed, the limit applying to the
decompressed bytes (a gzip bomb stops at the limit).

Example:
    with open_raw(folder, "server.log", LOG_BYTES) as fh:
        data = fh.read()
"""
from __future__ import annotations

import errno
import gzip
import os
import stat
from pathlib import Path
from typing import Iterable

from stages.core.faults import DISK_ERRNOS
from stages.core.provenance import stream_sha256

MiB = 1024 * 1024
GiB = 1024 * MiB
LOG_BYTES = 4 * GiB          # server logs, multi-turn request logs
RESULT_BYTES = 1 * GiB       # benchmark result files, niah.log (the engine's answers), /metrics snapshots
SMALL_BYTES = 16 * MiB       # cmd.sh, launch.out, meta.json, node probe files
TRACE_BYTES = 2 * GiB        # an engine profiler's trace (Chrome-trace JSON), decompressed
GZ = ".gz"

_KINDS = ((stat.S_ISLNK, "symbolic link, not followed"), (stat.S_ISDIR, "not a regular file (folder)"),
          (stat.S_ISFIFO, "not a regular file (FIFO)"), (stat.S_ISSOCK, "not a regular file (socket)"),
          (stat.S_ISCHR, "not a regular file (character device)"),
          (stat.S_ISBLK, "not a regular file (block device)"))
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)


class Refused(Exception):
    """A file that is not read; `reason` says why and quotes nothing from it."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


def size_text(n: int) -> str:
    for unit, size in (("GiB", GiB), ("MiB", MiB)):
        if n >= size:
            return f"{n / size:g} {unit}"
    return f"{n} bytes"


def too_big(limit: int) -> Refused:
    return Refused(f"larger than the limit of {size_text(limit)}")


def kind_of(mode: int) -> str | None:
    """Why an entry with this st_mode is not read; None for a regular file."""
    if stat.S_ISREG(mode):
        return None
    return next((reason for test, reason in _KINDS if test(mode)), "not a regular file")


def entry_refusal(path: Path) -> str | None:
    """Why `path` (not followed if it is a link) would be refused; None for a regular file."""
    try:
        return kind_of(os.lstat(path).st_mode)
    except OSError as exc:
        if exc.errno in DISK_ERRNOS:     # the storage failed or the entry vanished: not a refusal
            raise
        return f"cannot read: {exc.strerror or 'error'}"


def _refusal(exc: OSError, dir_fd: int | None, name: str) -> Exception:
    """The refusal an open error stands for (a link under O_NOFOLLOW, a socket), or the error."""
    if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.ENXIO, errno.EMLINK):
        try:
            mode = os.lstat(name, dir_fd=dir_fd).st_mode
        except OSError:
            return exc
        reason = kind_of(mode)
        if reason:
            return Refused(reason)
    return exc


def open_dir(path: Path, dir_fd: int | None = None) -> int:
    """A descriptor of the folder `path`, refused when it is a link or not a folder."""
    name = os.fspath(path)
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
    except OSError as exc:
        raise _refusal(exc, dir_fd, name) from None


def open_fd(folder: Path, name: str) -> int:
    """A descriptor of the regular file `name` (a relative posix path) inside `folder`; no
    component of `name`, nor `folder` itself, may be a link."""
    parts = name.split("/")
    if any(p in ("", ".", "..") for p in parts):
        raise Refused("not a plain relative file name")
    fd = open_dir(folder)
    try:
        for part in parts[:-1]:
            inner = open_dir(Path(part), dir_fd=fd)
            os.close(fd)
            fd = inner
        try:
            file_fd = os.open(parts[-1], _FILE_FLAGS, dir_fd=fd)
        except OSError as exc:
            raise _refusal(exc, fd, parts[-1]) from None
    finally:
        os.close(fd)
    try:
        reason = kind_of(os.fstat(file_fd).st_mode)
        if reason:
            raise Refused(reason)
        os.set_blocking(file_fd, True)
    except BaseException:
        os.close(file_fd)
        raise
    return file_fd


class LimitedReader:
    """A binary file read up to `limit` bytes: reading beyond raises Refused."""

    def __init__(self, fh, limit: int, seekable: bool, under=None):
        self._fh, self._limit, self._seekable, self._pos = fh, limit, seekable, 0
        self._under = under          # the file beneath a decompressing `fh`, closed with it

    def read(self, size: int = -1) -> bytes:
        room = self._limit - self._pos + 1
        data = self._fh.read(room if size is None or size < 0 else min(size, room))
        self._pos += len(data)
        if self._pos > self._limit:
            raise too_big(self._limit)
        return data

    def seekable(self) -> bool:
        return self._seekable

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        if not self._seekable:
            raise OSError(errno.ESPIPE, "not seekable")
        self._pos = self._fh.seek(offset, whence)
        return self._pos

    def close(self) -> None:
        try:
            self._fh.close()
        finally:
            if self._under is not None:
                self._under.close()

    def __enter__(self) -> "LimitedReader":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def open_raw(folder: Path, name: str, limit: int) -> LimitedReader:
    """The regular file `name` inside `folder`, for reading; decompressed when it ends in .gz.
    Raises Refused (not regular, a link on the way, over the limit) or OSError."""
    fd = open_fd(folder, name)
    fh = os.fdopen(fd, "rb")
    try:
        if name.endswith(GZ):
            return LimitedReader(gzip.GzipFile(fileobj=fh, mode="rb"), limit, seekable=False,
                                under=fh)
        if os.fstat(fd).st_size > limit:
            raise too_big(limit)
        return LimitedReader(fh, limit, seekable=True)
    except BaseException:
        fh.close()
        raise


class _OwnedGzip(gzip.GzipFile):
    """A GzipFile that closes the file beneath it too."""

    def __init__(self, raw):
        super().__init__(fileobj=raw, mode="rb")
        self._raw = raw

    def close(self) -> None:
        try:
            super().close()
        finally:
            self._raw.close()


def open_stream(folder: Path, name: str):
    """The regular file `name` inside `folder` (see open_fd) as a binary stream from its start,
    decompressed when it ends in .gz, for a reader that stops after what it needs (a line, a
    prefix): no size limit applies."""
    fh = os.fdopen(open_fd(folder, name), "rb")
    return _OwnedGzip(fh) if name.endswith(GZ) else fh


def read_raw(folder: Path, name: str, limit: int) -> bytes:
    """All the bytes of `open_raw(folder, name, limit)`."""
    with open_raw(folder, name, limit) as fh:
        data = fh.read()
    return data


def sha256(folder: Path, name: str) -> str:
    """The sha256 of the bytes of the regular file `name` inside `folder` (as stored: a .gz is
    not decompressed), opened as `open_fd` does."""
    with os.fdopen(open_fd(folder, name), "rb") as fh:
        return stream_sha256(fh)


def present(names: Iterable[str], name: str) -> str | None:
    """`name`, or else `name.gz`, whichever is among `names`."""
    names = set(names)
    return name if name in names else name + GZ if name + GZ in names else None
