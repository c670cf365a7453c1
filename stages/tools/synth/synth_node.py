"""A scripted campaign on the 8-GPU node (profile h200x8), in the files the run stage writes there
with the docker executor: cmd.sh, meta.json, launch.out, server.log, niah.log, bench/ (results
of `vllm bench serve --save-result --save-detailed`, its command and printout, /metrics before
and after each point), ramp.log and agents logs, gpu/ (the GPU sampler's file of each point and
multi-turn workload, synth_node_power.py), and MANIFEST.sha256. The attempts are declared in
synth_node_plan.py; specs, workloads and the gate come from params.yaml. Fixed times, seeded
numbers: the same params give the same bytes. A run keeps a few points of its spec's workloads,
with one request per user (two at least), so the whole campaign stays small.

Example:
    campaign synth-node --out tests/fixtures/node_campaign/runs
"""
from __future__ import annotations

import hashlib
import json
import random
import shlex
from dataclasses import asdict, replace
from datetime import timedelta
from pathlib import Path
from typing import Any

from stages.core.config import CampaignError, load_params, profile as get_profile
from stages.core.names import ctx_label
from stages.core.gate import gate_settings
from stages.run.quads import spans_quads
from stages.formats.sealed import RUN_MANIFEST, manifest_text, write_once
from stages.run import bench_client as bench
from stages.run import gpu_sampler, needle
from stages.run.executors import DockerExecutor
from stages.run.stage import spec_workloads
from stages.formats.launch_out import launch_text
from stages.formats.run_folder import (CMD_SH, LAUNCH_OUT, META_JSON, NIAH_LOG, SERVER_LOG, iso, make_run_id,
                                       params_hash, record_text, run_meta)
from stages.tools.synth import synth_node_log as slog
from stages.tools.synth import synth_node_power
from stages.tools.synth.synth_node_plan import SCENARIO, VERSIONS, Attempt, Load
from stages.tools.synth.synth_node_sim import Counters, Req, bench_printout, bench_result, metrics_text, \
    serve, slots_for, turn_lines

PROFILE = "h200x8"
GIT_SHA = "4be1c2f07a9d3e5b86c1f0a2d4e6b8c9a1f3e5d7"
NODE = {"cpus": 224, "machine": "x86_64", "system": "Linux"}
GAP_S = 2.5                         # between a /metrics scrape and the next request


