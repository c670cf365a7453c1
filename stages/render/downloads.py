"""The site's CSV downloads: the public tables as derive exported them (its CSV folder, paths.derived),
copied into the docs folder and redacted, a row at a time, since the site publishes them.

Example:
    write_csv_downloads(paths.derived, docs_dir)      # ["downloads/runs.csv", ...]
"""
from __future__ import annotations

import contextlib
import csv
import shutil
from pathlib import Path
from typing import Iterator

from stages.core.catalogue import public_tables
from stages.core.config import CampaignError
from stages.core.faults import naming
from stages.core.files import built_beside, paths_fingerprint
from stages.core.secrets import may_hold_secret, redact_text
from stages.core.provenance import digest
from stages.render.incremental import DocsWriter


def write_csv_downloads(derived_dir: Path, docs_dir: Path, out: DocsWriter | None = None,
                        key: str | None = None) -> list[str]:
    """The public tables as the site's CSV downloads: the files derive exported to `derived_dir`
    (<table>.csv), copied and redacted. With `out`, linked from the old docs folder when derive's
    files (their names, sizes and times) and the code are the ones of `key`."""
    tables = public_tables()
    missing = [t for t in tables if not (Path(derived_dir) / f"{t}.csv").is_file()]
    if missing:
        raise CampaignError(f"{derived_dir}: no {missing[0]}.csv (run the derive stage first)")
    rels = [f"downloads/{table}.csv" for table in tables]
    key = None if key is None else digest(key, paths_fingerprint((derived_dir,)))
    if out is not None and key is not None and out.link_all(rels, lambda rel: digest(key, rel)):
        return rels
    (docs_dir / "downloads").mkdir(parents=True, exist_ok=True)
    for table in tables:
        target = docs_dir / "downloads" / f"{table}.csv"
        with naming(target):
            shutil.copyfile(Path(derived_dir) / f"{table}.csv", target)
        redact_csv(target)
    if out is not None and key is not None:
        for rel in rels:
            out.after[rel] = [digest(key, rel), (docs_dir / rel).stat().st_size]
    return rels


@contextlib.contextmanager
def csv_fields_up_to(size: int) -> Iterator[None]:
    """Python's csv reader refuses a field over 131,072 characters (`csv.field_size_limit`), and a
    download keeps every field whole: an engine's "generated text" of a 1M-token prompt echoed
    back is millions of characters. Within this block the limit is `size`, the bytes of the file
    being read, which no field of that file can exceed; the previous limit is put back after."""
    before = csv.field_size_limit()
    csv.field_size_limit(max(size, before))
    try:
        yield
    finally:
        csv.field_size_limit(before)


def redact_csv(path: Path) -> None:
    """Rewrite a CSV file with every cell redacted (the site publishes it), a row at a time, so that
    a large field is read once and held once; the file is replaced only when a cell changed."""
    changed = False
    with built_beside(path) as partial:
        with csv_fields_up_to(path.stat().st_size + 1), path.open(newline="") as fh, \
                naming(partial), partial.open("w", newline="") as out:
            writer = csv.writer(out, lineterminator="\n")
            for row in csv.reader(fh):
                if any(map(may_hold_secret, row)):
                    redacted = [redact_text(cell) for cell in row]
                    changed = changed or redacted != row
                    row = redacted
                writer.writerow(row)
        if not changed:
            partial.unlink()        # nothing to replace
