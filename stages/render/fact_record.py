"""A fact's record: what a printed number is, where it came from and where it is audited; its id,
and the plain Python form of the values a query returns (facts.py makes them)."""
from __future__ import annotations

import datetime as dt
import decimal
import hashlib
import json
import re
from dataclasses import dataclass, field, fields, replace
from typing import Any

from stages.render.escape import audit_location
from stages.render.numbers import format_value

SAFE_ID = re.compile(r"^[A-Za-z0-9_.-]+$")


@dataclass
class Fact:
    id: str
    name: str
    params: dict[str, Any]
    value: Any
    unit: str | None
    display: str
    sql: str
    run_ids: list[str]
    source_file: str | None
    source_line: int | None
    excerpt: str | None
    stage: str
    git_sha: str | None
    pages: list[str] = field(default_factory=list)
    inputs: list[str] = field(default_factory=list)   # a derived fact's two facts (derived.py)
    source_note: str | None = None
    audit_page: str = ""       # where its audit entry is (escape.audit_location), set when made
    audit_anchor: str = ""
    statistic: str | None = None      # for a fact computed from many rows (inputs.py): how,
    input_rows: list[dict] = field(default_factory=list)   # and from which
    # the caveats it rests on, printed beside it (stages/render/marks.py): provisional,
    # capacity-limited, cached, one request; a derived fact carries its inputs'
    marks: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.audit_page:
            self.audit_page, self.audit_anchor = audit_location(
                self.id, self.name, self.run_ids, self.params)

    def record(self) -> dict[str, Any]:
        """The fact as facts.json holds it (its lists shared, not copied: it is only written)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    def at_decimals(self, decimals: int | None) -> "Fact":
        """The fact printed with `decimals` (itself when none are asked for)."""
        if decimals is None:
            return self
        return replace(self, display=format_value(self.value, decimals))


def fact_id(name: str, params: dict[str, Any]) -> str:
    values = [str(params[k]) for k in sorted(params)]
    if all(SAFE_ID.match(v) for v in values) and len("--".join(values)) <= 140:
        return "--".join([name, *values])
    digest = hashlib.sha1(json.dumps(params, sort_keys=True, default=str).encode()).hexdigest()
    return f"{name}--{digest[:12]}"


def run_ids(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        return [str(v) for v in value if v is not None]
    return [s for s in str(value).split(",") if s]


def plain(value: Any) -> Any:
    if isinstance(value, decimal.Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, (dt.date, dt.datetime)):
        return value.isoformat()
    return value
