"""Ingest on storage that fails while it plans (lists, fingerprints and seals the run folders,
before any row is written): each fault stops it with one line and the warehouse as it was, and
the next ingest makes the warehouse an uninterrupted one makes. Found by `make reliability`: the
storage turning read-only at ingest's 267th open, on the manifest of a folder already stored,
was taken for a folder whose manifest was removed (stored as tampered, exit 0), and the folder's
unchanged fingerprint kept that for good. Storage read-only from the start is no fault: its
folders are read unsealed, each saying why."""
from __future__ import annotations

import errno
import os
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from stages.cli import main
from stages.core import rawfile
from stages.formats.sealed import RUN_MANIFEST
from stages.tools.faults import crash_outputs as co
from stages.tools.faults.crash_cases import RUN_IDS, SCENARIOS
from stages.tools.faults.hostile_folders import make_project, make_writable

STORED, NEW, UNSEALED = RUN_IDS[0], RUN_IDS[2], RUN_IDS[4]


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> Path:
    """The crash suite's ingest project: two runs ingested, two sealed runs and one unsealed run
    added since."""
    work = tmp_path_factory.mktemp("storage-faults")
    SCENARIOS["ingest"].prepare(make_project(work / "base"))
    return work / "base"


def _copy(base: Path, dest: Path) -> Path:
    shutil.copytree(base, dest, symlinks=True)
    return dest / "project"


def _ingest(root: Path):
    return CliRunner().invoke(main, ["ingest", "--root", str(root)])


def _state(root: Path):
    return co.db_state(root / "data" / "warehouse.duckdb")


@pytest.fixture(scope="module")
def states(base, tmp_path_factory):
    """The warehouse before the command and after an uninterrupted run of it."""
    root = _copy(base, tmp_path_factory.mktemp("reference") / "copy")
    before = _state(root)
    result = _ingest(root)
    assert result.exit_code == 0, result.output
    after = _state(root)
    make_writable(root.parent)
    return before, after


def _fail(exc_errno: int, path: object) -> OSError:
    return OSError(exc_errno, os.strerror(exc_errno), str(path))


def manifest_of_a_stored_folder(monkeypatch):
    sha256 = rawfile.sha256

    def failing(folder, name):
        if name == RUN_MANIFEST and Path(folder).name == STORED:
            raise _fail(errno.EROFS, name)
        return sha256(folder, name)
    monkeypatch.setattr(rawfile, "sha256", failing)


def seal_of_an_unsealed_folder(monkeypatch):
    from stages.formats import sealed as provenance
    write_once = provenance.write_once

    def failing(path, text, *, scratch):
        if Path(path).name == RUN_MANIFEST:
            raise _fail(errno.EROFS, path)
        return write_once(path, text, scratch=scratch)
    monkeypatch.setattr(provenance, "write_once", failing)


def launch_out_of_an_unsealed_folder(monkeypatch):
    opened = Path.open

    def failing(self, *args, **kwargs):
        if self.name == "launch.out" and self.parent.name == UNSEALED:
            raise _fail(errno.EIO, self)
        return opened(self, *args, **kwargs)
    monkeypatch.setattr(Path, "open", failing)


def listing_of_a_new_folder(monkeypatch):
    scandir = os.scandir

    def failing(path="."):
        if Path(os.fsdecode(path)).name == "bench" and Path(os.fsdecode(path)).parent.name == NEW:
            raise _fail(errno.EIO, path)
        return scandir(path)
    monkeypatch.setattr(os, "scandir", failing)


FAULTS = {
    "the manifest of a stored folder cannot be opened (EROFS)": (manifest_of_a_stored_folder, "Read-only file system"),
    "the seal of an unsealed folder cannot be written (EROFS)": (seal_of_an_unsealed_folder, "Read-only file system"),
    "launch.out of an unsealed folder cannot be read (EIO)": (launch_out_of_an_unsealed_folder, "Input/output error"),
    "a subfolder of a new folder cannot be listed (EIO)": (listing_of_a_new_folder, "Input/output error"),
}


@pytest.mark.parametrize("fault", list(FAULTS))
def test_a_storage_fault_while_planning_stops_ingest_and_leaves_the_warehouse_whole(
        base, states, tmp_path, monkeypatch, fault):
    before, after = states
    root = _copy(base, tmp_path / "copy")
    arm, error = FAULTS[fault]
    arm(monkeypatch)
    result = _ingest(root)
    monkeypatch.undo()
    lines = [line for line in result.stderr.splitlines() if line.startswith("campaign: error: ")]
    assert result.exit_code != 0 and len(lines) == 1 and error in lines[0], result.stderr
    assert "Traceback" not in result.stderr
    now = _state(root)
    assert co.whole_by_run(co.by_run(now), co.by_run(before), co.by_run(after))
    assert now == before                # nothing is written before the plan is made
    again = _ingest(root)
    assert again.exit_code == 0, again.output
    assert _state(root) == after
    make_writable(tmp_path)


def test_storage_read_only_from_the_start_is_read_unsealed_with_its_reason(base, tmp_path, monkeypatch):
    import duckdb

    from stages.ingest import folders
    root = _copy(base, tmp_path / "copy")
    monkeypatch.setattr(folders, "read_only_storage", lambda folder: True)
    result = _ingest(root)
    assert result.exit_code == 0, result.output
    assert not (root / "data" / "runs" / UNSEALED / RUN_MANIFEST).exists()
    with duckdb.connect(str(root / "data" / "warehouse.duckdb"), read_only=True) as con:
        reasons = [r for (r,) in con.execute(
            "select reason from ingest_errors where run_id = $r", {"r": UNSEALED}).fetchall()]
        assert f"{RUN_MANIFEST}: could not seal the folder: the storage is read-only" in reasons
        assert con.execute("select count(*) from raw_runs where run_id = $r",
                           {"r": UNSEALED}).fetchone() == (1,)
    make_writable(tmp_path)
