"""The series as a blog: Parts as posts with authors, archive, categories, excerpts and RSS feed."""
from __future__ import annotations

import copy
import html
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml

from helpers.render_campaign import PROJECT
from stages.core.config import CampaignError
from stages.render import blog
from stages.render.pages import load_series
from stages.render.site_build import external_loads

FEED = "feed_rss_created.xml"
PARTS = {"part-node": "Part 1: The node", "part-local-cpu": "Part 2: A dress rehearsal on a CPU"}


@pytest.fixture(scope="module")
def site(node_render):
    """The render fixture's campaign with the node probe: Parts 1 and 2 are shown (the session's
    build, tests/conftest.py)."""
    return node_render.root / "data", copy.deepcopy(node_render.made)


def hrefs(page: Path) -> list[str]:
    return [html.unescape(h) for h in re.findall(r'<(?:a|link|img|script)\b[^>]*?\b(?:href|src)="([^"]*)"',
                                                    page.read_text())]


def local_target(page: Path, href: str) -> Path | None:
    """The file a relative link of `page` opens from disk, or None for anchors and other hosts."""
    parts = urlsplit(href)
    if parts.scheme or parts.netloc or not parts.path:
        return None
    return (page.parent / parts.path).resolve()


# ---------------------------------------------------------------- the built site

def test_parts_are_posts_published_at_their_own_names(site):
    data, summary = site
    assert [p for p in summary["pages"] if p.startswith("posts/")] == \
        ["posts/part-node.md", "posts/part-local-cpu.md"]
    for stem in PARTS:
        assert (data / "docs" / blog.POSTS_DIR / f"{stem}.md").is_file()
        assert (data / "site" / f"{stem}.html").is_file()
    assert not (data / "site" / "posts").exists()


def test_authors_file_declares_the_series_authors_with_a_local_avatar(site):
    data, _ = site
    authors = yaml.safe_load((data / "docs" / blog.AUTHORS_FILE).read_text())["authors"]
    series = yaml.safe_load((PROJECT / "site" / "series.yaml").read_text())["authors"]
    assert set(authors) == set(series) and authors["campaign-team"]["name"] == "Campaign team"
    assert (data / "site" / authors["campaign-team"]["avatar"]).read_text().startswith("<svg")


def test_post_shows_date_authors_categories_and_opens_with_its_description(site):
    data, _ = site
    post = (data / "site" / "part-local-cpu.html").read_text()
    assert "November 30, 2026" in post and "Campaign team" in post
    assert 'src="assets/images/author.svg"' in post
    assert 'href="category/method.html"' in post and 'href="category/local-cpu.html"' in post
    description = yaml.safe_load((PROJECT / "site" / "series.yaml").read_text())["parts"][1]["description"]
    body = (data / "docs" / "posts" / "part-local-cpu.md").read_text().split("\n---\n", 1)[1]
    head = body.split(blog.EXCERPT_SEPARATOR, 1)[0]
    assert head.lstrip().startswith("# Part 2: A dress rehearsal on a CPU\n")
    assert html.unescape(head).rstrip().endswith(description) and "## " not in head


def test_index_archive_and_category_pages_list_the_posts_by_excerpt(site):
    data, _ = site
    out = data / "site"
    index = (out / "index.html").read_text()
    for stem, title in PARTS.items():
        assert f'href="{stem}.html"' in index and html.escape(title, quote=False) in index
    assert 'href="archive/2026.html"' in index and 'href="category/hardware.html"' in index
    archive = (out / "archive" / "2026.html").read_text()
    assert 'href="../part-node.html"' in archive and 'href="../part-local-cpu.html"' in archive
    assert "vega-chart" not in archive          # excerpts stop before the body
    hardware = (out / "category" / "hardware.html").read_text()
    assert 'href="../part-node.html"' in hardware and 'href="../part-local-cpu.html"' not in hardware
    method = (out / "category" / "method.html").read_text()
    assert 'href="../part-node.html"' in method and 'href="../part-local-cpu.html"' in method


def test_feed_lists_each_part_with_title_date_link_and_categories(site):
    data, _ = site
    channel = ET.parse(data / "site" / FEED).getroot().find("channel")
    site_url = yaml.load((PROJECT / "mkdocs.yml").read_text(), Loader=yaml.BaseLoader)["site_url"]
    assert channel.findtext("link") == site_url
    items = {i.findtext("title"): i for i in channel.findall("item")}
    assert set(items) == set(PARTS.values())
    for stem, title in PARTS.items():
        item = items[title]
        assert item.findtext("link") == f"{site_url}{stem}.html"
        assert item.findtext("pubDate").startswith("Mon, 30 Nov 2026")
        assert item.findtext("author") == "Campaign team"
        assert "method" in [c.text for c in item.findall("category")]
    index = (data / "site" / "index.html").read_text()
    assert f'type="application/rss+xml" title="RSS feed" href="{FEED}"' in index


