"""The shape of the code: the import graph of `stages/` has no circle, and the shared core imports
no stage. Every import counts, a function's own included (an import moved into a function to
break a circle at load time still ties the two modules together)."""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "stages"
CORE = "stages.core"


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
