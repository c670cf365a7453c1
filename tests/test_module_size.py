"""Modules stay under 400 lines (docs/development.md, the code's rules): every Python module of
stages/ and tests/helpers/ is counted, and each one over the limit is named with its count."""
from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MOST_LINES = 400
FOLDERS = ("stages", "tests/helpers")


def oversized(root: Path = ROOT) -> list[str]:
    """Each module under FOLDERS of `root` longer than MOST_LINES, as "path: N lines"."""
    found = []
    for folder in FOLDERS:
        for path in sorted((root / folder).rglob("*.py")):
            lines = len(path.read_text().splitlines())
            if lines > MOST_LINES:
                found.append(f"{path.relative_to(root).as_posix()}: {lines} lines")
    return found


def test_no_module_is_over_400_lines():
    found = oversized()
    assert found == [], f"modules over {MOST_LINES} lines: " + "; ".join(found)


def test_each_module_over_the_limit_is_named_with_its_count(tmp_path):
    (tmp_path / "stages" / "pkg").mkdir(parents=True)
    (tmp_path / "tests" / "helpers").mkdir(parents=True)
    (tmp_path / "stages" / "pkg" / "long.py").write_text("x = 1\n" * 401)
    (tmp_path / "stages" / "pkg" / "at_limit.py").write_text("x = 1\n" * 400)
    (tmp_path / "tests" / "helpers" / "longer.py").write_text("x = 1\n" * 500)
    (tmp_path / "tests" / "test_elsewhere.py").write_text("x = 1\n" * 500)   # not counted
    assert oversized(tmp_path) == ["stages/pkg/long.py: 401 lines", "tests/helpers/longer.py: 500 lines"]
