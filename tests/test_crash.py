"""Crash and disk faults, the short form (the long one is `make reliability`): ingest, seal and
derive killed (SIGKILL) by time and at a write, starved by a failing write, fsync or open
(ENOSPC, EIO: libfiu), and given a runs folder that vanishes or turns read-only, leave every
output whole, no run folder changed, no lock held, and a re-run
that ends where an uninterrupted run does. Each fault stops its command with one line."""
from __future__ import annotations

import errno
import os

import pytest

from stages.core import faults
from stages.formats.sealed import RUN_MANIFEST, manifest_text, seal
from stages.tools.faults import crash


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    return crash.run(tmp_path_factory.mktemp("crash"), plan=crash.SHORT)


def test_every_stage_ran_its_cases(results):
    assert [r.stage for r in results] == list(crash.SHORT)
    fired = [c for r in results for c in r.cases if c.fired]
    kills = sum(c.kind.startswith("kill") for c in fired)
    assert kills >= 1                       # kills by time need no libfiu
    if crash.fiu_available():   # kills at a write, every kind of fault, each call and error of the turn
        assert kills >= 5
        assert {c.kind for c in fired} == {"kill-time", "kill-write", "disk", "input"}
        assert {c.plan.split()[0] for c in fired if c.kind == "disk"} == {"write", "fsync", "open"}
        assert {c.plan.rsplit(" ", 1)[-1] for c in fired if c.kind == "disk"} == {"ENOSPC", "EIO"}
        assert sum(c.kind == "input" for c in fired) == 2


@pytest.mark.parametrize("stage", list(crash.SHORT))
def test_every_output_stays_whole_and_the_rerun_matches(results, stage):
    [r] = [r for r in results if r.stage == stage]
    bad = [(c.kind, c.plan, c.not_whole, c.runs_changed, c.locks_held, c.leftovers, c.bad_stop,
            c.rerun_differs) for c in r.cases if not c.ok]
    assert not bad


def test_summary_counts_zero_not_whole(results):
    s = crash.summary(results)
    assert s["not_whole"] == s["runs_changed"] == s["reruns_differing"] == 0
    assert set(s["slowest_recovery_s"]) == set(crash.SHORT)


def test_a_seal_that_fails_leaves_no_manifest(tmp_path, monkeypatch):
    folder = tmp_path / "runs" / "r"
    folder.mkdir(parents=True)
    (folder / "a.txt").write_text("a")

    def full(fd, data):
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr("stages.formats.sealed.os.write", full)
    with pytest.raises(OSError) as exc:
        seal(folder)
    assert exc.value.filename == str(folder / RUN_MANIFEST)
    assert not (folder / RUN_MANIFEST).exists()
    assert [p.name for p in (tmp_path / "runs").iterdir()] == ["r"]
    monkeypatch.undo()
    seal(folder)
    assert (folder / RUN_MANIFEST).read_text() == manifest_text(folder)


def test_a_bench_folder_that_cannot_be_written_stops_the_run(monkeypatch):
    from stages.run import steps as run_steps

    class Out:
        def __init__(self):
            self.facts = []

        def add(self, **kw):
            self.facts.append(kw)

    class Eng:
        base_url = "http://x"

        def alive(self):
            return True

        def still_up(self):
            return True

    class Interrupts:
        def check(self):
            pass

    def full(window):
        raise OSError(errno.ENOSPC, "No space left on device", "data/runs/r/bench/chat__c01.json")
    measured = run_steps.Step("chat__c01", "one", lambda window: None)
    failing = run_steps.Step("chat__c02", "two", full)
    never = run_steps.Step("chat__c04", "three", lambda window: pytest.fail("ran after the fault"))
    monkeypatch.setattr(run_steps.bench, "reset_prefix_cache", lambda *a: 0)
    out, tally = Out(), run_steps.Tally()
    with pytest.raises(faults.StorageFault, match="bench/chat__c01.json: No space left on device"):
        run_steps.benchmark([measured, failing, never], Eng(), out, Interrupts(), None, "vllm",
                             lambda s: None, tally)
    assert tally.done == 1
    # the measured step's times, then the fault; nothing more is written to the full disk
    assert [list(f) for f in out.facts] == [["step_times"], ["point_error"]]
    assert out.facts[0]["step_times"].startswith("chat__c01 start=")
    assert out.facts[1] == {"point_error": "chat__c02 data/runs/r/bench/chat__c01.json: No space left on device"}


