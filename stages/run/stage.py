"""One spec's run (`campaign run`, which the run stage's scheduler calls per spec): launch one
engine, gate it, benchmark it, stop it, keep everything.

Each call makes a new raw run folder `<runs>/<run_id>/` (its files: stages/formats/run_folder.py)
and never touches an earlier one. A run that ends writes a small ledger file naming it (`<ledger>/<spec>.json`); the scheduler
records it in its own ledger, so `dvc repro` re-runs a spec only when its settings change, and an
interrupted run is attempted again, in a new folder, next time.
"""
from __future__ import annotations

import datetime as dt
import json
import os
import platform
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import httpx

from stages.run import gpu_sampler
from stages.run import metrics_sampler
from stages.run import needle
from stages.run import profiler
from stages.run import bench_client as bench
from stages.core.config import CampaignError, Paths, profile as active_profile, profile_workloads
from stages.core.names import SAFE_NAME, ctx_label, max_context
from stages.core.config import spec as get_spec
from stages.core.faults import storage_fault
from stages.core.gate import Gate, gate_settings as gate_of
from stages.core.multiturn_shapes import Workload, workload_from_params
from stages.run.engine import Engine, EngineDied
from stages.run.interrupts import Interrupts
from stages.run.executors import Launch, executor_for, free_port, internal_ports
from stages.formats.lines import read_chunks
from stages.formats.sglang_log import parse_sglang_log
from stages.formats.vllm_log import parse_vllm_log
from stages.formats.launch_out import SLURM_JOB_KEY, LaunchOut
from stages.formats.run_folder import (CMD_SH, LAUNCH_OUT, META_JSON, NIAH_LOG, SERVER_LOG,
                                       iso, make_run_id, params_hash, record_text, run_meta, utc_now)
from stages.run.quads import spans_quads
from stages.run import prompts
from stages.run.prompts import PromptBank
from stages.run.steps import Tally, benchmark, point_argv, sampling, stamp, steps_of, sweep_points
from stages.core.provenance import git_sha
from stages.formats.sealed import RUN_MANIFEST, seal, write_once
from stages.core.secrets import redact_mapping


@dataclass(frozen=True)
class RunResult:
    run_id: str
    folder: Path
    status: str        # ready | failed
    run_status: str    # complete | failed | engine_died
    points: int


def default_gpus(spec: dict) -> list[int] | None:
    """A spec's GPU set when no scheduler gave one: `gpus` as a count (the first N GPUs) or a list."""
    g = spec.get("gpus")
    if g is None:
        return None
    if isinstance(g, int):
        return list(range(g))
    return [int(x) for x in g]


def planned_run_ids(params: dict, names: list[str], runs: Path, *,
                    check_profile: bool = True) -> dict[str, str]:
    """Run ids for specs about to be submitted (a Slurm job is told its folder's name): each as
    `campaign run` would make it now, a second later where that id is taken already."""
    now, ids = utc_now(), {}
    for name in names:
        spec = get_spec(params, name, check_profile=check_profile)
        max_model_len = int(max_context(spec) or 0)
        engine = spec.get("engine") or active_profile(params, spec.get("profile")).get("engine")
        for step in range(3600):
            run_id = make_run_id(model=spec["model"], layout=spec["layout"], max_model_len=max_model_len,
                                 engine=engine, now=now + dt.timedelta(seconds=step))
            if run_id not in ids.values() and not (runs / run_id).exists():
                break
        ids[name] = run_id
    return ids


def spec_workloads(params: dict, spec_name: str, spec: dict) -> dict[str, dict]:
    """The spec's workloads, in its order, from its profile's group in params (`workloads.<profile>`)."""
    group = profile_workloads(params, spec.get("profile"))
    unknown = [w for w in spec.get("workloads") or [] if w not in group]
    if unknown:
        raise CampaignError(f"spec {spec_name!r}: unknown workload {unknown[0]!r} "
                            f"(params.yaml workloads.{spec.get('profile')}: {', '.join(group) or 'none'})")
    return {name: group[name] for name in spec.get("workloads") or []}


