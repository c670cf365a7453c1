"""Does each published fact's raw line hold its value? A check any test can run on a built site's
data/facts.json and the run folders its facts cite."""
from __future__ import annotations

import json
import math
import re
from pathlib import Path

NUMBER = re.compile(r"(?<![\w.])-?\d[\d,]*(?:\.\d+)?(?:[eE][-+]?\d+)?")


def decimals(text: str) -> int:
    """Digits after the point of a number as printed (a negative exponent adds to them)."""
    mantissa, _, exponent = text.lower().partition("e")
    places = len(mantissa.partition(".")[2])
    return places - int(exponent) if exponent else places


def printed_as(value: float, text: str) -> bool:
    """`text` (a number from a raw line) is `value`, or `value` is it rounded (to the decimals
    `value` has; a line less precise than the value does not hold it)."""
    number = float(text.replace(",", ""))
    if math.isclose(number, value, rel_tol=1e-9, abs_tol=1e-12):
        return True
    places = decimals(repr(float(value)))
    return decimals(text) > places and abs(number - value) <= 0.5 * 10 ** -places + 1e-12


def holds(line: str, value) -> bool:
    """The raw line's text holds the value: a number printed with or without thousands
    separators and rounding, a word as it is."""
    if isinstance(value, bool):
        return str(value).lower() in line.lower()
    if isinstance(value, (int, float)):
        return any(printed_as(float(value), m.group(0)) for m in NUMBER.finditer(line))
    return str(value) in line


# Facts read from a flag (or variable) of a run's cmd.sh: the names that may give each. A fact
# citing cmd.sh must be listed here, and its cited line must hold one of these names as well as
# its value.
FLAGS = {
    "launch_seq_cap": ("--max-num-seqs", "--max-running-requests"),
    "pareto_gpus": ("--gpus", "NVIDIA_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES",
                    "--tensor-parallel-size", "-tp", "--tp-size", "--tp", "--data-parallel-size",
                    "-dp", "--dp-size", "--dp", "--pipeline-parallel-size", "-pp", "--pp-size",
                    "--prefill-context-parallel-size", "-pcp"),
}
# Facts that count what their line lists (the GPUs of a device list): the line holds the value,
# or a list of that many items.
COUNTED = {"pareto_gpus"}
DEVICE_LIST = re.compile(r"(?<![\w.])\d+(?:,\d+)+(?![\w.])")


def holds_flag(line: str, names: tuple[str, ...]) -> bool:
    """The line names one of the flags (as a word of its own, `--flag value` or `--flag=value`)."""
    return any(re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", line) for name in names)


def holds_count(line: str, value) -> bool:
    """The line lists `value` items (a comma-separated list of indices)."""
    return isinstance(value, int) and any(
        len(m.group(0).split(",")) == value for m in DEVICE_LIST.finditer(line))


def raw_path(source_file: str, runs_dir: Path) -> Path | None:
    """Where a cited file lies under runs_dir: the part of its path after the folder that has
    runs_dir's name (data/runs/<run>/x -> runs_dir/<run>/x); None when it is not under it."""
    parts = Path(source_file).parts
    if runs_dir.name not in parts:
        return None
    return runs_dir.joinpath(*parts[parts.index(runs_dir.name) + 1:])


def line_problems(facts_file: Path, runs_dir: Path) -> tuple[int, list[str]]:
    """(facts checked, one problem per fact whose cited line under runs_dir does not hold its
    value). Facts citing no line, or a file outside runs_dir, are not checked."""
    checked, problems = 0, []
    for fact in json.loads(Path(facts_file).read_text()):
        if not fact.get("source_file") or fact.get("value") is None:
            continue
        path = raw_path(fact["source_file"], runs_dir)
        if path is None:
            continue
        checked += 1
        lines = path.read_text(errors="replace").splitlines()
        line_no = fact["source_line"]
        line = lines[line_no - 1] if 0 < line_no <= len(lines) else None
        value, name = fact["value"], fact["name"]
        if line is None or not (holds(line, value) or name in COUNTED and holds_count(line, value)):
            problems.append(f"{fact['id']} = {value!r} cites {fact['source_file']}:{line_no}: {line!r}")
        elif path.name == "cmd.sh" and not holds_flag(line, FLAGS.get(name, ())):
            problems.append(f"{fact['id']} = {value!r} cites {fact['source_file']}:{line_no}, which "
                            f"names none of its flags {FLAGS.get(name, '(none listed in FLAGS)')}: {line!r}")
    return checked, problems


def cited_files(facts_file: Path) -> dict[str, int]:
    """How many facts cite each kind of raw file (its name, a result file's suffix)."""
    counts: dict[str, int] = {}
    for fact in json.loads(Path(facts_file).read_text()):
        if fact.get("source_file") and fact.get("value") is not None:
            name = Path(fact["source_file"]).name
            kind = name.rsplit(".", 1)[-1] if "/bench/" in fact["source_file"] else name
            counts[kind] = counts.get(kind, 0) + 1
    return counts
