"""Specs as Slurm jobs (`campaign schedule --executor slurm`, or a profile with `executor: slurm`).

Where a cluster exists its scheduler places the work: each spec is one `sbatch` job asking for the
GPUs the spec needs (the whole node, `--exclusive`, when it needs all of a node's GPUs). The job
runs `campaign run <spec> --executor slurm --run-id <id> --port auto` from the project checkout,
which starts the engine on the node it got the way the profile's `slurm.engine` says (local,
docker, or the cluster's container support) and writes the run folder under paths.runs: both must
be on storage the compute nodes share with the node that submits.

The submitter waits, showing the queue state of its jobs (`squeue`), and as each job leaves the
queue it reads Slurm's own record of it (`sacct` where the cluster keeps accounting, else the
controller's record, `scontrol show job`), writes it into the run folder (slurm.json, the job's
output as slurm.out, key facts in launch.out), seals the folder and ingests it. A job Slurm ended
(time limit, node failure, out of memory) is a failed launch with Slurm's reason; the others go
on. An interrupt cancels every job it submitted (`scancel`), waits for them to leave the queue,
and marks their runs interrupted.
"""
from __future__ import annotations

import json
import shlex
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from stages.core.config import CampaignError
from stages.formats.sealed import seal, write_once
from stages.formats.launch_out import SLURM_STATE_KEY, LaunchOut, read_launch_facts
from stages.formats.run_folder import LAUNCH_OUT
from stages.run.interrupts import Interrupts

# Slurm's job states once a job is over (squeue no longer lists it, or lists it as one of these).
ENDED = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "OUT_OF_MEMORY",
         "BOOT_FAIL", "DEADLINE", "REVOKED", "SPECIAL_EXIT"}
# Job states in which Slurm, not the run, ended the job: the run is a failed launch.
KILLED_BY_SLURM = ENDED - {"COMPLETED", "CANCELLED"}
RECORD_FIELDS = ("JobID", "JobName", "State", "Elapsed", "ExitCode", "NodeList", "Reason",
                 "Partition", "Start", "End")
OUTPUT_DIR = "slurm"        # in paths.ledger: each job's output while it runs


@dataclass(frozen=True)
class Settings:
    """A profile's `slurm` block."""
    partition: str | None = None
    account: str | None = None
    time_limit: str = "01:00:00"        # a spec's own `time_limit` wins
    cpus_per_task: int | None = None
    mem: str | None = None
    gpu_flag: str = "gpus"              # --gpus N, or --gres gpu:N on clusters without cons_tres
    extra_args: tuple[str, ...] = ()
    poll_s: float = 10.0

    @classmethod
    def from_profile(cls, prof: dict) -> "Settings":
        cfg = dict(prof.get("slurm") or {})
        known = set(cls.__dataclass_fields__) | {"engine"}
        unknown = sorted(set(cfg) - known)
        if unknown:
            raise CampaignError(f"profile slurm settings: unknown {', '.join(unknown)} "
                                f"(known: {', '.join(sorted(known))})")
        cfg.pop("engine", None)
        if cfg.get("gpu_flag", "gpus") not in ("gpus", "gres"):
            raise CampaignError(f"slurm.gpu_flag {cfg['gpu_flag']!r}: expected gpus or gres")
        cfg["extra_args"] = tuple(str(a) for a in cfg.get("extra_args") or ())
        return cls(**{k: v for k, v in cfg.items() if v is not None})


@dataclass
class Job:
    """One submitted spec."""
    spec: str
    run_id: str
    job_id: str
    output: Path
    sbatch: list[str]
    script: str
    state: str = "PENDING"
    reason: str = ""
    node: str = ""
    seen: tuple = field(default_factory=tuple)


def sbatch_argv(*, spec_name: str, spec: dict, settings: Settings, gpus_per_node: int,
                run_id: str, output: Path, root: Path) -> list[str]:
    """The `sbatch` command submitting one spec (its batch script comes on stdin)."""
    gpus = spec.get("gpus") or 0
    n = gpus if isinstance(gpus, int) else len(gpus)
    argv = ["sbatch", "--parsable", f"--job-name={run_id}", "--nodes=1", "--ntasks=1",
            f"--time={spec.get('time_limit') or settings.time_limit}", f"--chdir={root.resolve()}",
            f"--output={output}", f"--comment=campaign spec {spec_name}"]
    argv += [f"--partition={settings.partition}"] if settings.partition else []
    argv += [f"--account={settings.account}"] if settings.account else []
    if n:
        argv += [f"--gpus={n}"] if settings.gpu_flag == "gpus" else [f"--gres=gpu:{n}"]
        if gpus_per_node and n >= gpus_per_node:
            argv.append("--exclusive")            # the spec takes the whole node
    argv += [f"--cpus-per-task={settings.cpus_per_task}"] if settings.cpus_per_task else []
    argv += [f"--mem={settings.mem}"] if settings.mem else []
    return argv + list(settings.extra_args)


