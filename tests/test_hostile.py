"""Hostile and careless inputs through the real commands: nothing lost, nothing from outside the
project or secret published, no script of the data run in Chromium, every misuse refused in one
line. The same run is the integrity section of `make reliability`."""
from __future__ import annotations

import pytest

from stages.tools.faults import hostile
from stages.tools.faults import reliability
from stages.tools.faults.hostile_folders import FOLDER_CASES
from stages.tools.faults.hostile_settings import BAD_PARAMS


@pytest.fixture(scope="module")
def result(tmp_path_factory):
    return hostile.run(tmp_path_factory.mktemp("hostile"), browse=reliability.browse)


def test_every_case_holds(result):
    assert [f"{c.name}: {c.outcome}" for c in result.cases if not c.ok] == []
    names = {c.name for c in result.cases}
    assert set(FOLDER_CASES) <= names and set(f"params: {n}" for n in BAD_PARAMS) <= names


def test_no_row_lost_and_no_run_folder_changed(result):
    assert result.rows_lost == 0
    assert result.runs_changed == []


def test_nothing_from_outside_and_no_secret_published(result):
    assert result.outside_published == []
    assert result.secrets_published == []


def test_no_script_of_the_data_runs_in_chromium(result):
    assert result.pages_browsed > 1
    assert result.scripts_run == 0
