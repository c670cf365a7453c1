"""The raw_runs row of a run folder: from its meta.json where it has one, else recovered from its
run id, what infer_run read from its cmd.sh and log, and its import.json (a folder brought in by
`campaign import`).
"""
from __future__ import annotations

import json
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from stages.core.warehouse import relative, text_value
from stages.ingest.infer import Inferred
from stages.formats import lines, run_folder
from stages.ingest.parsers import cmd as cmd_parser
from stages.ingest.rows import FolderRows


def first_text(facts: list[lines.Fact], name: str) -> str | None:
    return next((f.value_text for f in facts if f.fact == name and f.value_text), None)


def add_run_row(rows: FolderRows, folder: Path, root: Path, meta: dict[str, Any], rid: run_folder.RunId,
                 log_facts: list[lines.Fact], source_name: str) -> None:
    """The raw_runs row of a folder with a meta.json (`source_name`, already redacted)."""
    spec_params = meta.get("spec_params")
    gpus = meta.get("gpus")
    gpus = ",".join(map(str, gpus)) if isinstance(gpus, list) else text_value(gpus)
    rows.add(
        "raw_runs", relative(folder / source_name, root), 1,
        spec=text_value(meta.get("spec")), profile=text_value(meta.get("profile")),
        model=text_value(meta.get("model")) or rid.model,
        layout=text_value(meta.get("layout")) or rid.layout,
        ctx_label=text_value(meta.get("ctx_label")) or rid.ctx_label,
        engine=text_value(meta.get("engine")) or rid.engine,
        engine_version=text_value(meta.get("engine_version")) or first_text(log_facts, "engine_version"),
        image=text_value(meta.get("image")), image_digest=text_value(meta.get("image_digest")),
        executor=text_value(meta.get("executor")), gpus=gpus,
        gpu_count=len({g.strip() for g in gpus.split(",") if g.strip()}) if gpus else None,
        git_sha=text_value(meta.get("git_sha")), params_hash=text_value(meta.get("params_hash")),
        started_at=run_folder.parse_time(meta.get("started_at")),
        finished_at=run_folder.parse_time(meta.get("finished_at")),
        schema_version=meta.get("schema_version"), recovered=False,
        spec_json=json.dumps(spec_params if spec_params is not None else meta.get("spec"),
                             sort_keys=True, default=str),
    )


def add_recovered_row(rows: FolderRows, files: list[tuple[str, int, int]],
                       command: cmd_parser.Command | None, rid: run_folder.RunId,
                       inferred: list[Inferred], record: dict[str, Any] | None, source: str,
                       line: int) -> None:
    """The raw_runs row of a folder without a meta.json: the run id, what infer_run read from its
    cmd.sh and log, and the profile and spec its import.json (`record`) names."""
    year = datetime.fromtimestamp(min((m for _, _, m in files), default=time.time_ns()) / 1e9,
                                  tz=timezone.utc).year
    read = {value.field: value.value for value in inferred}
    record = record or {}
    rows.add(
        "raw_runs", source, line,
        spec=text_value(record.get("spec")), profile=text_value(record.get("profile")),
        model=rid.model, layout=rid.layout, ctx_label=rid.ctx_label,
        engine=rid.engine or (command.engine if command else None),
        engine_version=read.get("engine_version"), image=read.get("image"), image_digest=None,
        executor=("docker" if command and command.wrapper == "docker" else "local") if command else None,
        gpus=read.get("gpus"), gpu_count=int(read["gpu_count"]) if "gpu_count" in read else None,
        git_sha=None, params_hash=None, started_at=rid.started_at(year),
        finished_at=None, schema_version=None, recovered=True, spec_json=None,
        imported_from=text_value(record.get("source")),
        imported_at=run_folder.parse_time(record.get("imported_at")),
        imported_by=text_value(record.get("imported_by")),
        imported_kind=text_value(record.get("kind")) or ("run folder" if record else None),
    )
