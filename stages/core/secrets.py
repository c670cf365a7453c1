"""Secrets never reach what we write: cmd.sh, meta.json, server.log, the site.

A secret is the value of a secret-bearing flag (`--api-key`, `--hf-token`, ...), of an
environment variable or JSON key whose name contains TOKEN, KEY, SECRET, PASSWORD or CREDENTIAL,
of an `Authorization` header, or text shaped like a known token (`hf_…`, `sk-…`, `ghp_…`, ...).
The engine still gets the real values; every file we write gets `***` in their place.

`redact_text` is the one redaction for text that came from elsewhere (a run folder written by
another campaign, a log line): ingest stores, render prints and trace shows only its output.
"""
from __future__ import annotations

import os
import re
from typing import Iterable, Mapping

REDACTED = "***"
SECRET_FLAGS = frozenset({"--api-key", "--hf-token", "--token", "--hf_token", "--api_key"})
# A name is secret when one of its words is one of these (HF_TOKEN, OPENAI_API_KEY, apiKey,
# MY_PASSWORD), not when it merely contains one (engine_kv_tokens, tokenizer, KEYBOARD).
SECRET_WORDS = frozenset({"TOKEN", "KEY", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL",
                          "CREDENTIALS", "APIKEY", "AUTH"})
_WORD_BREAK = re.compile(r"[_.\-\s]+|(?<=[a-z0-9])(?=[A-Z])")
_MIN_LEN = 4   # shorter values would scrub ordinary text


# ...unless its last word says it names something about the secret, not the secret itself
# (mask_token_id, HF_TOKEN_PATH, key_type).
NOT_SECRET_LAST_WORDS = frozenset({"ID", "IDS", "IDX", "INDEX", "PATH", "FILE", "DIR", "TYPE", "LEN",
                                   "LENGTH", "SIZE", "MODE", "COUNT", "NUM", "NAME", "ENABLED"})


def is_secret_name(name: str) -> bool:
    words = [w.upper() for w in _WORD_BREAK.split(name) if w]
    return bool(words) and words[-1] not in NOT_SECRET_LAST_WORDS and any(w in SECRET_WORDS for w in words)


def redact_argv(argv: Iterable[str]) -> list[str]:
    out: list[str] = []
    hide_next = False
    for arg in argv:
        if hide_next:
            out.append(REDACTED)
            hide_next = False
        elif arg in SECRET_FLAGS:
            out.append(arg)
            hide_next = True
        elif "=" in arg and arg.split("=", 1)[0] in SECRET_FLAGS:
            out.append(arg.split("=", 1)[0] + "=" + REDACTED)
        elif arg.startswith("-e") and "=" in arg and is_secret_name(arg[2:].lstrip().split("=", 1)[0]):
            out.append(arg.split("=", 1)[0] + "=" + REDACTED)      # docker -eNAME=value
        elif "=" in arg and not arg.startswith("-") and is_secret_name(arg.split("=", 1)[0]):
            out.append(arg.split("=", 1)[0] + "=" + REDACTED)      # docker -e NAME=value
        else:
            out.append(arg)
    return [redact_text(arg) for arg in out]     # JSON flag values, token shapes


def redact_env(env: Mapping[str, str]) -> dict[str, str]:
    return {k: (REDACTED if is_secret_name(k) else v) for k, v in env.items()}


def redact_mapping(args: Mapping) -> dict:
    """A spec's `args` mapping (flag -> value) with secret flags' values hidden."""
    return {k: (REDACTED if str(k) in SECRET_FLAGS and v not in (True, False, None)
                else redact_value(v))
            for k, v in args.items()}


def secret_values(argv: Iterable[str], env: Mapping[str, str],
                  inherited: Mapping[str, str] | None = None) -> list[str]:
    """Every secret value that could appear in output, longest first."""
    argv = list(argv)
    values = set()
    for i, arg in enumerate(argv):
        if arg in SECRET_FLAGS and i + 1 < len(argv):
            values.add(argv[i + 1])
        elif "=" in arg and arg.split("=", 1)[0] in SECRET_FLAGS:
            values.add(arg.split("=", 1)[1])
    for source in (env, os.environ if inherited is None else inherited):
        values.update(v for k, v in source.items() if is_secret_name(k))
    return sorted((v for v in values if len(v) >= _MIN_LEN), key=len, reverse=True)


def scrub(data: bytes, values: list[bytes]) -> bytes:
    for v in values:
        data = data.replace(v, REDACTED.encode())
    return data


# ---------------------------------------------------------------- free text

_NAME = r"[A-Za-z_][A-Za-z0-9_.-]*"
# A value: quoted, or bare up to a space or the punctuation that closes it in a repr (`x=1,`).
_VALUE = r"""(?:'[^']*'|"(?:[^"\\]|\\.)*"|[^\s'",;)}\]]+)"""
# Values that hold nothing to hide (`api_key=None`, `allow_credentials=False`): kept as they are.
_TRIVIAL = re.compile(r"""(?i)^["']?(?:true|false|none|null|\d+(?:\.\d+)?)?["']?$""")
# Text without any of these cannot hold a secret that redact_text would find: a quick way past.
# What a text holds wherever it holds a secret redact_text redacts (in any case): without one of
# these, it is left as it is.
MAYBE_WORDS = ("token", "key", "secret", "passw", "credential", "auth", "hf_", "sk-",
               *(f"gh{c}_" for c in "pousr"), "github_pat_", "akia", "asia",
               *(f"xox{c}-" for c in "abprs"), "glpat-", "eyj")
