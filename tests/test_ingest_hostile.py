"""Ingest of hostile and odd run folders: links, FIFOs, sockets, oversized and compressed files,
names that are not run ids, secrets, and result files that are not what they claim."""
from __future__ import annotations

import gzip
import json
import os
import shutil
import signal
import socket
from pathlib import Path

import duckdb
import pytest

from helpers.db_rows import db_tuples
from stages.ingest import stage as ingest
from stages.ingest import nodes as ingest_nodes
from stages.core import rawfile

FIXTURES = Path(__file__).parent / "fixtures"
RUN = "tiny-llama__cpu_seqs4__4k__vllm__1130-053610"
MARKER = "MARKER-0d5c1f-outside-the-project"
HOSTILE = 'tiny[x](mailto:a onmouseover=alert(1);")__cpu_seqs4__4k__vllm__1129-000007'
HF = "hf_" + "Q7x" * 12
SK = "sk-" + "live9Z" * 7
PASSWORD = "hunter2-correct-horse"
SECRETS = (HF, SK, PASSWORD)


def copy_run(tmp_path: Path, name: str = RUN) -> Path:
    """The fixture run folder copied to tmp_path/data/runs/<name>, writable."""
    folder = tmp_path / "data" / "runs" / name
    shutil.copytree(FIXTURES / "runs" / RUN, folder)
    for path in (folder, *folder.rglob("*")):
        path.chmod(0o755 if path.is_dir() else 0o644)
    return folder


def outside(tmp_path: Path, text: str) -> Path:
    """A file outside the project holding `text`."""
    path = tmp_path / "elsewhere" / "secret.txt"
    path.parent.mkdir(exist_ok=True)
    path.write_text(text)
    return path


def run_ingest(root: Path, seconds: int = 60) -> dict:
    """Ingest root/data/runs, failing (not hanging) when it takes longer than `seconds`."""
    def expire(signum, frame):
        raise TimeoutError(f"ingest did not return within {seconds} s")

    old = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        return ingest.run(runs_dir=root / "data" / "runs", warehouse=root / "data" / "warehouse.duckdb",
                          root=root)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def query(root: Path, sql: str, params: list | None = None) -> list[tuple]:
    return db_tuples(root / "data" / "warehouse.duckdb", sql, params)


def all_text(root: Path) -> str:
    """Every text value of every table of the warehouse, one per line."""
    values = []
    with duckdb.connect(str(root / "data" / "warehouse.duckdb"), read_only=True) as con:
        columns = con.execute("select table_name, column_name from information_schema.columns "
                              "where data_type = 'VARCHAR'").fetchall()
        for table, column in columns:
            values += [v for (v,) in con.execute(f'select "{column}" from "{table}"').fetchall() if v]
    assert len(values) > 100, "the warehouse holds the run's text"
    return "\n".join(values)


def errors(root: Path, source: str) -> list[str]:
    return [r for (r,) in query(root, "select reason from ingest_errors where source_file = ? "
                                      "order by all", [source])]


def test_linked_cmd_sh_is_not_read_and_its_target_not_quoted(tmp_path: Path):
    folder = copy_run(tmp_path)
    (folder / "cmd.sh").unlink()
    (folder / "cmd.sh").symlink_to(outside(tmp_path, f"#!/bin/sh\nvllm serve {MARKER} --port 1\n"))
    (folder / "launch.out").unlink()
    (folder / "launch.out").symlink_to(outside(tmp_path, f"{MARKER} first line\n"))
    run_ingest(tmp_path)
    assert MARKER not in all_text(tmp_path) and "elsewhere" not in all_text(tmp_path)
    for name in ("cmd.sh", "launch.out"):
        assert "symbolic link, not followed" in errors(tmp_path, f"data/runs/{RUN}/{name}")
    assert query(tmp_path, "select count(*) from raw_commands") == [(0,)]
    assert query(tmp_path, "select count(*) from raw_runs where run_id = ?", [RUN]) == [(1,)]


