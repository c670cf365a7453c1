"""cmd.sh -> the engine command inside whatever wraps it, its environment and every flag.

Understood: `#!/bin/sh`, `cd`/`set`/`export` lines, `NAME=value` assignments (alone or before the
command), line continuations, `exec`, wrappers (docker run ... <image> [serve <model>] ..., srun,
numactl, timeout, ...), and the engine entry points `python -m vllm.entrypoints.openai.api_server`,
`vllm serve <model>`, `python -m sglang.launch_server`, `sglang serve`.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from stages.formats.lines import ParseError
from stages.ingest.parsers.shell_text import continued_lines, split_words, token_lines

_ASSIGN = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$", re.S)
_REDIRECT = re.compile(r"^\d*(?:>>?|<)|^&>")
_OPERATORS = {"|", "||", "&&", ";", "&", ";;"}
_NUMBER = re.compile(r"^-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?$")
_HUMAN_INT = re.compile(r"^(\d+(?:\.\d+)?)([kKmMgGtT]?)$")
_SHELL_WORDS = {"cd", "set", "export", "umask", "ulimit", "source", ".", "trap", "mkdir", "echo",
                "unset", "shopt", "wait", "true", ":", "printf", "sleep", "rm", "cp", "ln"}
_TRANSPARENT = {"exec", "env", "nohup", "time", "command", "builtin", "stdbuf"}
_DOCKER_BARE = {"--rm", "-d", "--detach", "-i", "-t", "--interactive", "--tty", "--privileged",
                "--init", "--read-only", "-P", "--publish-all", "--no-healthcheck",
                "--oom-kill-disable", "-q", "--quiet"}
_DOCKER_SHORT_BARE = re.compile(r"^-[ditP]+$")
_BARE_FLAG = re.compile(
    r"^--(?:enable|disable|no)-|^--(?:trust-remote-code|enforce-eager|async-scheduling"
    r"|skip-[\w-]+|use-[\w-]+|headless|api-key-from-env|uvicorn-log-level-off)$")
_BARE_SHORT = {"-ep"}

_TP = ("--tensor-parallel-size", "-tp", "--tp-size", "--tp")
_DP = ("--data-parallel-size", "-dp", "--dp-size", "--dp")
_PP = ("--pipeline-parallel-size", "-pp", "--pp-size", "--pp")
_DCP = ("--decode-context-parallel-size", "-dcp")
_PCP = ("--prefill-context-parallel-size", "-pcp")
_MAX_LEN = ("--max-model-len", "--context-length")
_MAX_SEQS = ("--max-num-seqs", "--max-running-requests")
# the sizes whose product is the GPUs a command takes (stages.ingest.infer)
PARALLEL_SIZE_FLAGS = _TP + _DP + _PP + _PCP
_EP_SWITCH = ("--enable-expert-parallel", "-ep", "--enable-ep-moe", "--expert-parallel")
_EP_SIZE = ("--ep-size", "--ep", "--expert-parallel-size")
_MODEL = ("--model", "--model-path")


@dataclass
class Command:
    command: str
    line: int
    engine: str | None = None            # vllm | sglang
    wrapper: str = "none"
    image: str | None = None
    model_path: str | None = None
    env: list[tuple[str, str | None, int]] = field(default_factory=list)
    flags: list[tuple[int, str, str | None]] = field(default_factory=list)
    tp: int | None = None
    dp: int | None = None
    pp: int | None = None
    dcp: int | None = None
    pcp: int | None = None
    expert_parallel: bool | None = None
    max_model_len: int | None = None
    max_num_seqs: int | None = None
    kv_cache_dtype: str | None = None
    prefix_caching: bool | None = None
    block_size: int | None = None
    # the wrapper's options with a value, as written (docker run's --gpus, --device, ...)
    wrapper_options: list[tuple[str, str]] = field(default_factory=list)
    # the physical line of each flag's value (of the flag itself when bare), in the order of
    # `flags`, and of each wrapper option's: a command continued over several lines cites the
    # line that holds the value, not its first
    flag_lines: list[int] = field(default_factory=list)
    wrapper_option_lines: list[int] = field(default_factory=list)

    def flag_line(self, names: tuple[str, ...] | str) -> int:
        """The line of the last of these flags (the one that counts), else the command's."""
        names = (names,) if isinstance(names, str) else names
        found = [n for n, (_, name, _) in enumerate(self.flags) if name in names]
        return self.flag_lines[found[-1]] if found and len(self.flag_lines) == len(self.flags) else self.line


