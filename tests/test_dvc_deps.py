"""dvc.yaml's deps cover what each stage's code imports and reads, so no output goes stale; the
run stage instead depends on no code at all but on params.yaml's `protocol`, bumped on purpose.

From each stage's entry modules the imports are followed (ast: `import stages.<module>`,
`from stages.<module> import y`, `from stages.<package> import <module>`, at any depth of the
module), and the package files each module reads are found (`Path(__file__).parent / "sql" / ...` and names bound to such a path):
stages/core/code.py, which ingest and render also key their kept outputs by (code_version). Every
module file and every file or folder read must be covered by one of the stage's deps.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
import yaml

from stages.core.code import closure, code_files, read_paths

ROOT = Path(__file__).resolve().parent.parent

# The modules each DVC stage's command runs (stages/cli.py calls them); everything they import
# follows. Moving a module: change it here.
STAGE_ENTRIES: dict[str, tuple[str, ...]] = {
    "model": ("stages.run.model",),
    "run": ("stages.run.schedule", "stages.run.stage"),
    "ingest": ("stages.ingest.stage", "stages.ingest.nodes"),
    "probe": ("stages.probe.node_probe",),
    "derive": ("stages.derive.stage",),
    "plan": ("stages.plan.stage", "stages.plan.report"),
    "render": ("stages.render.stage",),
}


def needed(stage: str, root: Path = ROOT) -> set[Path]:
    """Every module file a stage's code imports and every package file or folder it reads."""
    return code_files(STAGE_ENTRIES[stage], root)


def stage_deps(stage: str, root: Path = ROOT) -> list[Path]:
    """A stage's deps, `${a.b}` filled in from params.yaml (`${item}` of a foreach left out)."""
    params = yaml.safe_load((root / "params.yaml").read_text())

    def value(m: re.Match) -> str:
        node = params
        for key in m.group(1).split("."):
            node = node[key]
        return str(node)

    dvc = yaml.safe_load((root / "dvc.yaml").read_text())["stages"][stage]
    deps = (dvc.get("do") or dvc).get("deps") or []
    return [root / re.sub(r"\$\{([\w.-]+)\}", value, d) for d in deps if "${item}" not in d]


def docstring_only(path: Path) -> bool:
    """A package's __init__.py that holds nothing but its docstring (no code to depend on)."""
    if path.name != "__init__.py" or not path.is_file():
        return False
    body = ast.parse(path.read_text()).body
    return len(body) <= 1 and all(isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)
                                  for n in body)


def uncovered(stage: str, root: Path = ROOT) -> list[str]:
    deps = stage_deps(stage, root)
    return sorted(str(p.relative_to(root)) for p in needed(stage, root)
                  if not docstring_only(p) and not any(p == d or p.is_relative_to(d) for d in deps))


# Stages whose code is covered by the `protocol` param instead of their files: an engine run costs
# hours on the node, so a code edit re-runs it only when the edit bumps the protocol.
PROTOCOL_STAGES = {"run"}


@pytest.mark.parametrize("stage", sorted(set(STAGE_ENTRIES) - PROTOCOL_STAGES))
def test_stage_deps_cover_its_code(stage):
    assert uncovered(stage) == [], f"dvc.yaml stage {stage} lacks deps"


@pytest.mark.parametrize("stage", sorted(PROTOCOL_STAGES))
def test_protocol_stages_depend_on_the_protocol_not_on_code(stage):
    dvc = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"][stage]
    code = [d for d in stage_deps(stage) if d.suffix == ".py" or d.is_relative_to(ROOT / "stages")]
    assert code == [], f"dvc.yaml stage {stage} depends on code: {code}"
    assert "protocol" in dvc["params"]
    protocol = yaml.safe_load((ROOT / "params.yaml").read_text())["protocol"]
    assert isinstance(protocol, int) and protocol >= 1
    assert uncovered(stage) != []           # its code exists: the protocol stands for it


def test_every_stage_of_dvc_yaml_has_its_entry_modules():
    assert set(yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]) == set(STAGE_ENTRIES)


def test_a_missing_dep_is_caught(tmp_path):
    """The same check on a copy of the project whose derive stage forgot its own package, and
    whose render stage forgot the core's secrets module."""
    for name in ("stages", "params.yaml"):
        (tmp_path / name).symlink_to(ROOT / name)
    dvc = yaml.safe_load((ROOT / "dvc.yaml").read_text())
    dvc["stages"]["derive"]["deps"].remove("stages/derive")
    dvc["stages"]["render"]["deps"].remove("stages/core/secrets.py")
    (tmp_path / "dvc.yaml").write_text(yaml.safe_dump(dvc))
    assert {"stages/derive/stage.py", "stages/derive/sql/intermediate"} <= set(uncovered("derive", tmp_path))
    assert "stages/core/secrets.py" in uncovered("render", tmp_path)


def test_the_import_graph_is_followed():
    """Lazy imports, `from stages import x` and SQL folders read through a bound name are found."""
    render = closure(STAGE_ENTRIES["render"])
    assert {"stages.render.facts", "stages.render.charts", "stages.render.warehouse_page", "stages.core.catalogue"} <= render
    reads = read_paths(ROOT / "stages" / "core" / "catalogue.py")     # derive's models, read by path
    assert {ROOT / "stages/derive/sql/marts/schema.yaml", ROOT / "stages/derive/sql/staging",
            ROOT / "stages/derive/sql/intermediate", ROOT / "stages/derive/sql/marts"} <= reads


def test_derive_lists_every_profiles_rules():
    """derive judges each run by its own profile's rules: every profile's are among its params."""
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    listed = set(yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]["derive"]["params"])
    for name, prof in params["profiles"].items():
        for rule in prof["rules"]:
            assert f"profiles.{name}.rules.{rule}" in listed
    assert "profile" in listed and {f"rules.{r}" for r in params["rules"]} <= listed