def split_workloads(workloads: dict[str, dict], max_model_len: int) -> tuple[dict, list[Workload]]:
    """(sweeps for `vllm bench serve`, multi-turn workloads), checked before the engine starts."""
    sweeps = {n: w for n, w in workloads.items() if "kind" not in w}
    turns = [workload_from_params(n, w, seed=3000 + 100 * i, max_model_len=max_model_len)
             for i, (n, w) in enumerate(workloads.items()) if "kind" in w]
    return sweeps, turns


def run(*, spec_name: str, params: dict, paths: Paths,
        progress: Callable[[str], None] = lambda s: None, dry_run: bool = False,
        gpus: list[int] | None = None, port: int | str | None = None, run_id: str | None = None,
        executor: str | None = None) -> RunResult | Launch:
    """One spec's run. `port` "auto": the first free port from the profile's. `run_id`: the id a
    scheduler chose for it (a Slurm submission names the folder before the job starts). `executor`:
    the profile's, unless given; "slurm" is a run inside a Slurm job, whose submitter adds Slurm's
    record of the job to the folder and seals it."""
    # A dry run may show any spec's command, on the profile the spec is written for.
    spec = get_spec(params, spec_name, check_profile=not dry_run)
    # derive's rules are no setting of the launch (nor of its params hash)
    prof = {k: v for k, v in active_profile(params, spec.get("profile") if dry_run else None).items()
            if k != "rules"}
    prof["image"] = spec.get("image") or prof.get("image")
    if executor:
        prof["executor"] = executor
    in_slurm = prof.get("executor") == "slurm"
    job = slurm_job() if in_slurm and not dry_run else {}
    args = spec.get("args") or {}
    max_model_len = int(max_context(spec) or 0)
    if not max_model_len:
        raise CampaignError(f"spec {spec_name!r}: args must set --max-model-len (or --context-length)")
    workloads = spec_workloads(params, spec_name, spec)
    sweeps, conversations = split_workloads(workloads, max_model_len)
    gate_settings = gate_of(params, spec_name)
    gate = Gate.from_settings(gate_settings, f"specs.{spec_name}", max_model_len)
    engine_name = spec.get("engine") or prof["engine"]
    model_path = str(spec.get("model_path") or (paths.models / spec["model"]).relative_to(paths.root))
    gpu_set = gpus if gpus is not None else (job.get("gpus") if in_slurm else default_gpus(spec))
    executor = executor_for(prof, root=paths.root)
    sampler = prof.get("gpu_sampler") if gpu_sampler.settings(prof.get("gpu_sampler")) else None
    metrics_ms = metrics_sampler.settings(prof)
    started = utc_now()
    if run_id is not None and (not SAFE_NAME.match(run_id) or ".." in run_id):
        raise CampaignError(f"run id {run_id!r} is not safe as a folder name")
    run_id = run_id or make_run_id(model=spec["model"], layout=spec["layout"],
                                   max_model_len=max_model_len, engine=engine_name, now=started)
    env = {**(prof.get("env") or {}), **(spec.get("env") or {})}
    profiled = profiler.settings(prof) if profiler.wanted(sweeps) else None
    writable, engine_args = (), args
    if profiled is not None:        # the engine's profiler armed, writing into the run folder
        writable = (profiler.scratch(paths.runs / run_id).resolve(),)
        more_args, more_env = profiler.launch_additions(
            engine_name, profiler.engine_path(writable[0], paths.root, executor.name), profiled)
        engine_args, env = {**args, **more_args}, {**env, **more_env}
    if port == "auto":      # jobs sharing a node start from different ports: their ids differ
        port = free_port(int(prof["port"]) + (int(job["job_id"]) % 100 if job else 0))
    port = int(port if port is not None else prof["port"])     # the scheduler's slot, or the profile's
    env, launch_args = internal_ports(engine_name, port=port, base_port=int(prof["port"]), env=env,
                                      args=engine_args)
    # Inside a Slurm job a local engine sees the job's GPUs as Slurm numbered them for it.
    launch_gpus = None if in_slurm and executor.name != "docker" else gpu_set
    launch = executor.launch(run_id=run_id, engine=engine_name, model_path=model_path,
                             args=launch_args, env=env, port=port, gpus=launch_gpus,
                             writable=writable)
    if dry_run:
        return launch
    if not (paths.root / model_path).exists():
        raise CampaignError(f"model folder {model_path} not found (run `dvc repro model` first)")

    folder = paths.runs / run_id
    try:
        folder.mkdir(parents=True)
    except FileExistsError:
        raise CampaignError(f"run folder {folder} already exists; run ids are never reused") from None
    meta = run_meta(
        run_id=run_id, spec=spec_name, spec_params={**spec, "args": redact_mapping(args)},
        profile=params["profile"], engine=engine_name,
        engine_version=executor.engine_version(engine_name) if executor.name == "local" else None,
        image=prof.get("image") if executor.name != "local" else None,
        image_digest=executor.image_digest(prof.get("image")),
        executor="slurm" if in_slurm else executor.name, gpus=gpu_set,
        model=spec["model"], model_path=model_path, layout=spec["layout"], ctx=ctx_label(max_model_len),
        git_sha=git_sha(paths.root), params_hash=params_hash(spec, prof, workloads, gate_settings),
        node={"cpus": os.cpu_count(), "machine": platform.machine(), "system": platform.system()},
        started_at=started,
        slurm={**job, "engine": executor.name} if in_slurm else None, port=port,
        container=run_id if executor.name == "docker" else None,
        max_model_len=max_model_len, workloads=workloads, gate=gate_settings)
    for scratch in writable:
        scratch.mkdir(parents=True)
    # whole or absent, even if the run is killed as it writes them
    write_once(folder / META_JSON, record_text(meta), scratch=paths.runs)
    write_once(folder / CMD_SH, launch.script(f"engine command of run {run_id}, run from the project root"),
               scratch=paths.runs)
    out = LaunchOut(folder / LAUNCH_OUT)
    out.add(port=port, **{k: meta[k] for k in ("gpus", "container") if meta[k]})
    if in_slurm:
        out.add(**{SLURM_JOB_KEY: job["job_id"]}, slurm_node=job["node"])
    say = lambda msg: progress(f"[{spec_name}] {msg}")  # noqa: E731
    if gpu_set and spans_quads(gpu_set):
        p2p = executor.cross_p2p(gpu_set)
        if p2p is not None:
            out.add(cross_p2p=p2p)
            say(f"GPUs {gpu_set} span both quads: peer access {p2p}")
    say(f"run {run_id}: starting {engine_name} ({folder})")

    status, run_status, tally = "failed", "failed", Tally()
    interrupts = Interrupts()
    tokenizer_file = paths.root / model_path / "tokenizer.json"
    engine_start = time.time()
    try:
        # every prompt the gate and the points will send, built while the engine starts
        with interrupts, PromptBank(run_prompt_jobs(
                gate, max_model_len, tokenizer_file, sweeps,
                lambda p: point_argv(p, base_url=f"http://127.0.0.1:{port}", model=model_path,
                                     folder=folder, run_id=run_id, engine=engine_name)),
                workers=prof.get("client_workers")) as bank, \
                Engine(launch, folder / SERVER_LOG) as eng:
            first = sweep_points(sweeps)[:1]
            # The client's imports and tokenizer load while the engine starts, in a thread beside
            # the poll of the engine's health: an import that outlasts the start (about 12 s of
            # CPU) must not be counted in ready_s.
            with ThreadPoolExecutor(1, thread_name_prefix="warm-client") as warming:
                warm = warming.submit(bench.warm_client, point_argv(
                    first[0], base_url=eng.base_url, model=model_path, folder=folder, run_id=run_id,
                    engine=engine_name)) if first else None
                try:
                    ready_s = eng.wait_ready(timeout_s=float(prof.get("ready_timeout_s", 600)), progress=say)
                except EngineDied as exc:
                    out.add(status="failed", error=str(exc))
                    say(f"launch failed: {exc}")
                    return RunResult(run_id, folder, "failed", "failed", 0)
                ready_at = time.time()
                if warm is not None:
                    warm.result()
            status = "ready"
            kv = engine_kv_tokens(folder / SERVER_LOG, engine_name)
            out.add(status="ready", ready_s=f"{ready_s:.1f}", engine_kv_tokens=kv if kv is not None else "",
                    engine_times=f"start={stamp(engine_start)} ready={stamp(ready_at)}")
            say(f"ready in {ready_s:.1f} s, KV cache {kv} tokens")
            gate_start = time.time()
            score = needle.run_gate(
                base_url=eng.base_url, model=model_path, tokenizer_file=tokenizer_file,
                max_model_len=max_model_len, gate=gate, log_path=folder / NIAH_LOG, progress=say,
                prompts=bank)
            out.add(gate_score=score, gate_times=f"start={stamp(gate_start)} end={stamp(time.time())}")
            (folder / "bench").mkdir()
            with httpx.Client(timeout=30.0) as client:
                steps = steps_of(sweeps, conversations, base_url=eng.base_url, model=model_path,
                               tokenizer_file=tokenizer_file, folder=folder, run_id=run_id,
                               client=client, engine=engine_name, alive=eng.alive, say=say,
                               profiled=profiled, note=lambda k, v: out.add(**{k: v}), prompts=bank)
                benchmark(steps, eng, out, interrupts, client, engine_name, say, tally, prompts=bank,
                           sample=lambda name: sampling(
                               gpu_sampler.sampling(folder, name, gpu_set, sampler, background=True),
                               metrics_sampler.sampling(folder, name, eng.base_url, metrics_ms)))
                unfinished = gpu_sampler.finish()
                if unfinished:
                    raise storage_fault(unfinished[0].filename or "gpu samples", unfinished[0])
            run_status = "engine_died" if tally.died else "complete"
            out.add(prefix_cache_resets=tally.resets)
    except KeyboardInterrupt:
        run_status = "interrupted"
        say("interrupted: stopping the engine")
        raise
    finally:
        gpu_sampler.finish()            # (an interrupted run's samplers, before the folder is sealed)
        out.add(points=tally.done, run_status=run_status, finished_at=iso(utc_now()))
        for scratch in writable:        # the profiler's scratch folder, empty unless a point failed
            profiler.tidy(scratch)
        if not in_slurm:        # the Slurm submitter seals it once it has Slurm's record
            seal(folder)
    say(f"done: {tally.done} benchmark points, run {run_status}")
    return RunResult(run_id, folder, status, run_status, tally.done)


