"""The needle-in-a-haystack gate: is the launched engine still answering from its context?

A seeded haystack of filler sentences, a needle ("The access code is N.") planted at a given depth,
and a question at the end. The prompt is sized with the model's own tokenizer to a share of the
server's maximum context. A probe passes when the code appears in the answer. The gate's score is
the share of probes that passed. On dummy weights every probe fails, and that is the true result.
"""
from __future__ import annotations

import json
import random
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import httpx

_WORDS = ("river", "stone", "lantern", "harbour", "meadow", "copper", "signal", "orchard", "quiet",
          "market", "winter", "ledger", "compass", "thread", "valley", "engine", "paper", "garden")
QUESTION = "\n\nWhat is the access code mentioned in the text above? Answer with the number only.\n"


def needle_sentence(code: str) -> str:
    return f"The access code is {code}."


@dataclass(frozen=True)
class Probe:
    key: int
    depth: float
    prompt_tokens: int
    ok: bool
    latency_s: float
    answer: str


def filler(rng: random.Random, n: int) -> list[str]:
    return [" ".join(rng.choice(_WORDS) for _ in range(rng.randint(6, 12))).capitalize() + "."
            for _ in range(n)]


def build_prompt(*, tokenizer, target_tokens: int, depth: float, code: str, seed: int) -> tuple[str, int]:
    """A prompt of at most `target_tokens` tokens (by `tokenizer`) with the needle at `depth`."""
    rng = random.Random(seed)
    needle = needle_sentence(code)
    sentences = filler(rng, max(8, target_tokens // 4))

    def compose(n: int) -> str:
        body = sentences[:n]
        at = round(depth * len(body))
        return " ".join(body[:at] + [needle] + body[at:]) + QUESTION

    def count(n: int) -> int:
        return len(tokenizer.encode(compose(n)).ids)

    while count(len(sentences)) < target_tokens:  # make sure the haystack can reach the target
        sentences += filler(rng, len(sentences))
    lo, hi = 1, len(sentences)
    while lo < hi:  # largest sentence count that stays within the target
        mid = (lo + hi + 1) // 2
        if count(mid) <= target_tokens:
            lo = mid
        else:
            hi = mid - 1
    return compose(lo), count(lo)


def probe(*, client: httpx.Client, base_url: str, model: str, prompt: str, prompt_tokens: int,
          key: int, depth: float, code: str, max_tokens: int) -> Probe:
    t0 = time.perf_counter()
    resp = client.post(f"{base_url}/v1/completions", json={
        "model": model, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0.0})
    latency = time.perf_counter() - t0
    resp.raise_for_status()
    body = resp.json()
    answer = body["choices"][0]["text"]
    served_tokens = (body.get("usage") or {}).get("prompt_tokens") or prompt_tokens
    return Probe(key=key, depth=depth, prompt_tokens=served_tokens, ok=code in answer,
                 latency_s=round(latency, 3), answer=answer)


def run_gate(*, base_url: str, model: str, tokenizer_file: Path, max_model_len: int,
             depths: list[float], context_fraction: float, output_tokens: int, seed: int,
             log_path: Path, progress=None, timeout_s: float = 600.0) -> float:
    """Run one probe per depth, write niah.log line by line, return the score."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(tokenizer_file))
    rng = random.Random(seed)
    code = str(rng.randint(1_000_000, 9_999_999))
    target = int(max_model_len * context_fraction) - output_tokens
    passed = 0
    with open(log_path, "x") as log, httpx.Client(timeout=timeout_s) as client:
        for i, depth in enumerate(depths):
            prompt, n = build_prompt(tokenizer=tokenizer, target_tokens=target, depth=depth,
                                     code=code, seed=seed + i)
            p = probe(client=client, base_url=base_url, model=model, prompt=prompt, prompt_tokens=n,
                      key=0, depth=depth, code=code, max_tokens=output_tokens)
            passed += p.ok
            log.write(json.dumps(asdict(p), ensure_ascii=False) + "\n")
            log.flush()
            if progress:
                progress(f"needle at depth {depth:.0%}: {p.prompt_tokens} tokens, "
                         f"{'found' if p.ok else 'missed'} in {p.latency_s:.1f} s")
        score = passed / len(depths) if depths else 0.0
        log.write(f"GATE niah score= {score}\n")
    return score
