"""Publish: the built site as one versioned, reproducible archive.

`data/publish/site-<version>.tar.gz` holds the site under a top folder of the same name, and a
MANIFEST (sha256 and path of every file, sorted). The version is `git describe --always --dirty`
and the commit date (UTC); outside a git checkout it is `nogit` and the date the site was built.
The archive is deterministic: entries sorted, every mtime the commit time, owner root, modes
0644/0755, gzip header without a name or time. The same site at the same commit gives the same
bytes.

Example:
    from stages.tools.exchange import publish
    publish.run(site_dir=Path("data/site"), out_dir=Path("data/publish"), root=Path("."))
"""
from __future__ import annotations

import datetime as dt
import gzip
import io
import os
import re
import subprocess
import tarfile
from pathlib import Path

from stages.core.config import CampaignError
from stages.core.files import built_beside
from stages.core.provenance import file_sha256

MANIFEST = "MANIFEST"
SAFE_VERSION = re.compile(r"[^A-Za-z0-9._-]+")


def _git(root: Path, *args: str) -> str | None:
    try:
        out = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True,
                             check=False, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 and out.stdout.strip() else None


def commit_time(root: Path) -> int | None:
    """Seconds since the epoch of HEAD's commit, or None outside git."""
    stamp = _git(root, "log", "-1", "--format=%ct")
    return int(stamp) if stamp and stamp.isdigit() else None


def version(root: Path, when: int) -> str:
    """`<git describe --always --dirty>-<YYYYMMDD>`, e.g. 57f3e66-dirty-20261130."""
    described = _git(root, "describe", "--always", "--dirty") or "nogit"
    day = dt.datetime.fromtimestamp(when, tz=dt.timezone.utc).strftime("%Y%m%d")
    return f"{SAFE_VERSION.sub('-', described)}-{day}"


def site_files(site_dir: Path) -> list[Path]:
    """Every regular file under site_dir, sorted by relative path; links are refused."""
    files = []
    for path in site_dir.rglob("*"):
        if path.is_symlink():
            raise CampaignError(f"{path}: the site holds a symbolic link; publish copies files only")
        if path.is_file():
            files.append(path)
    return sorted(files, key=lambda p: p.relative_to(site_dir).as_posix())


def manifest(site_dir: Path, files: list[Path]) -> bytes:
    """`<sha256>  <path>` per file, sorted by path: `sha256sum -c MANIFEST` checks it."""
    lines = [f"{file_sha256(p)}  {p.relative_to(site_dir).as_posix()}\n" for p in files]
    return "".join(lines).encode()


def _info(name: str, size: int, mtime: int, mode: int, kind: bytes = tarfile.REGTYPE) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.size, info.mtime, info.mode, info.type = size, mtime, mode, kind
    info.uid = info.gid = 0
    info.uname = info.gname = "root"
    return info


def _folders(rel_paths: list[str]) -> list[str]:
    seen: set[str] = set()
    for rel in rel_paths:
        parts = rel.split("/")[:-1]
        for i in range(1, len(parts) + 1):
            seen.add("/".join(parts[:i]))
    return sorted(seen)


def write_archive(target: Path, site_dir: Path, top: str, mtime: int) -> None:
    files = site_files(site_dir)
    rels = [p.relative_to(site_dir).as_posix() for p in files]
    if MANIFEST in rels:
        raise CampaignError(f"{site_dir}: holds a file named {MANIFEST}; publish writes its own")
    members: list[tuple[str, Path | bytes | None]] = [(rel, None) for rel in _folders(rels)]
    members += list(zip(rels, files)) + [(MANIFEST, manifest(site_dir, files))]
    with built_beside(target) as partial, partial.open("wb") as out, \
            gzip.GzipFile(filename="", mode="wb", fileobj=out, mtime=0, compresslevel=9) as gz, \
            tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar:
        tar.addfile(_info(top, 0, mtime, 0o755, tarfile.DIRTYPE))
        for rel, content in sorted(members, key=lambda m: m[0]):
            name = f"{top}/{rel}"
            if content is None:
                tar.addfile(_info(name, 0, mtime, 0o755, tarfile.DIRTYPE))
            elif isinstance(content, bytes):
                tar.addfile(_info(name, len(content), mtime, 0o644), io.BytesIO(content))
            else:
                mode = 0o755 if os.access(content, os.X_OK) else 0o644
                with content.open("rb") as fh:
                    tar.addfile(_info(name, content.stat().st_size, mtime, mode), fh)


def run(*, site_dir: Path, out_dir: Path, root: Path) -> Path:
    """Archive the built site as out_dir/site-<version>.tar.gz; return its path."""
    site_dir, out_dir, root = Path(site_dir), Path(out_dir), Path(root)
    if not (site_dir / "index.html").is_file():
        raise CampaignError(f"{site_dir}: no built site (run the render stage first)")
    when = commit_time(root)
    if when is None:
        when = int((site_dir / "index.html").stat().st_mtime)
    top = f"site-{version(root, when)}"
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / f"{top}.tar.gz"
    write_archive(target, site_dir, top, when)
    return target
