"""The needle gate's settings: params.yaml `gate`, overridden by `profiles.<name>.gate`, then by
`specs.<name>.gate` (`gate_settings`), checked (`settings_problems`, `check_spec_gate`) and made
into a `Gate` (`Gate.from_settings`). The params checks read them here; the run stage's needle
gate (stages/run/needle.py) runs the probes they describe.
"""
from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from stages.core.errors import CampaignError
from stages.core.numbers import is_number

MIN_PROMPT_TOKENS = 256      # the least room a gate prompt needs beside the answer budget


@dataclass(frozen=True)
class Gate:
    """The gate's settings for one spec."""
    depths: tuple[float, ...]
    seed: int
    answer_tokens: int              # the answer budget (max_tokens), reasoning included
    template_margin_tokens: int     # kept free for what the server adds to the prompt
    timeout_base_s: float           # a probe's timeout: this, plus its prompt at the slowest
    min_prefill_tok_s: float        # prefill rate expected, plus the answer budget at the
    min_decode_tok_s: float         # slowest decode rate expected

    @classmethod
    def from_settings(cls, settings: dict[str, Any], where: str = "gate",
                      max_model_len: int | None = None) -> "Gate":
        """The gate of merged settings; a CampaignError names the first problem."""
        problems = settings_problems(settings, where, complete=True)
        if not problems and max_model_len is not None:
            problems = room_problems(settings, where, max_model_len)
        if problems:
            raise CampaignError(f"params.yaml: {problems[0]}")
        return cls(depths=tuple(float(d) for d in settings["depths"]), seed=int(settings["seed"]),
                   answer_tokens=int(settings["answer_tokens"]),
                   template_margin_tokens=int(settings["template_margin_tokens"]),
                   **{k: float(settings[k]) for k in ("timeout_base_s", "min_prefill_tok_s",
                                                      "min_decode_tok_s")})

    def prompt_target(self, max_model_len: int) -> int:
        """The most prompt tokens a probe may send to a server of `max_model_len`."""
        return max_model_len - self.answer_tokens - self.template_margin_tokens

    def timeout_s(self, prompt_tokens: int) -> float:
        """How long a probe of `prompt_tokens` may take before it is a failed probe."""
        return round(self.timeout_base_s + prompt_tokens / self.min_prefill_tok_s
                     + self.answer_tokens / self.min_decode_tok_s, 1)


SETTINGS = tuple(f.name for f in fields(Gate))
_INTEGERS = ("seed", "answer_tokens", "template_margin_tokens")
_RATES = ("timeout_base_s", "min_prefill_tok_s", "min_decode_tok_s")


def gate_layers(params: dict[str, Any], spec_name: str) -> list[tuple[str, Any]]:
    """(where, mapping) of each layer of a spec's gate settings, the later overriding the earlier."""
    spec = (params.get("specs") or {}).get(spec_name) or {}
    prof = (params.get("profiles") or {}).get(spec.get("profile")) if isinstance(spec, dict) else None
    layers = [("gate", params.get("gate"))]
    if isinstance(prof, dict) and "gate" in prof:
        layers.append((f"profiles.{spec.get('profile')}.gate", prof["gate"]))
    if isinstance(spec, dict) and "gate" in spec:
        layers.append((f"specs.{spec_name}.gate", spec["gate"]))
    return layers


def gate_settings(params: dict[str, Any], spec_name: str) -> dict[str, Any]:
    """A spec's gate settings: `gate`, then its profile's `gate`, then its own `gate`."""
    merged: dict[str, Any] = {}
    for _, layer in gate_layers(params, spec_name):
        merged.update(layer if isinstance(layer, dict) else {})
    return merged


def settings_problems(layer: Any, where: str, *, complete: bool = False) -> list[str]:
    """Problems of one layer of gate settings (every setting present, when `complete`)."""
    if not isinstance(layer, dict):
        return [f"{where} must be a mapping of {', '.join(SETTINGS)}"]
    problems = [f"{where}.{k} is not a gate setting ({', '.join(SETTINGS)})"
                for k in layer if k not in SETTINGS]
    if complete:
        problems += [f"{where} is missing {k}" for k in SETTINGS if k not in layer]
    depths = layer.get("depths", [0.5])
    if not isinstance(depths, list) or not depths or not all(is_number(d) and 0 <= d <= 1 for d in depths):
        problems.append(f"{where}.depths must be a list of shares between 0 and 1, not {depths!r}")
    for key in _INTEGERS:
        v = layer.get(key, 1)
        low = 0 if key != "answer_tokens" else 1
        if not isinstance(v, int) or isinstance(v, bool) or v < low:
            kind = "a positive integer" if low else "a whole number, zero or more"
            problems.append(f"{where}.{key} must be {kind}, not {v!r}")
    for key in _RATES:
        v = layer.get(key, 1)
        if not is_number(v) or v <= 0:
            problems.append(f"{where}.{key} must be a positive number, not {v!r}")
    return problems


def room_problems(settings: dict[str, Any], where: str, max_model_len: int) -> list[str]:
    """The answer budget and margin must leave a prompt of MIN_PROMPT_TOKENS in the context."""
    answer, margin = settings["answer_tokens"], settings["template_margin_tokens"]
    if max_model_len - answer - margin >= MIN_PROMPT_TOKENS:
        return []
    return [f"{where}: answer_tokens ({answer:,}) and template_margin_tokens ({margin:,}) leave no "
            f"room for a gate prompt in the server's maximum context of {max_model_len:,} tokens "
            f"(the prompt needs {MIN_PROMPT_TOKENS:,})"]


def check_spec_gate(params: dict[str, Any], spec_name: str, max_model_len: int | None) -> list[str]:
    """Problems of a spec's own gate layers (its profile's, its own), then of the room the merged
    settings leave for a prompt. The `gate` block itself is checked once, with `settings_problems`."""
    problems = [p for where, layer in gate_layers(params, spec_name)[1:]
                for p in settings_problems(layer, where)]
    if problems or not max_model_len:
        return problems
    return room_problems(gate_settings(params, spec_name), f"specs.{spec_name}", max_model_len)
