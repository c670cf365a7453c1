"""Engine process handling with stand-in servers: readiness, death, and stopping the whole group."""
from __future__ import annotations

import socket
import sys
import time
from pathlib import Path

import pytest

from stages.core.config import CampaignError
from stages.run.engine import Engine, EngineDied, group_members
from stages.run.executors import Launch, LocalExecutor, flag_args


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def health_server(tmp_path: Path, port: int, *, children: int = 0) -> Launch:
    """A shell that starts `children` sleepers and an HTTP server answering /health."""
    (tmp_path / "www").mkdir()
    (tmp_path / "www" / "health").write_text("ok")
    sleepers = " ".join(["sleep 300 &"] * children)
    script = f"{sleepers} exec {sys.executable} -m http.server {port} --bind 127.0.0.1 --directory www"
    return Launch(argv=["sh", "-c", script], cwd=tmp_path, port=port)


def test_ready_then_stop_leaves_no_process(tmp_path):
    launch = health_server(tmp_path, free_port(), children=2)
    with Engine(launch, tmp_path / "server.log") as eng:
        ready_s = eng.wait_ready(timeout_s=30)
        pgid = eng.pgid
        assert ready_s < 30
        assert len(group_members(pgid)) >= 3        # the server and both sleepers
    assert group_members(pgid) == []


def test_stop_on_exception_inside_the_block(tmp_path):
    launch = health_server(tmp_path, free_port(), children=1)
    with pytest.raises(KeyboardInterrupt):
        with Engine(launch, tmp_path / "server.log") as eng:
            eng.wait_ready(timeout_s=30)
            pgid = eng.pgid
            raise KeyboardInterrupt
    assert group_members(pgid) == []


def test_engine_that_exits_is_reported_fast(tmp_path):
    launch = Launch(argv=["sh", "-c", "echo 'RuntimeError: no memory'; exit 3"], cwd=tmp_path,
                    port=free_port())
    t0 = time.monotonic()
    with pytest.raises(EngineDied, match="exited with code 3"):
        with Engine(launch, tmp_path / "server.log") as eng:
            eng.wait_ready(timeout_s=60)
    assert time.monotonic() - t0 < 10
    assert "RuntimeError: no memory" in (tmp_path / "server.log").read_text()


def test_an_engine_that_stops_answering_and_then_exits_is_not_still_up(tmp_path):
    """A killed engine drops its connections a moment before its process can be reaped: after a
    failed request the run waits for one or the other instead of trusting the process alone."""
    port = free_port()
    (tmp_path / "www").mkdir()
    (tmp_path / "www" / "health").write_text("ok")
    script = (f"{sys.executable} -m http.server {port} --bind 127.0.0.1 --directory www & srv=$!; "
              "while [ ! -e stop ]; do sleep 0.1; done; kill $srv; sleep 1.5; exit 9")
    with Engine(Launch(argv=["sh", "-c", script], cwd=tmp_path, port=port), tmp_path / "server.log") as eng:
        eng.wait_ready(timeout_s=30)
        t0 = time.monotonic()
        assert eng.still_up()                       # answers /health: at once
        assert time.monotonic() - t0 < 1.0
        (tmp_path / "stop").touch()
        time.sleep(0.5)
        assert eng.alive()                          # no server, but the process is not gone yet
        assert not eng.still_up()
        assert not eng.alive()


def test_readiness_timeout(tmp_path):
    launch = Launch(argv=["sleep", "30"], cwd=tmp_path, port=free_port())
    with pytest.raises(EngineDied, match="not ready after"):
        with Engine(launch, tmp_path / "server.log") as eng:
            eng.wait_ready(timeout_s=1)


def test_progress_names_the_phase_from_the_log(tmp_path):
    script = "echo 'INFO [cpu_model_runner.py:87] Warming up model for the compilation...'; sleep 30"
    launch = Launch(argv=["sh", "-c", script], cwd=tmp_path, port=free_port())
    seen: list[str] = []
    with pytest.raises(EngineDied):
        with Engine(launch, tmp_path / "server.log") as eng:
            eng.wait_ready(timeout_s=2.5, progress=seen.append, every_s=1)
    assert seen and "compiling" in seen[-1]


def test_flag_args():
    assert flag_args({"--max-num-seqs": 4, "--enforce-eager": True, "--x": False, "--y": None}) == [
        "--max-num-seqs", "4", "--enforce-eager"]
    with pytest.raises(CampaignError):
        flag_args({"max-num-seqs": 4})


def test_local_launch_shell_line_is_exact(tmp_path):
    launch = LocalExecutor(root=tmp_path, python=".venv/bin/python").launch(
        run_id="r", engine="vllm", model_path="data/models/m", args={"--max-num-seqs": 4},
        env={"VLLM_CPU_KVCACHE_SPACE": "1"}, port=8011)
    assert launch.shell() == (
        "VLLM_CPU_KVCACHE_SPACE=1 .venv/bin/python -m vllm.entrypoints.openai.api_server "
        "--model data/models/m --host 127.0.0.1 --port 8011 --max-num-seqs 4")


def test_the_startup_phase_follows_a_real_h200_log(tmp_path):
    """The phase the waiting line names, read from the H200 run's own log as it grew: after CUDA
    graph capture, the engine's minute and a half of warm-up is not called capture."""
    from stages.run.engine import Engine
    from stages.run.executors import Launch
    log = (Path(__file__).parent / "fixtures" / "gpu_h200x1" / "llama-1b__gpu1_seqs64__32k__vllm__1202-160157"
           / "server.log").read_text().splitlines(keepends=True)
    path = tmp_path / "server.log"
    engine = Engine(Launch(argv=["true"]), path)
    seen = []
    for n in range(1, len(log) + 1):
        path.write_text("".join(log[:n]))
        if not seen or seen[-1] != engine.phase():
            seen.append(engine.phase())
    assert seen[-1] == "ready"
    capture = seen.index("capturing CUDA graphs")
    assert seen[capture + 1] == "warming up" and seen.index("weights loaded") < capture
