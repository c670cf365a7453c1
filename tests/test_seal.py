"""Write-once that holds: sealed folders are read-only, every edit is seen at the next ingest
(even one that keeps size and mtime, or rewrites the manifest to match), the rows of the first
ingest are kept, and derive marks the run tampered."""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from pathlib import Path

import duckdb
import pytest
from click.testing import CliRunner

from helpers.db_rows import db_tuples
from stages.derive import stage as derive
from stages.ingest import stage as ingest
from stages.cli import main
from stages.formats.sealed import AT_REST_S, RUN_MANIFEST, at_rest
from stages.run.stage import seal

ROOT = Path(__file__).resolve().parent.parent
RUN = "tiny-llama__cpu_seqs4__4k__vllm__1130-051200"
OTHER = "tiny-llama__cpu_seqs16__4k__vllm__1130-052000"
RULES = {"prefix_cache_tok_s": 60000, "gate_min_score": 1.0, "cached_share_max_pct": 20,
         "default_max_num_seqs": 1024, "burst_tpot_ms": 0.5, "cached_mark_pct": 10}
WORKLOADS = {"long": {"prompt_tokens": 2048, "output_tokens": 64, "concurrency": [4]}}
LAUNCH = "status=ready\nready_s=71.3\nengine_kv_tokens=1048576\nrun_status=complete\n"
EDITED = LAUNCH.replace("ready_s=71.3", "ready_s=17.3")
IS_ROOT = os.geteuid() == 0


def write_run(runs: Path, run_id: str, launch: str = LAUNCH) -> Path:
    folder = runs / run_id
    (folder / "bench").mkdir(parents=True)
    (folder / "cmd.sh").write_text(
        "#!/bin/sh\n.venv/bin/python -m vllm.entrypoints.openai.api_server \\\n"
        "  --model data/models/tiny-llama --max-num-seqs 4 --max-model-len 4096\n")
    (folder / "launch.out").write_text(launch)
    (folder / "meta.json").write_text(json.dumps({
        "schema_version": 1, "run_id": run_id, "spec": "tiny-seqs4", "profile": "local-cpu",
        "engine": "vllm", "model": "tiny-llama", "layout": "cpu_seqs4", "ctx_label": "4k",
        "started_at": "2026-11-30T05:12:00Z", "finished_at": "2026-11-30T05:20:00Z"}))
    (folder / "bench" / "note.txt").write_text("kept\n")
    return folder


def edit_keeping_size_and_mtime(path: Path, text: str) -> None:
    """What a careful editor does: same size, mtime put back, mode put back."""
    st = path.stat()
    assert len(text.encode()) == st.st_size
    path.chmod(0o644)
    path.write_text(text)
    path.chmod(st.st_mode & 0o777)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    after = path.stat()
    assert (after.st_size, after.st_mtime_ns) == (st.st_size, st.st_mtime_ns)


def rewrite_manifest(folder: Path) -> None:
    """Make the manifest match the folder as it is now (as `sha256sum` would)."""
    manifest = folder / RUN_MANIFEST
    lines = []
    for line in manifest.read_text().splitlines():
        _, name = line.split("  ", 1)
        lines.append(f"{hashlib.sha256((folder / name).read_bytes()).hexdigest()}  {name}\n")
    manifest.chmod(0o644)
    manifest.write_text("".join(lines))


@pytest.fixture()
def project(tmp_path: Path) -> Path:
    seal(write_run(tmp_path / "data" / "runs", RUN))
    return tmp_path


def ingest_project(root: Path, lines: list[str] | None = None, seal_unsealed: bool = True) -> dict:
    return ingest.run(runs_dir=root / "data" / "runs", warehouse=root / "data" / "warehouse.duckdb",
                      root=root, progress=lines.append if lines is not None else None,
                      seal_unsealed=seal_unsealed)


query = db_tuples


