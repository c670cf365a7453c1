"""The project's code as data: the modules a stage's entry modules import (their closure,
followed through the source with ast, lazy imports included), the files those modules read beside
themselves (SQL, YAML, templates, found from `Path(__file__).parent / ...` chains), and a version
of all of it. tests/test_dvc_deps.py checks dvc.yaml's deps against these; a stage whose outputs
are kept between runs (ingest's folders, render's cache) keys them by code_version.
"""
from __future__ import annotations

import ast
import functools
import hashlib
import itertools
from importlib import metadata
from pathlib import Path
from typing import Iterable, Iterator

ROOT = Path(__file__).resolve().parents[2]      # the folder that holds the `stages` package


def module_file(name: str, root: Path = ROOT) -> Path | None:
    """The file of a project module (`stages.<a>.<b>` -> stages/<a>/<b>.py, or
    stages/<a>/<b>/__init__.py)."""
    base = root.joinpath(*name.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def _stamp(path: Path) -> tuple[int, int]:
    """What the per-file memos below are keyed by beside the path: its mtime and size."""
    st = path.stat()
    return st.st_mtime_ns, st.st_size


def _statements(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """Every statement of a module, nested ones included (an import is a statement: its
    expressions need not be walked)."""
    for node in body:
        yield node
        for field in ("body", "orelse", "finalbody", "handlers", "cases"):
            inner = getattr(node, field, None)
            if isinstance(inner, list):
                yield from _statements(inner)


def imported(path: Path, root: Path = ROOT) -> set[str]:
    """The project modules a module imports, anywhere in it (lazy imports included)."""
    return set(_imported(path, root, _stamp(path)))


@functools.lru_cache(maxsize=None)
def _imported(path: Path, root: Path, stamp: tuple[int, int]) -> frozenset[str]:
    found: set[str] = set()
    for node in _statements(ast.parse(path.read_text()).body):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.split(".")[0] == "stages")
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "stages":
            found.add(node.module)
            for a in node.names:            # `from stages import bench`: a module, not a name
                if module_file(f"{node.module}.{a.name}", root):
                    found.add(f"{node.module}.{a.name}")
    return frozenset(m for m in found if module_file(m, root))


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
    return set(_read_paths(path, _stamp(path)))


@functools.lru_cache(maxsize=None)
def _read_paths(path: Path, stamp: tuple[int, int]) -> frozenset[Path]:
    text = path.read_text()
    if "__file__" not in text:                # every chain starts at the module's own file
        return frozenset()
    tree = ast.parse(text)
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
    return frozenset(p for p in read if p != here and p.exists() and p.suffix != ".py")


def code_files(entries: Iterable[str], root: Path = ROOT) -> set[Path]:
    """Every module file the entry modules import (closure; an empty __init__.py holds no code)
    and every package file or folder those modules read (read_paths)."""
    files = {f for m in closure(tuple(entries), root)
             if (f := module_file(m, root)).stat().st_size}
    return files | {p for f in files for p in read_paths(f)}


def package_data(folder: Path) -> set[Path]:
    """The files under `folder` that are not Python, leaving out the folders of other packages
    (those holding an __init__.py) and caches: a package's SQL, YAML and templates, however its
    code finds them."""
    found: set[Path] = set()
    for path in folder.iterdir():
        if path.is_dir() and path.name != "__pycache__" and not (path / "__init__.py").exists():
            found |= package_data(path)
        elif path.is_file() and path.suffix != ".py":
            found.add(path)
    return found


@functools.lru_cache(maxsize=None)
def code_version(entries: tuple[str, ...], libraries: tuple[str, ...] = (), salt: str = "") -> str:
    """A version of the code the entry modules run: the name and bytes of each file of code_files
    and of each package's data (package_data: a folder read, and the non-Python files of the
    folder of each module), the versions of `libraries` (installed distributions;
    `none` when one is not) and `salt`. A change to any of them is a new version."""
    h = hashlib.sha256(salt.encode() + b"\0")
    files = code_files(entries)
    paths = {p for p in files if not p.is_dir()}
    for folder in {p if p.is_dir() else p.parent for p in files}:
        paths |= package_data(folder)
    for path in sorted(paths):
        data = path.read_bytes()
        h.update(f"{path.relative_to(ROOT).as_posix()}\0{len(data)}\0".encode() + data)
    for lib in libraries:
        try:
            h.update(f"{lib}={metadata.version(lib)}\n".encode())
        except metadata.PackageNotFoundError:
            h.update(f"{lib}=none\n".encode())
    return h.hexdigest()
