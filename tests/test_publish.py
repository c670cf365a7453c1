"""Publish: one versioned, reproducible archive of the built site, with a MANIFEST inside."""
from __future__ import annotations

import datetime as dt
import hashlib
import os
import re
import subprocess
import tarfile
from pathlib import Path

import pytest

from stages.tools.exchange import publish
from stages.core.config import CampaignError

COMMITTED = int(dt.datetime(2026, 11, 30, 5, 0, tzinfo=dt.timezone.utc).timestamp())


def make_site(path: Path) -> Path:
    (path / "assets" / "charts").mkdir(parents=True)
    (path / "index.html").write_text("<html>index</html>\n")
    (path / "part-local-cpu.html").write_text("<html>part</html>\n")
    (path / "assets" / "charts" / "ttft.svg").write_text("<svg/>\n")
    (path / "assets" / "charts" / "ttft.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256)))
    return path


def git_repo(path: Path) -> Path:
    env = {**os.environ, "GIT_AUTHOR_DATE": "2026-11-30T05:00:00Z", "GIT_COMMITTER_DATE": "2026-11-30T05:00:00Z"}

    def git(*args: str) -> None:
        subprocess.run(["git", *args], cwd=path, check=True, capture_output=True, env=env)

    path.mkdir(parents=True, exist_ok=True)
    git("init", "-q")
    git("-c", "user.name=t", "-c", "user.email=t@example.org", "commit", "-q", "--allow-empty", "-m", "x")
    return path


def test_archive_is_named_by_version_and_date_and_holds_a_manifest(tmp_path):
    root = git_repo(tmp_path / "project")
    site = make_site(tmp_path / "site")
    archive = publish.run(site_dir=site, out_dir=tmp_path / "publish", root=root)
    sha = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True,
                         text=True, check=True).stdout.strip()
    assert archive == tmp_path / "publish" / f"site-{sha}-20261130.tar.gz"
    with tarfile.open(archive) as tar:
        members = tar.getmembers()
        names = [m.name for m in members]
        top = f"site-{sha}-20261130"
        assert names == sorted(names)
        assert f"{top}/index.html" in names and f"{top}/assets/charts/ttft.png" in names
        assert {m.mtime for m in members} == {COMMITTED}  # the commit time
        assert {(m.uid, m.gid, m.uname, m.gname) for m in members} == {(0, 0, "root", "root")}
        listing = tar.extractfile(f"{top}/MANIFEST").read().decode()
    expected = {p.relative_to(site).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
                for p in site.rglob("*") if p.is_file()}
    rows = [line.split("  ", 1) for line in listing.splitlines()]
    assert {path: digest for digest, path in rows} == expected
    assert [path for _, path in rows] == sorted(expected)


def test_same_site_same_commit_gives_the_same_bytes(tmp_path):
    root = git_repo(tmp_path / "project")
    site = make_site(tmp_path / "site")
    first = publish.run(site_dir=site, out_dir=tmp_path / "a", root=root).read_bytes()
    os.utime(site / "index.html", (1, 1))  # file times do not leak into the archive
    second = publish.run(site_dir=site, out_dir=tmp_path / "b", root=root).read_bytes()
    assert first == second
    (site / "index.html").write_text("<html>changed</html>\n")
    assert publish.run(site_dir=site, out_dir=tmp_path / "c", root=root).read_bytes() != first


def test_uncommitted_changes_mark_the_version_dirty(tmp_path):
    root = git_repo(tmp_path / "project")
    (root / "tracked.txt").write_text("a\n")
    subprocess.run(["git", "add", "tracked.txt"], cwd=root, check=True)
    archive = publish.run(site_dir=make_site(tmp_path / "site"), out_dir=tmp_path / "out", root=root)
    assert re.fullmatch(r"site-[0-9a-f]+-dirty-20261130\.tar\.gz", archive.name)


def test_outside_git_the_version_says_so(tmp_path):
    site = make_site(tmp_path / "site")
    os.utime(site / "index.html", (COMMITTED, COMMITTED))
    archive = publish.run(site_dir=site, out_dir=tmp_path / "out", root=tmp_path / "site")
    assert archive.name == "site-nogit-20261130.tar.gz"


def test_no_built_site_is_a_one_line_error(tmp_path):
    with pytest.raises(CampaignError, match="no built site"):
        publish.run(site_dir=tmp_path / "site", out_dir=tmp_path / "out", root=tmp_path)