def warehouse(root: Path, sql: str, params: list | None = None) -> list[tuple]:
    return query(root / "data" / "warehouse.duckdb", sql, params)


def derived(root: Path, sql: str, params: list | None = None) -> list[tuple]:
    out = root / "out"
    derive.run(warehouse=root / "data" / "warehouse.duckdb", campaign_db=out / "campaign.duckdb",
               derived_dir=out / "derived", metrics_file=out / "metrics.json", rules=RULES,
               workloads=WORKLOADS)
    return query(out / "campaign.duckdb", sql, params)


def test_seal_makes_files_and_folders_read_only_and_is_idempotent(tmp_path: Path):
    folder = write_run(tmp_path, RUN)
    manifest = seal(folder)
    first = (manifest.read_text(), manifest.stat().st_ino)
    assert [line.split("  ")[1] for line in first[0].splitlines()] == [
        "bench/note.txt", "cmd.sh", "launch.out", "meta.json"]
    for path in (folder, folder / "bench"):
        assert path.stat().st_mode & 0o777 == 0o555, path
    for path in (folder / "launch.out", folder / "bench" / "note.txt", manifest):
        assert path.stat().st_mode & 0o777 == 0o444, path
    if not IS_ROOT:  # root passes any mode: the bits above are what stops everyone else
        with pytest.raises(PermissionError):
            (folder / "added.txt").write_text("x")
        with pytest.raises(PermissionError):
            (folder / "launch.out").unlink()
    assert seal(folder) == manifest
    assert (manifest.read_text(), manifest.stat().st_ino) == first


def test_an_edit_keeping_size_and_mtime_is_seen_and_the_first_rows_are_kept(project: Path):
    assert ingest_project(project)["runs_read"] == 1
    noop = ingest_project(project)
    assert (noop["runs_read"], noop["runs_skipped"]) == (0, 1)

    edit_keeping_size_and_mtime(project / "data" / "runs" / RUN / "launch.out", EDITED)
    lines: list[str] = []
    again = ingest_project(project, lines)
    assert (again["runs_read"], again["runs_tampered"]) == (1, 1)
    assert "TAMPERED (launch.out): rows of its first ingest kept" in lines[0]
    assert warehouse(project, "select value from raw_launch_out where run_id = ? and key = 'ready_s'",
                     [RUN]) == [("71.3",)]
    assert warehouse(project, "select file, reason, rows_kept, source_file, source_line from raw_tampered") == [
        ("launch.out", "changed after the run (sha256 differs from the manifest)", True,
         f"data/runs/{RUN}/launch.out", 3)]
    assert derived(project, "select r.tampered, r.tampered_files, r.tampered_rows_kept, r.sealed_by, "
                            "l.ready_s from runs r join launches l using (run_id)") == [
        (True, "launch.out", True, "run", 71.3)]

    # the tamper is recorded once, and the folder is not hashed again while it stays as it is
    detected = warehouse(project, "select detected_at from raw_tampered")
    third = ingest_project(project)
    assert (third["runs_read"], third["runs_skipped"]) == (0, 1)
    assert warehouse(project, "select detected_at from raw_tampered") == detected


def test_a_manifest_rewritten_to_match_the_edit_is_still_seen(project: Path):
    ingest_project(project)
    folder = project / "data" / "runs" / RUN
    edit_keeping_size_and_mtime(folder / "launch.out", EDITED)
    rewrite_manifest(folder)
    summary = ingest_project(project)
    assert summary["runs_tampered"] == 1
    assert warehouse(project, "select file, reason, rows_kept from raw_tampered") == [
        (RUN_MANIFEST, "rewritten after the first ingest (sha256 differs from the one stored then)", True)]
    assert warehouse(project, "select value from raw_launch_out where run_id = ? and key = 'ready_s'",
                     [RUN]) == [("71.3",)]
    assert derived(project, "select tampered, tampered_files from runs") == [(True, RUN_MANIFEST)]


