"""The shared folder beside the project (`../shared/`): the public engine logs and benchmark result
files some tests read where they are (`real_logs/`, with its MANIFEST.md). CI's clone has it; a
clone elsewhere may not, and then those tests (marked `shared`) are skipped, said once at the end
of the run (tests/conftest.py). With `CI` set they run, and fail on the missing folder."""
from __future__ import annotations

from pathlib import Path

SHARED = Path(__file__).resolve().parents[3] / "shared"
REAL_LOGS = SHARED / "real_logs"