def test_a_folder_is_swapped_into_place_in_one_step(tmp_path, monkeypatch):
    from stages.core import files
    from stages.render.site_build import MARKER, swap_in
    site, new = tmp_path / "site", tmp_path / ".site.tmp-1"
    for folder, text in ((site, "old"), (new, "new")):
        folder.mkdir()
        (folder / MARKER).write_text("")
        (folder / "index.html").write_text(text)
    renames = []
    monkeypatch.setattr(files.os, "rename", lambda a, b: renames.append((a, b)))
    if not files.exchange(new, site):
        pytest.skip("this file system cannot swap two paths in one step")
    assert (site / "index.html").read_text() == "new" and (new / "index.html").read_text() == "old"
    files.exchange(new, site)
    swap_in(new, site)
    assert renames == []                        # never a moment without a site
    assert (site / "index.html").read_text() == "new" and not new.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["site"]


def test_a_runs_folder_that_vanishes_after_it_was_listed_stops_ingest_with_nothing_written(tmp_path, monkeypatch):
    """The storage goes away between the listing of the run folders and their reading: each file
    then looks gone, which is the storage's fault, not the run's (no rows of empty runs)."""
    import duckdb

    from stages.core.faults import StorageFault
    from stages.ingest import stage as ingest
    from stages.tools.faults.hostile_folders import copy_fixture

    root = tmp_path / "project"
    runs = root / "data" / "runs"
    for run_id in ("tiny-llama__cpu_seqs4__4k__vllm__1130-070000", "tiny-llama__cpu_seqs4__4k__vllm__1130-070001"):
        copy_fixture(runs / run_id)
    opened = ingest.open_warehouse

    def storage_gone(warehouse):
        runs.rename(runs.with_name("runs.gone"))
        return opened(warehouse)
    monkeypatch.setattr(ingest, "open_warehouse", storage_gone)
    with pytest.raises(StorageFault, match="No such file or directory"):
        ingest.run(runs_dir=runs, warehouse=root / "data" / "warehouse.duckdb", root=root)
    with duckdb.connect(str(root / "data" / "warehouse.duckdb"), read_only=True) as con:
        assert con.execute("select count(*) from raw_runs").fetchone() == (0,)
        assert con.execute("select count(*) from ingest_errors").fetchone() == (0,)


def test_a_site_build_on_a_full_disk_stops_with_one_line_naming_the_site_folder(tmp_path, monkeypatch):
    """A write of mkdocs' that fails with ENOSPC and no file name (Python's own file writes say
    none) is named by the site folder being built."""
    import yaml
    from mkdocs.commands import build as mkdocs_build

    from stages.core.faults import StorageFault
    from stages.render import site_memo

    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "index.md").write_text("# A page\n")
    config = tmp_path / "mkdocs.yml"
    config.write_text(yaml.safe_dump({"site_name": "x", "docs_dir": str(tmp_path / "docs"),
                                      "site_dir": str(tmp_path / "site")}))

    def full(cfg):
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(mkdocs_build, "build", full)
    with pytest.raises(StorageFault) as stopped:
        site_memo.build(config, site_memo.SiteMemo(None), "key", None)
    assert str(stopped.value) == f"{tmp_path / 'site'}: No space left on device"


def _full_disk(path):
    """`path` made a link to /dev/full: it opens, and every write to it fails with ENOSPC, which
    Python raises naming no file (a disk that fills up after the file was opened)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.symlink_to("/dev/full")
    return path


def _write_redacted_csv(tmp_path):
    from stages.core.files import scratch
    from stages.render.downloads import redact_csv

    (tmp_path / "runs.csv").write_text("run_id,notes\nr1,plain\n")
    return redact_csv, (tmp_path / "runs.csv",), scratch(tmp_path / "runs.csv")


def _write_page(tmp_path):
    from stages.render.incremental import DocsWriter

    out = DocsWriter(tmp_path / "new", tmp_path / "old", None)
    return out.put_content, ("part-1.md", "# A page\n"), tmp_path / "new" / "part-1.md"


def _mark_site(tmp_path):
    from stages.render.site_build import MARKER, mark

    return mark, (tmp_path,), tmp_path / MARKER


def _write_whole(tmp_path):
    from stages.core.files import scratch, write_atomic

    # its temporary file, named after the process and thread
    return write_atomic, (tmp_path / "facts.json", "{}"), scratch(tmp_path / "facts.json")


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full")
@pytest.mark.parametrize("writer", [_write_redacted_csv, _write_page, _mark_site, _write_whole])
def test_a_write_on_a_full_disk_names_the_file_being_written(tmp_path, writer):
    """A render's files (the redacted CSV downloads, the pages, the site folder's mark, a file
    written whole) stop on a full disk with one line naming the file, not just the error: make
    reliability's render, given ENOSPC at a write of a CSV download, said only `No space left on
    device`."""
    write, args, written = writer(tmp_path)
    _full_disk(written)
    with pytest.raises(OSError) as stopped:
        write(*args)
    assert faults.one_line(stopped.value) == f"{written}: No space left on device"