def human_int(value: str | None) -> int | None:
    """vLLM's human-readable integers: 4096, 128k (x1000), 128K (x1024), 1m, 1M."""
    if value is None:
        return None
    m = _HUMAN_INT.match(value.strip().replace("_", ""))
    if not m:
        raise ValueError(value)
    number, unit = float(m.group(1)), m.group(2)
    power = {"": 0, "k": 1, "m": 2, "g": 3, "t": 4}[unit.lower()]
    base = 1024 if unit.isupper() else 1000
    return int(round(number * base**power))


def _is_flag(token: str) -> bool:
    return token.startswith("-") and token != "-" and not _NUMBER.match(token)


def _is_stop(token: str) -> bool:
    return token in _OPERATORS or bool(_REDIRECT.match(token))


def _basename(token: str) -> str:
    return token.rsplit("/", 1)[-1]


def _engine_start(tokens: list[str]) -> tuple[int, int, str, bool] | None:
    """(index where the engine command starts, index of its first argument, engine, has_serve)."""
    for i, tok in enumerate(tokens):
        if _is_stop(tok):
            return None
        base = _basename(tok)
        if tok == "-m" and i + 1 < len(tokens):
            module = tokens[i + 1]
            engine = ("vllm" if module.startswith("vllm.entrypoints") or module == "vllm"
                      else "sglang" if module.startswith("sglang.launch_server") else None)
            if engine:
                j = i - 1
                while j > 0 and not _basename(tokens[j]).startswith("python"):
                    j -= 1
                return max(j, 0), i + 2, engine, False
        if base in ("vllm", "sglang") and i + 1 < len(tokens) and tokens[i + 1] == "serve":
            return i, i + 2, base, True
    return None


def _docker_image(tokens: list[str], start: int, env: list[tuple[str, str | None, int]],
                  lines: list[int], options: list[tuple[str, str]] | None = None,
                  option_lines: list[int] | None = None) -> int | None:
    """Index of the image in `docker run ...` whose `run` is at tokens[start]; docker -e go to env,
    every option with a value to `options` (name, value); `lines`: each token's physical line,
    the line of an option's value going to `option_lines`."""
    options = [] if options is None else options
    option_lines = [] if option_lines is None else option_lines
    i = start + 1
    while i < len(tokens):
        tok = tokens[i]
        if _is_stop(tok):
            return None
        if not tok.startswith("-"):
            return i
        name, eq, value = tok.partition("=")
        if tok in _DOCKER_BARE or _DOCKER_SHORT_BARE.match(tok) or (eq and name.startswith("--")):
            if eq and name in ("--env", "-e"):
                _env_pair(value, env, lines[i])
            elif eq:
                options.append((name, value))
                option_lines.append(lines[i])
            i += 1
            continue
        if i + 1 < len(tokens) and tok in ("-e", "--env"):
            _env_pair(tokens[i + 1], env, lines[i + 1])
        elif i + 1 < len(tokens):
            options.append((tok, tokens[i + 1]))
            option_lines.append(lines[i + 1])
        i += 2
    return None


def _env_pair(text: str, env: list[tuple[str, str | None, int]], line: int) -> None:
    m = _ASSIGN.match(text)
    if m:
        env.append((m.group(1), m.group(2), line))
    elif re.match(r"^[A-Za-z_]\w*$", text):
        env.append((text, None, line))


