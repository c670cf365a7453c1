"""What README.md and the pages of docs/ may show, checked against the tree: `problems(page)` lists,
one line each, a relative link to a file (or heading) that is not there; a command in a code block
or code span that does not exist (`make <target>`: a Makefile target; `campaign <sub> --opt`: a
subcommand of the CLI and one of its options; `dvc <cmd> [<sub>]`: a dvc command;
`python -m <module>`: a module of the project); a repository path in backticks (`stages/...`,
`tests/...`, `data/...`, `site/...`) that is neither in the tree nor a declared output; a file
name in backticks (`raw.sql`) that no file of the tree has; and a params key (`rules.gate_min_score`)
that params.yaml does not hold and the code never reads. A `<placeholder>` in a path or key
stands for any name."""
from __future__ import annotations

import argparse
import functools
import os
import re
import shlex
import subprocess
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
FENCE = re.compile(r"^```[^\n]*\n(.*?)^```[ \t]*$", re.M | re.S)
SPAN = re.compile(r"`([^`]+)`")          # a code span may go on over a line break
LINK = re.compile(r"\[[^\]\n]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*$", re.M)
PLACEHOLDER = re.compile(r"<[^<>]*>")
PATH_TOPS = ("stages/", "tests/", "data/", "site/", "docs/")
ROOT_FILES = {"params.yaml", "dvc.yaml", "dvc.lock", "mkdocs.yml", "Makefile", "pyproject.toml",
              "requirements.lock", "README.md"}
NAMED_FILE = re.compile(r"^[\w.-]+\.(py|sql|j2|yaml|yml)$")
PARAMS_KEY = re.compile(r"^[a-z_]+(\.(<[^<>]+>|[a-z0-9_-]+))+$")
SKIPPED_DIRS = {".git", ".venv", "__pycache__", "data", "node_modules", ".pytest_cache",
                ".hypothesis", ".cache", "campaign.egg-info"}


def pages(root: Path = ROOT) -> list[Path]:
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


def problems(page: Path, root: Path = ROOT) -> list[str]:
    text = page.read_text()
    prose = FENCE.sub("", text)
    spans = [" ".join(span.split()) for span in SPAN.findall(prose)]
    found = [*link_problems(page, prose, root)]
    for block in FENCE.findall(text):
        for line in block.splitlines():
            found += command_problems(line, root)
    for span in filter(None, spans):
        if span.split()[0] in ("campaign", "make", "dvc", "python") or span.startswith(".venv/bin/"):
            found += command_problems(span, root)
        else:
            found += path_problems(span, root)
    return found


# ---------------------------------------------------------------- links

def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for heading in HEADING.findall(FENCE.sub("", page.read_text())):
        base = slug(heading)
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


def link_problems(page: Path, prose: str, root: Path) -> list[str]:
    found = []
    for target in LINK.findall(prose):
        if re.match(r"^[a-z]+:", target):          # http:, https:, mailto:
            continue
        file, _, anchor = target.partition("#")
        dest = (page.parent / file).resolve() if file else page
        if not dest.exists():
            found.append(f"link {target}: no file {file}")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            found.append(f"link {target}: no heading #{anchor} in {dest.name}")
    return found


# ---------------------------------------------------------------- commands

def command_problems(line: str, root: Path) -> list[str]:
    line = re.sub(r"(^|\s)#.*$", "", line.strip().removeprefix("$ "))
    found = []
    for piece in re.split(r"&&|\|\||;|\|", line):
        try:
            words = shlex.split(piece)
        except ValueError:
            words = piece.split()
        while words and re.match(r"^[A-Z_][A-Z0-9_]*=", words[0]):
            words = words[1:]
        if not words:
            continue
        tool, args = Path(words[0]).name, words[1:]
        if tool == "campaign":
            found += campaign_problems(args)
        elif tool == "make":
            targets = make_targets(root)
            found += [f"make {a}: no such Makefile target" for a in args
                      if not a.startswith("-") and "=" not in a and a not in targets]
        elif tool == "dvc":
            found += dvc_problems(args)
        elif tool.startswith("python") and args[:1] == ["-m"] and len(args) > 1 and args[1].startswith("stages."):
            if not module_file(args[1], root):
                found.append(f"python -m {args[1]}: no such module")
    return found


@functools.lru_cache(maxsize=1)
def campaign_cli():
    from stages.cli import main
    return main