def test_a_removed_manifest_is_seen_and_not_written_again(project: Path):
    ingest_project(project)
    folder = project / "data" / "runs" / RUN
    (folder / RUN_MANIFEST).unlink()
    ingest_project(project)
    assert not (folder / RUN_MANIFEST).exists()
    assert warehouse(project, "select file, reason from raw_tampered") == [
        (RUN_MANIFEST, "removed after the first ingest")]


def test_the_first_hash_survives_a_rebuild_of_the_raw_tables(project: Path):
    ingest_project(project)
    db = project / "data" / "warehouse.duckdb"
    con = duckdb.connect(str(db))
    con.execute("alter table raw_gates add column stale integer")
    con.execute("alter table raw_seals add column stale integer")
    con.close()
    folder = project / "data" / "runs" / RUN
    edit_keeping_size_and_mtime(folder / "launch.out", EDITED)
    rewrite_manifest(folder)
    summary = ingest_project(project)
    assert summary["rebuilt"] is True
    assert [c for (c,) in warehouse(project, "select column_name from information_schema.columns "
                                             "where table_name = 'raw_seals'")] == [
        "run_id", "manifest_sha256", "sealed_by", "sealed_at", "first_ingested_at"]
    # the rows were dropped with the raw tables, so the edited ones are all there is, marked so
    assert warehouse(project, "select file, rows_kept from raw_tampered") == [(RUN_MANIFEST, False)]
    assert derived(project, "select tampered, tampered_rows_kept from runs") == [(True, False)]


def test_a_folder_already_changed_at_its_first_ingest_is_read_and_marked(project: Path):
    edit_keeping_size_and_mtime(project / "data" / "runs" / RUN / "launch.out", EDITED)
    lines: list[str] = []
    ingest_project(project, lines)
    assert "TAMPERED (launch.out): read as it is, marked tampered" in lines[0]
    assert warehouse(project, "select value from raw_launch_out where key = 'ready_s'") == [("17.3",)]
    assert warehouse(project, "select file, rows_kept from raw_tampered") == [("launch.out", False)]
    assert derived(project, "select tampered, tampered_files, tampered_rows_kept from runs") == [
        (True, "launch.out", False)]


def test_an_unsealed_folder_is_sealed_at_its_first_ingest(tmp_path: Path):
    runs = tmp_path / "data" / "runs"
    folder = write_run(runs, OTHER)
    ingest_project(tmp_path, seal_unsealed=False)
    assert not (folder / RUN_MANIFEST).exists()

    lines: list[str] = []
    summary = ingest_project(tmp_path, lines)
    assert summary["runs_sealed"] == 1 and ", sealed at ingest " in lines[0]
    assert (folder / RUN_MANIFEST).is_file() and folder.stat().st_mode & 0o777 == 0o555
    assert warehouse(tmp_path, "select sealed_by, sealed_at is not null, manifest_sha256 from raw_seals") == [
        ("ingest", True, hashlib.sha256((folder / RUN_MANIFEST).read_bytes()).hexdigest())]
    assert derived(tmp_path, "select sealed_by, sealed_at is not null, tampered from runs") == [
        ("ingest", True, False)]
    assert ingest_project(tmp_path)["runs_read"] == 0

    # from now on it is held like any sealed folder
    edit_keeping_size_and_mtime(folder / "launch.out", EDITED)
    assert ingest_project(tmp_path)["runs_tampered"] == 1
    assert warehouse(tmp_path, "select value from raw_launch_out where key = 'ready_s'") == [("71.3",)]


