"""`campaign import`: run folders made before the project (no meta.json) copied in byte for byte,
recorded (import.json), sealed; all or nothing, whether a source is refused or the command is
interrupted, even by SIGKILL."""
from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from stages.cli import main
from stages.core import locks
from stages.core.provenance import file_sha256
from stages.formats.sealed import RUN_MANIFEST
from stages.ingest import stage as ingest

ROOT = Path(__file__).resolve().parent.parent
NODE_RUNS = Path(__file__).parent / "fixtures" / "node_campaign" / "runs"
CAMPAIGN = [sys.executable, "-m", "stages.cli"]      # `campaign`, from this checkout
GLM = "glm53__tp8_dcp8__1024k__vllm__1116-062500"
SPECS = {"glm53__tp8_dcp8__1024k__vllm__1116-060000": "glm53-tp8-dcp8",
         GLM: "glm53-tp8-dcp8",
         "minimax_m3__tep8__1024k__vllm__1116-091000": "minimax-m3-tep8-stable",
         "minimax_m3__fx_tep8_recipe__1024k__vllm__1116-093000": "minimax-m3-tep8",
         "qwen3_235b__tp4__256k__vllm__1116-130000": "qwen3-235b-tp4",
         "qwen3_235b__tp4__256k__vllm__1116-140000": "qwen3-235b-tp4",
         "dsv4_pro__tep8__781k__vllm__1116-112000": "dsv4-pro-tep8",
         "dsv4_pro__dep8__781k__vllm__1116-110000": "dsv4-pro-dep8"}
RECORD_KEYS = {"record", "kind", "schema_version", "run_id", "profile", "spec", "spec_match", "source",
               "source_host", "imported_at", "imported_by", "files"}
BIG = 300 * 1024 * 1024


sha = file_sha256


def files_of(folder: Path) -> dict[str, str]:
    return {p.relative_to(folder).as_posix(): sha(p) for p in sorted(folder.rglob("*")) if p.is_file()}


def listing(runs: Path) -> dict[str, tuple]:
    """Every entry under runs, hidden ones included: kind, mode, and a file's sha256."""
    out = {}
    if not runs.exists():
        return out
    for here, dirs, names in os.walk(runs):
        for name in dirs + names:
            path = Path(here) / name
            st = path.lstat()
            out[path.relative_to(runs).as_posix()] = (
                stat.S_IFMT(st.st_mode), stat.S_IMODE(st.st_mode),
                sha(path) if stat.S_ISREG(st.st_mode) else None)
    return out


def strip(folder: Path, *names: str) -> Path:
    """A fixture folder copy without the files a campaign of this project adds."""
    for path in [folder, *folder.rglob("*")]:
        if path.is_dir():
            path.chmod(0o755)
    for name in names:
        (folder / name).unlink()
    return folder


@pytest.fixture(scope="module")
def old_runs(tmp_path_factory) -> Path:
    """The node campaign's eight run folders as a team without this project kept them."""
    src = tmp_path_factory.mktemp("old") / "runs"
    shutil.copytree(NODE_RUNS, src)
    for folder in src.iterdir():
        strip(folder, "meta.json", RUN_MANIFEST)
    return src


def make_project(root: Path, extra_specs: dict | None = None) -> Path:
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    params["specs"].update(extra_specs or {})
    root.mkdir(parents=True, exist_ok=True)
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    return root


@pytest.fixture()
def project(tmp_path: Path) -> Path:
    return make_project(tmp_path / "project")


def copy_run(old_runs: Path, dest: Path, run_id: str = GLM, name: str | None = None) -> Path:
    target = dest / (name or run_id)
    shutil.copytree(old_runs / run_id, target)
    return target


def campaign(*args: str):
    result = CliRunner().invoke(main, list(args))
    if isinstance(result.exception, Exception) and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result


def import_(project: Path, *sources: Path | str, profile: str = "h200x8"):
    return campaign("import", *map(str, sources), "--profile", profile, "--root", str(project))