class RunWriter:
    """One attempt's folder, built in time order."""

    def __init__(self, a: Attempt, params: dict, runs_dir: Path):
        self.a = a
        self.spec = params["specs"][a.spec]
        if self.spec.get("profile") != PROFILE:
            raise CampaignError(f"spec {a.spec!r} is not a spec of profile {PROFILE}")
        prof = {k: v for k, v in get_profile(params, PROFILE).items() if k != "rules"}
        prof["image"] = a.image or self.spec.get("image") or prof.get("image")
        self.prof = prof
        self.args = {k: v for k, v in (self.spec.get("args") or {}).items() if k not in a.drop_args}
        self.spec_used = {**self.spec, "args": self.args, **({"image": a.image} if a.image else {})}
        self.max_len = int(self.args["--max-model-len"])
        self.workloads = spec_workloads(params, a.spec, self.spec)
        self.gate = gate_settings(params, a.spec)
        self.model_path = self.spec["model_path"]
        self.run_id = make_run_id(model=self.spec["model"], layout=self.spec["layout"],
                                  max_model_len=self.max_len, engine="vllm", now=a.started)
        self.folder = runs_dir / self.run_id
        self.clock = slog.Clock(a.started)
        self.rng = random.Random(a.seed)
        self.lines: list[slog.Line] = []
        self.counters = Counters()
        self.files: dict[str, str] = {}
        self.sampler_ms = gpu_sampler.settings(prof.get("gpu_sampler"))

    # ---------------------------------------------------------------- small files

    def cmd_sh(self) -> str:
        env = {**(self.prof.get("env") or {}), **(self.spec.get("env") or {})}
        executor = DockerExecutor(root=Path("."), image=self.prof["image"], docker=self.prof.get("docker"))
        launch = executor.launch(run_id=self.run_id, engine="vllm", model_path=self.model_path,
                                 args=self.args, env=env, port=int(self.prof["port"]), gpus=list(self.a.gpus))
        return launch.script(f"engine command of run {self.run_id}, run from the project root")

    def meta_json(self) -> str:
        image = self.prof["image"]
        return record_text(run_meta(
            run_id=self.run_id, spec=self.a.spec, spec_params=self.spec_used, profile=PROFILE,
            engine="vllm", engine_version=None, image=image,
            image_digest=f"{image.split(':')[0]}@sha256:{_digest(image)}", executor="docker",
            gpus=self.a.gpus, model=self.spec["model"], model_path=self.model_path,
            layout=self.spec["layout"], ctx=ctx_label(self.max_len), git_sha=GIT_SHA,
            params_hash=params_hash(self.spec_used, self.prof, self.workloads, self.gate), node=NODE,
            started_at=self.a.started, max_model_len=self.max_len, workloads=self.workloads, gate=self.gate))

    # ---------------------------------------------------------------- the run

    def write(self) -> str:
        a = self.a
        out: dict[str, Any] = {}      # launch.out's facts, in the order the run stage adds them
        if spans_quads(list(a.gpus)):
            out["cross_p2p"] = "ok"
        version = VERSIONS[self.prof["image"]]
        self.lines += slog.startup_lines(a, clock=self.clock, version=version, model_path=self.model_path,
                                         args=self.args, max_model_len=self.max_len)
        if a.crash:
            self.lines += slog.crash_lines(a, clock=self.clock)
            end = a.crash.after_s + 2.0
            out.update(status="failed", error=f"engine exited with code 1 after {end:.0f} s "
                                              f"(see data/runs/{self.run_id}/server.log)",
                       points=0, run_status="failed", finished_at=self._iso(end + 9))
            return self._finish(out)
        out.update(status="ready", ready_s=f"{a.ready_s:.1f}", engine_kv_tokens=a.startup.kv_tokens)
        t = self._gate(a.ready_s + 1.0)
        out["gate_score"] = self.score
        done = 0
        sweeps = {n: w for n, w in self.workloads.items() if "kind" not in w}
        planned = {(p.workload, p.concurrency): p
                   for p in bench.points_for(workloads=sweeps, names=list(sweeps))}
        for load in a.points:
            if (load.workload, load.concurrency) not in planned:
                raise CampaignError(f"synth-node: spec {a.spec!r} has no point {load.workload} at "
                                    f"concurrency {load.concurrency} in params.yaml")
            t = self._point(planned[(load.workload, load.concurrency)], load, t)
            done += 1
        for load in a.turns:
            start = t
            t = self._turns(load, t)
            self._sampled(load.workload, load, (start + 0.2, t - GAP_S + 0.05), self.turn_reqs)
            done += 1
        self.lines += slog.shutdown_lines(t + 4.0)
        out.update(prefix_cache_resets=0, points=done, run_status="complete", finished_at=self._iso(t + 12))
        return self._finish(out)

    def _finish(self, launch_facts: dict[str, Any]) -> str:
        self.files[CMD_SH] = self.cmd_sh()
        self.files[META_JSON] = self.meta_json()
        self.files[LAUNCH_OUT] = launch_text(**launch_facts)
        self.files[SERVER_LOG] = slog.render(self.lines)
        self.folder.mkdir(parents=True)
        for name, text in sorted(self.files.items()):
            path = self.folder / name
            path.parent.mkdir(parents=True, exist_ok=True)
            write_once(path, text, scratch=self.folder.parent)     # raw run files, as a run writes them
        write_once(self.folder / RUN_MANIFEST, manifest_text(self.folder), scratch=self.folder.parent)
        return self.run_id

    def _iso(self, t: float) -> str:
        return iso(self.a.started + timedelta(seconds=t))

    # ---------------------------------------------------------------- the needle gate

    def _gate(self, t: float) -> float:
        gate = needle.Gate.from_settings(self.gate, f"specs.{self.a.spec}", self.max_len)
        code = str(random.Random(gate.seed).randint(1_000_000, 9_999_999))
        lines, passed, reqs = [], 0, []
        for depth, answer in zip(gate.depths, self.a.gate_answers):
            text = answer.replace("{code}", code)
            prompt = gate.prompt_target(self.max_len) - self.rng.randrange(3, 40)
            first = t + prompt / self.a.gate_prefill_tok_s
            out = len(text) // 4 + 1 if code in text else gate.answer_tokens   # a loop fills the budget
            end = first + 0.03 * (out - 1)
            reqs.append(Req(t, t, first, end, prompt, prompt, out, [0.03], t))
            self.lines.append((end, slog.access("POST /v1/completions", 200, end)))
            ok = code in text
            passed += ok
            probe = needle.Probe(key=0, depth=depth, prompt_tokens=prompt, ok=ok, latency_s=round(end - t, 3),
                                 answer=text, failure=None, reasoning_tokens=None,
                                 timeout_s=gate.timeout_s(prompt))
            lines.append(json.dumps(asdict(probe), ensure_ascii=False))
            t = end + 0.2
        self.score = passed / len(lines)
        self.files[NIAH_LOG] = "\n".join(lines + [f"GATE niah score= {self.score}"]) + "\n"
        self.counters.add(reqs)
        self.lines += slog.stats_lines(reqs, clock=self.clock, kv_tokens=self.a.startup.kv_tokens,
                                       start=reqs[0].send, end=t, rng=self.rng)
        return t + 1.0

    # ---------------------------------------------------------------- points and conversations

    def _scrape(self, name: str, t: float) -> None:
        self.files[f"bench/{name}"] = metrics_text(self.counters, model=self.model_path,
                                                   started_unix=self.a.started.timestamp() + 4.0)
        self.lines.append((t, slog.access("GET /metrics", 200, t)))

    def _point(self, planned: bench.Point, load: Load, t: float) -> float:
        p = replace(planned, num_prompts=max(load.concurrency, 2))
        point_dir = Path("data/runs") / self.run_id / "bench"
        argv = bench.bench_argv(p, base_url=f"http://127.0.0.1:{self.prof['port']}", model=self.model_path,
                                tokenizer=self.model_path, result_dir=point_dir, run_id=self.run_id)
        self.lines.append((t, slog.access("POST /reset_prefix_cache", 404, t)))
        self.files[f"bench/{p.point_id}.cmd"] = \
            "vllm bench serve " + " ".join(shlex.quote(x) for x in argv) + "\n"
        self._scrape(f"{p.point_id}.metrics.before.txt", t + 0.5)
        start = t + 0.5 + GAP_S
        context = p.prompt_tokens + p.output_tokens
        slots = slots_for(self.a.startup.kv_tokens, int(self.args.get("--max-num-seqs", 256)), context)
        block = int(self.args.get("--block-size", 64))
        cached = [p.prompt_tokens - block if i in load.cached else 0 for i in range(p.num_prompts)]
        reqs = serve(load, prompts=[p.prompt_tokens] * p.num_prompts, cached=cached, output=p.output_tokens,
                     slots=slots, t0=start, rng=self.rng, concurrency=p.concurrency)
        end = max(r.end for r in reqs)
        self.lines += [(r.send, slog.access("POST /v1/completions", 200, r.send)) for r in reqs]
        self.lines += slog.stats_lines(reqs, clock=self.clock, kv_tokens=self.a.startup.kv_tokens,
                                       start=start, end=end, rng=self.rng)
        texts = [self._text(p.output_tokens) for _ in reqs]
        body, result = bench_result(reqs, when=self.a.started + timedelta(seconds=end + 0.3),
                                    model=self.model_path, workload=p.workload, concurrency=p.concurrency,
                                    run_id=self.run_id, texts=texts)
        self.files[f"bench/{p.point_id}.json"] = body
        self.files[f"bench/{p.point_id}.out"] = bench_printout(result, argv)
        self.counters.add(reqs)
        self._scrape(f"{p.point_id}.metrics.after.txt", end + 0.6)
        self._sampled(p.point_id, load, (t + 0.2, end + 0.65), reqs)
        return end + 0.6 + GAP_S

    def _sampled(self, name: str, load: Load, window: tuple[float, float], reqs: list[Req]) -> None:
        """The GPU sampler's file of a step, as the run stage writes it around the step (after the
        prefix cache is emptied, until the /metrics scrape after it), where the profile samples."""
        if self.sampler_ms is None:
            return
        self.files[f"{gpu_sampler.FOLDER}/{name}{gpu_sampler.SUFFIX}"] = synth_node_power.sampler_file(
            point_id=name, gpus=tuple(self.a.gpus), interval_ms=self.sampler_ms, started=self.a.started,
            window=window, reqs=reqs, silent=load.silent_gpus, seed=f"{self.a.seed}:{name}")

    def _text(self, output: int) -> str:
        words = [self.rng.choice(self.a.answers) for _ in range(min(output // 16, 24))]
        return " " + " ".join(words)

    def _turns(self, load: Load, t: float) -> float:
        names = list(self.workloads)
        w = self.workloads[load.workload]
        seed = 3000 + 100 * names.index(load.workload)
        self.lines.append((t, slog.access("POST /reset_prefix_cache", 404, t)))
        t += 1.0
        out = int(w["output_tokens"])
        rows = []
        t_start = t
        if w["kind"] == "ramp":
            code = str(random.Random(seed * 31).randint(1_000_000, 9_999_999))
            steps = int(w["turns"])
            span = (int(w["end_tokens"]) - int(w["start_tokens"])) / (steps - 1)
            history = 0
            for turn in range(1, steps + 1):
                target = round(int(w["start_tokens"]) + span * (turn - 1))
                self._scrape(f"{load.workload}__t{turn:02d}.metrics.before.txt", t)
                prompt = target - self.rng.randrange(2, 30)
                hit = history // 64 * 64
                r = serve(load, prompts=[prompt], cached=[0], output=out, slots=1, t0=t + 0.2, rng=self.rng,
                          concurrency=1)[0]
                r = _cached(r, hit, load)
                self.counters.add([r])
                answer = f"The access code given at the start of the conversation is {code}."
                rows.append((0, turn, target, r, True, answer))
                self.lines.append((r.send, slog.access("POST /v1/completions", 200, r.send)))
                self.lines += slog.stats_lines([r], clock=self.clock, kv_tokens=self.a.startup.kv_tokens,
                                               start=r.send, end=r.end, rng=self.rng)
                self._scrape(f"{load.workload}__t{turn:02d}.metrics.after.txt", r.end + 0.3)
                history = prompt + out
                t = r.end + 0.6
            sessions = 1
        else:
            sessions = int(w["sessions"])
            self._scrape(f"{load.workload}__s{sessions:02d}.metrics.before.txt", t)
            shared = int(w["shared_history_tokens"])
            reqs = []
            clocks = [t + 0.2 + 0.01 * s for s in range(sessions)]
            for turn in range(1, int(w["turns"]) + 1):
                for s in range(sessions):
                    prompt = shared + turn * int(w["turn_tokens"]) + (turn - 1) * out + 24
                    fresh = prompt - shared if turn == 1 else int(w["turn_tokens"]) + out + 24
                    hit = 0 if (turn == 1 and s == 0) else (prompt - fresh) // 64 * 64
                    r = serve(load, prompts=[prompt], cached=[0], output=out, slots=1, t0=clocks[s],
                              rng=self.rng, concurrency=1)[0]
                    r = _cached(r, hit, load, slowdown=1 + 0.06 * (sessions - 1))
                    clocks[s] = r.end + 0.05
                    reqs.append(r)
                    rows.append((s, turn, prompt - 24, r, None, None))
                    self.lines.append((r.send, slog.access("POST /v1/completions", 200, r.send)))
            self.counters.add(reqs)
            end = max(r.end for r in reqs)
            self.lines += slog.stats_lines(reqs, clock=self.clock, kv_tokens=self.a.startup.kv_tokens,
                                           start=t, end=end, rng=self.rng)
            self._scrape(f"{load.workload}__s{sessions:02d}.metrics.after.txt", end + 0.3)
            t = end + 0.6
        self.turn_reqs = [row[3] for row in rows]
        log = "ramp.log" if w["kind"] == "ramp" else f"agents.{load.workload}.jsonl"
        self.files[log] = turn_lines(workload=load.workload, kind=w["kind"], params=dict(w), seed=seed,
                                     sessions=sessions, turns=int(w["turns"]), output=out,
                                     started=self.a.started, t_start=t_start, reqs=rows)
        return t + GAP_S


def _cached(r: Req, hit: int, load: Load, slowdown: float = 1.0) -> Req:
    """The request with `hit` prompt tokens found in the prefix cache: only the rest is prefilled."""
    fresh = r.prompt - hit
    first = r.begin + fresh / load.prefill_tok_s * slowdown
    itls = [round(x * slowdown, 4) for x in r.itls]
    return replace(r, first=first, end=first + sum(itls), prefilled=fresh, itls=itls)


def _digest(image: str) -> str:
    return hashlib.sha256(image.encode()).hexdigest()


def run(*, out_dir: Path, root: Path = Path(".")) -> list[str]:
    """Write every attempt of the scenario under `out_dir` (which must not hold them yet);
    returns the run ids in start order."""
    params = load_params(root)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    ids = []
    for attempt in SCENARIO:
        writer = RunWriter(attempt, params, out_dir)
        if writer.folder.exists():
            raise CampaignError(f"{writer.folder} already exists; synth-node writes into an empty folder")
        ids.append(writer.write())
    return ids
