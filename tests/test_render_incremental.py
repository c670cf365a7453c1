"""Rendering only what changed: a render after an edit is byte for byte a render from scratch,
and what the edit did not touch is neither rendered nor written again."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.render_campaign import PROJECT, RUN4, build_campaign, render_kwargs
from stages.render import site_build, site_memo
from stages.render import stage as render

PART = "part-local-cpu.md.j2"
EDIT = "\nA sentence the author added to look at the page again.\n"
BUILD_DATE = re.compile(rb"<(pubDate|lastBuildDate)>[^<]*</\1>")   # the feeds say when they were built


def project(root: Path) -> Path:
    build_campaign(root)
    shutil.copytree(PROJECT / "site", root / "site")
    return root


def kwargs(root: Path) -> dict:
    return render_kwargs(root, build=True, static_images=(), templates_dir=root / "site" / "templates",
                         chart_cache=root / "data" / "chart_cache")


def files(folder: Path) -> dict[str, bytes]:
    out = {}
    for path in sorted(folder.rglob("*")):
        if path.is_file():
            data = path.read_bytes()
            out[path.relative_to(folder).as_posix()] = BUILD_DATE.sub(b"", data) \
                if path.name.startswith("feed_rss") else data
    return out


@pytest.fixture(scope="module")
def edited(tmp_path_factory):
    """A project rendered, its Part's template edited, rendered again; and a copy of the edited
    project rendered from scratch (no cache, no earlier docs or site)."""
    root = project(tmp_path_factory.mktemp("incremental"))
    first = render.run(**kwargs(root))
    audit = root / "data" / "docs" / "audit" / f"{RUN4}.html"
    inode = os.stat(audit).st_ino
    again = render.run(**kwargs(root))
    template = root / "site" / "templates" / PART
    template.write_text(template.read_text() + EDIT)
    after_edit = render.run(**kwargs(root))
    scratch = tmp_path_factory.mktemp("scratch")
    shutil.copytree(root / "data" / "runs", scratch / "data" / "runs")
    shutil.copy(root / "data" / "campaign.duckdb", scratch / "data" / "campaign.duckdb")
    shutil.copytree(root / "data" / "derived", scratch / "data" / "derived")
    shutil.copytree(root / "site", scratch / "site")
    full = render.run(**kwargs(scratch))
    return root, scratch, {"first": first, "again": again, "edit": after_edit, "full": full,
                           "audit_inode": inode, "audit_inode_after": os.stat(audit).st_ino}


def test_a_render_after_an_edit_is_byte_for_byte_a_render_from_scratch(edited):
    root, scratch, _ = edited
    site, site_full = files(root / "data" / "site"), files(scratch / "data" / "site")
    assert sorted(site) == sorted(site_full)
    assert [name for name in site if site[name] != site_full[name]] == []
    assert files(root / "data" / "docs") == files(scratch / "data" / "docs")
    assert (root / "data" / "facts.json").read_bytes() == (scratch / "data" / "facts.json").read_bytes()
    assert EDIT.strip() in (root / "data" / "site" / "part-local-cpu.html").read_text()


def test_an_unchanged_render_renders_and_writes_nothing_again(edited):
    _, _, runs = edited
    again, first = runs["again"], runs["first"]
    assert first["pages_reused"] == 0
    assert again["pages_reused"] == len(again["pages"]) - 2      # all but SOURCES and Warehouse
    assert again["docs_files_written"] == 0 and again["docs_files_linked"] > 0
    assert again["facts"] == first["facts"]


def test_an_edit_renders_its_page_only_and_leaves_the_audit_pages_alone(edited):
    _, _, runs = edited
    edit = runs["edit"]
    assert edit["pages_reused"] == len(edit["pages"]) - 3        # the edited Part is rendered
    assert runs["audit_inode_after"] == runs["audit_inode"]     # not written again: linked
    assert 0 < edit["docs_files_written"] < 5
    assert runs["full"]["pages_reused"] == 0


def test_a_render_after_a_change_of_data_renders_every_page(edited, tmp_path):
    root, _, _ = edited
    copy = tmp_path / "p"
    shutil.copytree(root, copy, symlinks=True)
    import duckdb

    con = duckdb.connect(str(copy / "data" / "campaign.duckdb"))
    con.execute("update launches set ready_s = ready_s + 1")
    con.close()
    summary = render.run(**kwargs(copy))
    assert summary["pages_reused"] == 0


def test_the_remembered_build_is_mkdocs_own_build(edited, tmp_path):
    """site_memo's remembered steps, hits and misses, give the site `mkdocs build` itself gives."""
    root, _, _ = edited
    docs, config = root / "data" / "docs", PROJECT / "mkdocs.yml"
    memo = site_memo.SiteMemo(tmp_path / "memo")
    site_build.build_site(config, docs, tmp_path / "first", memo=memo)           # every step run
    site_build.build_site(config, docs, tmp_path / "again", memo=site_memo.SiteMemo(tmp_path / "memo"),
                          old_site=tmp_path / "first")                            # every step remembered
    own = tmp_path / "mkdocs.yml"
    own.write_text(f"INHERIT: {config}\ndocs_dir: {docs}\nsite_dir: {tmp_path / 'own'}\n"
                   f"hooks: [{PROJECT / 'site' / 'mkdocs_hooks.py'}]\n")
    subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-f", str(own)],
                   check=True, cwd=root)
    site_build.relative_error_page(tmp_path / "own")
    theirs = files(tmp_path / "own")
    for built in ("first", "again"):
        ours = files(tmp_path / built)
        assert sorted(ours) == sorted(theirs)
        assert [name for name in ours if ours[name] != theirs[name]] == []