def batch_script(*, spec_name: str, run_id: str, python: str) -> str:
    """What the job runs: the spec's run, on the node Slurm gave it."""
    cmd = [python, "-m", "stages.cli", "run", spec_name, "--executor", "slurm", "--run-id", run_id,
           "--port", "auto"]
    return (f"#!/bin/bash\n# campaign spec {spec_name}, run {run_id}\n"
            f"exec {shlex.join(cmd)}\n")


def _slurm(argv: list[str], *, stdin: str | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(argv, input=stdin, capture_output=True, text=True, timeout=timeout)
    except FileNotFoundError:
        raise CampaignError(f"{argv[0]} not found: the slurm executor runs where the Slurm "
                            "commands are (a cluster's login node)") from None
    except subprocess.TimeoutExpired:
        raise CampaignError(f"{argv[0]} did not answer within {timeout:.0f} s") from None


def submit(argv: list[str], script: str) -> str:
    """Submit; returns the job id."""
    out = _slurm(argv, stdin=script)
    if out.returncode != 0:
        raise CampaignError(f"sbatch refused the job: {(out.stderr or out.stdout).strip()}")
    return out.stdout.strip().split(";")[0]


def queue(job_ids: list[str]) -> dict[str, tuple[str, str, str]]:
    """(state, reason, node) of each listed job still in the queue."""
    if not job_ids:
        return {}
    out = _slurm(["squeue", "--noheader", "--states=all", f"--jobs={','.join(job_ids)}",
                  "--format=%i|%T|%r|%N"])
    if out.returncode != 0 and "Invalid job id" not in out.stderr:
        raise CampaignError(f"squeue failed: {out.stderr.strip()}")
    rows = {}
    for line in out.stdout.splitlines():
        parts = line.strip().split("|")
        if len(parts) == 4 and parts[0] in job_ids:
            rows[parts[0]] = (parts[1], parts[2], parts[3])
    return rows


def record(job_id: str) -> dict:
    """Slurm's own record of a job that ended: `sacct` where the cluster keeps accounting, else the
    controller's (`scontrol show job`, kept for MinJobAge after the end). Fields as Slurm names
    them, plus `source` and `text` (Slurm's answer, as printed)."""
    out = _slurm(["sacct", "--noheader", "--parsable2", "--allocations", f"--jobs={job_id}",
                  f"--format={','.join(RECORD_FIELDS)}"])
    if out.returncode == 0 and out.stdout.strip():
        return {**parse_sacct(out.stdout, job_id), "source": "sacct", "text": out.stdout.strip()}
    out = _slurm(["scontrol", "show", "job", "--oneliner", job_id])
    if out.returncode == 0 and out.stdout.strip():
        return {**parse_scontrol(out.stdout), "source": "scontrol", "text": out.stdout.strip()}
    return {"JobID": job_id, "State": "UNKNOWN", "source": None,
            "text": "no record: sacct has no accounting here and the controller no longer keeps the job"}


def parse_sacct(text: str, job_id: str) -> dict:
    """The allocation's line of `sacct --parsable2 --format=<RECORD_FIELDS>`."""
    for line in text.splitlines():
        values = line.split("|")
        if len(values) == len(RECORD_FIELDS) and values[0] == job_id:
            rec = dict(zip(RECORD_FIELDS, values))
            rec["State"] = rec["State"].split()[0]          # "CANCELLED by 0" -> CANCELLED
            return rec
    return {"JobID": job_id, "State": "UNKNOWN"}


def parse_scontrol(text: str) -> dict:
    """`scontrol show job --oneliner`: key=value words, named as sacct names them."""
    kv = dict(w.split("=", 1) for w in text.split() if "=" in w)
    return {"JobID": kv.get("JobId"), "JobName": kv.get("JobName"), "State": kv.get("JobState", "UNKNOWN"),
            "Elapsed": kv.get("RunTime"), "ExitCode": kv.get("ExitCode"), "NodeList": kv.get("NodeList"),
            "Reason": kv.get("Reason"), "Partition": kv.get("Partition"),
            "Start": kv.get("StartTime"), "End": kv.get("EndTime")}


def slurm_error(rec: dict) -> str:
    """Slurm's reason for ending a job, as one line."""
    reason = rec.get("Reason")
    why = f" ({reason})" if reason and reason not in ("None", "") else ""
    return (f"Slurm ended job {rec.get('JobID')}: {rec.get('State')}{why} after {rec.get('Elapsed')}"
            f", exit code {rec.get('ExitCode')}")


def finalize(folder: Path, job: Job, rec: dict, *, cancelled: bool) -> str | None:
    """Write Slurm's record into the run folder and seal it; returns the run's final run_status
    (None when the job never made its folder)."""
    if not folder.is_dir():
        return None
    write_once(folder / "slurm.json", json.dumps({
        "job_id": job.job_id, "sbatch": job.sbatch, "script": job.script,
        "record_source": rec.get("source"), "record": {k: rec.get(k) for k in RECORD_FIELDS},
        "record_text": rec.get("text"),
    }, indent=2) + "\n", scratch=folder.parent)
    if job.output.is_file():
        shutil.copyfile(job.output, folder / "slurm.out")
    facts = read_launch_facts(folder / LAUNCH_OUT)
    lines = {SLURM_STATE_KEY: rec.get("State"), "slurm_elapsed": rec.get("Elapsed"),
             "slurm_exit_code": rec.get("ExitCode"), "slurm_reason": rec.get("Reason")}
    state = rec.get("State") or "UNKNOWN"
    if state in KILLED_BY_SLURM and facts.get("run_status") == "complete":
        # Slurm checks limits every half minute or so: a run may finish every point and stop its
        # engine before Slurm ends the job on its way out. Its measurements stand; Slurm's state
        # is recorded beside them.
        lines["slurm_note"] = f"{slurm_error(rec)}, after the run had completed"
    elif state in KILLED_BY_SLURM:
        lines.update(status="failed", error=slurm_error(rec), run_status="failed")
    elif "run_status" not in facts:        # the job ended before the run could say how it ended
        lines["run_status"] = "interrupted" if cancelled or state == "CANCELLED" else "failed"
        if not cancelled and state != "CANCELLED":
            lines["error"] = slurm_error(rec)
    LaunchOut(folder / LAUNCH_OUT, append=True).add(**{k: v for k, v in lines.items() if v not in (None, "")})
    seal(folder)
    return read_launch_facts(folder / LAUNCH_OUT).get("run_status")


def execute(specs: list[str], *, params: dict, profile: dict, root: Path, runs: Path,
            ledger_dir: Path, run_ids: dict[str, str], progress=lambda s: None,
            done=lambda spec, run_id, run_status: None, ingest: bool = True) -> dict[str, int]:
    """Submit each spec as a job, wait, finalize each run as its job ends (and ingest it).
    Returns each spec's exit status (0: its run finished, whatever its outcome)."""
    settings = Settings.from_profile(profile)
    out_dir = ledger_dir / OUTPUT_DIR
    out_dir.mkdir(parents=True, exist_ok=True)
    jobs: dict[str, Job] = {}
    results: dict[str, int] = {}
    started = time.monotonic()
    try:
        with Interrupts():
            for name in specs:
                run_id = run_ids[name]
                output = (out_dir / f"{run_id}.out").resolve()
                argv = sbatch_argv(spec_name=name, spec=params["specs"][name], settings=settings,
                                   gpus_per_node=int(profile.get("gpus_per_node") or 0),
                                   run_id=run_id, output=output, root=root)
                script = batch_script(spec_name=name, run_id=run_id, python=sys.executable)
                job_id = submit(argv, script)
                jobs[job_id] = Job(name, run_id, job_id, output, argv, script)
                progress(f"slurm: {name} submitted as job {job_id} (run {run_id})")
            last_summary = 0.0
            while len(results) < len(jobs):
                rows = queue([j for j, job in jobs.items() if job.spec not in results])
                for job_id, job in jobs.items():
                    if job.spec in results:
                        continue
                    row = rows.get(job_id)
                    if row is None or row[0] in ENDED:
                        results[job.spec] = _end(job, runs, cancelled=False, progress=progress,
                                                 done=done, root=root, ingest=ingest)
                    elif row != job.seen:
                        job.seen, (job.state, job.reason, job.node) = row, row
                        where = f" on {job.node}" if job.state == "RUNNING" else \
                            (f" ({job.reason})" if job.reason not in ("", "None") else "")
                        progress(f"slurm: {job.spec} job {job_id} {job.state}{where}")
                now = time.monotonic() - started
                if len(results) < len(jobs) and now - last_summary >= 60:
                    last_summary = now
                    states = [j.state for j in jobs.values() if j.spec not in results]
                    progress(f"slurm: {states.count('RUNNING')} running, {states.count('PENDING')} "
                             f"pending, {len(results)} ended ({now / 60:.0f} min)")
                if len(results) < len(jobs):
                    time.sleep(settings.poll_s)
    except KeyboardInterrupt:
        _cancel_all(jobs, results, runs, progress=progress, done=done, root=root)
        raise
    return results


def _end(job: Job, runs: Path, *, cancelled: bool, progress, done, root: Path, ingest: bool) -> int:
    rec = record(job.job_id)
    run_status = finalize(runs / job.run_id, job, rec, cancelled=cancelled)
    state = rec.get("State")
    if run_status is None:
        tail = _tail(job.output)
        progress(f"slurm: {job.spec} job {job.job_id} {state} before its run began"
                 + (f": {tail}" if tail else ""))
        done(job.spec, job.run_id, None)
        return 1
    note = f": {slurm_error(rec)}" if state in KILLED_BY_SLURM else ""
    progress(f"slurm: {job.spec} job {job.job_id} {state}, run {job.run_id} {run_status}{note}")
    done(job.spec, job.run_id, run_status)
    if ingest and not cancelled:
        _ingest(root, progress)
    return 0 if run_status != "interrupted" else 1


def _cancel_all(jobs: dict[str, Job], results: dict[str, int], runs: Path, *, progress, done,
                root: Path) -> None:
    """scancel every job not yet ended, wait for them to leave the queue, mark their runs."""
    held = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}
    old_mask = signal.pthread_sigmask(signal.SIG_BLOCK, held)
    try:
        open_ids = [j for j, job in jobs.items() if job.spec not in results]
        if not open_ids:
            return
        progress(f"slurm: interrupted: cancelling jobs {', '.join(open_ids)}")
        _slurm(["scancel", *open_ids])
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            left = [j for j, row in queue(open_ids).items() if row[0] not in ENDED]
            if not left:
                break
            time.sleep(1)
        for job_id in open_ids:
            job = jobs[job_id]
            results[job.spec] = _end(job, runs, cancelled=True, progress=progress, done=done,
                                     root=root, ingest=False)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)


