"""Builds that many test files read, made once a session (tests/conftest.py) and kept read-only:
a test that changes what it reads copies it first (copy_build). Each build's files are digested
when it is made and again at the end of the session; a test that wrote into one fails there,
naming what changed."""
from __future__ import annotations

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


def xdist_groups(items: list, builds: set[str], first: str = "engine") -> list:
    """Each test marked xdist_group with its file's group, for `pytest -n N --dist loadgroup`: a
    file is one group, and the files that read one of the shared `builds` (the fixture names) are
    one group together, so that each build is made once; the groups holding a test marked `first`
    (the ones that start an engine: the longest) come first. Returns the items in that order."""
    import pytest

    group: dict[str, str] = {}          # file, or "build:name" -> the name it is joined under

    def root(name: str) -> str:
        while group.setdefault(name, name) != name:
            name = group[name]
        return name

    for item in items:
        for build in sorted(builds & set(item.fixturenames)):
            a, b = sorted((root(item.nodeid.split("::")[0]), root(f"build:{build}")))
            group[b] = a
    names = {item.nodeid: root(item.nodeid.split("::")[0]) for item in items}
    early = {names[item.nodeid] for item in items if item.get_closest_marker(first)}
    for item in items:
        item.add_marker(pytest.mark.xdist_group(names[item.nodeid]))
    return sorted(items, key=lambda item: names[item.nodeid] not in early)
