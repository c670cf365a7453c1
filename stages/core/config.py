"""Reading params.yaml: the one place paths and settings come from."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from stages.core.errors import CampaignError
from stages.core.params_check import check_params

PARAMS_FILE = "params.yaml"
class ParamsError(CampaignError):
    """params.yaml breaks its rules: one line per problem (the CLI prints each)."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        super().__init__("\n".join(problems))


# libyaml's safe loader where PyYAML was built with it: the same documents, read ten times faster
SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def read_yaml(path: Path, *, error: type[CampaignError] = CampaignError, what: str = "") -> Any:
    """A settings file's YAML document ({} when it is empty). A missing file or one that is not
    YAML raises `error`, naming the file (`what`, where given, says what the file is for)."""
    try:
        return yaml.safe_load(path.read_text()) or {}
    except FileNotFoundError:
        raise error(f"{path}: not found{f' ({what})' if what else ''}") from None
    except yaml.YAMLError as exc:
        raise error(f"{path.name}: not valid YAML: {exc}".splitlines()[0]) from None


def load_params(root: Path | str = ".", *, check: bool = True) -> dict[str, Any]:
    """params.yaml, checked with `check_params` (a ParamsError lists every problem)."""
    path = Path(root) / PARAMS_FILE
    try:
        params = yaml.load(path.read_text(), Loader=SAFE_LOADER)
    except FileNotFoundError:
        raise CampaignError(f"{path}: not found (run from the project root)") from None
    except yaml.YAMLError as exc:
        raise CampaignError(f"{path}: not valid YAML: {exc}") from None
    if not isinstance(params, dict):
        raise CampaignError(f"{path}: expected a mapping at the top level")
    if check:
        problems = check_params(params, root)
        if problems:
            raise ParamsError([f"{PARAMS_FILE}: {p}" for p in problems])
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
    templates: Path | None = None     # render's inputs and the tools' report folders; from_params
    series: Path | None = None
    sources: Path | None = None       # always sets them
    table_docs: Path | None = None
    mkdocs: Path | None = None
    bench: Path | None = None
    reliability: Path | None = None
    chart_cache: Path | None = None   # render's chart images, kept between renders
    plan: Path | None = None          # the plan stage's outputs (stages/plan)

    @classmethod
    def from_params(cls, params: dict[str, Any], root: Path | str = ".") -> "Paths":
        root = Path(root)
        p = params.get("paths") or {}
        missing = [k for k in cls.__dataclass_fields__ if k not in ("root", "plan") and k not in p]
        if missing:
            raise CampaignError(f"params.yaml: paths is missing {', '.join(missing)}")
        paths = {k: root / v for k, v in p.items() if k in cls.__dataclass_fields__}
        # A profile may keep its run folders elsewhere: on a cluster, storage the compute nodes share.
        runs = ((params.get("profiles") or {}).get(params.get("profile")) or {}).get("runs")
        if isinstance(runs, str) and runs:
            paths["runs"] = root / runs
        return cls(root=root, **paths)


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


def profile_rules(params: dict[str, Any], name: str | None = None) -> dict[str, Any]:
    """The rules derive applies to runs of a profile (the active one by default): the shared
    `rules` with the profile's own `profiles.<name>.rules`."""
    return {**(params.get("rules") or {}), **(profile(params, name).get("rules") or {})}


def derive_settings(params: dict[str, Any]) -> dict[str, Any]:
    """What the derive stage reads from params, as `derive.run` takes it: the active profile's
    rules, workloads and service level objectives (`slo.<profile>`), and every profile's, by name;
    the energy settings."""
    slo = params.get("slo") or {}
    return {"rules": profile_rules(params), "workloads": profile_workloads(params),
            "slo": slo.get(params.get("profile")),
            "profiles": {name: {"rules": profile_rules(params, name),
                                "workloads": profile_workloads(params, name),
                                "slo": slo.get(name)}
                         for name in params.get("profiles") or {}},
            "energy": params.get("energy"), "prices": params.get("prices"),
            "pareto": params.get("pareto")}


# ---------------------------------------------------------------------------------------------
# Checking params.yaml: every problem found, one line each (without the file name).


