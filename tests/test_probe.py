"""The node probe: topology parsing, nccl-tests arithmetic, a real gloo sweep, write-once, safety."""
from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path

import pytest

from stages.probe import node_probe as probe
from stages.probe import probe_env
from stages.probe import probe_folder
from stages.probe import probe_inventory
from stages.probe import probe_measure
from stages.probe import probe_plan
from stages.core.config import CampaignError
from stages.formats import node_smi
from stages.ingest.parsers import node, node_json

NODE = Path(__file__).parent / "fixtures" / "node"
NOW = dt.datetime(2026, 11, 30, 6, 15, 0, tzinfo=dt.timezone.utc)


def matrix(topo: node_smi.Topology) -> dict[tuple[str, str], str]:
    return {(link["device"], link["peer"]): link["link"] for link in topo.links}


# ---------------------------------------------------------------- topology

def test_topo_8_gpus_two_quads():
    topo = node_smi.parse_topo((NODE / "topo_h200x8.txt").read_bytes())
    assert topo.errors == []
    m = matrix(topo)
    assert len(m) == 10 * 10                        # 8 GPUs and 2 NICs, both ways
    assert m[("GPU0", "GPU3")] == "NV18" and m[("GPU5", "GPU7")] == "NV18"
    assert m[("GPU3", "GPU4")] == "SYS" and m[("GPU7", "GPU0")] == "SYS"
    assert m[("GPU2", "GPU2")] == "X"
    assert m[("GPU0", "NIC0")] == "PIX" and m[("NIC1", "GPU4")] == "PIX" and m[("NIC0", "GPU5")] == "SYS"
    nv = next(link for link in topo.links if (link["device"], link["peer"]) == ("GPU1", "GPU2"))
    assert (nv["link_kind"], nv["nvlinks"], nv["source_line"]) == ("nvlink", 18, 3)
    sys_link = next(link for link in topo.links if (link["device"], link["peer"]) == ("GPU1", "GPU6"))
    assert (sys_link["link_kind"], sys_link["nvlinks"]) == ("pcie", None)
    assert node_smi.nvlink_islands(topo.links) == [[0, 1, 2, 3], [4, 5, 6, 7]]


def test_topo_affinity_columns_and_legend():
    topo = node_smi.parse_topo((NODE / "topo_h200x8.txt").read_bytes())
    gpu4 = next(d for d in topo.devices if d["device"] == "GPU4")
    assert gpu4 == {"device": "GPU4", "cpu_affinity": "64-127,192-255", "numa_affinity": "1",
                    "gpu_numa_id": None, "source_line": 6}
    nic0 = next(d for d in topo.devices if d["device"] == "NIC0")
    assert "cpu_affinity" not in nic0
    legend = {row["code"]: row["meaning"] for row in topo.legend}
    assert legend["SYS"].startswith("Connection traversing PCIe as well as the SMP interconnect")
    assert legend["NV#"] == "Connection traversing a bonded set of # NVLinks"
    assert legend["NIC1"] == "mlx5_1"


def test_topo_2_gpus_and_space_separated_copy():
    two = (NODE / "topo_h200x2.txt").read_bytes()
    topo = node_smi.parse_topo(two)
    assert topo.errors == []
    assert matrix(topo) == {("GPU0", "GPU0"): "X", ("GPU0", "GPU1"): "NV18",
                            ("GPU1", "GPU0"): "NV18", ("GPU1", "GPU1"): "X"}
    assert [d["cpu_affinity"] for d in topo.devices] == ["0-31", "0-31"]
    assert node_smi.nvlink_islands(topo.links) == [[0, 1]]
    # pasted from a terminal: tabs became spaces; the same matrix comes out
    spaced = node_smi.parse_topo(two.replace(b"\t", b"    "))
    assert matrix(spaced) == matrix(topo)
    assert spaced.devices[1]["numa_affinity"] == "0"


