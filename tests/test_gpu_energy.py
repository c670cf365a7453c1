"""GPU power and energy: the sampler around a point with a stand-in nvidia-smi reporting known
power, read by ingest and turned by derive into point_energy (joules per output token checked
against the integral of the power it reported; missing samples flagged, not counted); the file
recorded on a real H200 read the same way."""
from __future__ import annotations

import shutil
import sys
import time
from datetime import datetime
from pathlib import Path

import duckdb
import numpy as np
import pytest

from stages.core.config import CampaignError, derive_settings, load_params
from stages.derive import params_tables
from stages.derive import stage as derive
from stages.ingest import stage as ingest
from stages.ingest.parsers import gpu_samples
from stages.run import gpu_sampler

ROOT = Path(__file__).resolve().parent.parent
FAKE_SMI = ROOT / "tests" / "fixtures" / "fake_nvidia_smi" / "nvidia-smi"
RUN = "tiny-llama__cpu_seqs4__4k__vllm__1130-053610"
FIXTURE_RUN = ROOT / "tests" / "fixtures" / "runs" / RUN
POINT = "long-shared__c04"            # a point of the fixture run: its result file has output tokens
H200_FILE = ROOT / "data" / "nodes" / "h200x1__1201-144437.gpu_samples.csv"
RULES = {"prefix_cache_tok_s": 60000, "gate_min_score": 1.0, "cached_share_max_pct": 20,
         "default_max_num_seqs": 256, "burst_tpot_ms": 0.5, "cached_mark_pct": 10}


@pytest.fixture()
def smi_env(monkeypatch):
    """The stand-in on the sampler's path; returns a setter for its FAKE_SMI_* settings."""
    monkeypatch.setenv("FAKE_SMI_PYTHON", sys.executable)
    for key in ("FAKE_SMI_POWER", "FAKE_SMI_RAMP", "FAKE_SMI_SILENT", "FAKE_SMI_GAP", "FAKE_SMI_STEP"):
        monkeypatch.delenv(key, raising=False)
    return lambda **kv: [monkeypatch.setenv(f"FAKE_SMI_{k.upper()}", str(v)) for k, v in kv.items()]


def run_folder(tmp_path: Path) -> Path:
    """A copy of the fixture run (unsealed, so a file added to it is not a change after the run)."""
    folder = tmp_path / "data" / "runs" / RUN
    shutil.copytree(FIXTURE_RUN, folder)
    (folder / "MANIFEST.sha256").unlink()
    return folder


def sample_point(folder: Path, gpus: list[int], seconds: float, interval_ms: int = 50,
                 setup_s: float = 0.0, mark: bool = True) -> Path:
    """Sample a stand-in point: `setup_s` of the client setting up, then `seconds` of requests,
    whose window the sampler is told (as the benchmark client tells it) unless `mark` is false."""
    with gpu_sampler.sampling(folder, POINT, gpus, {"interval_ms": interval_ms}, smi=str(FAKE_SMI)) as s:
        time.sleep(setup_s)
        sent = time.time()
        time.sleep(seconds)
        if mark:
            s.mark_requests(sent, time.time())
    return s.path


def window_of(setting: dict[str, str]) -> tuple[float, float]:
    """The energy window a sampler file's settings give: its requests window where it has one."""
    at = lambda key: datetime.fromisoformat(setting[key].replace("Z", "+00:00")).timestamp()  # noqa: E731
    if "requests_start" in setting:
        return at("requests_start"), at("requests_end")
    return at("window_start"), at("window_end")


def derived(tmp_path: Path, max_gap_s: float | None = 0.5) -> duckdb.DuckDBPyConnection:
    data = tmp_path / "data"
    summary = ingest.run(runs_dir=data / "runs", warehouse=data / "warehouse.duckdb", root=tmp_path)
    assert summary["errors"] == 0
    derive.run(warehouse=data / "warehouse.duckdb", campaign_db=data / "campaign.duckdb",
               derived_dir=data / "derived", metrics_file=data / "metrics.json", rules=RULES,
               workloads={}, energy=None if max_gap_s is None else {"max_gap_s": max_gap_s})
    return duckdb.connect(str(data / "campaign.duckdb"), read_only=True)


def energy_row(con: duckdb.DuckDBPyConnection, point: str = POINT) -> dict:
    cur = con.execute("select * from point_energy where point_id = ?", [point])
    names = [d[0] for d in cur.description]
    rows = [dict(zip(names, r)) for r in cur.fetchall()]
    assert len(rows) == 1
    return rows[0]


