"""Tests marked `shared` read ../shared/real_logs (tests/helpers/shared_folder.py). Where that
folder is absent and `CI` is not set, they are skipped, and the run ends with one line saying how
many and why; in CI a missing folder fails them.

The builds that several test files read are made here, once a session, and are read-only: a test
that changes one works on a copy (helpers/shared_builds.py checks, at the end of the session,
that none was written to)."""
from __future__ import annotations

import os

import pytest

from helpers.shared_builds import Build, engine_first, read_only, shared_build_scheduling
from helpers.shared_folder import REAL_LOGS

SKIP_REASON = "needs ../shared/real_logs beside the project"
# The session fixtures below: under `pytest -n N --dist loadfile` the files that read one of them
# run in one worker, so that it is built once (helpers.shared_builds.shared_build_scheduling).
SHARED_BUILDS = {"node_repro", "imported_node", "node_render", "hostile_render", "scripted_node"}


def pytest_configure(config):
    config.addinivalue_line("markers", "shared: reads ../shared/real_logs (skipped where it is absent, outside CI)")
    config.addinivalue_line("markers", "slow: takes minutes without the real engine (run first, as `engine`)")


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    if config.getvalue("dist") == "loadfile":
        return shared_build_scheduling(config, log, SHARED_BUILDS)
    return None


def pytest_collection_modifyitems(config, items):
    if hasattr(config, "workerinput"):      # a worker of pytest-xdist: the longest files first
        items[:] = engine_first(items)
    if REAL_LOGS.is_dir() or os.environ.get("CI"):
        return
    skip = pytest.mark.skip(reason=SKIP_REASON)
    for item in items:
        if "shared" in item.keywords:
            item.add_marker(skip)


def pytest_terminal_summary(terminalreporter):
    skipped = [r for r in terminalreporter.stats.get("skipped", []) if SKIP_REASON in str(r.longrepr)]
    if skipped:
        terminalreporter.write_line(
            f"{len(skipped)} tests skipped: they read ../shared/real_logs, which is not beside this "
            "clone (in CI, with CI set, they run and its absence fails them)")


# ---------------------------------------------------------------- builds several files read

@pytest.fixture(scope="session")
def node_repro(tmp_path_factory):
    """The synthetic node campaign as a team builds it: its run folders in data/runs of a project
    copy, the node profile active, no spec to launch, `dvc repro` (what it printed: `said`)."""
    from helpers.node_campaign import NODE_RUNS, repro_with_runs
    root = tmp_path_factory.mktemp("node-repro")
    out = repro_with_runs(root, "h200x8", NODE_RUNS)
    with read_only(root):
        yield Build(root, out.stdout + out.stderr)


@pytest.fixture(scope="session")
def imported_node(tmp_path_factory):
    """The synthetic node campaign stripped of meta.json and manifest, imported with --profile
    h200x8 and built stage by stage (`said`: what render printed; `made`: the import's output)."""
    from helpers.node_campaign import imported_node_campaign
    root = tmp_path_factory.mktemp("imported")
    imported, said = imported_node_campaign(root, tmp_path_factory.mktemp("imported-elsewhere"))
    with read_only(root):
        yield Build(root, said, imported)


@pytest.fixture(scope="session")
def node_render(tmp_path_factory):
    """The render tests' campaign with the node probe, rendered and its site built (`made`:
    render's summary)."""
    from helpers.node_render import render_node_campaign
    root = tmp_path_factory.mktemp("node-probe")
    summary = render_node_campaign(root, build=True)
    with read_only(root):
        yield Build(root, made=summary)


@pytest.fixture(scope="session")
def hostile_render(tmp_path_factory):
    """The render tests' campaign made hostile, rendered and its site built."""
    from helpers.render_campaign import render_hostile_campaign
    root = tmp_path_factory.mktemp("hostile")
    render_hostile_campaign(root)
    with read_only(root):
        yield Build(root)


@pytest.fixture(scope="session")
def scripted_node(tmp_path_factory):
    """The scripted node campaign at scale, ingested and derived (`made`: its campaign.duckdb)."""
    from helpers.node_campaign import scripted_node_campaign
    root = tmp_path_factory.mktemp("scripted") / "root"
    db = scripted_node_campaign(root)
    with read_only(root):
        yield Build(root, made=db)
