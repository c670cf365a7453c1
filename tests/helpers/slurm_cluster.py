"""A real single-host Slurm cluster for the tests: Debian's slurmctld and slurmd (run as root) and
munged (run as the munge user), configured here, no systemd. `make test` installs the packages.

The cluster has one node (this machine, its CPUs and no GPUs) in one partition, no accounting
database (so `sacct` has nothing and the controller's record is Slurm's record of a job), and a job
completion log. Its ports are picked free, its state lives in a temporary folder, and the daemons
are stopped (and a munged this started) when the cluster is closed.
"""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

MUNGE_SOCKET_DIR = Path("/run/munge")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _munge_works() -> bool:
    try:
        enc = subprocess.run(["munge", "-n"], capture_output=True, timeout=10)
        dec = subprocess.run(["unmunge"], input=enc.stdout, capture_output=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return enc.returncode == 0 and dec.returncode == 0


class SlurmCluster:
    """`with SlurmCluster(folder) as cluster:` a running cluster; `cluster.env` is what a command
    needs to reach it (SLURM_CONF)."""

    def __init__(self, folder: Path, *, cpus: int | None = None):
        self.folder = Path(folder)
        self.cpus = cpus or os.cpu_count() or 1
        self.conf = self.folder / "slurm.conf"
        self.env = {**os.environ, "SLURM_CONF": str(self.conf)}
        self._munged: subprocess.Popen | None = None

    def __enter__(self) -> "SlurmCluster":
        for tool in ("slurmctld", "slurmd", "munged", "sbatch"):
            if not shutil.which(tool) and not Path(f"/usr/sbin/{tool}").exists():
                raise RuntimeError(f"{tool} not found: `make test` installs Slurm and munge")
        try:
            self._start_munge()
            self._start_slurm()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _start_munge(self) -> None:
        if _munge_works():
            return
        MUNGE_SOCKET_DIR.mkdir(mode=0o755, exist_ok=True)
        shutil.chown(MUNGE_SOCKET_DIR, "munge", "munge")
        key = Path("/etc/munge/munge.key")
        if not key.exists():
            subprocess.run(["runuser", "-u", "munge", "--", "mungekey", "--create"], check=True)
        # --foreground: this process owns it, and stops it on close
        self._munged = subprocess.Popen(["runuser", "-u", "munge", "--", "/usr/sbin/munged",
                                         "--foreground"], stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 20
        while not _munge_works():
            if time.monotonic() > deadline or self._munged.poll() is not None:
                raise RuntimeError("munged did not start")
            time.sleep(0.2)

    def _start_slurm(self) -> None:
        d = self.folder
        for sub in ("state", "spool"):
            (d / sub).mkdir(parents=True, exist_ok=True)
        host = socket.gethostname().split(".")[0]
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2**20
        self.conf.write_text("\n".join([
            "ClusterName=rehearsal",
            f"SlurmctldHost={host}(127.0.0.1)",
            "SlurmUser=root", "SlurmdUser=root",
            f"SlurmctldPort={_free_port()}", f"SlurmdPort={_free_port()}",
            "AuthType=auth/munge",
            "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none", "MpiDefault=none",
            "ReturnToService=2",
            f"StateSaveLocation={d}/state", f"SlurmdSpoolDir={d}/spool",
            f"SlurmctldPidFile={d}/slurmctld.pid", f"SlurmdPidFile={d}/slurmd.pid",
            f"SlurmctldLogFile={d}/slurmctld.log", f"SlurmdLogFile={d}/slurmd.log",
            "SchedulerType=sched/backfill",
            "SelectType=select/cons_tres", "SelectTypeParameters=CR_Core",
            "AccountingStorageType=accounting_storage/none", "JobAcctGatherType=jobacct_gather/none",
            "JobCompType=jobcomp/filetxt", f"JobCompLoc={d}/jobcomp.txt",
            "MinJobAge=3600",             # the controller keeps an ended job's record an hour
            "KillWait=15", "InactiveLimit=0",
            f"NodeName={host} NodeAddr=127.0.0.1 CPUs={self.cpus} RealMemory={memory // 2} State=UNKNOWN",
            "PartitionName=rehearsal Nodes=ALL Default=YES MaxTime=INFINITE State=UP",
        ]) + "\n")
        for daemon in ("slurmctld", "slurmd"):
            subprocess.run([f"/usr/sbin/{daemon}", "-f", str(self.conf)], env=self.env, check=True,
                           capture_output=True, timeout=30)
        deadline = time.monotonic() + 60
        while True:
            out = subprocess.run(["sinfo", "--noheader", "--format=%t"], env=self.env,
                                 capture_output=True, text=True, timeout=30)
            if out.stdout.strip() == "idle":
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"the Slurm node did not become idle: {out.stdout}{out.stderr}"
                                   f"{self.log('slurmctld')[-2000:]}{self.log('slurmd')[-2000:]}")
            time.sleep(0.5)

    def log(self, daemon: str) -> str:
        try:
            return (self.folder / f"{daemon}.log").read_text(errors="replace")
        except OSError:
            return ""

    def squeue(self) -> list[str]:
        """Jobs the controller still has pending or running (ids)."""
        out = subprocess.run(["squeue", "--noheader", "--format=%i"], env=self.env,
                             capture_output=True, text=True, timeout=30, check=True)
        return out.stdout.split()

    def close(self) -> None:
        for daemon in ("slurmd", "slurmctld"):
            pid_file = self.folder / f"{daemon}.pid"
            try:
                pid = int(pid_file.read_text())
            except (OSError, ValueError):
                continue
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                continue
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline and Path(f"/proc/{pid}").exists():
                time.sleep(0.2)
        if self._munged is not None:
            self._munged.terminate()
            try:
                self._munged.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._munged.kill()