def hand_integral(path: Path) -> tuple[float, float, dict[int, list[float]]]:
    """From the raw file alone: each GPU's power as straight lines between its samples, held flat
    beyond the first and last, integrated over the window with numpy; (joules, window_s, watts)."""
    text = path.read_text().splitlines()
    setting = {ln[2:].split("=", 1)[0]: ln[2:].split("=", 1)[1] for ln in text if ln.startswith("# ")}
    ws, we = window_of(setting)
    series: dict[int, list[tuple[float, float]]] = {}
    for line in text:
        if line.startswith("#") or line.startswith("index"):
            continue
        cells = [c.strip() for c in line.split(",")]
        t = gpu_samples.parse_time(cells[1]).timestamp()
        series.setdefault(int(cells[0]), []).append((t, float(cells[2])))
    joules = 0.0
    for points in series.values():
        ts, ps = np.array([t for t, _ in points]), np.array([p for _, p in points])
        inside = ts[(ts > ws) & (ts < we)]
        grid = np.concatenate([[ws], inside, [we]])
        joules += float(np.trapezoid(np.interp(grid, ts, ps), grid))
    return joules, we - ws, {g: [p for _, p in pts] for g, pts in series.items()}


# ---------------------------------------------------------------- the sampler

def test_no_gpu_set_or_no_settings_means_no_sampler(tmp_path: Path):
    with gpu_sampler.sampling(tmp_path, POINT, None, {"interval_ms": 50}, smi=str(FAKE_SMI)) as s:
        assert s is None
    with gpu_sampler.sampling(tmp_path, POINT, [0], None, smi=str(FAKE_SMI)) as s:
        assert s is None
    assert not (tmp_path / "gpu").exists()
    with pytest.raises(CampaignError, match="interval_ms"):
        gpu_sampler.settings({"interval_ms": 0})


def test_the_profiles_sample_the_node_and_not_the_cpu():
    params = load_params(ROOT)
    assert gpu_sampler.settings(params["profiles"]["h200x8"]["gpu_sampler"]) > 0
    assert gpu_sampler.settings(params["profiles"]["local-cpu"]["gpu_sampler"]) is None
    assert derive_settings(params)["energy"]["max_gap_s"] > 0


def test_sampler_file_brackets_the_point(tmp_path: Path, smi_env):
    smi_env(power="0=210,1=320")
    path = sample_point(tmp_path, [0, 1], 0.6)
    parsed = gpu_samples.parse_sampler_file(path.read_bytes())
    settings = {k: v for k, v, _ in parsed.settings}
    assert parsed.errors == []
    assert settings["point"] == POINT and settings["gpus"] == "0,1" and settings["clock"] == "UTC"
    assert settings["sampler_exit"] == "stopped" and "sampler_error" not in settings
    assert "--id=0,1" in settings["command"] and "--loop-ms=50" in settings["command"]
    start = datetime.fromisoformat(settings["window_start"].replace("Z", "+00:00"))
    end = datetime.fromisoformat(settings["window_end"].replace("Z", "+00:00"))
    for gpu, watts in ((0, 210.0), (1, 320.0)):
        times = [s["sampled_at"] for s in parsed.samples if s["gpu_index"] == gpu]
        assert {s["power_w"] for s in parsed.samples if s["gpu_index"] == gpu} == {watts}
        assert min(times) <= start and max(times) >= end      # samples on both sides of the point


def test_a_sampler_stopped_in_the_background_finishes_its_file_before_finish_returns(tmp_path: Path, smi_env):
    smi_env(power="0=150")
    with gpu_sampler.sampling(tmp_path, POINT, [0], {"interval_ms": 50}, smi=str(FAKE_SMI),
                              background=True) as s:
        time.sleep(0.3)
        s.mark_requests(time.time() - 0.2, time.time())
    assert gpu_sampler.finish() == [] and gpu_sampler.finish() == []
    parsed = gpu_samples.parse_sampler_file(s.path.read_bytes())
    settings = {k: v for k, v, _ in parsed.settings}
    assert parsed.errors == [] and settings["sampler_exit"] == "stopped" and "requests_end" in settings
    end = datetime.fromisoformat(settings["window_end"].replace("Z", "+00:00"))
    assert max(x["sampled_at"] for x in parsed.samples) > end     # its sample after the point


def test_a_sampler_that_cannot_start_says_so(tmp_path: Path):
    with gpu_sampler.sampling(tmp_path, POINT, [0], {"interval_ms": 50},
                              smi=str(tmp_path / "no-such-smi")) as s:
        pass
    text = s.path.read_text()
    assert "# sampler_exit=not started" in text and "# sampler_error=cannot start" in text


# ---------------------------------------------------------------- derive: point_energy