def test_the_node_campaign_arrives_byte_for_byte_recorded_and_sealed(project, old_runs):
    before = {folder.name: files_of(folder) for folder in old_runs.iterdir()}
    mtimes = {p: p.stat().st_mtime_ns for p in old_runs.rglob("*") if p.is_file()}
    result = import_(project, *sorted(old_runs.iterdir()))
    assert result.exit_code == 0, result.stderr
    assert "imported=8" in result.stdout
    runs = project / "data" / "runs"
    assert sorted(p.name for p in runs.iterdir()) == sorted(SPECS)
    for run_id, spec in SPECS.items():
        folder = runs / run_id
        arrived = files_of(folder)
        assert set(arrived) == set(before[run_id]) | {"import.json", RUN_MANIFEST}
        assert {k: arrived[k] for k in before[run_id]} == before[run_id]
        for name in before[run_id]:
            assert (folder / name).stat().st_mtime_ns == mtimes[old_runs / run_id / name]
        record = json.loads((folder / "import.json").read_text())
        assert set(record) == RECORD_KEYS
        assert record["record"] == "import" and record["schema_version"] == 1
        assert (record["run_id"], record["profile"], record["spec"]) == (run_id, "h200x8", spec)
        assert record["spec_match"].endswith(f"match spec {spec}")
        assert record["source"] == str((old_runs / run_id).resolve())
        assert record["source_host"] == socket.gethostname()
        assert record["imported_at"].endswith("Z")
        assert record["files"] == before[run_id]
        assert (folder / "import.json").read_text() == json.dumps(record, sort_keys=True, indent=2) + "\n"
        checked = subprocess.run(["sha256sum", "-c", "--quiet", RUN_MANIFEST], cwd=folder,
                                 capture_output=True, text=True)
        assert checked.returncode == 0, checked.stdout + checked.stderr
        listed = {line.split("  ", 1)[1] for line in (folder / RUN_MANIFEST).read_text().splitlines()}
        assert listed == set(before[run_id]) | {"import.json"}
        for path in [folder, *folder.rglob("*")]:
            assert path.stat().st_mode & 0o222 == 0, path
    assert {folder.name: files_of(folder) for folder in old_runs.iterdir()} == before
    imported = [line for line in result.stderr.splitlines() if " imported " in line]
    assert len(imported) == 8 and f"imported {GLM} (80 files, " in result.stderr
    # ingest reads them as any sealed run folder: no error, nothing tampered
    summary = ingest.run(runs_dir=runs, warehouse=project / "data" / "warehouse.duckdb",
                         root=project, progress=None, seal_unsealed=True)
    assert (summary["runs_read"], summary["errors"], summary["runs_tampered"]) == (8, 0, 0)


def test_help_has_an_example():
    result = campaign("import", "--help")
    assert result.exit_code == 0 and "Example:" in result.output
    assert "campaign import /old/runs/glm53__tp8_dcp8__1024k__vllm__1010-053939 --profile h200x8" \
        in result.output


def test_a_meta_json_of_the_same_profile_is_kept_as_it_is(project, tmp_path):
    src = strip(copy_run(NODE_RUNS, tmp_path), RUN_MANIFEST)
    result = import_(project, src)
    assert result.exit_code == 0, result.stderr
    folder = project / "data" / "runs" / GLM
    assert sha(folder / "meta.json") == sha(src / "meta.json")


def glm_record_beside(tmp_path: Path, old_runs: Path, name: str, **changed) -> dict:
    """The import record of GLM, imported into a project whose params.yaml also holds spec `name`:
    glm53-tp8-dcp8's spec with `changed` settings."""
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    project = make_project(tmp_path / "project", {name: {**params["specs"]["glm53-tp8-dcp8"], **changed}})
    assert import_(project, old_runs / GLM).exit_code == 0
    return json.loads((project / "data" / "runs" / GLM / "import.json").read_text())


def test_of_several_matching_specs_the_image_in_cmd_sh_picks_one(tmp_path, old_runs):
    record = glm_record_beside(tmp_path, old_runs, "glm53-nightly", image="vllm/vllm-openai:nightly")
    assert record["spec"] == "glm53-tp8-dcp8"
    assert record["spec_match"] == ("specs glm53-tp8-dcp8 and glm53-nightly match; the image in "
                                    "cmd.sh (vllm/vllm-openai:v0.31.0) picks glm53-tp8-dcp8")


def test_a_run_no_spec_of_the_profile_names_is_imported_with_spec_null(project, old_runs):
    result = import_(project, old_runs / GLM, profile="h200x1")
    assert result.exit_code == 0, result.stderr
    record = json.loads((project / "data" / "runs" / GLM / "import.json").read_text())
    assert record["spec"] is None and record["profile"] == "h200x1"
    assert record["spec_match"].startswith("no spec of params.yaml has model glm53, layout tp8_dcp8, "
                                           "context 1024k and engine vllm")
    assert "spec none" in result.stderr