def test_campaign_seal_and_campaign_ingest_seal_unsealed_folders(tmp_path: Path):
    shutil.copy(ROOT / "params.yaml", tmp_path / "params.yaml")
    runs = tmp_path / "data" / "runs"
    first, second = write_run(runs, RUN), write_run(runs, OTHER)
    runner = CliRunner()

    result = runner.invoke(main, ["seal", RUN, "--root", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert f"sealed {RUN}: {RUN_MANIFEST} written, folder read-only" in result.stdout
    assert (first / RUN_MANIFEST).is_file() and not (second / RUN_MANIFEST).exists()
    assert first.stat().st_mode & 0o777 == 0o555

    for bad in ("../runs", "nope", ".hidden"):
        result = runner.invoke(main, ["seal", bad, "--root", str(tmp_path)])
        assert result.exit_code == 2
        assert result.stderr.strip() == f"campaign: error: {bad}: no run folder of that name under {runs}"

    result = runner.invoke(main, ["ingest", "--root", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert f"{OTHER} " in result.stderr and "sealed at ingest" in result.stderr
    assert "runs_sealed=1" in result.stdout
    assert (second / RUN_MANIFEST).is_file() and second.stat().st_mode & 0o777 == 0o555

    result = runner.invoke(main, ["seal", "--root", str(tmp_path)])
    assert result.exit_code == 0 and result.stdout.strip() == "sealed=0 made_read_only=0 already_sealed=2"


def test_the_launch_section_of_a_tampered_run_says_so_and_names_the_files(tmp_path: Path):
    from helpers.render_campaign import RUN4, RUN16, build_campaign, render_kwargs
    from stages.render import stage as render
    from stages.render.escape import escape_text

    db = build_campaign(tmp_path)
    con = duckdb.connect(str(db))
    con.execute("update runs set tampered = true, tampered_files = 'bench/long__c04.json, launch.out', "
                "tampered_rows_kept = true where run_id = $run_id", {"run_id": RUN4})
    con.close()
    render.run(**render_kwargs(tmp_path))
    text = (tmp_path / "data" / "docs" / "posts" / "part-local-cpu.md").read_text()
    box = '!!! danger "Tampered: changed after it was sealed"'
    assert text.count(box) == 1
    section = text[text.index(f"### <code>{escape_text(RUN4)}</code>"):]
    assert section.index(box) < section.index('<pre class="evidence">')
    assert "no longer match its seal: bench/long&#95;&#95;c04.json, launch.out." in section
    assert "The figures shown are the ones read before the change." in section
    assert box not in text[text.index(f"### <code>{escape_text(RUN16)}</code>"):]


def test_a_folder_a_run_may_still_be_writing_is_not_sealed(tmp_path: Path):
    runs = tmp_path / "data" / "runs"
    folder = write_run(runs, OTHER, launch="status=ready\nready_s=71.3\n")   # no run_status yet
    assert ingest_project(tmp_path)["runs_sealed"] == 0
    assert not (folder / RUN_MANIFEST).exists() and folder.stat().st_mode & 0o200

    old = time.time() - AT_REST_S - 60                   # untouched for over an hour: at rest
    for p in folder.rglob("*"):
        os.utime(p, (old, old))
    assert at_rest(folder)
    assert ingest_project(tmp_path)["runs_sealed"] == 1
    assert (folder / RUN_MANIFEST).is_file()


def test_a_run_in_a_slurm_job_is_not_sealed_before_the_submitter_records_the_job(tmp_path: Path):
    """The job's run records its end, then the submitter adds Slurm's record (slurm.json) and seals:
    an ingest in between (another job ended) leaves the folder to it."""
    runs = tmp_path / "data" / "runs"
    folder = write_run(runs, OTHER, launch="slurm_job_id=41\nstatus=ready\nrun_status=complete\n")
    assert not at_rest(folder)
    assert ingest_project(tmp_path)["runs_sealed"] == 0
    assert not (folder / RUN_MANIFEST).exists()

    (folder / "slurm.json").write_text("{}\n")
    with (folder / "launch.out").open("a") as f:
        f.write("slurm_state=COMPLETED\n")
    assert at_rest(folder)
    assert ingest_project(tmp_path)["runs_sealed"] == 1
    assert "slurm.json" in (folder / RUN_MANIFEST).read_text()
