"""What the tests share: builders of the fixture campaigns (tests/conftest.py makes the ones many
test files read, once a session) and readers of what a build made. Test modules import from here,
never from one another (tests/test_import_graph.py checks it)."""
from __future__ import annotations

from pathlib import Path

PROJECT = Path(__file__).resolve().parents[2]
FIXTURES = PROJECT / "tests" / "fixtures"
