"""What a run folder's meta.json would have said, read from the folder's other files where it has
none (a campaign run before this project, brought in by `campaign import`, or a folder copied by
hand): the image, the engine version, the GPUs and the server's maximum context. Each value is an
Inferred record naming the file and line it came from and how, kept in raw_run_inferred so that
the audit entries of the numbers resting on it say so.

The GPUs, in the order trusted: the device list of `docker run --gpus` (or NVIDIA_VISIBLE_DEVICES
passed to the container), CUDA_VISIBLE_DEVICES, then the count the engine's parallel sizes make
(vLLM: tensor x pipeline x prefill-context x data parallel; SGLang: tensor x pipeline, times data
parallel unless its attention is data parallel inside the tensor group), checked against the GPU
workers the log names; the log's workers alone where the command gives no size.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from stages.ingest.parsers import cmd as cmd_parser
from stages.formats import lines

_PID = re.compile(r"\s+pid=\d+$")
# Process tags of one GPU worker each: vLLM's Worker_TP3 / Worker_DP1_TP0 / Worker_TP0_DCP0 /
# VllmWorker rank=3, SGLang's TP3 / DP0 TP3.
_GPU_WORKER = re.compile(r"^(?:Worker(?:_[A-Z]+\d+)*|VllmWorker rank=\d+|(?:DP\d+ )?(?:PP\d+ )?TP\d+)$")
_DEVICE_LIST = re.compile(r"^(?:device=)?(\d+(?:,\d+)*)$")


@dataclass(frozen=True)
class Inferred:
    field: str            # a raw_runs column: image, engine_version, gpus, gpu_count, max_model_len
    value: str
    how: str              # one sentence: what was read, for the audit entry
    source_file: str
    source_line: int


def infer_run(command: cmd_parser.Command | None, cmd_source: str | None,
              log_facts: list[lines.Fact], log_source: str | None) -> list[Inferred]:
    """Every value meta.json would have given that the folder's cmd.sh and log tell."""
    out: list[Inferred] = []
    if command is not None and cmd_source and command.image:
        out.append(Inferred("image", command.image, "the image `docker run` starts in cmd.sh",
                            cmd_source, command.line))
    version = next((f for f in log_facts if f.fact == "engine_version" and f.value_text), None)
    if version is not None and log_source:
        out.append(Inferred("engine_version", version.value_text, "the version line of the engine's log",
                            log_source, version.line))
    if command is not None and cmd_source and command.max_model_len:
        names = ("--max-model-len", "--context-length")
        flag = next((name for _, name, _ in reversed(command.flags) if name in names), "--max-model-len")
        out.append(Inferred("max_model_len", str(command.max_model_len),
                            f"{flag} on the engine command in cmd.sh", cmd_source,
                            command.flag_line(names)))
    out += _gpus(command, cmd_source, log_facts, log_source)
    return out


def _device_list(value: str | None) -> list[int] | None:
    """'"device=0,1,2,3"' or '0,1' -> [0, 1, 2, 3]; 'all', a count or GPU UUIDs -> None."""
    if value is None:
        return None
    m = _DEVICE_LIST.match(value.strip().strip("'\"").replace(" ", ""))
    return [int(g) for g in m.group(1).split(",")] if m else None


def _gpus(command: cmd_parser.Command | None, cmd_source: str | None,
          log_facts: list[lines.Fact], log_source: str | None) -> list[Inferred]:
    workers = _log_workers(log_facts)
    if command is not None and cmd_source:
        option_lines = command.wrapper_option_lines or [command.line] * len(command.wrapper_options)
        for (name, value), line in zip(command.wrapper_options, option_lines):
            devices = _device_list(value) if name == "--gpus" else None
            if devices:
                return _set(devices, f"the device list of `docker run --gpus {value}` in cmd.sh",
                            cmd_source, line)
        for env_name in ("NVIDIA_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES"):
            for name, value, line in command.env:
                devices = _device_list(value) if name == env_name else None
                if devices:
                    return _set(devices, f"{env_name}={value} in cmd.sh", cmd_source, line)
        sizes = _parallel_sizes(command)
        if sizes:
            count, said = sizes
            seen = (f"; the log names {len(workers)} GPU workers ({_span(workers)})"
                    if workers else "")
            return [Inferred("gpu_count", str(count), f"{said} on the engine command in cmd.sh{seen}",
                             cmd_source, _sizes_line(command))]
    if workers and log_source:
        first_line = min(line for line, _ in workers.values())
        return [Inferred("gpu_count", str(len(workers)),
                         f"the GPU workers the engine's log names ({_span(workers)})",
                         log_source, first_line)]
    return []


def _set(devices: list[int], how: str, source: str, line: int) -> list[Inferred]:
    return [Inferred("gpus", ",".join(map(str, devices)), how, source, line),
            Inferred("gpu_count", str(len(set(devices))), how, source, line)]


def _parallel_sizes(command: cmd_parser.Command) -> tuple[int, str] | None:
    """The GPUs the engine's parallel sizes take, and the sizes as said; None when the command
    names none of them (the count would rest on the engine's default alone)."""
    named = {"tensor": command.tp, "pipeline": command.pp, "data": command.dp}
    if command.engine != "sglang":
        named["prefill-context"] = command.pcp
    given = {k: v for k, v in named.items() if v}
    if not given:
        return None
    count = 1
    for kind, size in given.items():
        if kind == "data" and command.engine == "sglang" and _dp_attention(command):
            continue
        count *= size
    said = " x ".join(f"{kind} parallel {size}" for kind, size in given.items())
    if command.engine == "sglang" and command.dp and _dp_attention(command):
        said += " (data parallel attention inside the tensor group)"
    return count, said


def _sizes_line(command: cmd_parser.Command) -> int:
    """The line of the one parallel size flag the command gives, else the command's first line
    (several sizes multiply: no one line holds their product)."""
    given = [n for n, (_, name, _) in enumerate(command.flags)
             if name in cmd_parser.PARALLEL_SIZE_FLAGS]
    lines = {command.flag_lines[n] for n in given} if len(command.flag_lines) == len(command.flags) else set()
    return lines.pop() if len(lines) == 1 and len(given) == 1 else command.line


def _dp_attention(command: cmd_parser.Command) -> bool:
    return any(name == "--enable-dp-attention" for _, name, _ in command.flags)


def _log_workers(log_facts: list[lines.Fact]) -> dict[str, tuple[int, str]]:
    """The GPU workers the log's facts name: tag (pid left out) -> (first line, tag)."""
    out: dict[str, tuple[int, str]] = {}
    for f in log_facts:
        tag = _PID.sub("", f.worker or "")
        if tag and _GPU_WORKER.match(tag) and tag not in out:
            out[tag] = (f.line, tag)
    return out


def _span(workers: dict[str, tuple[int, str]]) -> str:
    tags = sorted(workers, key=lambda t: [int(n) for n in re.findall(r"\d+", t)] or [0])
    return tags[0] if len(tags) == 1 else f"{tags[0]} to {tags[-1]}"
