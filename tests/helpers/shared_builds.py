"""Builds that many test files read, made once a session (tests/conftest.py) and kept read-only:
a test that changes what it reads copies it first (copy_build). Each build's files are digested
when it is made and again at the end of the session; a test that wrote into one fails there,
naming what changed."""
from __future__ import annotations

import re
import shutil
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, NamedTuple

from stages.tools.faults.hostile_folders import tree_digest


class Build(NamedTuple):
    """A shared build: its folder, what building it printed, and what else its builder returned."""
    root: Path
    said: str = ""
    made: Any = None


@contextmanager
def read_only(root: Path) -> Iterator[None]:
    """Fails, after the block, if any file or folder under root was added, removed or changed."""
    before = tree_digest(root)
    yield
    after = tree_digest(root)
    changed = sorted(name for name in before.keys() | after.keys() if before.get(name) != after.get(name))
    assert not changed, (f"{root}: a test changed this shared build (copy it first, "
                         f"helpers.shared_builds.copy_build): {changed[:20]}")


def copy_build(build: Path, dest: Path) -> Path:
    """A writable copy of a shared build's folder at dest (links copied as links)."""
    shutil.copytree(build, dest, symlinks=True)
    return dest


def engine_first(items: list, marks: tuple[str, ...] = ("engine", "slow")) -> list:
    """The items with the files that hold a test marked with one of `marks` (those that start the
    real engine, or take minutes otherwise: the longest) first, each file's tests kept together
    and in order."""
    early = {item.path for item in items if any(item.get_closest_marker(m) for m in marks)}
    return sorted(items, key=lambda item: item.path not in early)


def file_groups(files: list[str], builds: set[str], root: Path) -> dict[str, str]:
    """Each test file (relative to root) -> its group under pytest-xdist: the file itself, or for
    the files that request one of the shared `builds` (fixtures, named in their source), one group
    for all the files joined through the builds they name, so that each build is made once."""
    joined: dict[str, str] = {}

    def group(name: str) -> str:
        while joined.setdefault(name, name) != name:
            name = joined[name]
        return name

    named = re.compile(r"\b(" + "|".join(sorted(builds)) + r")\b")
    for file in files:
        for build in sorted(set(named.findall((root / file).read_text()))):
            first, second = sorted((group(file), group(f"build:{build}")))
            joined[second] = first
    return {file: group(file) for file in files}


def shared_build_scheduling(config, log, builds: set[str]):
    """pytest-xdist's `--dist loadfile`, with the files that read one of the shared `builds` sent
    to one worker together (file_groups)."""
    from xdist.scheduler import LoadFileScheduling
    groups: dict[str, str] = {}

    class SharedBuildScheduling(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            file = nodeid.split("::", 1)[0]
            if file not in groups:
                groups.update(file_groups(sorted({n.split("::", 1)[0] for n in self.collection}),
                                          builds, config.rootpath))
            return groups[file]

    return SharedBuildScheduling(config, log)