def test_pages_held_in_memory_by_the_preview_give_what_the_cache_folder_gives(edited, tmp_path):
    """The preview holds rendered pages in memory between renders (SiteMemo.pages); after an edit
    its render writes what a render taking them from the cache folder writes."""
    root, _, _ = edited
    sites = {}
    for how in ("memory", "folder"):
        copy = tmp_path / how
        for sub in ("data/runs", "data/derived", "site"):
            shutil.copytree(root / sub, copy / sub)
        shutil.copy(root / "data" / "campaign.duckdb", copy / "data" / "campaign.duckdb")
        memo = site_memo.SiteMemo(copy / "data" / "chart_cache") if how == "memory" else None
        render.run(**kwargs(copy), memo=memo)
        template = copy / "site" / "templates" / PART
        template.write_text(template.read_text() + "\nA second sentence, while the preview runs.\n")
        again = render.run(**kwargs(copy), memo=memo)
        assert again["pages_reused"] >= 2
        if memo is not None:
            assert len(memo.pages) == again["pages_reused"] + 1    # every page of the series, in memory
        sites[how] = (files(copy / "data" / "site"), files(copy / "data" / "docs"))
    assert sites["memory"] == sites["folder"]


def test_a_page_rendered_again_takes_each_chart_it_calls_the_same_way_from_its_last_render(
        edited, tmp_path, monkeypatch):
    """An edit to a Part's text re-renders the Part, but a chart called as before, on the same
    data, is its previous render's (markup and files): no rows fetched, no spec made."""
    from stages.render.chart_writer import ChartWriter

    root, scratch, _ = edited
    copy = tmp_path / "copy"
    for sub in ("data/runs", "data/derived", "site"):
        shutil.copytree(root / sub, copy / sub)
    shutil.copy(root / "data" / "campaign.duckdb", copy / "data" / "campaign.duckdb")
    render.run(**kwargs(copy))
    template = copy / "site" / "templates" / PART
    template.write_text(template.read_text() + "\nOne more sentence to look at.\n")

    def refused(self, *args, **kwargs):
        raise AssertionError(f"chart made again: {args}")
    monkeypatch.setattr(ChartWriter, "_write", refused)
    again = render.run(**kwargs(copy))
    assert again["charts"] and again["chart_specs_reused"] == len(again["charts"])
    site, first = files(copy / "data" / "site"), files(root / "data" / "site")
    assert [n for n in site if n.startswith("assets/charts/") and site[n] != first.get(n)] == []


def test_a_render_pauses_the_cyclic_collector_and_leaves_it_as_it_was(edited, tmp_path):
    import gc

    root, _, _ = edited
    assert gc.isenabled()
    render.run(**kwargs(root))
    assert gc.isenabled()
    broken = tmp_path / "templates"
    shutil.copytree(root / "site" / "templates", broken)
    (broken / PART).write_text("{% if %}")
    with pytest.raises(Exception):
        render.run(**{**kwargs(root), "templates_dir": broken})
    assert gc.isenabled()
    gc.disable()
    try:
        render.run(**kwargs(root))
        assert not gc.isenabled()       # paused by its caller: left paused
    finally:
        gc.enable()
