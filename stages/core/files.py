"""Writing a file whole: through a temporary file beside it, renamed into place, so that a reader
(or a render that stopped half way) sees the old file or the new one, never a part of one; and a
process's standard error sent to a file (divert_stderr)."""
from __future__ import annotations

import os
import sys
import threading
from pathlib import Path


def write_atomic(path: Path, data: str | bytes) -> None:
    """Write `data` (text as UTF-8) to `path`, making its folder if needed."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}-{threading.get_ident()}.tmp")
    try:
        tmp.write_bytes(data.encode() if isinstance(data, str) else data)
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