def refused(project: Path, sources: list, expect: str, profile: str = "h200x8") -> None:
    """The import of `sources` is refused with one line holding `expect`, and the runs folder is
    exactly as it was."""
    runs = project / "data" / "runs"
    before = listing(runs)
    result = import_(project, *sources, profile=profile)
    lines = result.stderr.splitlines()
    assert result.exit_code == 2, result.stderr
    assert len(lines) == 1 and lines[0].startswith("campaign: error: "), result.stderr
    assert expect in lines[0]
    assert listing(runs) == before


@pytest.fixture()
def one_imported(project, old_runs) -> Path:
    """A project whose runs folder already holds one imported run."""
    assert import_(project, old_runs / "qwen3_235b__tp4__256k__vllm__1116-130000").exit_code == 0
    return project


def test_the_same_folder_imported_again_is_refused(one_imported, old_runs):
    refused(one_imported, [old_runs / "qwen3_235b__tp4__256k__vllm__1116-130000"],
            expect="already in the runs folder")


def test_the_same_folder_given_twice_is_refused(one_imported, old_runs):
    refused(one_imported, [old_runs / GLM, old_runs / GLM], expect="given twice")


def test_an_unknown_profile_is_refused(one_imported, old_runs):
    refused(one_imported, [old_runs / GLM], profile="h100x8",
            expect="--profile 'h100x8' is not one of")


@pytest.mark.parametrize("damage, expect", [
    (lambda f: (f / "bench" / "latest.json").symlink_to("doc-4k__c01.json"),
     "'bench/latest.json': symbolic link"),
    (lambda f: os.mkfifo(f / "server.pipe"), "'server.pipe': not a regular file (FIFO)"),
    (lambda f: (f / RUN_MANIFEST).write_text(""),
     "already sealed (MANIFEST.sha256): copy it into the runs folder as it is"),
    (lambda f: (f / "import.json").write_text("{}"), "import.json"),
    (lambda f: (f / "meta.json").write_text('{"profile": "h200x1"}'),
     "meta.json names profile 'h200x1', not --profile h200x8"),
    (lambda f: [(f / n).unlink() for n in ("cmd.sh", "server.log", "launch.out")],
     "holds none of cmd.sh, server.log, launch.out: not a run folder"),
], ids=["symlink", "fifo", "sealed", "imported", "other-profile", "not-a-run"])
def test_one_bad_source_among_good_ones_imports_nothing(one_imported, old_runs, tmp_path, damage, expect):
    bad = copy_run(old_runs, tmp_path / "bad")
    damage(bad)
    good = [old_runs / name for name in sorted(SPECS)
            if name not in (GLM, "qwen3_235b__tp4__256k__vllm__1116-130000")]
    refused(one_imported, [*good[:3], bad, *good[3:]], expect=expect)


def test_a_folder_whose_name_is_no_run_id_is_refused(one_imported, old_runs, tmp_path):
    src = copy_run(old_runs, tmp_path, name="glm53-first-try")
    refused(one_imported, [src], expect="folder name 'glm53-first-try' is not a run id")


def test_a_link_to_a_run_folder_is_refused(one_imported, old_runs, tmp_path):
    (tmp_path / GLM).symlink_to(old_runs / GLM)
    refused(one_imported, [f"{tmp_path / GLM}/"], expect="is a symbolic link")


def test_a_second_import_waits_for_the_first(project, old_runs):
    runs = project / "data" / "runs"
    with locks.writing(project, [runs], "campaign import"):
        result = import_(project, old_runs / GLM)
    assert result.exit_code == 2 and "is being written by `campaign import`" in result.stderr
    assert not runs.exists() or not any(runs.iterdir())


# -- interrupted --------------------------------------------------------------------------------

@pytest.fixture()
def big_source(old_runs, tmp_path) -> Path:
    """A run folder with a 300 MB file (sparse: quick to make, as slow to copy as any)."""
    src = copy_run(old_runs, tmp_path / "src")
    with (src / "bench" / "big.bin").open("wb") as fh:
        fh.truncate(BIG)
    return src