def test_fifo_and_device_logs_do_not_block(tmp_path: Path):
    folder = copy_run(tmp_path)
    (folder / "server.log").unlink()
    os.mkfifo(folder / "server.log")
    (folder / "niah.log").unlink()
    (folder / "niah.log").symlink_to("/dev/zero")
    run_ingest(tmp_path, seconds=30)
    assert "not a regular file (FIFO)" in errors(tmp_path, f"data/runs/{RUN}/server.log")
    assert "symbolic link, not followed" in errors(tmp_path, f"data/runs/{RUN}/niah.log")
    assert query(tmp_path, "select count(*) from raw_log_facts") == [(0,)]
    assert query(tmp_path, "select count(*) from raw_bench_points") == [(2,)]


def test_a_socket_in_place_of_a_result_file_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    folder = copy_run(tmp_path)
    (folder / "bench" / "chat__c01.json").unlink()
    sock = socket.socket(socket.AF_UNIX)
    try:
        monkeypatch.chdir(folder / "bench")      # a socket's path must be short
        sock.bind("chat__c01.json")
        monkeypatch.undo()
        run_ingest(tmp_path, seconds=30)
    finally:
        sock.close()
    assert "not a regular file (socket)" in errors(tmp_path, f"data/runs/{RUN}/bench/chat__c01.json")
    assert [p for (p,) in query(tmp_path, "select point_id from raw_bench_points")] == ["long-shared__c04"]


def test_a_file_in_a_linked_folder_is_not_read(tmp_path: Path):
    folder = copy_run(tmp_path)
    shutil.move(folder / "bench", tmp_path / "bench-elsewhere")
    (folder / "bench").symlink_to(tmp_path / "bench-elsewhere")
    with pytest.raises(rawfile.Refused, match="symbolic link, not followed"):
        rawfile.read_raw(folder, "bench/chat__c01.json", rawfile.RESULT_BYTES)
    run_ingest(tmp_path)
    assert "symbolic link, not followed" in errors(tmp_path, f"data/runs/{RUN}/bench")
    assert query(tmp_path, "select count(*) from raw_bench_points") == [(0,)]


def test_a_linked_run_folder_is_refused(tmp_path: Path):
    copy_run(tmp_path, RUN)
    elsewhere = tmp_path / "elsewhere" / "runs"
    elsewhere.mkdir(parents=True)
    other = "tiny-llama__cpu_seqs4__4k__vllm__1130-060000"
    shutil.copytree(FIXTURES / "runs" / RUN, elsewhere / other)
    (tmp_path / "data" / "runs" / other).symlink_to(elsewhere / other)
    summary = run_ingest(tmp_path)
    assert (summary["runs_seen"], summary["runs_refused"]) == (1, 1)
    assert query(tmp_path, "select run_id from raw_runs") == [(RUN,)]
    assert errors(tmp_path, "data/runs") == [f"'{other}': symbolic link, not followed"]


def test_names_that_are_not_run_ids_are_refused_and_not_read(tmp_path: Path):
    copy_run(tmp_path, RUN)
    for name in (HOSTILE, f"{RUN} (copy)", f"{RUN}.bak"):
        copy_run(tmp_path, name)
    summary = run_ingest(tmp_path)
    assert (summary["runs_seen"], summary["runs_read"], summary["runs_refused"]) == (1, 1, 3)
    assert query(tmp_path, "select run_id from raw_runs") == [(RUN,)]
    assert query(tmp_path, "select count(distinct run_id) from raw_bench_points") == [(1,)]
    reasons = errors(tmp_path, "data/runs")
    assert len(reasons) == 3 and all(r.startswith("folder name is not a run id: '") for r in reasons)
    text = all_text(tmp_path)
    for piece in ("[x]", "(mailto", "onmouseover=", "(copy)"):
        assert piece not in text
    assert "tiny\\x5bx\\x5d\\x28mailto\\x3aa onmouseover\\x3dalert" in "\n".join(reasons)

    # the refusals are replaced, not added to, on the next ingest, and go when the folder goes
    shutil.rmtree(tmp_path / "data" / "runs" / HOSTILE)
    again = run_ingest(tmp_path)
    assert (again["runs_refused"], again["runs_read"]) == (2, 0)
    assert len(errors(tmp_path, "data/runs")) == 2


