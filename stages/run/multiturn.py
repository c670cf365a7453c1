"""Multi-turn workloads: the ramp and agent sessions, sent by our own streaming client.

`vllm bench serve` sends independent requests; these workloads are conversations, where each
request re-sends everything before it:

  ramp    one conversation (or a few in lockstep) growing from `start_tokens` to `end_tokens` over
          `turns` turns. Turn 1 plants a needle (an access code); every turn ends with the question
          and the answer is checked. The prefix cache serves the history, so the turn's wait is
          what a user of a long conversation sees.
  agents  `sessions` concurrent sessions that each open with the same shared history of
          `shared_history_tokens` and grow by `turn_tokens` (plus the previous answer) a turn,
          `output_tokens` out per turn. Built to be served from the prefix cache.

Prompts are sized with the model's own tokenizer and seeded, so a rerun sends the same text (and a
new engine has nothing cached). Every request streams; the client times the first token, the last
token and the longest gap between chunks. The raw format (`ramp.log`, `agents.<workload>.jsonl`,
the /metrics snapshots in `bench/`) is documented in DESIGN.md's raw run folder table and read
by `stages/ingest/parsers/turns.py`.

Example:
    from stages.core.multiturn_shapes import workload_from_params
    from stages.run import multiturn
    w = workload_from_params("ramp", params_workloads["ramp"])
    multiturn.run_workload(w, base_url=..., model=..., tokenizer_file=..., folder=run_folder)
"""
from __future__ import annotations

import asyncio
import json
import random
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

import httpx

from stages.run.bench_client import scrape_metrics
from stages.core.multiturn_shapes import Workload
from stages.core.progress import Progress
from stages.run.needle import QUESTION, filler, needle_sentence

NEXT_STEP = "\n\nContinue the task with the notes above. Reply with the next step.\n"
ANSWER_CHARS = 200


# ---------------------------------------------------------------- prompt text