def test_blog_pages_link_only_to_files_of_the_site_and_load_nothing_from_outside(site):
    data, _ = site
    out = data / "site"
    assert external_loads(out) == []
    pages = [out / "index.html", out / "archive" / "2026.html", out / "category" / "method.html",
             out / "part-node.html", out / "part-local-cpu.html"]
    for page in pages:
        for href in hrefs(page):
            target = local_target(page, href)
            assert target is None or target.is_file(), (page.name, href)
    # Part to Part, and audit page back to the Part that prints the number
    assert 'href="part-local-cpu.html"' in (out / "part-node.html").read_text()
    audit = next(t for t in (p.read_text() for p in (out / "audit").glob("*.html") if p.name != "queries.html")
                 if "node_busbw_peak_gbs" in t)
    assert 'href="../part-node.html"' in audit


# ---------------------------------------------------------------- pieces

def test_rebase_links_climbs_out_of_the_posts_folder_but_leaves_anchors_hosts_and_scripts():
    text = ('[a](audit/x.md "audit trail"){.fact} [b](#run-1) [c](https://example.org/p) '
            '[d](SOURCES.md#s1) ![e](assets/charts/p/c.svg) [f](posts/part-node.md)\n'
            '<script type="application/json">{"t": "[g](audit/y.md)"}</script>\n'
            '```\n[h](audit/z.md)\n```\n')
    out = blog.rebase_links(text, "posts")
    assert '[a](../audit/x.md "audit trail"){.fact}' in out and "[b](#run-1)" in out
    assert "[c](https://example.org/p)" in out and "[d](../SOURCES.md#s1)" in out
    assert "![e](../assets/charts/p/c.svg)" in out and "[f](part-node.md)" in out
    assert '"[g](audit/y.md)"' in out and "\n[h](audit/z.md)\n" in out
    assert blog.rebase_links(text, "") == text


def test_excerpt_follows_the_title_and_escapes_the_description():
    body = "# Title\n\n*byline*\n\nBody.\n"
    out = blog.with_excerpt(body, "Fast <b>reads</b>")
    title, rest = out.split(blog.EXCERPT_SEPARATOR)
    assert title.startswith("# Title\n") and "Fast &lt;b&gt;reads&lt;/b&gt;" in title
    assert "*byline*" in rest and "Body." in rest
    assert blog.with_excerpt("No title.\n", "D").startswith(f"D\n\n{blog.EXCERPT_SEPARATOR}\n")


def series_with(tmp_path: Path, authors_block: str, part_authors: str) -> Path:
    templates = tmp_path / "templates"
    templates.mkdir()
    (templates / "part-a.md.j2").write_text("# {{ page.title }}\n")
    series = tmp_path / "series.yaml"
    series.write_text(authors_block + "parts:\n  - {part: 1, title: A, date: 2026-11-30, "
                      f"description: D, template: part-a.md.j2, authors: {part_authors}}}\n")
    return series


def test_a_part_author_not_declared_in_the_series_is_a_one_line_error(tmp_path):
    series = series_with(tmp_path, "authors:\n  ann: {name: Ann, description: Writes.}\n", "[bob]")
    with pytest.raises(CampaignError, match=r"part entry 1: author\(s\) bob not declared .*\(ann\)"):
        load_series(series, tmp_path / "templates")


def test_an_author_without_a_name_is_a_one_line_error(tmp_path):
    series = series_with(tmp_path, "authors:\n  ann: {description: Writes.}\n", "[ann]")
    with pytest.raises(CampaignError, match="author 'ann' needs a name and a description"):
        load_series(series, tmp_path / "templates")


def test_declared_authors_reach_the_byline_and_the_front_matter(tmp_path):
    series = series_with(tmp_path, "authors:\n  ann: {name: Ann Lee, description: Writes.}\n", "[ann]")
    _, [part], authors = load_series(series, tmp_path / "templates")
    assert part.name == "posts/part-a.md" and part.meta["authors"] == ["ann"]
    assert part.meta["author_names"] == ["Ann Lee"]
    assert yaml.safe_load(blog.authors_file(authors))["authors"]["ann"] == {
        "name": "Ann Lee", "description": "Writes.", "avatar": blog.AVATAR}


def test_external_loads_skips_canonical_and_feed_links_but_not_stylesheets(tmp_path):
    (tmp_path / "a.html").write_text(
        '<link rel="canonical" href="http://127.0.0.1:8000/a.html">'
        '<link rel="alternate" type="application/rss+xml" href="https://example.org/feed.xml">')
    assert external_loads(tmp_path) == []
    (tmp_path / "b.html").write_text('<link rel="stylesheet" href="https://fonts.example.org/x.css">')
    assert len(external_loads(tmp_path)) == 1