def run_prompt_jobs(gate: Gate, max_model_len: int, tokenizer_file: Path, sweeps: dict,
                    argv_of: Callable) -> list:
    """The prompt bank's jobs of a run: the gate's probes, then every sweep point, in run order."""
    code, target = needle.gate_needle(gate, max_model_len)
    return (prompts.gate_jobs(tokenizer_file, target, list(gate.depths), code, gate.seed)
            + prompts.point_jobs(sweep_points(sweeps), argv_of))


# seal(folder), from stages.formats.sealed, makes a finished run folder write-once.
MANIFEST = RUN_MANIFEST


def slurm_job() -> dict:
    """The Slurm job this process runs in, from the environment Slurm gives a batch job: its id,
    node, partition and GPU set (the node's own GPU indices, as docker needs them)."""
    if not os.environ.get("SLURM_JOB_ID"):
        raise CampaignError("the slurm executor runs a spec inside a Slurm job; submit it with "
                            "`campaign schedule --executor slurm`")
    gpus = os.environ.get("SLURM_JOB_GPUS") or os.environ.get("SLURM_STEP_GPUS") or ""
    return {"job_id": os.environ["SLURM_JOB_ID"],
            "node": os.environ.get("SLURMD_NODENAME") or platform.node(),
            "partition": os.environ.get("SLURM_JOB_PARTITION"),
            "gpus": [int(g) for g in gpus.split(",") if g.strip().isdigit()] or None}


def engine_kv_tokens(log: Path, engine: str) -> int | None:
    """The KV pool the engine's log states, read by ingest's parser of that engine: the first
    `KV cache size` line of vLLM (not blocks x block size), SGLang's max_total_num_tokens."""
    with open(log, "rb") as f:
        if engine == "sglang":
            facts = [x for x in parse_sglang_log(read_chunks(f)).facts if x.fact == "max_total_num_tokens"]
        else:
            facts = [x for x in parse_vllm_log(read_chunks(f)).facts
                     if x.fact == "kv_tokens" and x.detail in ("GPU", "CPU")]
    return int(facts[0].value_num) if facts else None


def write_ledger(path: Path, result: RunResult, spec_name: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({
        "spec": spec_name, "run_id": result.run_id, "folder": str(result.folder),
        "status": result.status, "run_status": result.run_status, "points": result.points,
    }, indent=2) + "\n")
    tmp.replace(path)
