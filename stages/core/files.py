"""Writing a file whole: through a temporary file beside it, renamed into place, so that a reader
(or a render that stopped half way) sees the old file or the new one, never a part of one; and a
process's standard error sent to a file (divert_stderr)."""
from __future__ import annotations

import ctypes
import errno
import os
import sys
import threading
from pathlib import Path
from typing import Iterator

from stages.core.faults import naming


def file_stats(folder: Path | str, *, follow_symlinks: bool = True) -> Iterator[tuple[str, int, int]]:
    """(path, size, modification time in ns) of every file under `folder`, in a stable order
    (folders and names sorted), a file gone while walked left out: what a fingerprint of a
    folder's files reads."""
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames.sort()
        for name in sorted(filenames):
            path = os.path.join(dirpath, name)
            try:
                st = os.stat(path, follow_symlinks=follow_symlinks)
            except OSError:
                continue
            yield path, st.st_size, st.st_mtime_ns


def write_file(path: Path, data: str | bytes) -> None:
    """Write `data` (text as UTF-8) to `path`; a write the disk refuses names `path` (naming)."""
    with naming(path):
        Path(path).write_bytes(data.encode() if isinstance(data, str) else data)


def write_atomic(path: Path, data: str | bytes) -> None:
    """Write `data` (text as UTF-8) to `path`, making its folder if needed."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}-{threading.get_ident()}.tmp")
    try:
        write_file(tmp, data)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def divert_stderr(path: Path) -> None:
    """From now on this process's standard error (file descriptor 2, what C libraries print to as
    well) goes to `path`, not the console: for a command that has said all it has to say, so the
    warnings libraries print while the interpreter shuts down are kept in a file."""
    sys.stdout.flush()
    sys.stderr.flush()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(fd, 2)
    os.close(fd)


_AT_FDCWD = -100
_RENAME_EXCHANGE = 2          # renameat2(2): swap two paths in one step


def exchange(a: Path, b: Path) -> bool:
    """Swap the paths `a` and `b` in one step (Linux renameat2 with RENAME_EXCHANGE), so that
    neither is ever missing; False where the system or file system cannot (then nothing moved)."""
    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return False
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    if renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
        return False
    raise OSError(err, os.strerror(err), str(b))


def replace_folder(new: Path, target: Path, aside: Path) -> Path | None:
    """Put the folder `new` at `target`. The old folder is swapped with the new one in one step
    where the system can (it then lies at `new`'s path), else renamed to `aside` first; returns
    where the old folder now lies, for the caller to remove, or None when there was none.
    With the one-step swap, `target` is a whole folder at every instant, old or new."""
    if not (target.exists() or target.is_symlink()):
        os.rename(new, target)
        return None
    if exchange(new, target):
        return new
    os.rename(target, aside)
    try:
        os.rename(new, target)
    except OSError:
        os.rename(aside, target)
        raise
    return aside


def process_alive(pid: int) -> bool:
    """Whether process `pid` exists (signal 0 only asks; one of another user exists too): a
    scratch file named by the pid of a process that is gone is left over and may be removed."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True
