"""What the campaign's earlier launches took, read from the campaign database (when there is one):
the memory they kept beside weights and KV cache, and the time of each part of their runs. A
model's config and a profile's planning settings are read by stages/planning/inputs.py."""
from __future__ import annotations

import functools
import statistics
from dataclasses import dataclass, field
from pathlib import Path

import duckdb


SQL = Path(__file__).parent / "sql"
WARM_GAP_S = 600      # a launch this soon after another ended on the same machine finds its caches warm


@dataclass
class History:
    """The campaign's launches: their log figures, flags and steps."""
    launches: list[dict] = field(default_factory=list)
    flags: dict[str, dict] = field(default_factory=dict)     # run_id -> {flag: value}
    steps: dict[str, dict] = field(default_factory=dict)     # run_id -> {step: seconds}

    def reserve(self, profile: str, engine: str, version: str | None, budget_of, *,
                leave_out: str | None = None) -> tuple[float | None, int]:
        """The median memory a ready launch of this engine version on the profile's GPUs (any
        version of the engine, for a spec not launched yet) kept beside its weights and KV cache
        (its budget less both), and how many launches say so."""
        seen = []
        for la in self.launches:
            if (la["run_id"] == leave_out or la["engine"] != engine or la["profile"] != profile
                    or (version is not None and la["engine_version"] != version)
                    or la["status"] != "ready" or la["weights_gib"] is None or la["kv_cache_gib"] is None):
                continue
            budget = budget_of(la)
            if budget is not None:
                seen.append(budget - la["weights_gib"] - la["kv_cache_gib"])
        return (statistics.median(seen) if seen else None), len(seen)

    def warm(self, launch: dict) -> bool:
        """Whether `launch` started on a machine whose caches an earlier launch had just filled:
        another launch of its engine on its profile ended at most WARM_GAP_S before it started (the
        scheduler runs a slot's specs back to back). vLLM's kernels are built and cached on a
        machine's first launch: the second launch of llama-1m on an H200, 5 s after another ended,
        spent 30.9 s in 'init engine' against 156.0 s on a fresh machine."""
        return launch["run_id"] in self._warm_runs

    @functools.cached_property
    def _warm_runs(self) -> frozenset[str]:
        """The warm launches, found once (each launch against the ends of its engine and profile's)."""
        ends: dict[tuple, list] = {}
        for la in self.launches:
            if la.get("finished_at") is not None:
                ends.setdefault((la["engine"], la["profile"]), []).append((la["finished_at"], la["run_id"]))
        warm = set()
        for la in self.launches:
            start = la.get("started_at")
            if start is not None and any(run_id != la["run_id"] and 0 <= (start - end).total_seconds() <= WARM_GAP_S
                                         for end, run_id in ends.get((la["engine"], la["profile"]), ())):
                warm.add(la["run_id"])
        return frozenset(warm)

    def times(self, model: str, engine: str, *, leave_out: str | None = None) -> tuple[dict, int]:
        """Median seconds of each part (engine_start on a fresh machine, engine_start_warm after
        another launch, gate, each step) over the other ready launches of the same model and
        engine, and how many there were."""
        parts: dict[str, list[float]] = {}
        runs = [la for la in self.launches if la["model"] == model and la["engine"] == engine
                and la["run_id"] != leave_out and la["status"] == "ready"]
        for la in runs:
            start = "engine_start_warm" if self.warm(la) else "engine_start"
            for part, value in ((start, la["ready_s"]), ("gate", la["gate_s"])):
                if value is not None:
                    parts.setdefault(part, []).append(float(value))
            for step, seconds in self.steps.get(la["run_id"], {}).items():
                parts.setdefault(step, []).append(float(seconds))
        return {k: statistics.median(v) for k, v in parts.items()}, len(runs)


def _rows(con, name: str) -> list[dict]:
    cur = con.execute((SQL / name).read_text())
    cols = [d[0] for d in cur.description]
    return [dict(zip(cols, r)) for r in cur.fetchall()]


def from_connection(con) -> History:
    """The launches of a campaign database open on `con` (derive's, as it builds)."""
    launches = _rows(con, "launches.sql")
    flags: dict[str, dict] = {}
    for r in _rows(con, "flags.sql"):
        flags.setdefault(r["run_id"], {})[r["flag"]] = r["flag_value"]
    steps: dict[str, dict] = {}
    for r in _rows(con, "steps.sql"):
        steps.setdefault(r["run_id"], {})[r["step"]] = r["seconds"]
    return History(launches, flags, steps)


def read(campaign_db: Path) -> History:
    """What the campaign database holds; an empty history where there is none yet."""
    if not Path(campaign_db).is_file():
        return History()
    con = duckdb.connect(str(campaign_db), read_only=True)
    try:
        return from_connection(con)
    finally:
        con.close()