class Text:
    """Seeded filler text sized in the model's tokens. Sentences are counted one by one (with the
    space that joins them), so a sized block never needs the whole prompt re-tokenized."""

    def __init__(self, tokenizer, seed: int):
        self.tokenizer = tokenizer
        self.rng = random.Random(seed)

    def block(self, tokens: int) -> tuple[str, int]:
        """About `tokens` tokens of filler (at least one sentence), and its count. Sentences are
        counted one by one, which overcounts the joined text by a few percent; one count of the
        whole block corrects that."""
        text = self._sentences(tokens)
        actual = self.count(text)
        if actual < tokens * 0.98:
            text = f"{text} {self._sentences(round((tokens - actual) * 1.05))}"
            actual = self.count(text)
        return text, actual

    def _sentences(self, tokens: int) -> str:
        sentences: list[str] = []
        total = 0
        while total < tokens:
            batch = filler(self.rng, max(8, (tokens - total) // 8))
            for s, enc in zip(batch, self.tokenizer.encode_batch([" " + s for s in batch])):
                if total + len(enc.ids) > tokens and sentences:
                    return " ".join(sentences)
                sentences.append(s)
                total += len(enc.ids)
        return " ".join(sentences)

    def count(self, text: str) -> int:
        return len(self.tokenizer.encode(text).ids)


# ---------------------------------------------------------------- the streaming client

@dataclass
class Reply:
    text: str = ""
    input_tokens: int | None = None
    output_tokens: int = 0
    ttft_s: float | None = None
    latency_s: float | None = None
    max_itl_s: float | None = None
    error: str = ""


async def complete(client: httpx.AsyncClient, *, base_url: str, model: str, prompt: str,
                   max_tokens: int) -> Reply:
    """One streamed completion, timed from send to the first and the last token."""
    reply = Reply()
    chunks: list[float] = []
    t0 = time.perf_counter()
    body = {"model": model, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0.0,
            "ignore_eos": True, "stream": True, "stream_options": {"include_usage": True}}
    try:
        async with client.stream("POST", f"{base_url}/v1/completions", json=body) as resp:
            if resp.status_code != 200:
                detail = (await resp.aread()).decode("utf-8", "replace")[:200]
                raise httpx.HTTPStatusError(f"HTTP {resp.status_code}: {detail}", request=resp.request,
                                            response=resp)
            async for line in resp.aiter_lines():
                if not line.startswith("data: ") or line == "data: [DONE]":
                    continue
                data = json.loads(line[6:])
                text = "".join(c.get("text") or "" for c in data.get("choices") or [])
                if text:
                    chunks.append(time.perf_counter() - t0)
                    reply.text += text
                usage = data.get("usage")
                if usage:
                    reply.input_tokens = usage.get("prompt_tokens")
                    reply.output_tokens = usage.get("completion_tokens") or 0
    except (httpx.HTTPError, json.JSONDecodeError, OSError) as exc:
        reply.error = f"{type(exc).__name__}: {exc}"[:300]
    if chunks:
        reply.ttft_s, reply.latency_s = chunks[0], chunks[-1]
        if len(chunks) > 1:
            reply.max_itl_s = max(b - a for a, b in zip(chunks, chunks[1:]))
        if not reply.output_tokens:
            reply.output_tokens = len(chunks)
    if reply.error:
        reply.output_tokens = 0
    return reply


# ---------------------------------------------------------------- writing the raw file

@dataclass
class Log:
    path: Path
    workload: Workload
    started: float = field(default_factory=time.perf_counter)
    requests: int = 0
    failed: int = 0

    def write(self, obj: dict[str, Any]) -> None:
        with open(self.path, "a") as f:
            f.write(json.dumps(obj, ensure_ascii=False) + "\n")

    def start(self) -> None:
        w = self.workload
        self.started = time.perf_counter()
        self.write({"event": "workload", "workload": w.name, "kind": w.kind, "sessions": w.sessions,
                    "turns": w.turns, "output_tokens": w.output_tokens, "seed": w.seed, "params": w.params,
                    "started_at": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")})

    def request(self, *, session: int, turn: int, target_tokens: int, sent_at: float, reply: Reply,
                needle_ok: bool | None = None) -> None:
        w = self.workload
        self.write({
            "event": "request", "workload": w.name, "kind": w.kind,
            "point_id": w.point_id(turn), "session": session, "turn": turn,
            "request_idx": self.requests, "target_tokens": target_tokens,
            "input_tokens": reply.input_tokens, "output_tokens": reply.output_tokens,
            "ttft_s": _round(reply.ttft_s), "latency_s": _round(reply.latency_s),
            "max_itl_s": _round(reply.max_itl_s), "started_s": _round(sent_at - self.started),
            "needle_ok": needle_ok, "answer": reply.text[:ANSWER_CHARS] if w.kind == "ramp" else None,
            "error": reply.error})
        self.requests += 1
        self.failed += bool(reply.error)

    def done(self) -> None:
        self.write({"event": "done", "workload": self.workload.name, "requests": self.requests,
                    "failed": self.failed, "wall_s": _round(time.perf_counter() - self.started)})


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 6)


# ---------------------------------------------------------------- the two workloads

@dataclass
class Conversation:
    prompt: str = ""          # everything sent so far, answers included
    tokens: int = 0           # its size in tokens (as the server counted it, where known)


async def _turn(client, log: Log, conv: Conversation, *, base_url: str, model: str, session: int,
                turn: int, new_text: str, tail: str, target: int, max_tokens: int,
                code: str | None) -> Reply:
    prompt = conv.prompt + new_text + tail
    sent_at = time.perf_counter()
    reply = await complete(client, base_url=base_url, model=model, prompt=prompt, max_tokens=max_tokens)
    log.request(session=session, turn=turn, target_tokens=target, sent_at=sent_at, reply=reply,
                needle_ok=(code in reply.text) if code is not None and not reply.error else None)
    conv.prompt = prompt + reply.text + "\n\n"
    if reply.input_tokens is not None:
        conv.tokens = reply.input_tokens + reply.output_tokens + 1
    return reply


async def _ramp(w: Workload, *, client, log: Log, base_url: str, model: str, tokenizer,
                snapshot: Callable[[str, str], None], alive: Callable[[], bool], say: Progress) -> None:
    texts = [Text(tokenizer, w.seed + s) for s in range(w.sessions)]
    codes = [str(random.Random(w.seed * 31 + s).randint(1_000_000, 9_999_999)) for s in range(w.sessions)]
    convs = [Conversation() for _ in range(w.sessions)]
    question = texts[0].count(QUESTION)
    needle = texts[0].count(" " + needle_sentence(codes[0]))
    for turn, target in enumerate(w.targets(), start=1):
        if not alive():
            say(f"{w.name}: engine no longer running, stopping at turn {turn}")
            return
        new = []
        for s, conv in enumerate(convs):
            body, _ = texts[s].block(max(1, target - conv.tokens - question - (needle if turn == 1 else 0)))
            if turn == 1:
                half = body.find(". ", len(body) // 2) + 1 or len(body)
                body = f"{body[:half]} {needle_sentence(codes[s])}{body[half:]}"
            new.append(body if turn == 1 else " " + body)
        snapshot(w.point_id(turn), "before")
        replies = await asyncio.gather(*(
            _turn(client, log, conv, base_url=base_url, model=model, session=s, turn=turn,
                  new_text=new[s], tail=QUESTION, target=target, max_tokens=w.output_tokens, code=codes[s])
            for s, conv in enumerate(convs)))
        snapshot(w.point_id(turn), "after")
        wait = max((r.ttft_s or 0.0) for r in replies)
        found = sum(codes[s] in r.text for s, r in enumerate(replies) if not r.error)
        say(f"{w.name} turn {turn}/{w.turns}: {max(c.tokens for c in convs):,} tokens, longest wait "
            f"{wait:.2f} s, needle found {found}/{w.sessions}")


async def _agents(w: Workload, *, client, log: Log, base_url: str, model: str, tokenizer,
                  snapshot: Callable[[str, str], None], alive: Callable[[], bool], say: Progress) -> None:
    shared, shared_tokens = Text(tokenizer, w.seed).block(w.shared_history_tokens)
    tail = len(tokenizer.encode(NEXT_STEP).ids)

    async def session(s: int) -> None:
        text = Text(tokenizer, w.seed + 1 + s)
        conv = Conversation(prompt=shared, tokens=shared_tokens)
        for turn in range(1, w.turns + 1):
            if not alive():
                return
            body, n = text.block(w.turn_tokens)
            reply = await _turn(client, log, conv, base_url=base_url, model=model, session=s, turn=turn,
                                new_text=" " + body, tail=NEXT_STEP, target=conv.tokens + n + tail,
                                max_tokens=w.output_tokens, code=None)
            say(f"{w.name} session {s + 1}/{w.sessions} turn {turn}/{w.turns}: "
                f"{reply.input_tokens or 0:,} tokens in, first token after {reply.ttft_s or 0:.2f} s"
                + (f" ({reply.error})" if reply.error else ""))

    snapshot(w.point_id(), "before")
    await asyncio.gather(*(session(s) for s in range(w.sessions)))
    snapshot(w.point_id(), "after")


def run_workload(w: Workload, *, base_url: str, model: str, tokenizer_file: Path, folder: Path,
                 alive: Callable[[], bool] = lambda: True, progress: Progress | None = None,
                 timeout_s: float = 3600.0, window: Callable[[float, float], None] | None = None) -> Log:
    """Run one multi-turn workload against a ready server; append its lines to the run folder's
    log and write its /metrics snapshots under `bench/`. Returns the log (requests, failures).
    `window(sent, ended)` is told when its sessions began and the last of them ended (wall-clock
    epoch seconds), the tokenizer's loading left out."""
    from tokenizers import Tokenizer

    say = progress or (lambda _msg: None)
    tokenizer = Tokenizer.from_file(str(tokenizer_file))
    bench_dir = folder / "bench"
    bench_dir.mkdir(exist_ok=True)
    log = Log(folder / w.log_name, w)
    sync = httpx.Client(timeout=60.0)

    def snapshot(point_id: str, phase: str) -> None:
        try:
            scrape_metrics(sync, base_url, bench_dir / f"{point_id}.metrics.{phase}.txt")
        except httpx.HTTPError as exc:
            say(f"{w.name}: /metrics not read ({exc})")

    async def main() -> None:
        limits = httpx.Limits(max_connections=w.sessions + 2)
        async with httpx.AsyncClient(timeout=timeout_s, limits=limits) as client:
            body = _ramp if w.kind == "ramp" else _agents
            await body(w, client=client, log=log, base_url=base_url, model=model, tokenizer=tokenizer,
                       snapshot=snapshot, alive=alive, say=say)

    log.start()
    began = time.time()
    try:
        asyncio.run(main())
        log.done()
    finally:
        sync.close()
    if window is not None:
        window(began, time.time())
    return log
