"""Writing a file whole: through a temporary file beside it, renamed into place, so that a reader
(or a render that stopped half way) sees the old file or the new one, never a part of one."""
from __future__ import annotations

import os
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
