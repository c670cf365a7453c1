"""The JSON files of a node folder as rows with their line.

    p2p.jsonl        one object per ordered GPU pair                  -> p2p
    allreduce.jsonl  one object per (group, message size)             -> allreduce
    env.json         versions and NCCL_*/CUDA_* variables             -> env, env_vars
    meta.json        what the probe was asked and what it did         -> meta
"""
from __future__ import annotations

from typing import Any

from stages.formats.lines import ParseError, json_file_object, json_object, text_lines
from stages.formats.run_folder import SCHEMA_VERSIONS



# ---------------------------------------------------------------- JSON lines

P2P_FIELDS = {"src": int, "dst": int, "can_access_peer": bool, "bytes": int, "repeats": int,
              "time_us_median": float, "copy_gbs": float, "copy_gbs_max": float}
ALLREDUCE_FIELDS = {"group": str, "gpus": list, "ranks": int, "backend": str, "device": str,
                    "dtype": str, "bytes": int, "count": int, "iters": int, "warmup": int,
                    "time_us": float, "time_us_min": float, "time_us_max": float,
                    "algbw_gbs": float, "busbw_gbs": float, "correct": bool}
_REQUIRED = {"p2p.jsonl": ("src", "dst", "can_access_peer"),
             "allreduce.jsonl": ("group", "gpus", "bytes", "time_us", "algbw_gbs", "busbw_gbs")}


def _typed(value: Any, kind: type) -> Any:
    if value is None:
        return None
    if kind is bool:
        return value if isinstance(value, bool) else None
    if kind is list:
        return value if isinstance(value, list) else None
    if isinstance(value, bool):
        return None
    try:
        return kind(value)
    except (TypeError, ValueError):
        return None


def _json_lines(data: bytes, name: str, fields: dict[str, type]) -> tuple[list[dict[str, Any]], list[ParseError]]:
    rows, errors = [], []
    for number, text in text_lines(data):
        obj = json_object(text, number, f"{name}: ")
        if isinstance(obj, ParseError):
            errors.append(obj)
            continue
        row = {key: _typed(obj.get(key), kind) for key, kind in fields.items()}
        missing = [k for k in _REQUIRED[name] if row[k] is None]
        if missing:
            errors.append(ParseError(number, f"{name}: missing or wrong type: {', '.join(missing)}"))
            continue
        row["source_line"] = number
        rows.append(row)
    return rows, errors


def parse_p2p(data: bytes) -> tuple[list[dict[str, Any]], list[ParseError]]:
    return _json_lines(data, "p2p.jsonl", P2P_FIELDS)


def parse_allreduce(data: bytes) -> tuple[list[dict[str, Any]], list[ParseError]]:
    rows, errors = _json_lines(data, "allreduce.jsonl", ALLREDUCE_FIELDS)
    for row in rows:
        row["gpus"] = ",".join(str(g) for g in row["gpus"])
    return rows, errors


# ---------------------------------------------------------------- env.json, meta.json

def _json_object(data: bytes, name: str) -> tuple[dict[str, Any] | None, list[ParseError]]:
    obj = json_file_object(data, name)
    if isinstance(obj, ParseError):
        return None, [obj]
    version = obj.get("schema_version")
    if version not in SCHEMA_VERSIONS:
        return None, [ParseError(1, f"{name}: schema_version {version!r} is not one this parser knows "
                                    f"({', '.join(map(str, SCHEMA_VERSIONS))})")]
    return obj, []


ENV_FIELDS = ("driver", "cuda", "torch", "nccl", "python", "platform", "gpu_count")


def parse_env(data: bytes) -> tuple[dict[str, Any] | None, list[dict[str, Any]], list[ParseError]]:
    """Versions as one row, and every recorded environment variable as a (name, value) row."""
    obj, errors = _json_object(data, "env.json")
    if obj is None:
        return None, [], errors
    row = {k: obj.get(k) for k in ENV_FIELDS}
    row["source_line"] = 1
    variables = obj.get("env") if isinstance(obj.get("env"), dict) else {}
    forced = obj.get("env_forced") if isinstance(obj.get("env_forced"), dict) else {}
    env_rows = [{"name": str(k), "value": None if v is None else str(v), "forced": k in forced,
                 "source_line": 1} for k, v in sorted(variables.items())]
    return row, env_rows, errors


def parse_meta(data: bytes) -> tuple[dict[str, Any] | None, list[ParseError]]:
    return _json_object(data, "meta.json")

