"""dvc.yaml's deps cover what each stage's code imports and reads, so no output goes stale; the
run stage instead depends on no code at all but on params.yaml's `protocol`, bumped on purpose.

From each stage's entry modules the imports are followed (ast: `import stages.<module>`,
`from stages.<module> import y`, `from stages.<package> import <module>`, at any depth of the
module), and the package files each module reads are found (`Path(__file__).parent / "sql" / ...` and names bound to such a path). Every
module file and every file or folder read must be covered by one of the stage's deps.
"""
from __future__ import annotations

import ast
import itertools
import re
from pathlib import Path

import pytest
import yaml

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


def module_file(name: str, root: Path = ROOT) -> Path | None:
    """The file of a project module (`stages.<a>.<b>` -> stages/<a>/<b>.py, or
    stages/<a>/<b>/__init__.py)."""
    base = root.joinpath(*name.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def imported(path: Path, root: Path = ROOT) -> set[str]:
    """The project modules a module imports, anywhere in it (lazy imports included)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.split(".")[0] == "stages")
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "stages":
            found.add(node.module)
            for a in node.names:            # `from stages import bench`: a module, not a name
                if module_file(f"{node.module}.{a.name}", root):
                    found.add(f"{node.module}.{a.name}")
    return {m for m in found if module_file(m, root)}


def closure(entries: tuple[str, ...], root: Path = ROOT) -> set[str]:
    """The entry modules and every project module they import, transitively (with packages)."""
    seen: set[str] = set()
    todo = list(entries)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        parts = name.split(".")
        todo += [".".join(parts[:i]) for i in range(1, len(parts)) if module_file(".".join(parts[:i]), root)]
        todo += sorted(imported(module_file(name, root), root))
    return seen


def _strings(node: ast.AST) -> set[str] | None:
    """The strings an expression can be: a literal, or a conditional of literals."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value}
    if isinstance(node, ast.IfExp):
        a, b = _strings(node.body), _strings(node.orelse)
        return a | b if a is not None and b is not None else None
    return None


def _is_here(node: ast.AST) -> bool:
    """`Path(__file__).parent` (or `.resolve().parent`)."""
    return (isinstance(node, ast.Attribute) and node.attr == "parent"
            and "__file__" in ast.unparse(node.value) and "parent" not in ast.unparse(node.value))


def _is_up(node: ast.AST) -> bool:
    """`<a path>.parent`: the folder above (`Path(__file__).parent.parent`, the package's parent)."""
    return isinstance(node, ast.Attribute) and node.attr == "parent" and not _is_here(node)


def read_paths(path: Path) -> set[Path]:
    """Files and folders a module reads beside itself: each `/` chain from `Path(__file__).parent`
    (or a folder above it, `.parent.parent`) or from a name bound to one, resolved as far as its
    segments are literals (or names bound to literals); a segment that is not (an f-string) stops
    the chain at the folder before it."""
    tree = ast.parse(path.read_text())
    here = path.parent
    names: dict[str, set[str]] = {}       # variable -> literal strings assigned to it
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            values = _strings(node.value)
            for t in node.targets:
                if isinstance(t, ast.Name) and values is not None:
                    names.setdefault(t.id, set()).update(values)
    bound: dict[str, set[Path]] = {}      # name -> paths it holds (module constants, defaults)

    def resolve(node: ast.AST) -> set[Path] | None:
        if _is_here(node):
            return {here}
        if _is_up(node):
            up = resolve(node.value)
            return {p.parent for p in up} if up else None
        if isinstance(node, ast.Name) and node.id in bound:
            return bound[node.id]
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
            left = resolve(node.left)
            if left is None:
                return None
            seg = _strings(node.right)
            if seg is None and isinstance(node.right, ast.Name):
                seg = names.get(node.right.id)
            if seg is None:
                return left                   # a computed name: the folder is what is read
            return {p / s for p, s in itertools.product(left, seg)}
        return None

    for _ in range(3):                        # names bound to names bound to paths
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                got = resolve(node.value)
                if got:
                    bound[node.targets[0].id] = got
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                args = node.args.args[len(node.args.args) - len(node.args.defaults):] + node.args.kwonlyargs
                defaults = node.args.defaults + [d for d in node.args.kw_defaults]
                for arg, default in zip(args, defaults):
                    got = resolve(default) if default is not None else None
                    if got:
                        bound[arg.arg] = got
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}

    def only_a_root(name: str) -> bool:
        """A name used only to build longer paths (`SQL_DIR / "x"`, or a parameter's default)."""
        for node in ast.walk(tree):
            if isinstance(node, ast.Name) and node.id == name and isinstance(node.ctx, ast.Load):
                up = parents.get(node)
                if isinstance(up, ast.BinOp) and isinstance(up.op, ast.Div) and up.left is node:
                    continue
                if isinstance(up, (ast.arguments, ast.Call, ast.keyword)):
                    continue                  # a default, or handed to a function that builds on it
                return False
        return True

    read: set[Path] = set()
    for node in ast.walk(tree):
        if not (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div)):
            continue
        up = parents.get(node)
        if isinstance(up, ast.BinOp) and isinstance(up.op, ast.Div) and up.left is node:
            continue                          # part of a longer chain
        if isinstance(up, ast.Assign) and all(isinstance(t, ast.Name) and only_a_root(t.id)
                                              for t in up.targets):
            continue                          # a root other paths are built from
        read |= resolve(node) or set()
    for name, paths in bound.items():         # constants read as they are (`SCHEMA_FILE`)
        if not only_a_root(name) and name in {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}:
            read |= paths
    return {p for p in read if p != here and p.exists() and p.suffix != ".py"}


def needed(stage: str, root: Path = ROOT) -> set[Path]:
    """Every module file a stage's code imports and every package file or folder it reads."""
    files = {f for m in closure(STAGE_ENTRIES[stage], root)
             if (f := module_file(m, root)).stat().st_size}        # an empty __init__.py holds no code
    return files | {p for f in files for p in read_paths(f)}


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
