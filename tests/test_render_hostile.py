"""Render with hostile data: run ids, names and texts that carry markup, Markdown links and
handlers, raw files with secrets, links and FIFOs, and site paths pointed at the runs."""
from __future__ import annotations

import html
import json
import os
import re
from pathlib import Path

import pytest

from helpers.render_campaign import (HOSTILE_FAILED, HOSTILE_RUN, HOSTILE_TEXT, OUTSIDE_TEXT, PROJECT, RUN4,
                                     SECRETS, build_campaign, render_kwargs)
from helpers.shared_builds import copy_build
from helpers.site_browser import static_scan, tags
from stages.render import stage as render
from stages.render.site_build import MARKER
from stages.render import trace
from stages.core.config import CampaignError, Paths
from stages.tools.faults.hostile_folders import tree_digest


@pytest.fixture(scope="module")
def hostile(hostile_render) -> Path:
    return hostile_render.root


def paths_for(root: Path) -> Paths:
    data = root / "data"
    return Paths(root=root, models=data / "models", runs=data / "runs", nodes=data / "nodes",
                 ledger=data / "ledger", warehouse=data / "warehouse.duckdb",
                 campaign_db=data / "campaign.duckdb", derived=data / "derived",
                 metrics=data / "metrics.json", facts=data / "facts.json", docs=data / "docs",
                 site=data / "site", publish=data / "publish")


def test_no_handler_attribute_or_script_link_in_any_page(hostile):
    site = hostile / "data" / "site"
    pages = list(site.rglob("*.html"))     # the Parts, index, Compare, Warehouse, audit pages
    assert len(pages) >= 10 and sum(p.parent.name == "audit" for p in pages) >= 3
    assert static_scan(site) == []


def test_hostile_names_are_printed_as_text(hostile):
    docs = hostile / "data" / "docs"
    article = (docs / "posts" / "part-local-cpu.md").read_text()
    shown = html.unescape(article)
    # chart specs are JSON in script elements Markdown leaves alone, with < > & as \u escapes
    article = re.sub(r'<script type="application/json"[^>]*>[^<]*</script>', "", article)
    for value in (HOSTILE_RUN, HOSTILE_FAILED, HOSTILE_TEXT.split(" | ")[0]):
        assert value in shown, value
    for raw in ("[x](mailto:", "](javascript:", "<img", "<svg", "{onclick", "{onmouseover"):
        assert raw not in article, raw
    built = (hostile / "data" / "site" / "part-local-cpu.html").read_text()
    titles = [attrs.get("title") for tag, attrs in tags(built) if "run-ref" in (attrs.get("class") or "")]
    assert HOSTILE_RUN in titles                    # the full id, as its tooltip
    audit_text = "".join(html.unescape(p.read_text()) for p in (docs / "audit").glob("*.html"))
    assert HOSTILE_FAILED in audit_text


def test_no_secret_in_site_docs_facts_or_trace(hostile):
    data = hostile / "data"
    cmd = (data / "runs" / RUN4 / "cmd.sh").read_text()
    assert all(s in cmd for s in SECRETS)  # the raw files do carry them
    for folder in (data / "site", data / "docs"):
        for path in folder.rglob("*"):
            if path.is_file():
                content = path.read_bytes()
                for secret in SECRETS:
                    assert secret.encode() not in content, (path, secret)
    facts_text = (data / "facts.json").read_text()
    assert not any(s in facts_text for s in SECRETS)
    assert "***" in html.unescape((data / "docs" / "audit" / f"{RUN4}.html").read_text())
    paths = paths_for(hostile)
    for fact in json.loads(facts_text):
        out = trace.chain(fact, paths)
        assert not any(s in out for s in SECRETS), fact["id"]


def test_links_fifos_and_outside_folders_are_not_read(tmp_path):
    root = tmp_path / "project"
    build_campaign(root)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "passwd").write_text(OUTSIDE_TEXT + "\n" + "ready_s=99\n")
    runs = root / "data" / "runs"
    (runs / RUN4 / "cmd.sh").unlink()
    (runs / RUN4 / "cmd.sh").symlink_to(outside / "passwd")
    (runs / RUN4 / "launch.out").unlink()
    os.mkfifo(runs / RUN4 / "launch.out")          # a fact's source: must not hang the render
    render.run(**render_kwargs(root))
    docs = root / "data" / "docs"
    for path in docs.rglob("*.md"):
        assert OUTSIDE_TEXT not in path.read_text(), path
    audit = html.unescape((docs / "audit" / f"{RUN4}.html").read_text())
    assert "(not shown: refused (not a regular file (FIFO)))" in audit
    assert f"(not shown: data/runs/{RUN4}/cmd.sh: refused (symbolic link, not followed))" in audit
    record = next(r for r in json.loads((root / "data" / "facts.json").read_text())
                  if r["id"] == f"launch_ready_s--{RUN4}")
    assert record["excerpt"] == "(not shown: refused (not a regular file (FIFO)))"
    out = trace.chain(record, paths_for(root))
    assert OUTSIDE_TEXT not in out and "cmd.sh    -" in out


def test_a_site_path_on_the_runs_refuses_and_changes_nothing(tmp_path):
    root = tmp_path / "project"
    build_campaign(root)
    runs = root / "data" / "runs"
    before = tree_digest(root / "data")
    for target in ({"site_dir": runs, "build": True}, {"docs_dir": runs},
                   {"docs_dir": root / "data"}, {"site_dir": root, "build": True}):
        with pytest.raises(CampaignError) as err:
            render.run(**render_kwargs(root, **target))
        message = str(err.value)
        assert "\n" not in message and "refusing to replace it" in message, message
        assert tree_digest(root / "data") == before, target


def test_a_failed_build_leaves_the_previous_site(hostile, tmp_path):
    hostile = copy_build(hostile, tmp_path / "hostile")     # the session's build stays as it was
    data = hostile / "data"
    site_before, docs_before = tree_digest(data / "site"), tree_digest(data / "docs")
    facts_before = (data / "facts.json").read_bytes()
    assert (data / "site" / MARKER).is_file() and (data / "docs" / MARKER).is_file()
    broken = tmp_path / "mkdocs.yml"
    broken.write_text((PROJECT / "mkdocs.yml").read_text().replace(
        "name: material", "name: material\n  custom_dir: no-such-folder"))
    with pytest.raises(CampaignError, match="mkdocs build --strict failed"):
        render.run(**render_kwargs(hostile, build=True, mkdocs_config=broken))
    assert tree_digest(data / "site") == site_before
    assert tree_digest(data / "docs") == docs_before
    assert (data / "facts.json").read_bytes() == facts_before
    assert sorted(p.name for p in data.iterdir()) == ["campaign.duckdb", "derived", "docs", "facts.json",
                                                      "runs", "site"]   # no scratch folder left
