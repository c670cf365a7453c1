"""Reading params.yaml: the one place paths and settings come from."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

PARAMS_FILE = "params.yaml"


class CampaignError(Exception):
    """A user error: printed as one line by the CLI, with a non-zero exit."""


def load_params(root: Path | str = ".") -> dict[str, Any]:
    path = Path(root) / PARAMS_FILE
    try:
        params = yaml.safe_load(path.read_text())
    except FileNotFoundError:
        raise CampaignError(f"{path}: not found (run from the project root)") from None
    except yaml.YAMLError as exc:
        raise CampaignError(f"{path}: not valid YAML: {exc}") from None
    if not isinstance(params, dict):
        raise CampaignError(f"{path}: expected a mapping at the top level")
    return params


@dataclass(frozen=True)
class Paths:
    root: Path
    models: Path
    runs: Path
    nodes: Path
    ledger: Path
    warehouse: Path
    campaign_db: Path
    derived: Path
    metrics: Path
    facts: Path
    docs: Path
    site: Path
    publish: Path

    @classmethod
    def from_params(cls, params: dict[str, Any], root: Path | str = ".") -> "Paths":
        root = Path(root)
        p = params.get("paths") or {}
        missing = [k for k in cls.__dataclass_fields__ if k != "root" and k not in p]
        if missing:
            raise CampaignError(f"params.yaml: paths is missing {', '.join(missing)}")
        return cls(root=root, **{k: root / v for k, v in p.items() if k in cls.__dataclass_fields__})


def spec(params: dict[str, Any], name: str, *, check_profile: bool = True) -> dict[str, Any]:
    """The run spec `name`, checked against the active profile."""
    specs = params.get("specs") or {}
    if name not in specs:
        known = ", ".join(sorted(specs)) or "none"
        raise CampaignError(f"unknown spec {name!r} (params.yaml specs: {known})")
    s = specs[name]
    active = params.get("profile")
    if check_profile and s.get("profile") != active:
        raise CampaignError(
            f"spec {name!r} is for profile {s.get('profile')!r}, but the active profile is {active!r}")
    return s


def profile(params: dict[str, Any], name: str | None = None) -> dict[str, Any]:
    name = name or params.get("profile")
    profiles = params.get("profiles") or {}
    if name not in profiles:
        raise CampaignError(f"unknown profile {name!r} (params.yaml profiles: {', '.join(profiles)})")
    return profiles[name]


def profile_workloads(params: dict[str, Any], name: str | None = None) -> dict[str, Any]:
    """The workloads of a profile (the active one by default): `workloads.<profile>` in params.

    Workloads are grouped by profile so that a run stage depends only on its own profile's group
    (editing a node workload does not re-run the local engines)."""
    name = name or params.get("profile")
    groups = params.get("workloads") or {}
    group = groups.get(name)
    if group is None:
        return {}
    if not isinstance(group, dict):
        raise CampaignError(f"params.yaml: workloads.{name} must be a mapping of workload names")
    return group
