"""The needle-in-a-haystack gate: is the launched engine still answering from its context?

A seeded haystack of filler sentences, a needle ("The access code is N.") planted at a given depth,
and a question at the end. The prompt is sized with the model's own tokenizer to the server's
maximum context less the answer budget and a small margin. The answer is the text after the
model's reasoning block (`</think>`), when it has one. A probe passes when the code appears in the
answer; a probe that times out, gets an HTTP or connection error, or whose reasoning never closes
is a failed probe, its reason written in niah.log. The gate's score is the share of probes that
passed. On dummy weights every probe fails, and that is the true result.

The gate's settings are params.yaml `gate`, overridden by `profiles.<name>.gate`, then by
`specs.<name>.gate` (`gate_settings`); `Gate.from_settings` checks them.
"""
from __future__ import annotations

import json
import random
import time
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import httpx

from stages.core.config import CampaignError
from stages.core.secrets import redact_text

_WORDS = ("river", "stone", "lantern", "harbour", "meadow", "copper", "signal", "orchard", "quiet",
          "market", "winter", "ledger", "compass", "thread", "valley", "engine", "paper", "garden")
QUESTION = "\n\nWhat is the access code mentioned in the text above? Answer with the number only.\n"
THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
MIN_PROMPT_TOKENS = 256      # the least room a gate prompt needs beside the answer budget
REASON_CHARS = 300           # a failure reason is cut to this many characters


def needle_sentence(code: str) -> str:
    return f"The access code is {code}."


# ---------------------------------------------------------------------------------- settings

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


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def settings_problems(layer: Any, where: str, *, complete: bool = False) -> list[str]:
    """Problems of one layer of gate settings (every setting present, when `complete`)."""
    if not isinstance(layer, dict):
        return [f"{where} must be a mapping of {', '.join(SETTINGS)}"]
    problems = [f"{where}.{k} is not a gate setting ({', '.join(SETTINGS)})"
                for k in layer if k not in SETTINGS]
    if complete:
        problems += [f"{where} is missing {k}" for k in SETTINGS if k not in layer]
    depths = layer.get("depths", [0.5])
    if not isinstance(depths, list) or not depths or not all(_number(d) and 0 <= d <= 1 for d in depths):
        problems.append(f"{where}.depths must be a list of shares between 0 and 1, not {depths!r}")
    for key in _INTEGERS:
        v = layer.get(key, 1)
        low = 0 if key != "answer_tokens" else 1
        if not isinstance(v, int) or isinstance(v, bool) or v < low:
            kind = "a positive integer" if low else "a whole number, zero or more"
            problems.append(f"{where}.{key} must be {kind}, not {v!r}")
    for key in _RATES:
        v = layer.get(key, 1)
        if not _number(v) or v <= 0:
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


# ---------------------------------------------------------------------------------- the prompt

def filler(rng: random.Random, n: int) -> list[str]:
    return [" ".join(rng.choice(_WORDS) for _ in range(rng.randint(6, 12))).capitalize() + "."
            for _ in range(n)]


def build_prompt(*, tokenizer, target_tokens: int, depth: float, code: str, seed: int,
                 max_encodes: int = 8) -> tuple[str, int]:
    """A prompt of at most `target_tokens` tokens (by `tokenizer`) with the needle at `depth`,
    within a sentence or so of the target. Sized from a sample's tokens per sentence, then
    refined with a few whole-prompt encodes, so a million-token prompt takes seconds."""
    rng = random.Random(seed)
    needle = needle_sentence(code)
    sentences = filler(rng, 64)

    def compose(n: int) -> str:
        body = sentences[:n]
        at = round(depth * len(body))
        return " ".join(body[:at] + [needle] + body[at:]) + QUESTION

    def count(n: int) -> int:
        while len(sentences) < n:   # the same rng stream, however it is extended
            sentences.extend(filler(rng, max(64, n - len(sentences))))
        return len(tokenizer.encode(compose(n)).ids)

    base = count(0)
    if base > target_tokens:
        raise CampaignError(f"a gate prompt of {target_tokens:,} tokens has no room for the needle "
                            f"and the question ({base:,} tokens)")
    per = max((count(len(sentences)) - base) / len(sentences), 1.0)   # tokens per sentence
    best, n = (0, base), max(0, int((target_tokens - base) / per))
    for _ in range(max_encodes):
        got = count(n)
        if got <= target_tokens and got >= best[1]:
            best = (n, got)
        if got <= target_tokens and target_tokens - got < per:
            break
        if n:
            per = max((got - base) / n, 1.0)
        step = int((target_tokens - got) / per)
        n = max(0, n + (step if step else -1 if got > target_tokens else 1))
    return compose(best[0]), best[1]


# ---------------------------------------------------------------------------------- a probe