def test_oversized_files_and_gzip_bombs_stop_at_the_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    folder = copy_run(tmp_path)
    monkeypatch.setattr(rawfile, "SMALL_BYTES", 200)
    monkeypatch.setattr(rawfile, "LOG_BYTES", 1024 * 1024)
    log = folder / "server.log"
    with gzip.open(folder / "server.log.gz", "wb", compresslevel=9) as fh:
        fh.write(log.read_bytes())
        fh.write(b"\n" * (8 * 1024 * 1024))
    log.unlink()
    assert (folder / "server.log.gz").stat().st_size < 64 * 1024
    run_ingest(tmp_path)
    assert errors(tmp_path, f"data/runs/{RUN}/cmd.sh") == ["larger than the limit of 200 bytes"]
    assert errors(tmp_path, f"data/runs/{RUN}/server.log.gz") == ["larger than the limit of 1 MiB"]
    assert query(tmp_path, "select count(*) from raw_log_facts") == [(0,)]
    assert query(tmp_path, "select count(*) from raw_launch_out") == [(7,)]


def test_a_compressed_log_gives_the_rows_of_the_plain_one(tmp_path: Path):
    plain_root, gz_root = tmp_path / "plain", tmp_path / "gz"
    copy_run(plain_root)
    folder = copy_run(gz_root)
    with gzip.open(folder / "server.log.gz", "wb") as fh:
        fh.write((folder / "server.log").read_bytes())
    (folder / "server.log").unlink()
    run_ingest(plain_root)
    run_ingest(gz_root)
    for table in ("raw_log_facts", "raw_log_stats"):
        sql = f"select * exclude (source_file) from {table} order by all"
        assert query(gz_root, sql) == query(plain_root, sql) != []
    assert query(gz_root, "select distinct source_file from raw_log_facts") == [
        (f"data/runs/{RUN}/server.log.gz",)]


def test_result_files_with_non_numbers_or_unequal_arrays(tmp_path: Path):
    folder = copy_run(tmp_path)
    chat = folder / "bench" / "chat__c01.json"
    text = chat.read_text()
    chat.write_text(text.replace('"median_ttft_ms": ', '"median_ttft_ms": NaN, "was": ', 1))
    long = folder / "bench" / "long-shared__c04.json"
    obj = json.loads(long.read_text())
    obj["ttfts"] = obj["ttfts"][:1]
    long.write_text(json.dumps(obj))
    run_ingest(tmp_path)
    assert errors(tmp_path, f"data/runs/{RUN}/bench/chat__c01.json") == [
        "chat__c01: median_ttft_ms is NaN where a number belongs; the point is left out"]
    (reason,) = errors(tmp_path, f"data/runs/{RUN}/bench/long-shared__c04.json")
    assert "per-request arrays differ in length" in reason and "ttfts=1" in reason
    assert query(tmp_path, "select point_id from raw_bench_points") == [("long-shared__c04",)]
    assert query(tmp_path, "select count(*) from raw_bench_requests") == [(0,)]


def test_duplicate_launch_out_keys_are_an_error(tmp_path: Path):
    folder = copy_run(tmp_path)
    with (folder / "launch.out").open("a") as fh:
        fh.write("point_error=chat__c01 timeout\npoint_error=chat__c02 timeout\n"
                 "ready_s=37.2\nstatus=failed\n")
    run_ingest(tmp_path)
    assert [r for r in errors(tmp_path, f"data/runs/{RUN}/launch.out")] == [
        "launch.out: key status given twice with different values (lines 1 and 11)"]