def test_joules_per_token_is_the_integral_of_the_reported_power(tmp_path: Path, smi_env):
    folder = run_folder(tmp_path)
    smi_env(power="0=150,1=400", ramp="80")          # watts rise 80 W/s on each GPU
    path = sample_point(folder, [0, 1], 1.2)
    joules, window_s, watts = hand_integral(path)
    assert max(watts[0]) - min(watts[0]) > 50          # the power moved during the point
    con = derived(tmp_path)
    row = energy_row(con)
    assert row["energy_valid"] is True and row["energy_problem"] is None
    assert row["gpus"] == "0,1" and row["gpus_in_set"] == 2 and row["gpus_sampled"] == 2
    assert row["samples"] == sum(len(v) for v in watts.values())
    assert row["window_s"] == pytest.approx(window_s, abs=1e-6)
    assert row["energy_j"] == pytest.approx(joules, rel=1e-9)
    assert row["output_tokens"] == 512 and row["repeat"] == 1 and row["workload"] == "long-shared"
    assert row["j_per_output_token"] == pytest.approx(joules / 512, rel=1e-9)
    # a constant share of the window: about (150 + 400) W plus the ramp, for about 1.2 s
    assert 550 * 1.1 < joules < (550 + 2 * 80 * 3) * 2.0
    # every value traces to raw lines of the sampler file and the result file
    lines = path.read_text().splitlines()
    assert row["source_file"] == f"data/runs/{RUN}/gpu/{POINT}.csv"
    assert lines[row["source_line"] - 1].startswith(("0, ", "1, "))
    assert lines[row["last_sample_line"] - 1].startswith(("0, ", "1, "))
    assert row["window_from"] == "requests"
    assert lines[row["window_start_line"] - 1].startswith("# requests_start=")
    assert lines[row["window_end_line"] - 1].startswith("# requests_end=")
    assert row["result_file"] == f"data/runs/{RUN}/bench/{POINT}.json"
    gpu_means = [np.mean(v) for v in watts.values()]
    assert row["avg_power_total_w"] == pytest.approx(sum(gpu_means), rel=0.05)
    assert row["avg_power_per_gpu_w"] == pytest.approx(row["avg_power_total_w"] / 2, rel=1e-9)


def test_constant_power_gives_power_times_window(tmp_path: Path, smi_env):
    folder = run_folder(tmp_path)
    smi_env(power="0=250,1=250,2=250,3=250")
    sample_point(folder, [0, 1, 2, 3], 0.8)
    row = energy_row(derived(tmp_path))
    assert row["energy_valid"] is True
    assert row["energy_j"] == pytest.approx(1000.0 * row["window_s"], rel=1e-9)
    assert row["j_per_output_token"] == pytest.approx(1000.0 * row["window_s"] / 512, rel=1e-9)
    assert row["avg_power_total_w"] == pytest.approx(1000.0)
    assert row["avg_power_per_gpu_w"] == pytest.approx(250.0)


def test_energy_counts_the_requests_window_and_idle_power_the_set_up_before_it(tmp_path: Path, smi_env):
    """The client sets up for 0.8 s (the GPUs idle at 60 W), then its requests draw 400 W for
    0.6 s: the energy is the requests' alone, the set-up's samples give the idle power."""
    folder = run_folder(tmp_path)
    smi_env(power="0=60", step="0.8:400")                   # 60 W, then 400 W from 0.8 s on
    path = sample_point(folder, [0], 0.6, setup_s=0.8)
    joules, window_s, watts = hand_integral(path)
    row = energy_row(derived(tmp_path))
    assert row["window_from"] == "requests" and row["energy_valid"] is True, row["energy_problem"]
    assert row["window_s"] == pytest.approx(window_s, abs=1e-6)
    assert 0.55 < row["window_s"] < 0.9 and row["sampler_window_s"] > row["window_s"] + 0.7
    assert row["energy_j"] == pytest.approx(joules, rel=1e-9)
    assert row["energy_j"] == pytest.approx(400 * row["window_s"], rel=0.2)   # the requests' power
    assert row["idle_power_total_w"] == pytest.approx(60.0) and row["idle_samples"] >= 10
    assert row["bench_duration_s"] == pytest.approx(0.6, abs=0.1)             # the fixture's result