def start_import(project: Path, src: Path) -> tuple[subprocess.Popen, Path]:
    """An import in its own process, once it has begun copying the big file into its staging
    folder."""
    runs = project / "data" / "runs"
    proc = subprocess.Popen([*CAMPAIGN, "import", str(src), "--profile", "h200x8", "--root", str(project)],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and proc.poll() is None:
        staging = list(runs.glob(".import-*")) if runs.exists() else []
        if staging and (staging[0] / "bench" / "big.bin").exists():
            return proc, staging[0]
        time.sleep(0.002)
    proc.kill()
    raise AssertionError(f"the import did not begin copying the big file: {proc.communicate()}")


def visible(runs: Path) -> dict[str, tuple]:
    return {k: v for k, v in listing(runs).items() if not k.startswith(".")}


def test_after_a_sigkill_the_staging_stays_hidden_and_the_next_import_removes_it(one_imported, big_source):
    runs = one_imported / "data" / "runs"
    before = visible(runs)
    proc, staging = start_import(one_imported, big_source)
    proc.kill()
    proc.communicate()
    assert proc.returncode == -signal.SIGKILL
    assert (staging / "bench" / "big.bin").exists() and visible(runs) == before
    assert not ingest.run(runs_dir=runs, warehouse=one_imported / "w.duckdb", root=one_imported,
                          progress=None, seal_unsealed=False)["errors"]
    result = import_(one_imported, big_source)
    assert result.exit_code == 0, result.stderr
    assert f"removed {staging.name}" in result.stderr
    assert not list(runs.glob(".import-*"))
    assert files_of(runs / GLM)["bench/big.bin"] == sha(big_source / "bench" / "big.bin")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_an_interrupted_import_removes_its_staging_folder(one_imported, big_source, sig):
    runs = one_imported / "data" / "runs"
    before = listing(runs)
    proc, staging = start_import(one_imported, big_source)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 2, err
    assert f"campaign: error: interrupted ({sig.name})" in err
    assert listing(runs) == before


def test_a_staging_folder_of_a_running_process_is_left_alone(one_imported, old_runs):
    runs = one_imported / "data" / "runs"
    gone = subprocess.Popen(["true"])
    gone.wait()
    running = subprocess.Popen(["sleep", "30"])
    try:
        for pid in (gone.pid, running.pid):
            (runs / f".import-{GLM}-{pid}" / "bench").mkdir(parents=True)
            (runs / f".import-{GLM}-{pid}").chmod(0o555)
        result = import_(one_imported, old_runs / GLM)
        assert result.exit_code == 0, result.stderr
        assert not (runs / f".import-{GLM}-{gone.pid}").exists()
        assert (runs / f".import-{GLM}-{running.pid}").exists()
    finally:
        running.kill()
        running.wait()


def test_a_spec_of_another_engine_is_not_the_run_s(tmp_path, old_runs):
    record = glm_record_beside(tmp_path, old_runs, "glm53-tp8-dcp8", engine="sglang")
    assert record["spec"] is None and "engine vllm" in record["spec_match"]


RESULTS_RUN = "llama-1b__imported__32k__vllm__1202-170000"


def test_a_folder_of_result_files_becomes_the_bench_folder_of_a_new_run(project, tmp_path):
    shapes = Path(__file__).parent / "fixtures" / "bench_shapes"
    results = tmp_path / "results"
    shutil.copytree(shapes, results / "sweep", ignore=shutil.ignore_patterns("README.md"))
    result = campaign("import", str(results), "--profile", "h200x1", "--results", RESULTS_RUN,
                      "--root", str(project))
    assert result.exit_code == 0, result.stderr
    folder = project / "data" / "runs" / RESULTS_RUN
    assert {f"bench/{n}": h for n, h in files_of(results).items()}.items() <= files_of(folder).items()
    record = json.loads((folder / "import.json").read_text())
    assert record["kind"] == "results" and record["profile"] == "h200x1" and record["spec"] is None
    assert set(record["files"]) == {f"bench/{n}" for n in files_of(results)}
    assert subprocess.run(["sha256sum", "-c", "--quiet", RUN_MANIFEST], cwd=folder).returncode == 0
    assert folder.stat().st_mode & 0o222 == 0


def test_result_files_are_refused_as_one_run_with_a_run_id_not_there_yet(project, tmp_path):
    results = tmp_path / "results"
    results.mkdir()
    (results / "a.json").write_text("{}")
    refused(project, [results, "--results", "not-a-run-id"], "--results 'not-a-run-id' is not a run id")
    refused(project, [results, results, "--results", RESULTS_RUN],
            "--results imports one folder of result files as one run")
    (tmp_path / "empty").mkdir()
    refused(project, [tmp_path / "empty", "--results", RESULTS_RUN], "holds no file")
