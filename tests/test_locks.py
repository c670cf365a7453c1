"""One writer at a time per output: a second writer gets one line naming the first, exit 2."""
from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest
from click.testing import CliRunner

from stages.derive import stage as derive
from stages.core import locks
from stages.core import raw_schema
from stages.cli import main
from stages.core.config import CampaignError
from stages.core.names import LOCK_DIR

ROOT = Path(__file__).resolve().parent.parent
RAW_DDL = raw_schema.RAW_SCHEMA
HOLD = """
import sys
from pathlib import Path
from stages.core import locks
root = Path(sys.argv[1])
with locks.writing(root, [root / p for p in sys.argv[3:]], sys.argv[2]):
    print("held", flush=True)
    sys.stdin.read()
"""


@pytest.fixture
def project(tmp_path) -> Path:
    """A project with the shipped params.yaml and an empty warehouse, derived once."""
    shutil.copy(ROOT / "params.yaml", tmp_path / "params.yaml")
    (tmp_path / "data").mkdir()
    con = duckdb.connect(str(tmp_path / "data" / "warehouse.duckdb"))
    con.execute(RAW_DDL.read_text())
    con.close()
    result = CliRunner().invoke(main, ["derive", "--root", str(tmp_path)])
    assert result.exit_code == 0, result.output
    return tmp_path


class Holder:
    """Another process holding the locks of `outputs` as `command`, until it is released."""

    def __init__(self, root: Path, command: str, outputs: list[str]):
        self.proc = subprocess.Popen([sys.executable, "-c", HOLD, str(root), command, *outputs],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                     env={**os.environ, "PYTHONPATH": str(ROOT)})
        assert self.proc.stdout.readline() == "held\n"

    def release(self) -> None:
        self.proc.stdin.close()
        assert self.proc.wait(timeout=30) == 0


def snapshot(root: Path) -> dict[str, bytes]:
    data = root / "data"
    return {str(p.relative_to(data)): p.read_bytes() for p in sorted(data.rglob("*"))
            if p.is_file() and LOCK_DIR not in str(p.relative_to(root))}


LINE = re.compile(r"campaign: error: (\S+) is being written by `([^`]+)` \(pid (\d+), since "
                  r"\d\d:\d\d:\d\d\); try again when it ends")


@pytest.mark.parametrize("args, command, outputs", [
    (["derive"], "campaign derive", ["data/campaign.duckdb", "data/derived", "data/metrics.json"]),
    (["ingest"], "campaign ingest", ["data/warehouse.duckdb"]),
    (["render", "--no-build"], "campaign render", ["data/docs", "data/site", "data/facts.json"]),
    (["run", "tiny-seqs4"], "campaign run tiny-seqs4", ["data/ledger/tiny-seqs4.json"]),
])
def test_second_writer_gets_one_line_naming_the_first(project, args, command, outputs):
    before = snapshot(project)
    holder = Holder(project, command, outputs)
    try:
        result = CliRunner().invoke(main, [*args, "--root", str(project)])
        assert result.exit_code == 2
        [line] = result.output.strip().splitlines()
        m = LINE.fullmatch(line)
        assert m, line
        assert m.group(1) in outputs and m.group(2) == command and int(m.group(3)) == holder.proc.pid
        assert snapshot(project) == before            # the first writer's outputs are intact
    finally:
        holder.release()


def test_derive_runs_again_once_the_holder_ends(project):
    holder = Holder(project, "campaign derive", ["data/campaign.duckdb"])
    holder.release()
    result = CliRunner().invoke(main, ["derive", "--root", str(project)])
    assert result.exit_code == 0, result.output


def test_a_killed_holder_leaves_no_lock_behind(tmp_path):
    holder = Holder(tmp_path, "campaign ingest", ["data/warehouse.duckdb"])
    holder.proc.send_signal(signal.SIGKILL)
    holder.proc.wait(timeout=30)
    with locks.writing(tmp_path, [tmp_path / "data" / "warehouse.duckdb"], "campaign ingest"):
        with pytest.raises(CampaignError, match=r"data/warehouse.duckdb is being written by "
                                                r"`campaign ingest` \(pid %d," % os.getpid()):
            with locks.writing(tmp_path, [tmp_path / "data" / "warehouse.duckdb"], "campaign ingest"):
                pass


def test_lock_files_are_ignored_by_git():
    lock = locks.lock_file(ROOT, ROOT / "data" / "campaign.duckdb")
    assert lock.parent == ROOT / LOCK_DIR
    rel = str(lock.relative_to(ROOT))
    assert subprocess.run(["git", "check-ignore", "-q", rel], cwd=ROOT).returncode == 0