def parse_flags(args: list[str], *, has_serve: bool) -> tuple[str | None, list[tuple[int, str, str | None]]]:
    """(positional model, flags) of an engine's arguments; stops at a redirection or operator."""
    model, flags, _ = _flags_at(args, has_serve=has_serve)
    return model, flags


def _flags_at(args: list[str], *, has_serve: bool
              ) -> tuple[str | None, list[tuple[int, str, str | None]], list[int]]:
    """parse_flags, with the index in `args` of each flag's value (its first word; the flag's own
    index when bare)."""
    flags: list[list] = []
    at: list[int] = []
    model = None
    i = 0
    while i < len(args):
        tok = args[i]
        if _is_stop(tok):
            break
        if _is_flag(tok):
            if tok.startswith("--") and "=" in tok:
                name, value = tok.split("=", 1)
                flags.append([name, value])
                at.append(i)
            elif (i + 1 < len(args) and not _is_flag(args[i + 1]) and not _is_stop(args[i + 1])
                  and not _BARE_FLAG.match(tok) and tok not in _BARE_SHORT):
                flags.append([tok, args[i + 1]])
                at.append(i + 1)
                i += 1
            else:
                flags.append([tok, None])
                at.append(i)
        elif has_serve and model is None and not flags:
            model = tok
        elif flags and flags[-1][1] is not None:
            flags[-1][1] = f"{flags[-1][1]} {tok}"  # nargs="+" values
        elif flags:
            flags[-1][1] = tok
            at[-1] = i
        elif model is None:
            model = tok
        i += 1
    return model, [(n + 1, name, value) for n, (name, value) in enumerate(flags)], at


def _last(flags: list[tuple[int, str, str | None]], names: tuple[str, ...]) -> tuple[str, str | None] | None:
    found = None
    for _, name, value in flags:
        if name in names:
            found = (name, value)
    return found


def _int_flag(flags, names, line: int, errors: list[ParseError], human: bool = False) -> int | None:
    got = _last(flags, names)
    if got is None or got[1] is None:
        return None
    try:
        return human_int(got[1]) if human else int(got[1])
    except ValueError:
        errors.append(ParseError(line, f"cmd.sh: {got[0]} {got[1]!r} is not a whole number"))
        return None


def _truth(value: str | None) -> bool:
    return value is None or value.strip().lower() not in ("0", "false", "no", "off")


def _derive(cmd: Command, errors: list[ParseError]) -> None:
    flags, line, at = cmd.flags, cmd.line, cmd.flag_line
    cmd.tp = _int_flag(flags, _TP, at(_TP), errors)
    cmd.dp = _int_flag(flags, _DP, at(_DP), errors)
    cmd.pp = _int_flag(flags, _PP, at(_PP), errors)
    cmd.dcp = _int_flag(flags, _DCP, at(_DCP), errors)
    cmd.pcp = _int_flag(flags, _PCP, at(_PCP), errors)
    cmd.max_model_len = _int_flag(flags, _MAX_LEN, at(_MAX_LEN), errors, human=True)
    cmd.max_num_seqs = _int_flag(flags, _MAX_SEQS, at(_MAX_SEQS), errors)
    cmd.block_size = _int_flag(flags, ("--block-size",), at("--block-size"), errors)
    kv = _last(flags, ("--kv-cache-dtype",))
    cmd.kv_cache_dtype = kv[1] if kv else None
    model = _last(flags, _MODEL)
    if model and model[1]:
        cmd.model_path = model[1]
    for _, name, value in flags:
        if name in _EP_SWITCH:
            cmd.expert_parallel = _truth(value)
        elif name == "--no-enable-expert-parallel":
            cmd.expert_parallel = False
        elif name in _EP_SIZE:
            try:
                cmd.expert_parallel = int(value or "1") > 1
            except ValueError:
                errors.append(ParseError(at(name), f"cmd.sh: {name} {value!r} is not a whole number"))
        elif name == "--enable-prefix-caching":
            cmd.prefix_caching = _truth(value)
        elif name in ("--no-enable-prefix-caching", "--disable-radix-cache"):
            cmd.prefix_caching = not _truth(value) if value is not None else False


