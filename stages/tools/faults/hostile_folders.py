"""The scratch project and its damaged run folders, for the hostile-input run (hostile.py).

A scratch project (this project's params.yaml, site/ and mkdocs.yml) gets the intact fixture run
folder and, beside it, copies damaged the way an attacker or a careless user would; `tamper` edits
two sealed folders after the first ingest.
"""
from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

import yaml

from stages.core.provenance import file_sha256

from stages.formats.sealed import RUN_MANIFEST, manifest_text
from stages.formats.launch_out import LaunchOut
from stages.formats.run_folder import LAUNCH_OUT

PROJECT = Path(__file__).resolve().parents[3]
FIXTURE = PROJECT / "tests" / "fixtures" / "runs"
# Text only a file outside the project holds; it must never reach an output.
MARKER = "OUTSIDE-THE-PROJECT-7c1e0b"
# Secrets as another campaign's run folder might carry them.
SECRETS = ("hf_Reliab1lityT0kenAbcdefgh", "sk-reliability0123456789abcdef", "hunter2-reliability",
           "hf-override-secret-77")
# Folder names that carry script: a Markdown link with an event handler, a javascript: link.
HOSTILE_NAMES = (
    'tiny[x](mailto:a onmouseover=alert(1);")__cpu_seqs4__4k__vllm__1129-000007',
    "tiny[y](javascript:alert(2))__cpu_seqs4__4k__vllm__1129-000008",
    'tiny<img src=x onerror=alert(3)>__cpu_seqs4__4k__vllm__1129-000009',
)
CLI_TIMEOUT_S = 300


def _run_id(n: int) -> str:
    """A valid run id for the n-th hostile copy of the fixture."""
    return f"tiny-llama__cpu_seqs4__4k__vllm__1130-06{n:04d}"


def _writable(folder: Path) -> None:
    os.chmod(folder, 0o755)
    for p in folder.rglob("*"):
        if not p.is_symlink():
            p.chmod(0o755 if p.is_dir() else 0o644)


def copy_fixture(dest: Path) -> Path:
    """A writable copy of the fixture's first run folder at `dest`."""
    source = next(p for p in sorted(FIXTURE.iterdir()) if p.is_dir())
    shutil.copytree(source, dest)
    _writable(dest)
    return dest


def _unseal(folder: Path) -> None:
    (folder / RUN_MANIFEST).unlink(missing_ok=True)


def _manifest(folder: Path) -> None:
    """(Re)write a folder's manifest to match its files now, as someone covering an edit would."""
    (folder / RUN_MANIFEST).write_text(manifest_text(folder))


def _replace_same_size(path: Path, old: str, new: str) -> None:
    """Edit a file in place keeping its size and its modification time."""
    assert len(old) == len(new)
    st = path.stat()
    path.chmod(0o644)
    path.write_text(path.read_text().replace(old, new, 1))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def tree_digest(folder: Path) -> dict[str, str]:
    """Every entry under folder (links as their target text, not followed) -> a digest."""
    out = {}
    for p in sorted(folder.rglob("*")):
        rel = p.relative_to(folder).as_posix()
        if p.is_symlink():
            out[rel] = "link:" + os.readlink(p)
        elif p.is_fifo():
            out[rel] = "fifo"
        elif p.is_file():
            out[rel] = file_sha256(p)
        elif p.is_dir():
            out[rel] = "dir"
    return out


# ---------------------------------------------------------------- the scratch project

class Project:
    def __init__(self, root: Path):
        self.root = root
        self.runs = root / "data" / "runs"
        self.outside = root.parent / "outside"

    def params(self) -> dict[str, Any]:
        return yaml.safe_load((self.root / "params.yaml").read_text())

    def write_params(self, params: dict[str, Any]) -> None:
        (self.root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))

    def cli(self, *args: str, timeout: float = CLI_TIMEOUT_S) -> subprocess.CompletedProcess:
        """`campaign ARGS` in the project; a command that hangs is killed and exits 124."""
        argv = [sys.executable, "-m", "stages.cli", *args, "--root", str(self.root)]
        try:
            return subprocess.run(argv, cwd=self.root, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return subprocess.CompletedProcess(argv, 124, "", f"still running after {timeout:.0f} s: killed")

    def spawn(self, *args: str) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, "-m", "stages.cli", *args, "--root", str(self.root)],
                                cwd=self.root, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def make_project(workdir: Path) -> Project:
    root = workdir / "project"
    root.mkdir(parents=True)
    shutil.copy(PROJECT / "params.yaml", root / "params.yaml")
    shutil.copy(PROJECT / "mkdocs.yml", root / "mkdocs.yml")
    shutil.copytree(PROJECT / "site", root / "site")
    project = Project(root)
    project.runs.mkdir(parents=True)
    project.outside.mkdir()
    (project.outside / "passwd").write_text(f"root:x:0:0:{MARKER}:/root:/bin/bash\n")
    (project.outside / "launch.out").write_text(f"status=ready {MARKER}\n")
    return project


# ---------------------------------------------------------------- damaged folders

def _link_cmd(p: Project, f: Path) -> None:
    (f / "cmd.sh").unlink()
    (f / "cmd.sh").symlink_to(p.outside / "passwd")


def _link_launch_out(p: Project, f: Path) -> None:
    (f / "launch.out").unlink()
    (f / "launch.out").symlink_to(p.outside / "launch.out")


def _fifo_log(p: Project, f: Path) -> None:
    (f / "server.log").unlink()
    os.mkfifo(f / "server.log")


def _dev_zero_log(p: Project, f: Path) -> None:
    (f / "server.log").unlink()
    (f / "server.log").symlink_to("/dev/zero")


