"""The needle-in-a-haystack gate: is the launched engine still answering from its context?

A seeded haystack of filler sentences, a needle ("The access code is N.") planted at a given depth,
and a question at the end. The prompt is sized with the model's own tokenizer to the server's
maximum context less the answer budget and a small margin. The answer is the text after the
model's reasoning block (`</think>`), when it has one. A probe passes when the code appears in the
answer; a probe that times out, gets an HTTP or connection error, or whose reasoning never closes
is a failed probe, its reason written in niah.log. The gate's score is the share of probes that
passed. On dummy weights every probe fails, and that is the true result.

The gate's settings (params.yaml `gate`, a profile's and a spec's) are read and checked by
stages/core/gate.py.
"""
from __future__ import annotations

import json
import random
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import httpx

from stages.core.config import CampaignError
from stages.core.gate import Gate
from stages.core.secrets import redact_text

_WORDS = ("river", "stone", "lantern", "harbour", "meadow", "copper", "signal", "orchard", "quiet",
          "market", "winter", "ledger", "compass", "thread", "valley", "engine", "paper", "garden")
QUESTION = "\n\nWhat is the access code mentioned in the text above? Answer with the number only.\n"
THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
REASON_CHARS = 300           # a failure reason is cut to this many characters


def needle_sentence(code: str) -> str:
    return f"The access code is {code}."


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


def gate_key(i: int) -> str:
    """The name a prompt bank keeps the gate's i-th probe prompt under."""
    return f"gate-{i}"


def gate_needle(gate: Gate, max_model_len: int) -> tuple[str, int]:
    """The gate's needle code and the prompt size its probes aim at."""
    return str(random.Random(gate.seed).randint(1_000_000, 9_999_999)), gate.prompt_target(max_model_len)


def run_gate(*, base_url: str, model: str, tokenizer_file: Path, max_model_len: int, gate: Gate,
             log_path: Path, progress=None, prompts=None) -> float:
    """Run one probe per depth, write niah.log line by line, return the score. A failed probe
    counts as missed; the gate goes on to the next probe and never raises for it. `prompts`: a
    PromptBank (stages/run/prompts.py) holding the probes' prompts built while the engine started
    (gate_jobs); a probe whose prompt it does not hold builds it here."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(tokenizer_file))
    code, target = gate_needle(gate, max_model_len)
    passed = 0
    with open(log_path, "x") as log, httpx.Client() as client:
        for i, depth in enumerate(gate.depths):
            if prompts is not None and gate_key(i) in prompts:
                prompt, n = prompts.take(gate_key(i))
            else:
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