def _wrapper(tokens: list[str], start: int) -> str:
    for tok in tokens[:start]:
        if _ASSIGN.match(tok) or tok.startswith("-"):
            continue
        base = _basename(tok)
        if base in _TRANSPARENT:
            continue
        return "docker" if base in ("docker", "podman") else base
    return "none"


def _engine_in(tokens: list[str], env: list, lines: list[int], options: list[tuple[str, str]],
               option_lines: list[int]) -> tuple[int, int, str | None, bool, str | None] | None:
    """Where the engine command starts in one logical line, looking inside docker run (whose
    options with a value go to `options`, their lines to `option_lines`)."""
    for i, tok in enumerate(tokens):
        if _is_stop(tok):
            break
        if _basename(tok) in ("docker", "podman") and i + 1 < len(tokens) and tokens[i + 1] == "run":
            image_at = _docker_image(tokens, i + 1, env, lines, options, option_lines)
            if image_at is None:
                return None
            image = tokens[image_at]
            inner = _engine_start(tokens[image_at + 1:])
            if inner is not None:
                _, arg0, engine, serve = inner
                return i, image_at + 1 + arg0, engine, serve, image
            rest = tokens[image_at + 1:]
            serve = bool(rest) and rest[0] == "serve"
            engine = "sglang" if "sglang" in image.lower() else "vllm"
            return i, image_at + 1 + (1 if serve else 0), engine, serve, image
    found = _engine_start(tokens)
    if found is None:
        return None
    start, arg0, engine, serve = found
    return start, arg0, engine, serve, None


def parse_cmd(text: str) -> tuple[Command | None, list[ParseError]]:
    """The engine command of a cmd.sh, or None (with an error) when there is none."""
    errors: list[ParseError] = []
    env: list[tuple[str, str | None, int]] = []
    fallback: tuple[int, str, list[str]] | None = None
    for line, logical, pieces in continued_lines(text.replace("\x00", "")):
        body = logical.strip()
        if not body or body.startswith("#"):
            continue
        tokens = split_words(body, line, errors)
        if not tokens:
            continue
        lines = token_lines(tokens, pieces, line)
        if tokens[0] == "export" or all(_ASSIGN.match(t) for t in tokens):
            skip = 1 if tokens[0] == "export" else 0
            for tok, at in zip(tokens[skip:], lines[skip:]):
                _env_pair(tok, env, at)
            continue
        if tokens[0] in _SHELL_WORDS:
            continue
        options: list[tuple[str, str]] = []
        option_lines: list[int] = []
        found = _engine_in(tokens, env, lines, options, option_lines)
        if found is None:
            if any(t in _MODEL for t in tokens):
                fallback = (line, body, tokens, lines)
            continue
        start, arg0, engine, serve, image = found
        for tok, at in zip(tokens[:start], lines):
            if _ASSIGN.match(tok):
                _env_pair(tok, env, at)
        cmd = Command(command=" ".join(body.split()), line=line, engine=engine,
                      wrapper="docker" if image else _wrapper(tokens, start), image=image, env=env,
                      wrapper_options=options, wrapper_option_lines=option_lines)
        cmd.model_path, cmd.flags, at = _flags_at(tokens[arg0:], has_serve=serve)
        cmd.flag_lines = [lines[arg0 + i] for i in at]
        _derive(cmd, errors)
        return cmd, errors
    if fallback is not None:
        line, body, tokens, lines = fallback
        first_flag = next(i for i, t in enumerate(tokens) if _is_flag(t))
        cmd = Command(command=" ".join(body.split()), line=line, wrapper=_wrapper(tokens, first_flag),
                      env=env)
        cmd.model_path, cmd.flags, at = _flags_at(tokens[first_flag:], has_serve=False)
        cmd.flag_lines = [lines[first_flag + i] for i in at]
        _derive(cmd, errors)
        return cmd, errors
    errors.append(ParseError(None, "cmd.sh: no engine command found"))
    return None, errors