def test_a_file_without_a_requests_window_counts_the_duration_before_its_end(tmp_path: Path, smi_env):
    """A file written before the client timed its requests: the result file's duration before
    the sampler's window end is the point's window, and the row says so."""
    folder = run_folder(tmp_path)
    smi_env(power="0=200")
    path = sample_point(folder, [0], 1.5, mark=False)
    text = path.read_text()
    assert "requests_start" not in text
    row = energy_row(derived(tmp_path))
    assert row["window_from"] == "result duration"
    assert row["window_s"] == pytest.approx(row["bench_duration_s"], abs=1e-6)
    assert row["sampler_window_s"] > row["window_s"] + 0.5
    assert row["energy_j"] == pytest.approx(200.0 * row["window_s"], rel=1e-9)
    assert row["window_source_file"] == f"data/runs/{RUN}/bench/{POINT}.json"
    assert row["window_end_line"] == next(i for i, ln in enumerate(text.splitlines(), 1)
                                          if ln.startswith("# window_end="))


def test_a_silent_gpu_makes_the_energy_invalid_not_a_number(tmp_path: Path, smi_env):
    folder = run_folder(tmp_path)
    smi_env(power="0=300,1=300", silent="1")
    sample_point(folder, [0, 1], 0.6)
    row = energy_row(derived(tmp_path))
    assert row["energy_valid"] is False
    assert row["energy_j"] is None and row["j_per_output_token"] is None
    assert row["gpus_in_set"] == 2 and row["gpus_sampled"] == 1
    assert row["energy_problem"] == "GPU 1 has no samples"
    assert row["avg_power_total_w"] is None                 # half the set is not a total
    assert row["avg_power_per_gpu_w"] == pytest.approx(300.0)


def test_a_gap_in_the_samples_makes_the_energy_invalid(tmp_path: Path, smi_env):
    folder = run_folder(tmp_path)
    smi_env(power="0=300", gap="0.5:1.4")                  # about 0.9 s without a line
    sample_point(folder, [0], 1.6)
    con = derived(tmp_path, max_gap_s=0.5)
    row = energy_row(con)
    assert row["energy_valid"] is False and row["energy_j"] is None and row["j_per_output_token"] is None
    assert row["max_gap_s"] > 0.5 and "samples" in row["energy_problem"] and "apart" in row["energy_problem"]
    con.close()
    # the same file under a looser threshold counts
    row = energy_row(derived(tmp_path, max_gap_s=2.0))
    assert row["energy_valid"] is True
    assert row["energy_j"] == pytest.approx(300.0 * row["window_s"], rel=1e-9)


def test_samples_that_stop_before_the_window_ends_are_invalid(tmp_path: Path, smi_env):
    folder = run_folder(tmp_path)
    smi_env(power="0=300", gap="0.6:100")                  # the loop prints nothing after 0.6 s
    sample_point(folder, [0], 1.5)
    row = energy_row(derived(tmp_path, max_gap_s=0.5))
    assert row["energy_valid"] is False and row["energy_j"] is None
    assert "before the window's end" in row["energy_problem"]


def test_without_a_threshold_no_energy_is_valid(tmp_path: Path, smi_env):
    folder = run_folder(tmp_path)
    smi_env(power="0=300")
    sample_point(folder, [0], 0.4)
    row = energy_row(derived(tmp_path, max_gap_s=None))
    assert row["energy_valid"] is False and row["energy_problem"] == "no energy.max_gap_s setting"
    with pytest.raises(CampaignError, match="max_gap_s"):
        params_tables.energy_values({"max_gap_s": -1})


# ---------------------------------------------------------------- the real H200 file

def test_the_real_h200_file_reads_through_ingest_and_derive(tmp_path: Path):
    folder = run_folder(tmp_path)
    (folder / "gpu").mkdir()
    shutil.copy(H200_FILE, folder / "gpu" / "h200-matmul-bf16.csv")
    con = derived(tmp_path, max_gap_s=load_params(ROOT)["energy"]["max_gap_s"])
    row = energy_row(con, "h200-matmul-bf16")
    joules, window_s, series = hand_integral(H200_FILE)
    powers = series[0]
    assert len(powers) > 100 and all(10 < p < 750 for p in powers)   # an H200: tens to ~700 W
    assert max(powers) > 300 and min(powers) < 150                   # idle, then the matmul load
    assert row["gpus"] == "0" and row["gpus_sampled"] == 1 and row["samples"] == len(powers)
    assert row["energy_valid"] is True, row["energy_problem"]
    assert row["energy_j"] == pytest.approx(joules, rel=1e-9)
    assert 10 < row["energy_j"] / row["window_s"] < 750
    assert 10 < row["avg_power_per_gpu_w"] < 750
    assert row["output_tokens"] is None and row["j_per_output_token"] is None   # no result file
    ingested = [r[0] for r in duckdb.connect(str(tmp_path / "data" / "warehouse.duckdb"), read_only=True)
                .execute("select power_w from raw_gpu_samples order by source_line").fetchall()]
    assert ingested == powers
