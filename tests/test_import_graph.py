"""The shape of the code: the import graph of `stages/` has no circle, the shared core imports no
stage, and no stage imports another: a stage package imports only the shared packages (the core,
the raw folders' formats, planning), the formats import only the core, and only the tools and the
command line import stages. Every import counts, a function's own included (an import moved into
a function to break a circle at load time still ties the two modules together)."""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "stages"
CORE = "stages.core"
# What each part of stages/ may import besides itself. The shared packages: the core (imports none
# of the others), the raw folders' contract (stages.formats) and planning, on the core. The stages
# (the dvc stages' packages) import only those. The tools and the command line import anything.
SHARED = {"core": set(), "formats": {"core"}, "planning": {"core"}}
STAGES = ("run", "probe", "ingest", "derive", "plan", "render")
ANYTHING = ("tools", "cli")
ALLOWED = {**SHARED, **{stage: set(SHARED) for stage in STAGES}}
# Edges that break the rule, being removed. Listed by module; none may be added.
KNOWN_EXCEPTIONS: set[tuple[str, str]] = set()


def module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in (ROOT / PACKAGE).rglob("*.py")}


def imports(path: Path, name: str, known: set[str]) -> set[str]:
    """The modules of `known` that the module `name` at `path` imports, anywhere in it."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(up + ([base] if base else []))
            # `from pkg import mod` names a module; `from mod import thing` names its module
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
        else:
            continue
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name and target != PACKAGE:
                found.add(target)
    return found


def graph() -> dict[str, set[str]]:
    mods = modules()
    known = set(mods)
    return {name: imports(path, name, known) for name, path in mods.items()}


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index, low, stack, on_stack, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return sorted(out)


def test_the_import_graph_has_no_circle():
    found = circles(graph())
    assert found == [], "import circles: " + "; ".join(" <-> ".join(c) for c in found)


def test_the_core_imports_no_stage():
    edges = graph()
    outward = sorted(f"{m} imports {t}" for m, ts in edges.items() if m.startswith(CORE)
                     for t in ts if not t.startswith(CORE))
    assert outward == []


def part(module: str) -> str:
    """The part of stages/ a module belongs to: its package under stages/ (`stages.run.stage` ->
    run), `cli` for the command line's modules (stages/cli*.py), `stages` for the package itself."""
    parts = module.split(".")
    if len(parts) == 1:
        return PACKAGE
    return "cli" if len(parts) == 2 and parts[1].startswith("cli") else parts[1]


def crossings(edges: dict[str, set[str]]) -> list[tuple[str, str]]:
    """The imports between parts of stages/ that ALLOWED does not allow (a part not in it, or in
    ANYTHING, is not checked)."""
    out = []
    for module, targets in edges.items():
        src = part(module)
        if src in ANYTHING or src == PACKAGE:
            continue
        allowed = ALLOWED.get(src)
        assert allowed is not None, f"{module}: part {src} of stages/ is not in the import rule"
        out += [(module, t) for t in targets if part(t) != src and part(t) not in allowed]
    return sorted(out)


def test_no_stage_imports_another_stage():
    """run, probe, ingest, derive, plan and render import the shared packages only; the formats
    import only the core. The known exceptions are listed, and each must still be there."""
    found = set(crossings(graph()))
    assert sorted(found - KNOWN_EXCEPTIONS) == [], "imports across stages"
    assert sorted(KNOWN_EXCEPTIONS - found) == [], "gone: take them out of KNOWN_EXCEPTIONS"


def test_every_part_of_stages_is_in_the_import_rule():
    parts = {part(m) for m in graph()} - {PACKAGE}
    assert parts == set(ALLOWED) | set(ANYTHING)


def test_the_rule_sees_a_stage_importing_another():
    edges = {"stages.run.stage": {"stages.ingest.parsers.cmd", "stages.formats.lines", "stages.core.config"},
             "stages.formats.lines": {"stages.core.names", "stages.planning.plans"},
             "stages.tools.synth.campaign": {"stages.run.stage", "stages.ingest.read"},
             "stages.cli": {"stages.render.stage"}}
    assert crossings(edges) == [("stages.formats.lines", "stages.planning.plans"),
                                ("stages.run.stage", "stages.ingest.parsers.cmd")]


def test_the_checker_sees_a_circle_and_a_function_level_import(tmp_path):
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    source = tmp_path / "m.py"
    source.write_text("def f():\n    from stages.run import needle\n    import stages.core.config\n")
    assert imports(source, "stages.x.m", {"stages.run.needle", "stages.core.config", "stages.run"}) == {
        "stages.run.needle", "stages.core.config"}


def imported_test_modules(source: str, test_modules: set[str]) -> list[str]:
    """The test modules (of `test_modules`, or under `tests.`) that `source` imports, anywhere in it."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level:
            names = [node.module or ""]
        else:
            continue
        found += [n for n in names if n.split(".")[0] in test_modules or n.split(".")[0] == "tests"]
    return found


def test_no_test_module_imports_another():
    """Tests share code through tests/helpers/ and builds through tests/conftest.py, never by
    importing another test module (which ties the files together and builds its module fixtures
    again in each importer)."""
    tests = ROOT / "tests"
    names = {p.stem for p in tests.glob("test_*.py")} | {"conftest"}
    found = {p.relative_to(ROOT).as_posix(): imported_test_modules(p.read_text(), names)
             for p in sorted([*tests.glob("*.py"), *(tests / "helpers").rglob("*.py")])}
    assert {path: mods for path, mods in found.items() if mods} == {}
    source = "def f():\n    import test_a as a\nfrom test_b import x\nfrom helpers import y\n"
    assert sorted(imported_test_modules(source, {"test_a", "test_b"})) == ["test_a", "test_b"]
