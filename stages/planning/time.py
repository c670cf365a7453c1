"""How long a spec will hold its GPUs, before it is launched: engine start, the gate, and each
benchmark step, from what earlier launches of the same model and engine took where there are some,
else from the rates the profile names (params.yaml `profiles.<name>.plan.rates`).

A step is what the run stage runs after the gate: one benchmark point (`<workload>__cNN`: its
concurrency times prompts_per_user requests) or one multi-turn workload (named after it). From
rates, a point takes its prompt tokens at the prefill rate, one request after another, plus its
output tokens at the per-sequence decode rate once per wave of users, plus the step's fixed cost.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from stages.core.multiturn_shapes import KINDS, workload_from_params


@dataclass(frozen=True)
class Rates:
    engine_start_s: float         # on a fresh machine
    prefill_tok_s: float
    decode_tok_s: float           # one sequence's output tokens a second
    step_overhead_s: float        # a step's client set-up, result file and gap
    engine_start_warm_s: float    # right after another launch on the machine (its caches warm)

    @classmethod
    def from_params(cls, rates: dict) -> "Rates":
        given = {**rates, "engine_start_warm_s": rates.get("engine_start_warm_s", rates["engine_start_s"])}
        return cls(**{k: float(given[k]) for k in cls.__dataclass_fields__})


@dataclass(frozen=True)
class Step:
    name: str
    prompt_tokens: int            # every request's prompt tokens, summed
    output_rounds: int            # waves of decoding, one after another
    output_tokens: int            # a request's output tokens

    def seconds(self, r: Rates) -> float:
        return (self.prompt_tokens / r.prefill_tok_s + self.output_rounds * self.output_tokens
                / r.decode_tok_s + r.step_overhead_s)


def steps(workloads: dict[str, dict], names: list[str]) -> list[Step]:
    """The steps a spec's workloads make, in the order the run stage runs them."""
    out = []
    for name in names:
        w = workloads[name]
        if w.get("kind") in KINDS:
            mt = workload_from_params(name, w)
            if mt.kind == "ramp":
                prompts = sum(mt.targets()) * mt.sessions
            else:
                grow = mt.turn_tokens + mt.output_tokens
                prompts = mt.sessions * sum(mt.shared_history_tokens + t * grow for t in range(mt.turns))
            out.append(Step(name, prompts, mt.turns, mt.output_tokens))
            continue
        for c in w.get("concurrency") or [1]:
            n = c * int(w.get("prompts_per_user", 1))
            out.append(Step(f"{name}__c{c:02d}", n * int(w["prompt_tokens"]), math.ceil(n / c),
                            int(w["output_tokens"])))
    return out


@dataclass
class Estimate:
    engine_start_s: float
    gate_s: float
    steps_s: dict[str, float]
    basis: dict[str, str] = field(default_factory=dict)    # part -> "history" | "rates"

    @property
    def total_s(self) -> float:
        return self.engine_start_s + self.gate_s + sum(self.steps_s.values())


def estimate(plan_steps: list[Step], rates: Rates, *, gate_probes: int, gate_prompt_tokens: int,
             gate_answer_tokens: int, history: dict[str, float] | None = None,
             warm: bool = False) -> Estimate:
    """`history`: seconds earlier launches took, by part ("engine_start", "engine_start_warm",
    "gate", a step's name); a part it lacks comes from the rates. `warm`: the launch follows
    another on the same machine, so its engine starts as such launches did."""
    history = history or {}
    basis = {}

    def pick(part: str, from_rates: float) -> float:
        if part in history:
            basis[part] = "history"
            return float(history[part])
        basis[part] = "rates"
        return from_rates

    gate = gate_probes * (gate_prompt_tokens / rates.prefill_tok_s + gate_answer_tokens / rates.decode_tok_s)
    start = (pick("engine_start_warm", rates.engine_start_warm_s) if warm
             else pick("engine_start", rates.engine_start_s))
    return Estimate(engine_start_s=start, gate_s=pick("gate", gate),
                    steps_s={s.name: pick(s.name, s.seconds(rates)) for s in plan_steps}, basis=basis)