def campaign_problems(args: list[str]) -> list[str]:
    import click
    command, said = campaign_cli(), "campaign"
    words = list(args)
    while isinstance(command, click.Group):
        if not words or words[0] in ("-h", "--help"):
            return []
        sub = words.pop(0)
        said += f" {sub}"
        if sub not in command.commands:
            return [f"{said}: no such subcommand"]
        command = command.commands[sub]
    options = {"-h", "--help"} | {o for p in command.params for o in (*p.opts, *p.secondary_opts)
                                  if o.startswith("-")}
    return [f"{said} {w.split('=')[0]}: no such option" for w in words
            if w.startswith("-") and w.split("=")[0] not in options]


def make_targets(root: Path) -> set[str]:
    targets = set()
    for line in (root / "Makefile").read_text().splitlines():
        rule = re.match(r"^([^\s:=#][^:=#]*?)\s*::?(?!=)", line)
        if rule:
            targets |= {t for t in rule.group(1).split() if "$" not in t}
    return targets


@functools.lru_cache(maxsize=1)
def dvc_parser() -> argparse.ArgumentParser:
    from dvc.cli.parser import get_main_parser
    return get_main_parser()


def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser] | None:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return None


def dvc_problems(args: list[str]) -> list[str]:
    parser, said = dvc_parser(), "dvc"
    words = [w for w in args if not w.startswith("-")]
    while (choices := subcommands(parser)) is not None and words:
        said += f" {words[0]}"
        if words[0] not in choices:
            return [f"{said}: no such dvc command"]
        parser = choices[words.pop(0)]
    return []


def module_file(module: str, root: Path) -> Path | None:
    base = root.joinpath(*module.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.exists():
            return candidate
    return None


# ---------------------------------------------------------------- paths and keys

def path_problems(span: str, root: Path) -> list[str]:
    if " " in span:
        return []
    if span.startswith(PATH_TOPS) or span in ROOT_FILES:
        return [] if path_known(span, root) else [f"`{span}`: not in the tree, nor a declared output"]
    if NAMED_FILE.match(span):
        return [] if span in file_names(root) else [f"`{span}`: no file of that name in the tree"]
    if span.startswith("stages.") and re.match(r"^[\w.]+$", span):
        head, _, _ = span.rpartition(".")
        known = module_file(span, root) or "." in head and module_file(head, root)
        return [] if known else [f"`{span}`: no such module"]
    if PARAMS_KEY.match(span) and span.split(".")[0] in params(root):
        return [] if key_known(span, root) else [f"`{span}`: not a key of params.yaml, nor read by the code"]
    return []


def path_known(span: str, root: Path) -> bool:
    pattern = PLACEHOLDER.sub("*", span).rstrip("/")
    if "*" in pattern:
        if any(root.glob(pattern)):
            return True
        pattern = pattern.split("*")[0].rstrip("/")
    elif (root / pattern).exists():
        return True
    return pattern.startswith("data/") and declared(pattern.removesuffix(".dvc"), root)


def declared(path: str, root: Path) -> bool:
    """An output the pipeline or a command writes: a path of params.yaml's `paths`, an output of
    dvc.yaml, or (the generated data folders) one that .gitignore keeps out of git."""
    outs = {str(v).rstrip("/") for v in (params(root).get("paths") or {}).values()}
    if any(path == o or path.startswith(o + "/") for o in outs):
        return True
    ignored = subprocess.run(["git", "check-ignore", "-q", "--no-index", path], cwd=root)
    return ignored.returncode == 0


@functools.lru_cache(maxsize=4)
def params(root: Path) -> dict:
    return yaml.safe_load((root / "params.yaml").read_text()) or {}


@functools.lru_cache(maxsize=4)
def file_names(root: Path) -> frozenset[str]:
    names = set()
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d not in SKIPPED_DIRS]
        names.update(files)
    return frozenset(names)


@functools.lru_cache(maxsize=4)
def code_text(root: Path) -> str:
    return "\n".join(p.read_text() for p in (root / "stages").rglob("*.py"))


def key_known(span: str, root: Path) -> bool:
    """The key is in params.yaml (a placeholder matching any key there), or, for a key params.yaml
    leaves to its default, every name of it past the params.yaml part is read by the code."""
    nodes, missing = [params(root)], []
    for seg in span.split("."):
        if not nodes:
            missing.append(seg)
            continue
        step = []
        for node in nodes:
            if isinstance(node, dict):
                step += list(node.values()) if seg.startswith("<") else [node[seg]] if seg in node else []
        nodes = step
        if not nodes:
            missing.append(seg)
    words = [m for m in missing if not m.startswith("<")]
    return all(re.search(rf"\b{re.escape(w)}\b", code_text(root)) for w in words)