_MAYBE = re.compile("(?i)" + "|".join(map(re.escape, MAYBE_WORDS)))
# Shapes of well-known credentials, wherever they stand.
TOKEN_SHAPES = re.compile(
    r"\b(?:hf_[A-Za-z0-9]{16,}"                        # Hugging Face
    r"|sk-(?:proj-|ant-)?[A-Za-z0-9_-]{16,}"            # OpenAI, Anthropic
    r"|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}"   # GitHub
    r"|(?:AKIA|ASIA)[0-9A-Z]{16}"                        # AWS access key id
    r"|xox[abprs]-[A-Za-z0-9-]{10,}"                     # Slack
    r"|glpat-[A-Za-z0-9_-]{20,}"                         # GitLab
    r"|eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,})")   # a JWT
# What each of TOKEN_SHAPES starts with (keep the two in step): a text without one holds none.
TOKEN_PREFIXES = ("hf_", "sk-", *(f"gh{c}_" for c in "pousr"), "github_pat_", "AKIA", "ASIA",
                  *(f"xox{c}-" for c in "abprs"), "glpat-", "eyJ")
_AUTH_HEADER = re.compile(
    r"(?i)\b((?:proxy-)?authorization[\"']?\s*[:=]\s*[\"']?\s*(?:bearer|basic|token)?\s*)"
    r"([^\s\"',}]+)")
_FLAG_VALUE = re.compile(
    r"(?<![\w-])(" + "|".join(re.escape(f) for f in sorted(SECRET_FLAGS, key=len, reverse=True))
    + r")(=|\s+)(" + _VALUE + ")")
_ASSIGNMENT = re.compile(r"(?<![\w.-])(" + _NAME + r")=(" + _VALUE + ")")
_JSON_MEMBER = re.compile(r"""((\\?["'])(""" + _NAME + r""")\2\s*:\s*)(\\?["'])((?:(?!\4).)*)\4""")


def redact_text(text: str) -> str:
    """`text` with every secret it shows replaced by `***`: the values of secret flags and of
    secret-named assignments (`HF_TOKEN=…`, `-e API_KEY=…`), JSON members with secret-named keys
    (also inside a quoted flag value), `Authorization` headers, and known token shapes.

    Each pattern runs only over a text that holds what it needs to match (a flag, `=`, `:`, the
    word authorization, a token's prefix), found by plain substring search: over an engine's
    echoed prompt of 40 MB each pattern takes one to four seconds, each search a few hundredths.

    Example: redact_text("HF_TOKEN=hf_abc vllm serve m --api-key sk-1") ==
             "HF_TOKEN=*** vllm serve m --api-key ***"
    """
    if not text or not may_hold_secret(text):
        return text
    if any(flag in text for flag in SECRET_FLAGS):
        text = _FLAG_VALUE.sub(lambda m: m.group(1) + m.group(2) + REDACTED, text)
    if "=" in text:
        text = _ASSIGNMENT.sub(
            lambda m: m.group(0) if not is_secret_name(m.group(1)) or _TRIVIAL.match(m.group(2))
            else f"{m.group(1)}={REDACTED}", text)
    if ":" in text:
        text = _JSON_MEMBER.sub(
            lambda m: m.group(0) if not is_secret_name(m.group(3)) or _TRIVIAL.match(m.group(5))
            else f"{m.group(1)}{m.group(4)}{REDACTED}{m.group(4)}", text)
    if "authorization" in _lowered(text):
        text = _AUTH_HEADER.sub(lambda m: m.group(1) + REDACTED, text)
    if any(prefix in text for prefix in TOKEN_PREFIXES):
        text = TOKEN_SHAPES.sub(REDACTED, text)
    return text


# Characters that ignore-case matching (_MAYBE, _AUTH_HEADER) reads as an ASCII letter and that
# str.lower() leaves apart (or makes two characters of): folded before lowering.
_FOLD = (("\u0130", "i"), ("\u0131", "i"), ("\u017f", "s"), ("\u212a", "k"))


def _lowered(text: str) -> str:
    """`text` lower-cased as ignore-case matching reads it, for a plain substring search."""
    if not text.isascii():
        for char, letter in _FOLD:
            text = text.replace(char, letter) if char in text else text
    return text.lower()


def may_hold_secret(text: str) -> bool:
    """False when `text` cannot hold a secret redact_text would redact (none of MAYBE_WORDS in any
    part of it): a check by plain substring search, true wherever _MAYBE would find a word, and far
    cheaper over a long text (40 MB without any of the words: under 1 s, where the pattern takes
    17 s; an engine's echoed prompt is such a text). redact_text starts with it; it also comes
    before redacting many parts (a CSV row's cells)."""
    low = _lowered(text)
    return any(word in low for word in MAYBE_WORDS)


def redact_value(value):
    """A value from a raw file, redacted where it is text (other types pass unchanged)."""
    return redact_text(value) if isinstance(value, str) else value