def _ingest(root: Path, progress) -> None:
    """Ingest the runs that ended so far (`campaign ingest`), so the warehouse follows the queue."""
    out = subprocess.run([sys.executable, "-m", "stages.cli", "ingest", "--root", str(root)],
                         capture_output=True, text=True)
    lines = (out.stdout or out.stderr).strip().splitlines()
    progress(f"slurm: ingest {'done' if out.returncode == 0 else 'failed'}: "
             f"{lines[-1] if lines else ''}")


def _tail(path: Path, n: int = 300) -> str:
    try:
        text = path.read_text(errors="replace").strip()
    except OSError:
        return ""
    return " ".join(text.splitlines()[-1:])[-n:] if text else ""


def dry_run(params: dict, names: list[str], profile: dict, *, root: Path, ledger_dir: Path,
            run_ids: dict[str, str]) -> str:
    """Each spec's sbatch command and batch script, as `execute` would submit them."""
    settings = Settings.from_profile(profile)
    parts = []
    for name in names:
        argv = sbatch_argv(spec_name=name, spec=params["specs"][name], settings=settings,
                           gpus_per_node=int(profile.get("gpus_per_node") or 0),
                           run_id=run_ids[name], output=ledger_dir / OUTPUT_DIR / f"{run_ids[name]}.out",
                           root=root)
        parts.append(f"{shlex.join(argv)} <<'EOF'\n"
                     f"{batch_script(spec_name=name, run_id=run_ids[name], python=sys.executable)}EOF")
    return "\n".join(parts)
