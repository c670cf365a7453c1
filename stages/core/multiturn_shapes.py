"""The multi-turn workloads' shapes as params.yaml gives them (`kind: ramp` or `kind: agents`):
`workload_from_params` reads and checks one into a `Workload`, whose methods say how long it grows
and where its files go. The params checks read them here; the run stage's client
(stages/run/multiturn.py) sends them.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from stages.core.errors import CampaignError

KINDS = ("ramp", "agents")


@dataclass(frozen=True)
class Workload:
    name: str
    kind: str
    sessions: int
    turns: int
    output_tokens: int
    seed: int
    params: dict[str, Any]
    start_tokens: int = 0             # ramp
    end_tokens: int = 0               # ramp
    shared_history_tokens: int = 0    # agents
    turn_tokens: int = 0              # agents

    def point_id(self, turn: int | None = None) -> str:
        """Where this workload's /metrics snapshots go: per turn for the ramp, whole for agents."""
        if self.kind == "ramp":
            return f"{self.name}__t{turn:02d}"
        return f"{self.name}__s{self.sessions:02d}"

    @property
    def log_name(self) -> str:
        return "ramp.log" if self.kind == "ramp" else f"agents.{self.name}.jsonl"

    def targets(self) -> list[int]:
        """The prompt size each ramp turn aims for, evenly spaced from start to end."""
        if self.turns == 1:
            return [self.end_tokens]
        step = (self.end_tokens - self.start_tokens) / (self.turns - 1)
        return [round(self.start_tokens + step * i) for i in range(self.turns)]


def _positive(name: str, spec: dict, key: str, default: int | None = None) -> int:
    value = spec.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise CampaignError(f"params.yaml: workloads {name}.{key} must be a positive integer, not {value!r}")
    return value


def workload_from_params(name: str, spec: dict[str, Any], *, seed: int = 3000,
                         max_model_len: int | None = None) -> Workload:
    """A multi-turn workload from its params entry, checked (one-line errors)."""
    kind = spec.get("kind")
    if kind not in KINDS:
        raise CampaignError(f"params.yaml: workloads {name}.kind must be one of {', '.join(KINDS)}, not {kind!r}")
    common = dict(name=name, kind=kind, sessions=_positive(name, spec, "sessions", 1),
                  turns=_positive(name, spec, "turns"), output_tokens=_positive(name, spec, "output_tokens"),
                  seed=int(spec.get("seed", seed)), params=dict(spec))
    if kind == "ramp":
        w = Workload(**common, start_tokens=_positive(name, spec, "start_tokens"),
                     end_tokens=_positive(name, spec, "end_tokens"))
        if w.end_tokens < w.start_tokens:
            raise CampaignError(f"params.yaml: workloads {name}: end_tokens is below start_tokens")
        longest = w.end_tokens
    else:
        w = Workload(**common, shared_history_tokens=_positive(name, spec, "shared_history_tokens"),
                     turn_tokens=_positive(name, spec, "turn_tokens"))
        longest = w.shared_history_tokens + w.turns * (w.turn_tokens + w.output_tokens)
    if max_model_len and longest + w.output_tokens > max_model_len:
        raise CampaignError(f"params.yaml: workloads {name} grows to about {longest + w.output_tokens:,} "
                            f"tokens, beyond the server's maximum context of {max_model_len:,}")
    return w