def test_topo_without_matrix_and_with_unknown_link():
    failed = b"NVIDIA-SMI has failed because it couldn't communicate with the driver\n"
    assert node_smi.parse_topo(failed).errors
    topo = node_smi.parse_topo(b"\tGPU0\tGPU1\nGPU0\t X \tQQ\nGPU1\tSYS\t X \n")
    assert [e.line for e in topo.errors] == [2]
    assert node_smi.nvlink_islands(topo.links) == [[0], [1]]


def test_gpus_csv_units_in_column_names():
    rows, errors = node_smi.parse_gpus_csv((NODE / "gpus_h200x8.csv").read_bytes())
    assert errors == [] and len(rows) == 8
    assert rows[7] == {"gpu_index": 7, "name": "NVIDIA H200 NVL",
                       "uuid": "GPU-00000007-5f1e-4c2a-9d3b-000000000007", "pci_bus_id": "00000000:DB:00.0",
                       "memory_total_mib": 143771.0, "driver_version": "580.159.04", "power_limit_w": 600.0,
                       "clocks_max_sm_mhz": 1785.0, "source_line": 9}
    rows, _ = node_smi.parse_gpus_csv(b"index, power.limit [W]\n0, [N/A]\n")
    assert rows[0]["power_limit_w"] is None


def test_nvlink_status():
    rows, _ = node_smi.parse_nvlink_status((NODE / "nvlink_h200.txt").read_bytes())
    assert len(rows) == 37
    assert rows[0] == {"gpu_index": 0, "link": 0, "link_gb_s": 26.562, "active": True,
                       "state": "26.562 GB/s", "source_line": 2}
    assert rows[-1]["active"] is False and rows[-1]["gpu_index"] == 2


# ---------------------------------------------------------------- arithmetic and settings

@pytest.mark.parametrize("ranks, factor", [(2, 1.0), (4, 1.5), (8, 1.75)])
def test_busbw_is_nccl_tests_all_reduce(ranks, factor):
    # nccl-tests: algbw = bytes / 1e9 / seconds; all_reduce busbw = algbw * 2(n-1)/n
    algbw, busbw = probe_measure.bandwidth_gbs(4 * 2**30, 0.05, ranks)
    assert algbw == pytest.approx(85.8993459)
    assert busbw == pytest.approx(85.8993459 * factor)


def test_sizes_and_groups():
    assert probe_plan.size_sweep("1MiB..4GiB") == [2**i for i in range(20, 33)]
    assert probe_plan.size_sweep("1KiB..1MiB")[-1] == 2**20 and len(probe_plan.size_sweep("1KiB..1MiB")) == 11
    assert probe_plan.size_sweep([4096, "1KiB"]) == [1024, 4096]
    with pytest.raises(CampaignError):
        probe_plan.size_sweep("1MiB..1KiB")
    with pytest.raises(CampaignError):
        probe_plan.parse_size("4 parsecs")
    assert probe_plan.auto_groups(8) == [[0, 1, 2, 3], [4, 5, 6, 7], list(range(8))]
    assert probe_plan.auto_groups(4) == [[0, 1, 2, 3]]
    assert probe_plan.auto_groups(2) == [[0, 1]]
    assert probe_plan.auto_groups(1) == []
    chosen, skipped = probe_plan.resolve_groups([[0, 1, 2, 3], [4, 5, 6, 7], [0, 1]], 2)
    assert chosen == [[0, 1]] and len(skipped) == 2
    assert probe_plan.resolve_groups(["0-3", "4-7", [0, 1, 2, 3]], 8)[0] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert probe_plan.resolve_groups("auto", 1) == ([], ["1 device(s): an all-reduce needs a group of at least 2"])
    assert probe_plan.parse_group("4-7") == [4, 5, 6, 7] and probe_plan.group_label([4, 5, 6, 7]) == "4-7"
    assert probe_plan.group_label([0, 2]) == "0,2"


