"""Damaged copies of a real run folder: ingest reads what is left, records what it cannot read,
and loses no row of the undamaged files."""
from __future__ import annotations

import pytest

from stages.tools.faults.reliability import CASES, damaged_folders


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    return {c.name: c for c in damaged_folders(tmp_path_factory.mktemp("reliability"))}


def test_every_case_ran(results):
    assert set(results) == set(CASES)


@pytest.mark.parametrize("case", sorted(CASES))
def test_no_row_of_an_undamaged_file_is_lost(results, case):
    assert results[case].rows_lost == 0
    assert results[case].rows_intact > results[case].rows_damaged or case in (
        "NUL bytes in engine log", "no meta.json", "edited after the run")


@pytest.mark.parametrize("case", ["truncated result file", "corrupt result file",
                                  "truncated metrics snapshot", "edited after the run"])
def test_what_cannot_be_read_is_recorded(results, case):
    assert results[case].errors


def test_a_crashed_launch_still_gives_its_error(results):
    assert "spec recovered" in results["crashed launch"].outcome
    assert results["crashed launch"].rows_damaged > 0


def test_an_edited_file_is_named_against_its_manifest(results):
    [error] = results["edited after the run"].errors
    assert "launch.out: changed after the run (sha256 differs from the manifest)" in error
