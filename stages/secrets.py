"""Secrets never reach what we write: cmd.sh, meta.json, server.log, the site.

A secret is the value of a secret-bearing flag (`--api-key`, `--hf-token`, ...) or of an
environment variable whose name contains TOKEN, KEY or SECRET. The engine still gets the real
values; every file we write gets `***` in their place.
"""
from __future__ import annotations

import os
import re
from typing import Iterable, Mapping

REDACTED = "***"
SECRET_FLAGS = frozenset({"--api-key", "--hf-token", "--token", "--hf_token", "--api_key"})
_SECRET_NAME = re.compile(r"TOKEN|KEY|SECRET", re.I)
_MIN_LEN = 4   # shorter values would scrub ordinary text


def is_secret_name(name: str) -> bool:
    return bool(_SECRET_NAME.search(name))


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
    return out


def redact_env(env: Mapping[str, str]) -> dict[str, str]:
    return {k: (REDACTED if is_secret_name(k) else v) for k, v in env.items()}


def redact_mapping(args: Mapping) -> dict:
    """A spec's `args` mapping (flag -> value) with secret flags' values hidden."""
    return {k: (REDACTED if str(k) in SECRET_FLAGS and v not in (True, False, None) else v)
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
