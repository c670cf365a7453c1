"""Writing a file whole: through a temporary file beside it, renamed into place, so that a reader
(or a render that stopped half way) sees the old file or the new one, never a part of one; a
folder's fingerprint (its files' stat fields, hashed); and a process's standard error sent to a
file (divert_stderr)."""
from __future__ import annotations

import contextlib
import ctypes
import errno
import glob
import hashlib
import os
import re
import shutil
import sys
import threading
from pathlib import Path
from typing import Callable, Iterable, Iterator

from stages.core.faults import is_storage_fault, naming
from stages.core.provenance import raise_storage_fault


def folder_stats(folder: Path | str) -> list[tuple[str, int, int, int, int]]:
    """(relative posix name, size, mtime_ns, ctime_ns, inode) of every entry under `folder` that
    is not a folder, sorted. Any write or replacement changes a file's ctime or inode, and neither
    can be set back (mtime can), so a fingerprint of these sees every edit without reading the
    files. Links are not followed: a link, to a file or to a folder, is listed with its own
    stat fields, and what it points to is not looked at. The storage failing while it lists
    (a folder it cannot list, a file it cannot stat; not one that is gone) is raised: a listing
    with files left out would be taken for the folder's fingerprint."""
    out = []
    for dirpath, dirnames, filenames in os.walk(folder, onerror=raise_storage_fault):
        links = [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]
        dirnames[:] = sorted(d for d in dirnames if d not in links)
        for name in filenames + links:
            path = Path(dirpath) / name
            try:
                st = os.lstat(path)
            except FileNotFoundError:
                continue
            except OSError as exc:
                if is_storage_fault(exc):
                    raise
                continue
            out.append((path.relative_to(folder).as_posix(), st.st_size, st.st_mtime_ns,
                        st.st_ctime_ns, st.st_ino))
    out.sort()
    return out


def fingerprint(entries: Iterable[tuple[str | int, ...]], version: str = "") -> str:
    """A hash of stat entries (folder_stats) and a version (the code that reads them)."""
    digest = hashlib.sha256(version.encode())
    for entry in entries:
        digest.update(("\0".join(str(field) for field in entry) + "\n").encode())
    return digest.hexdigest()


def paths_fingerprint(paths: Iterable[Path | str | None], version: str = "") -> str:
    """fingerprint of each path in turn: a folder's folder_stats, a file's stat fields under its
    name (a link named here followed, a broken one by its own), `none` for a path that is None or
    absent."""
    entries: list[tuple[str | int, ...]] = []
    for path in paths:
        if path is None or not os.path.lexists(path):
            entries.append(("none",))
        elif os.path.isdir(path) and not os.path.islink(path):
            entries.append(("folder",))
            entries += folder_stats(path)
        else:
            st = os.stat(path) if os.path.exists(path) else os.lstat(path)
            entries.append(("file", Path(path).name, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino))
    return fingerprint(entries, version)


def write_file(path: Path, data: str | bytes) -> None:
    """Write `data` (text as UTF-8) to `path`; a write the disk refuses names `path` (naming)."""
    with naming(path):
        Path(path).write_bytes(data.encode() if isinstance(data, str) else data)


def scratch(path: Path, kind: str = "tmp") -> Path:
    """Where this process (and thread) builds `path` (kind `tmp`) or puts its old version aside
    (`old`): a hidden name beside it, `.<name>.<kind>-<pid>-<thread>`, on the same file system so
    that a rename puts it in place, and named by its process so that what a killed one left is
    known (stale_scratch)."""
    path = Path(path)
    return path.with_name(f".{path.name}.{kind}-{os.getpid()}-{threading.get_ident()}")


def stale_scratch(path: Path) -> list[Path]:
    """The scratch paths beside `path` (scratch, a database's WAL beside one included) of
    processes that are gone: what a killed writer left."""
    path = Path(path)
    named = re.compile(rf"\.{re.escape(path.name)}\.[a-z]+-(\d+)-\d+(\.wal)?")
    found = []
    for entry in sorted(path.parent.glob(f".{glob.escape(path.name)}.*-*")):
        m = named.fullmatch(entry.name)
        if m and not process_alive(int(m.group(1))):
            found.append(entry)
    return found


def remove_path(path: Path | None) -> None:
    """A file, a database with its WAL, or a folder (not followed when it is a link), if it is
    there."""
    if path is None:
        return
    path = Path(path)
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        for p in (path, path.with_name(path.name + ".wal")):
            p.unlink(missing_ok=True)


@contextlib.contextmanager
def built_beside(path: Path, kind: str = "tmp") -> Iterator[Path]:
    """The block builds `path` at its scratch path (yielded), renamed onto `path` when the block
    ends; a block that leaves nothing there (it found nothing to change) replaces nothing, and
    one that raises leaves `path` as it was and its scratch removed."""
    tmp = scratch(path, kind)
    try:
        yield tmp
        if os.path.lexists(tmp):
            os.replace(tmp, path)
    except BaseException:
        remove_path(tmp)
        raise


def user_cache_home() -> Path:
    """This user's cache folder: $XDG_CACHE_HOME, or ~/.cache."""
    return Path(os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"))


def user_cache(name: str) -> Path:
    """`name` in this user's cache of files made again from installed packages alone, shared by
    every project on the machine: <user_cache_home>/campaign."""
    return user_cache_home() / "campaign" / name


def write_atomic(path: Path, data: str | bytes) -> None:
    """Write `data` (text as UTF-8) to `path`, making its folder if needed: built beside it and
    renamed into place (built_beside)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with built_beside(path) as tmp:
        write_file(tmp, data)


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


def swap_in(new: Path, target: Path, remove_old: Callable[[Path], None] = remove_path) -> None:
    """Put the folder `new` (built at scratch(target)) at `target` (replace_folder, the old one
    put aside at scratch(target, "old")), then remove the old one with `remove_old`."""
    old = replace_folder(new, target, scratch(target, "old"))
    if old is not None:
        remove_old(old)


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