@dataclass(frozen=True)
class Probe:
    """One probe, as a line of niah.log."""
    key: int
    depth: float
    prompt_tokens: int
    ok: bool
    latency_s: float
    answer: str                     # the text after the reasoning block
    failure: str | None             # why the probe got no answer to judge; None when it got one
    reasoning_tokens: int | None    # length of the reasoning block (model's tokenizer); None: none
    timeout_s: float


def split_reasoning(text: str) -> tuple[str | None, str | None]:
    """(reasoning, answer) of a completion: the answer is the text after the last `</think>`;
    a reasoning block that never closes leaves no answer; text with no block is all answer."""
    if THINK_CLOSE in text:
        reasoning, _, answer = text.rpartition(THINK_CLOSE)
        return reasoning.split(THINK_OPEN, 1)[-1], answer
    if THINK_OPEN in text:
        return text.split(THINK_OPEN, 1)[1], None
    return None, text


def _reason(text: str) -> str:
    one_line = " ".join(redact_text(text).split())
    return one_line[:REASON_CHARS] + ("..." if len(one_line) > REASON_CHARS else "")


def probe(*, client: httpx.Client, base_url: str, model: str, prompt: str, prompt_tokens: int,
          key: int, depth: float, code: str, max_tokens: int, timeout_s: float,
          tokenizer=None) -> Probe:
    """One probe. A timeout, an HTTP or connection error or an answer that cannot be read is a
    failed probe with its reason; it never raises for them."""
    t0 = time.perf_counter()
    failure, reasoning, answer, served = None, None, "", prompt_tokens
    try:
        resp = client.post(f"{base_url}/v1/completions",
                           timeout=httpx.Timeout(timeout_s, connect=min(timeout_s, 30.0)),
                           json={"model": model, "prompt": prompt, "max_tokens": max_tokens,
                                 "temperature": 0.0})
        resp.raise_for_status()
        body = resp.json()
        text = body["choices"][0]["text"]
        served = (body.get("usage") or {}).get("prompt_tokens") or prompt_tokens
        reasoning, said = split_reasoning(str(text))
        if said is None:
            failure = f"reasoning block not closed within the answer budget of {max_tokens:,} tokens"
        answer = said or ""
    except httpx.TimeoutException as exc:
        failure = f"no answer within the probe's timeout of {timeout_s:,} s ({type(exc).__name__})"
    except httpx.HTTPStatusError as exc:
        failure = f"HTTP {exc.response.status_code} from the server: {exc.response.text}"
    except httpx.HTTPError as exc:
        failure = f"{type(exc).__name__}: {exc}"
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        failure = f"response not understood: {type(exc).__name__}: {exc}"
    latency = time.perf_counter() - t0
    n_reasoning = None
    if reasoning is not None:
        n_reasoning = len(tokenizer.encode(reasoning).ids) if tokenizer is not None else None
    return Probe(key=key, depth=depth, prompt_tokens=int(served), ok=failure is None and code in answer,
                 latency_s=round(latency, 3), timeout_s=timeout_s,
                 failure=None if failure is None else _reason(failure),
                 reasoning_tokens=n_reasoning, answer=answer)


def run_gate(*, base_url: str, model: str, tokenizer_file: Path, max_model_len: int, gate: Gate,
             log_path: Path, progress=None) -> float:
    """Run one probe per depth, write niah.log line by line, return the score. A failed probe
    counts as missed; the gate goes on to the next probe and never raises for it."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(tokenizer_file))
    code = str(random.Random(gate.seed).randint(1_000_000, 9_999_999))
    target = gate.prompt_target(max_model_len)
    passed = 0
    with open(log_path, "x") as log, httpx.Client() as client:
        for i, depth in enumerate(gate.depths):
            prompt, n = build_prompt(tokenizer=tokenizer, target_tokens=target, depth=depth,
                                     code=code, seed=gate.seed + i)
            if progress:
                progress(f"needle at depth {depth:.0%}: sending {n} tokens, timeout {gate.timeout_s(n):.0f} s")
            p = probe(client=client, base_url=base_url, model=model, prompt=prompt, prompt_tokens=n,
                      key=0, depth=depth, code=code, max_tokens=gate.answer_tokens,
                      timeout_s=gate.timeout_s(n), tokenizer=tokenizer)
            passed += p.ok
            log.write(json.dumps(asdict(p), ensure_ascii=False) + "\n")
            log.flush()
            if progress:
                outcome = p.failure or ("found" if p.ok else "missed")
                progress(f"needle at depth {depth:.0%}: {p.prompt_tokens} tokens, "
                         f"{outcome} in {p.latency_s:.1f} s")
        score = passed / len(gate.depths) if gate.depths else 0.0
        log.write(f"GATE niah score= {score}\n")
    return score