def test_no_secret_reaches_the_warehouse(tmp_path: Path):
    folder = copy_run(tmp_path)
    cmd = (folder / "cmd.sh").read_text().replace(
        "VLLM_CPU_KVCACHE_SPACE=1", f"HF_TOKEN={HF} MY_PASSWORD={PASSWORD} VLLM_CPU_KVCACHE_SPACE=1")
    (folder / "cmd.sh").write_text(cmd.rstrip("\n") + f" --api-key {SK} --hf-overrides "
                                   f"'{{\"token\": \"{PASSWORD}\"}}'\n")
    with (folder / "server.log").open("a") as fh:
        fh.write(f"(APIServer pid=1) INFO 11-30 05:40:00 [utils.py:1] non-default args: "
                 f"{{'api_key': ['{SK}'], 'model': 'm'}}\n"
                 f"(APIServer pid=1) ERROR 11-30 05:40:01 [core.py:1] ValueError: bad token {HF} "
                 f"(Authorization: Bearer {SK})\n")
    with (folder / "launch.out").open("a") as fh:
        fh.write(f"hf_token={HF}\nAuthorization: Bearer {SK}\n")
    meta = json.loads((folder / "meta.json").read_text())
    meta["spec_params"]["args"] = {"--api-key": PASSWORD, "--max-num-seqs": 4}
    meta["image"] = f"registry.example/{HF}/vllm"
    (folder / "meta.json").write_text(json.dumps(meta))
    (folder / "bench" / f"{HF}.json").write_text('{"completed": 1, "api_key": "%s"}' % PASSWORD)
    run_ingest(tmp_path)
    text = all_text(tmp_path)
    for secret in SECRETS:
        assert secret not in text
    # the values are there, hidden: the rows were stored, not dropped
    flags = dict(query(tmp_path, "select flag, value from raw_command_flags"))
    assert (flags["env:HF_TOKEN"], flags["env:MY_PASSWORD"], flags["--api-key"]) == ("***",) * 3
    assert query(tmp_path, "select count(*) from raw_log_facts where fact = 'error' "
                           "and value_text like 'bad token ***%'") == [(1,)]
    assert "--api-key ***" in query(tmp_path, "select command from raw_commands")[0][0]
    assert query(tmp_path, "select value from raw_launch_out where key = 'hf_token'") == [("***",)]
    assert '"--api-key": "***"' in query(tmp_path, "select spec_json from raw_runs")[0][0]


def test_node_folders_read_only_regular_files(tmp_path: Path):
    nodes = tmp_path / "data" / "nodes"
    node = nodes / "h200x8__1130-050000"
    node.mkdir(parents=True)
    shutil.copy(FIXTURES / "node" / "topo_h200x8.txt", node / "topo.txt")
    (node / "gpus.csv").symlink_to(outside(tmp_path, f"index, name\n0, {MARKER}\n"))
    os.mkfifo(node / "nvlink.txt")
    (nodes / "h200x8__1130-060000").symlink_to(node)

    def expire(signum, frame):
        raise TimeoutError("node ingest did not return")

    old = signal.signal(signal.SIGALRM, expire)
    signal.alarm(30)
    try:
        summary = ingest_nodes.run(nodes_dir=nodes, warehouse=tmp_path / "data" / "warehouse.duckdb",
                                   root=tmp_path)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    assert summary["nodes"] == 1 and summary["rows"]["raw_node_links"] > 0
    assert query(tmp_path, "select source_file, reason from ingest_errors order by all") == [
        ("data/nodes/h200x8__1130-050000/gpus.csv", "symbolic link, not followed"),
        ("data/nodes/h200x8__1130-050000/nvlink.txt", "not a regular file (FIFO)"),
        ("data/nodes/h200x8__1130-060000", "node folder not read: symbolic link, not followed")]
    assert MARKER not in str(query(tmp_path, "select * from raw_node_gpus"))
