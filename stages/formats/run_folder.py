"""A raw run folder's names and its meta.json: the run id (made by the run stage and the tools that
make or bring in run folders, read back by ingest), the files the run stage writes, UTC
timestamps, and the one builder of meta.json with the schema version of the raw records.

    <runs>/<model>__<layout>__<ctx>__<engine>__<MMDD-HHMMSS>/
      cmd.sh      the engine command exactly as run      server.log  the engine's output
      meta.json   spec, versions, git sha, params hash   launch.out  key=value facts, appended as known
      niah.log    the needle gate                         bench/      one result file per point
"""
from __future__ import annotations

import datetime as dt
import hashlib
import json
import re
from dataclasses import dataclass
from typing import Any, Iterable

from stages.core.config import CampaignError
from stages.core.names import SAFE_NAME, ctx_label

# The schema version of the raw records written: a run's meta.json, the import record beside an
# imported run, a node folder's meta.json and env.json. SCHEMA_VERSIONS: those a reader knows.
SCHEMA_VERSION = 1
SCHEMA_VERSIONS = (1,)

META_JSON = "meta.json"
CMD_SH = "cmd.sh"
SERVER_LOG = "server.log"
LAUNCH_OUT = "launch.out"
NIAH_LOG = "niah.log"
BENCH = "bench"                 # the folder of the benchmark's results, one file per point
# The record `campaign import` writes into a run folder it brought in (where it came from, when,
# by whom, each file's sha256, the profile and spec); ingest reads it where meta.json is absent.
IMPORT_RECORD = "import.json"
# The GPU sampler's file of a benchmark point: gpu/<point_id>.csv of the run folder (the run stage
# writes it, ingest reads it).
GPU_SAMPLES_FOLDER, GPU_SAMPLES_SUFFIX = "gpu", ".csv"
# The engine profiler's trace of a profiled point: profile/<point_id>.<anything>.pt.trace.json.gz
# (one file per worker), read by ingest (stages/ingest/parsers/profile_trace.py).
PROFILE_FOLDER = "profile"
# Beside a CPU engine's trace, vLLM's profiler writes its table of operator totals made from it
# (<worker>.profiler_out.txt): kept as the engine wrote it, read by no one.
PROFILE_TABLE_SUFFIX = ".profiler_out.txt"
# The /metrics sampler's file of a benchmark point (or multi-turn workload): bench/<point_id> with
# this suffix (the run stage writes it, ingest reads it).
METRICS_SERIES_SUFFIX = ".metrics-series.txt"

# A run id, as a folder name: safe characters only (a file name and a shell word as it stands).
MAX_RUN_ID_CHARS = 200
_STAMP = re.compile(r"\d{4}-\d{6}")
_ISO = "%Y-%m-%dT%H:%M:%SZ"


@dataclass(frozen=True)
class RunId:
    model: str | None
    layout: str | None
    ctx_label: str | None
    engine: str | None
    stamp: str | None            # MMDD-HHMMSS

    def started_at(self, year: int) -> dt.datetime | None:
        """The run id's stamp as a UTC time in `year` (the id carries no year)."""
        if not self.stamp:
            return None
        try:
            return dt.datetime.strptime(f"{year}{self.stamp}", "%Y%m%d-%H%M%S").replace(tzinfo=dt.timezone.utc)
        except ValueError:
            return None


def make_run_id(*, model: str, layout: str, max_model_len: int, engine: str, now: dt.datetime) -> str:
    """`<model>__<layout>__<ctx>__<engine>__<MMDD-HHMMSS>`; a part that could not be read back
    is a user error."""
    for name, value in (("model", model), ("layout", layout), ("engine", engine)):
        if not SAFE_NAME.match(value) or "__" in value:
            raise CampaignError(f"{name} {value!r} cannot be part of a run id "
                                "(letters, digits, '.', '_', '-'; no '__')")
    return f"{model}__{layout}__{ctx_label(max_model_len)}__{engine}__{now:%m%d-%H%M%S}"


def parse_run_id(run_id: str) -> RunId:
    """`<model>__<layout>__<ctx>__<engine>__<MMDD-HHMMSS>`; a part that is not there is None."""
    parts = run_id.split("__")
    stamp = parts.pop() if len(parts) > 1 and _STAMP.fullmatch(parts[-1]) else None
    if len(parts) >= 4:
        return RunId(parts[0], "__".join(parts[1:-2]), parts[-2], parts[-1], stamp)
    parts += [None] * (4 - len(parts))
    return RunId(parts[0] or None, parts[1], parts[2], parts[3], stamp)


def is_run_id(name: str) -> bool:
    """`name` is a run id: `<model>__<layout>__<ctx>__<engine>__<MMDD-HHMMSS>`, every part there,
    letters, digits, '.', '_' and '-' only, starting with a letter or digit."""
    if len(name) > MAX_RUN_ID_CHARS or not SAFE_NAME.match(name):
        return False
    rid = parse_run_id(name)
    parts = (rid.model, rid.layout, rid.ctx_label, rid.engine, rid.stamp)
    return all(parts) and "" not in name.split("__")


def utc_now() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


def iso(t: dt.datetime) -> str:
    """A time as the raw records write it: UTC, to the second (a time without a zone is UTC)."""
    return (t if t.tzinfo is None else t.astimezone(dt.timezone.utc)).strftime(_ISO)


def parse_time(value: Any) -> dt.datetime | None:
    """An ISO 8601 time; a time without a zone is taken as UTC."""
    if not isinstance(value, str) or not value.strip():
        return None
    try:
        parsed = dt.datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.timezone.utc)


# What of a profile is not a setting of its launches: what `campaign plan` reads to plan them.
NOT_LAUNCH_SETTINGS = ("plan",)


def params_hash(spec: dict, profile: dict, *parts) -> str:
    """meta.json's params_hash: the settings a run was launched with (its spec, its profile less
    its planning settings, and `parts`), digested."""
    launched = {k: v for k, v in profile.items() if k not in NOT_LAUNCH_SETTINGS}
    blob = json.dumps([spec, launched, *parts], sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def gpu_text(gpus: Iterable[int] | str | None) -> str | None:
    """A GPU set as meta.json and launch.out hold it: "0,1" (None for none)."""
    if gpus is None or isinstance(gpus, str):
        return gpus or None
    return ",".join(map(str, gpus)) or None


def run_meta(*, run_id: str, spec: str, spec_params: dict, profile: str, engine: str,
             engine_version: str | None, image: str | None, image_digest: str | None, executor: str,
             gpus: Iterable[int] | str | None, model: str, model_path: str, layout: str, ctx: str,
             git_sha: str | None, params_hash: str, node: dict, started_at: dt.datetime,
             **more: Any) -> dict[str, Any]:
    """A run's meta.json as a dict: the fields every writer gives, the schema version, `gpus` as
    "0,1", `started_at` in UTC; `more` adds the writer's own (the run stage's port and Slurm job,
    a finished run's finished_at...)."""
    return {"schema_version": SCHEMA_VERSION, "run_id": run_id, "spec": spec, "spec_params": spec_params,
            "profile": profile, "engine": engine, "engine_version": engine_version, "image": image,
            "image_digest": image_digest, "executor": executor, "gpus": gpu_text(gpus), "model": model,
            "model_path": model_path, "layout": layout, "ctx_label": ctx, "git_sha": git_sha,
            "params_hash": params_hash, "node": node, "started_at": iso(started_at), **more}


def record_text(record: dict[str, Any]) -> str:
    """A raw JSON record's text (meta.json, import.json, a node folder's meta.json and env.json)."""
    return json.dumps(record, indent=2, sort_keys=True) + "\n"
