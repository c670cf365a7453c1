"""README.md and the reference in docs/ show only what exists: every relative link resolves, every
command in a code block or code span is a Makefile target, a `campaign` subcommand with its
options, a dvc command or a module of the project, and every repository path, file name and
params key in backticks is in the tree (or is a declared output). README.md stays a five-minute
read and links every page of docs/. The checks are tests/helpers/docs_check.py's."""
from __future__ import annotations

import pytest

from helpers.docs_check import ROOT, pages, problems

README_MAX_BYTES = 12 * 1024


@pytest.mark.parametrize("page", pages(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_page_shows_only_what_exists(page):
    assert problems(page) == []


def test_readme_is_short_and_links_every_docs_page():
    readme = ROOT / "README.md"
    assert readme.stat().st_size <= README_MAX_BYTES
    text = readme.read_text()
    docs = sorted((ROOT / "docs").glob("*.md"))
    assert docs, "docs/ holds the reference"
    assert [p.name for p in docs if f"](docs/{p.name})" not in text] == []


def test_docs_folder_is_not_the_site():
    """The site's pages are render's (mkdocs' docs_dir, data/docs); docs/ is never built into it."""
    mkdocs = (ROOT / "mkdocs.yml").read_text()
    assert "docs_dir: data/docs" in mkdocs


def test_a_made_up_command_path_or_link_fails(tmp_path):
    (tmp_path / "README.md").write_text((ROOT / "README.md").read_text())
    page = tmp_path / "made-up.md"
    page.write_text(
        "# A page\n\n[there](made-up.md#a-page) and [nowhere](missing.md), [no heading](#elsewhere)\n\n"
        "```sh\n"
        "make test\n"
        "make frobnicate        # no such target\n"
        "campaign render --timings t.json\n"
        "campaign frobnicate --now\n"
        "campaign trace --sideways FACT\n"
        ".venv/bin/dvc pull && dvc frobnicate\n"
        "dvc metrics diff\n"
        "dvc metrics frobnicate\n"
        "python -m stages.probe.node_probe --node-kind h200x8\n"
        "python -m stages.probe.frobnicate\n"
        "```\n\n"
        "Run `campaign ingest`, then `campaign frobnicate`; read `stages/derive/sql/marts/schema.yaml`, "
        "`stages/frobnicate/`, `raw.sql`, `frobnicate.sql`, `stages.render.charts.PALETTE`, "
        "`stages.frobnicate`; keys `rules.gate_min_score`, `profiles.<name>.rules.prefix_cache_tok_s`, "
        "`profiles.<name>.frobnicate_s`; outputs `data/runs/<run_id>/launch.out`, `data/runs.dvc`, "
        "`data/frobnicate.txt`.\n")
    found = problems(page, ROOT)
    assert found == [
        "link missing.md: no file missing.md",
        "link #elsewhere: no heading #elsewhere in made-up.md",
        "make frobnicate: no such Makefile target",
        "campaign frobnicate: no such subcommand",
        "campaign trace --sideways: no such option",
        "dvc frobnicate: no such dvc command",
        "dvc metrics frobnicate: no such dvc command",
        "python -m stages.probe.frobnicate: no such module",
        "campaign frobnicate: no such subcommand",
        "`stages/frobnicate/`: not in the tree, nor a declared output",
        "`frobnicate.sql`: no file of that name in the tree",
        "`stages.frobnicate`: no such module",
        "`profiles.<name>.frobnicate_s`: not a key of params.yaml, nor read by the code",
        "`data/frobnicate.txt`: not in the tree, nor a declared output",
    ]