def test_safe_env_keeps_nccl_values_and_turns_multicast_off():
    env = probe_env.safe_env({"NCCL_CUMEM_ENABLE": "0", "NCCL_NVLS_ENABLE": "1", "PATH": "/bin"})
    assert env["NCCL_NVLS_ENABLE"] == "0" and env["NCCL_CUMEM_ENABLE"] == "0" and env["PATH"] == "/bin"
    assert probe_env.recorded_env(env) == {"NCCL_CUMEM_ENABLE": "0", "NCCL_NVLS_ENABLE": "0",
                                           "NVSHMEM_DISABLE_NVLS": "1", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1"}


def test_probe_never_changes_gpu_settings():
    for module in (probe, probe_env, probe_folder, probe_inventory, probe_measure, probe_plan):
        source = Path(module.__file__).read_text()
        for flag in ("-r", "--gpu-reset", "-pm", "-lgc", "-rgc", "-ac", "-pl", "-mig", "-c"):
            assert f'"{flag}"' not in source
    assert all(argv[0] == "nvidia-smi" for argv in probe_inventory.COMMANDS.values())


# ---------------------------------------------------------------- a real sweep over gloo

@pytest.fixture(scope="module")
def gloo_node(tmp_path_factory):
    out = tmp_path_factory.mktemp("nodes")
    mp = pytest.MonkeyPatch()
    mp.setenv("NCCL_NVLS_ENABLE", "1")              # must be overridden, in the probe and its children
    mp.setenv("NCCL_CUMEM_ENABLE", "0")             # must be kept
    lines: list[str] = []
    try:
        folder = probe.run(out_dir=out, node_kind="cpu", groups="auto", sizes="1KiB..1MiB",
                           backend="gloo", device="cpu", iters=3, warmup=1, world_size=2,
                           progress=lines.append, now=NOW)
        assert os.environ["NCCL_NVLS_ENABLE"] == "1"        # the caller's environment is given back
    finally:
        mp.undo()
    return folder, lines


def test_gloo_sweep_writes_allreduce_jsonl(gloo_node):
    folder, _ = gloo_node
    assert folder.name == "cpu__1130-061500"
    assert sorted(p.name for p in folder.iterdir()) == ["allreduce.jsonl", "env.json", "meta.json", "probe.log"]
    rows = [json.loads(line) for line in (folder / "allreduce.jsonl").read_text().splitlines()]
    assert [r["bytes"] for r in rows] == [2**i for i in range(10, 21)]
    for r in rows:
        assert (r["group"], r["gpus"], r["ranks"], r["backend"], r["iters"]) == ("0-1", [0, 1], 2, "gloo", 3)
        assert r["correct"] is True and r["count"] == r["bytes"] // 4
        assert r["time_us_min"] <= r["time_us"] <= r["time_us_max"]
        assert r["algbw_gbs"] == pytest.approx(r["bytes"] / 1e9 / (r["time_us"] / 1e6), rel=1e-3)
        assert r["busbw_gbs"] == pytest.approx(r["algbw_gbs"] * 1.0, rel=1e-3)    # 2(n-1)/n, n=2
    parsed, errors = node_json.parse_allreduce((folder / "allreduce.jsonl").read_bytes())
    assert errors == [] and parsed[0]["gpus"] == "0,1" and parsed[-1]["source_line"] == 11


def test_children_saw_multicast_off_and_kept_nccl_values(gloo_node):
    folder, _ = gloo_node
    meta = json.loads((folder / "meta.json").read_text())
    assert meta["status"] == "complete"
    [group] = meta["groups"]
    assert [c["rank"] for c in group["child_env"]] == [0, 1]
    for child in group["child_env"]:
        assert child["env"]["NCCL_NVLS_ENABLE"] == "0"          # inherited, before the child's own setting
        assert child["env"]["NCCL_CUMEM_ENABLE"] == "0"
        assert child["env"]["TORCH_SYMM_MEM_DISABLE_MULTICAST"] == "1"
    assert meta["env_forced"]["NCCL_NVLS_ENABLE"] == {"was": "1", "now": "0"}
    env = json.loads((folder / "env.json").read_text())
    assert env["env"]["NCCL_NVLS_ENABLE"] == "0" and env["env"]["NCCL_CUMEM_ENABLE"] == "0"
    assert env["torch"] and env["python"] and "hostname" not in json.dumps(env).lower()
    row, variables, errors = node_json.parse_env((folder / "env.json").read_bytes())
    assert errors == [] and row["torch"] == env["torch"]
    assert {"name": "NCCL_NVLS_ENABLE", "value": "0", "forced": True, "source_line": 1} in variables


def test_node_folder_is_write_once(gloo_node, tmp_path):
    folder, lines = gloo_node
    assert any("all-reduce group 0-1" in line for line in lines)
    assert (folder / "probe.log").read_text().count("\n") == len(lines)
    for p in folder.iterdir():
        assert p.stat().st_mode & 0o222 == 0                    # read-only once written
    with pytest.raises(CampaignError, match="already exists"):
        probe.run(out_dir=folder.parent, node_kind="cpu", device="cpu", backend="gloo", now=NOW)


def test_read_node_folder(gloo_node):
    folder, _ = gloo_node
    root = folder.parent.parent
    read = node.read_node_folder(folder, root)
    assert read.errors == [] and read.meta["node_kind"] == "cpu"
    assert len(read.allreduce) == 11 and read.gpus == [] and read.p2p == []
    assert read.allreduce[0]["source_file"] == f"{folder.parent.name}/{folder.name}/allreduce.jsonl"
    assert read.allreduce[0]["node_id"] == folder.name


def test_read_node_folder_from_gpu_files(tmp_path):
    folder = tmp_path / "nodes" / "h200x8__1130-061500"
    folder.mkdir(parents=True)
    (folder / "topo.txt").write_bytes((NODE / "topo_h200x8.txt").read_bytes())
    (folder / "gpus.csv").write_bytes((NODE / "gpus_h200x8.csv").read_bytes())
    (folder / "p2p.jsonl").write_text(
        json.dumps({"src": 0, "dst": 4, "can_access_peer": True, "bytes": 2**28, "repeats": 5,
                    "time_us_median": 5000.0, "copy_gbs": 53.687, "copy_gbs_max": 54.1}) + "\n{oops\n")
    read = node.read_node_folder(folder, tmp_path)
    assert len(read.gpus) == 8 and len(read.links) == 100 and len(read.affinity) == 10
    assert read.p2p[0]["copy_gbs"] == 53.687 and read.p2p[0]["source_file"] == "nodes/h200x8__1130-061500/p2p.jsonl"
    assert read.errors == [{"node_id": folder.name, "source_file": "nodes/h200x8__1130-061500/p2p.jsonl",
                            "source_line": 2, "reason": "p2p.jsonl: not valid JSON: Expecting property name enclosed in double quotes"}]


def test_cli_help_and_cpu_run(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        probe.main(["--help"])
    assert exit_.value.code == 0 and "--node-kind" in capsys.readouterr().out
    assert probe.main(["--out", str(tmp_path), "--node-kind", "bad__kind", "--device", "cpu"]) == 2
    assert "cannot be part of a node id" in capsys.readouterr().err
    assert probe.main(["--out", str(tmp_path), "--node-kind", "x", "--device", "cpu", "--backend", "nccl"]) == 2


def test_cuda_without_gpu_fails_in_one_line_and_keeps_its_folder(tmp_path):
    with pytest.raises(CampaignError, match="sees no GPU"):
        probe.run(out_dir=tmp_path, node_kind="h200x2", device="cuda", now=NOW)
    folder = tmp_path / "h200x2__1130-061500"
    meta = json.loads((folder / "meta.json").read_text())
    assert meta["status"] == "failed" and "sees no GPU" in meta["error"]
    assert sorted(p.name for p in folder.iterdir()) == ["meta.json", "probe.log"]


def test_a_garbled_link_speed_is_an_error_on_its_line_not_a_crash_or_an_inactive_link():
    text = (b"GPU 0: NVIDIA H200 (UUID: GPU-0)\n\t Link 0: 26.562 GB/s\n\t Link 1: .26.562 GB/s\n"
            b"\t Link 2: <inactive>\n")
    rows, errors = node_smi.parse_nvlink_status(text)
    assert [(r["link"], r["active"]) for r in rows] == [(0, True), (2, False)]
    assert [(e.line, "link 1 of GPU 0" in e.reason) for e in errors] == [(3, True)]