def _secrets(p: Project, f: Path) -> None:
    hf, sk, password, override = SECRETS
    _unseal(f)
    cmd = (f / "cmd.sh").read_text().splitlines()
    cmd[-1] = (f"HF_TOKEN={hf} MY_PASSWORD={password} " + cmd[-1] + f" --api-key {sk}"
               + f" --hf-overrides '{{\"hf_token\": \"{override}\"}}'")
    (f / "cmd.sh").write_text("\n".join(cmd) + "\n")
    with (f / "server.log").open("a") as log:
        log.write(f"(APIServer pid=1) INFO 11-30 05:37:20 [api_server.py:1] args: api_key='{sk}' "
                  f"hf_token='{hf}'\n")
    meta = json.loads((f / "meta.json").read_text())
    meta["spec_params"]["args"]["--api-key"] = sk
    meta["image"] = f"registry.invalid/vllm:{hf}"
    (f / "meta.json").write_text(json.dumps(meta, indent=2))


def _nan_and_strings(p: Project, f: Path) -> None:
    path = f / "bench" / "chat__c01.json"
    data = json.loads(path.read_text())
    data["ttfts"][0] = float("nan")
    data["completed"] = "two"
    path.write_text(json.dumps(data))


def _unequal_arrays(p: Project, f: Path) -> None:
    path = f / "bench" / "long-shared__c04.json"
    data = json.loads(path.read_text())
    data["ttfts"] = data["ttfts"][:-1]
    path.write_text(json.dumps(data))


def _gzip_log(p: Project, f: Path) -> None:
    _unseal(f)
    log = f / "server.log"
    (f / "server.log.gz").write_bytes(gzip.compress(log.read_bytes(), mtime=0))
    log.unlink()


def _duplicate_keys(p: Project, f: Path) -> None:
    LaunchOut(f / LAUNCH_OUT, append=True).add(engine_kv_tokens=99999)


# name -> (fault, how to damage a fresh copy before the first ingest)
FOLDER_CASES: dict[str, tuple[str, Callable[[Project, Path], None]]] = {
    "cmd.sh links outside": ("cmd.sh is a symbolic link to a password file outside the project",
                             _link_cmd),
    "launch.out links outside": ("launch.out is a symbolic link to a file outside the project",
                                 _link_launch_out),
    "engine log is a FIFO": ("server.log is a named pipe nobody writes to", _fifo_log),
    "engine log is /dev/zero": ("server.log is a link to /dev/zero, endless", _dev_zero_log),
    "secrets from another campaign": (
        "HF_TOKEN, a password, --api-key and a token inside --hf-overrides in cmd.sh, echoed in "
        "server.log and meta.json; the folder arrives unsealed", _secrets),
    "NaN and strings in a result file": ("a TTFT of NaN and `completed: \"two\"` in a result file",
                                         _nan_and_strings),
    "arrays of different lengths": ("one TTFT fewer than the other per-request arrays",
                                    _unequal_arrays),
    "compressed engine log": ("server.log stored as server.log.gz; the folder arrives unsealed",
                              _gzip_log),
    "duplicate keys in launch.out": ("engine_kv_tokens given twice with different values",
                                     _duplicate_keys),
}


def damage_folders(p: Project) -> dict[str, str]:
    """Write the intact fixture and every damaged copy; case name -> run folder name."""
    folders = {"intact": copy_fixture(p.runs / _run_id(0)).name}
    for n, (name, (_, damage)) in enumerate(FOLDER_CASES.items(), start=1):
        folder = copy_fixture(p.runs / _run_id(n))
        damage(p, folder)
        folders[name] = folder.name
    n = len(FOLDER_CASES) + 1
    linked = copy_fixture(p.outside / _run_id(n))
    (linked / "cmd.sh").write_text(f"#!/bin/sh\n# {MARKER}\nvllm serve m\n")
    _manifest(linked)
    (p.runs / linked.name).symlink_to(linked, target_is_directory=True)
    folders["run folder linked from outside"] = linked.name
    for i, name in enumerate(HOSTILE_NAMES):
        copy_fixture(p.runs / name)
        folders[f"script in a folder name {i + 1}"] = name
    for suffix in (".bak", " (copy)"):
        copy_fixture(p.runs / (_run_id(0) + suffix))
        folders[f"copied folder named *{suffix}"] = _run_id(0) + suffix
    for n, name in ((n + 1, "edited after sealing, size and mtime kept"),
                    (n + 2, "manifest rewritten to match an edit"),
                    (n + 3, "folder arrives unsealed")):
        folder = copy_fixture(p.runs / _run_id(n))
        if name == "folder arrives unsealed":
            _unseal(folder)
        folders[name] = folder.name
    return folders


def tamper(p: Project, folders: dict[str, str]) -> None:
    """After the first ingest: edit two sealed folders, one also rewriting its manifest."""
    kept = p.runs / folders["edited after sealing, size and mtime kept"]
    os.chmod(kept, 0o755)
    _replace_same_size(kept / "launch.out", "engine_kv_tokens=16384", "engine_kv_tokens=96384")
    rewritten = p.runs / folders["manifest rewritten to match an edit"]
    _writable(rewritten)
    _replace_same_size(rewritten / "launch.out", "ready_s=37.2", "ready_s=99.9")
    _manifest(rewritten)


def make_writable(tree: Path) -> None:
    """Every folder under `tree` (and itself) writable again: sealed run folders are read-only,
    and a scratch tree holding them must be removable."""
    for dirpath, dirnames, _ in os.walk(tree):
        for d in dirnames:
            if not (Path(dirpath) / d).is_symlink():
                os.chmod(Path(dirpath) / d, 0o755)
    os.chmod(tree, 0o755)
