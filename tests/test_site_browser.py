"""The built site in a real browser: charts drawn by vega-embed, no errors, nothing fetched from
another host, a model answer holding <script> shown as text, and run names, specs and texts that
carry links and handlers running nothing on any page when hovered or focused; tables that fit a
desktop window, chart labels readable on a phone, charts named for screen readers, and a 404 page
that works from disk.

Headless Chromium is required (Debian package `chromium`; `$CHROMIUM` names another binary). The
test fails, not skips, when it is missing: the site's promises are only checked here.
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
import yaml

from helpers.render_campaign import HOSTILE_RUN, PROJECT, RUN4, SCRIPT_ANSWER
from helpers.site_browser import Browser, SiteServer, find_chromium, static_scan, tags

ARTICLE = "part-local-cpu.html"
NODE_PART = "part-node.html"
WAREHOUSE = "warehouse.html"
DESKTOP, NARROW = 1280, 560
WIDE, PHONE = 1400, 390

CHARTS_DRAWN = """
(() => {
  const charts = [...document.querySelectorAll('div.vega-chart')];
  return charts.length > 0 && charts.every(c => c.classList.contains('vega-embed')
      && c.querySelector('svg.marks') !== null && c.querySelector('img') === null);
})()
"""
CHART_STATE = """
JSON.stringify([...document.querySelectorAll('div.vega-chart')].map(c => ({
  spec: c.dataset.spec,
  embedded: c.classList.contains('vega-embed'),
  svg: c.querySelectorAll('svg.marks').length,
  marks: c.querySelectorAll('svg.marks path, svg.marks line, svg.marks rect').length,
  fallback: c.querySelectorAll('img').length,
  role: c.getAttribute('role'),
  label: c.getAttribute('aria-label'),
  description: (c.querySelector('[role="graphics-document"]') || c).getAttribute('aria-label'),
  client: c.clientWidth,
  scroll: c.scrollWidth,
})))
"""
TEXT_STATE = """
JSON.stringify({
  text: document.body.innerText,
  scripts: [...document.scripts].map(s => s.textContent).filter(t => t.includes("alert('x')")).length,
  runRefs: [...document.querySelectorAll('.run-ref')].map(e => [e.textContent, e.title,
                                                               e.getClientRects().length]),
  anchors: [...document.querySelectorAll('[id^="run-"]')].map(e => e.id),
})
"""


@pytest.fixture(scope="module")
def site(node_render) -> Path:
    return node_render.root / "data" / "site"


@pytest.fixture(scope="module")
def browser():
    binary = find_chromium()
    if binary is None:
        pytest.fail("headless Chromium not found: install the `chromium` package "
                    "(apt-get install chromium) or set $CHROMIUM to its binary")
    with Browser(binary) as b:
        yield b


@pytest.fixture(scope="module")
def visits(site, browser):
    """Each page loaded once at desktop width (the article also at a narrow width)."""
    audit = sorted(p for p in (site / "audit").glob("*.html")
                   if "&lt;script&gt;alert" in p.read_text())
    assert audit, "the fixture's script answer reaches an audit page"
    pages = {ARTICLE: DESKTOP, f"audit/{audit[0].name}": DESKTOP, WAREHOUSE: DESKTOP,
             f"{ARTICLE}#narrow": NARROW}
    out = {}
    with SiteServer(site) as server:
        for name, width in pages.items():
            tab = browser.page(width=width)
            tab.goto(server.base + name.split("#")[0])
            drawn = tab.wait_for(CHARTS_DRAWN) if name.startswith(ARTICLE) else None
            out[name] = {"tab": tab, "drawn": drawn, "port": server.httpd.server_address[1],
                         "charts": json.loads(tab.js(CHART_STATE)),
                         **json.loads(tab.js(TEXT_STATE))}
    return out


def test_every_chart_is_drawn_by_vega_embed_not_the_fallback(visits):
    for name in (ARTICLE, f"{ARTICLE}#narrow"):
        charts = visits[name]["charts"]
        assert len(charts) == 5, name       # four scaling charts and the ramp
        assert visits[name]["drawn"], charts
        for chart in charts:
            assert chart["embedded"] and chart["svg"] == 1 and chart["fallback"] == 0, chart
            assert chart["marks"] > 20, chart  # axes, lines and points, not an empty view


def test_charts_fit_the_column_without_scrolling(visits):
    for name in (ARTICLE, f"{ARTICLE}#narrow"):
        for chart in visits[name]["charts"]:
            assert chart["scroll"] <= chart["client"], (name, chart)


def test_no_console_errors(visits):
    for name, visit in visits.items():
        assert visit["tab"].console_errors() == [], name


def test_no_request_leaves_the_local_server(visits):
    for name, visit in visits.items():
        urls = visit["tab"].requested_urls()
        assert urls, name
        for url in urls:
            parts = urlsplit(url)
            if parts.scheme in ("data", "blob", "about"):
                continue
            assert (parts.scheme, parts.hostname, parts.port) == ("http", "127.0.0.1", visit["port"]), url


def test_a_model_answer_with_script_shows_as_text(visits):
    for name in (ARTICLE, next(n for n in visits if n.startswith("audit/"))):
        visit = visits[name]
        assert "<script>alert('x')</script>" in visit["text"], name
        assert visit["scripts"] == 0, name
        assert visit["tab"].dialogs() == [], name
    assert SCRIPT_ANSWER.startswith("<script>alert('x')</script>")


def test_table_runs_are_one_line_labels_with_the_full_id(visits):
    visit = visits[ARTICLE]
    labels = {label: (title, lines) for label, title, lines in visit["runRefs"]}
    assert labels["tiny-seqs4 · 05:12"] == (RUN4, 1)
    assert all(lines == 1 for _, _, lines in visit["runRefs"])
    assert f"run-{RUN4}" in visit["anchors"] and RUN4 in visit["text"]  # still findable on the page


def test_warehouse_page_renders(visits):
    text = visits[WAREHOUSE]["text"]
    assert "decode_tok_s_per_user" in text and "raw_log_facts" in text
    assert "bench_points.csv" in text


def test_charts_have_an_accessible_name_and_description(visits, site):
    for chart in visits[ARTICLE]["charts"]:
        assert chart["role"] == "figure" and chart["label"], chart
        assert chart["description"].startswith(f"Chart: {chart['label']}. "), chart
        assert " against " in chart["description"], chart   # what is drawn against what
    alts = [a.get("alt") for tag, a in tags((site / ARTICLE).read_text())
            if tag == "img" and "assets/charts/" in (a.get("src") or "")]
    assert len(alts) == 5 and all(alt.startswith("Chart: ") for alt in alts), alts
    labels = [c["label"] for c in visits[ARTICLE]["charts"]]
    assert [alt.split(". ")[0] for alt in alts] == [f"Chart: {label}" for label in labels]


TABLE_ROWS = """
JSON.stringify([...document.querySelectorAll('article table')].map(t =>
  [...t.rows].map(r => [...r.cells].map(c => c.textContent.trim()))))
"""


def test_warehouse_facts_table_keeps_a_pipe_in_a_type_inside_its_cell(visits):
    tables = json.loads(visits[WAREHOUSE]["tab"].js(TABLE_ROWS))
    assert len(tables) > 10
    for rows in tables:
        assert {len(r) for r in rows} == {len(rows[0])}, rows[0]
    facts = next(rows for rows in tables if ["id", "str"] == rows[1][:2])
    assert ["unit", "str | None"] == next(r for r in facts if r[0] == "unit")[:2]


TABLES_SCROLL = """
JSON.stringify([...document.querySelectorAll('article table')].map(t => {
  const w = t.closest('.md-typeset__scrollwrap') || t.parentElement;
  return {head: t.rows[0].textContent.trim().slice(0, 80), scroll: w.scrollWidth, client: w.clientWidth};
}))
"""


def test_no_table_scrolls_sideways_in_a_wide_window(site, browser):
    pages = [p.name for p in sorted(site.glob("*.html"))] + ["audit/index.html"]
    pages += [f"audit/{p.name}" for p in sorted((site / "audit").glob("*.html"))[:: 40]]
    measured = {}
    with SiteServer(site) as server:
        for name in pages:
            tab = browser.page(width=WIDE, height=900)
            tab.goto(server.base + name)
            tab.wait_for("!document.querySelector('article table:not(.md-typeset__scrollwrap table)')", 5)
            measured[name] = json.loads(tab.js(TABLES_SCROLL))
    assert len(measured[ARTICLE]) > 5 and len(measured[NODE_PART]) > 2
    wide = [(name, t) for name, tables in measured.items() for t in tables if t["scroll"] > t["client"]]
    assert wide == []


CHART_TEXT = """
JSON.stringify([...document.querySelectorAll('div.vega-chart svg.marks')].map(s => {
  const k = s.getBoundingClientRect().width / s.width.baseVal.value;
  const sizes = [...s.querySelectorAll('text')].map(t => parseFloat(getComputedStyle(t).fontSize) * k);
  return {texts: sizes.length, smallest: Math.min(...sizes), client: s.parentElement.clientWidth,
          scroll: s.parentElement.scrollWidth};
}))
"""


def test_chart_labels_are_readable_on_a_phone(site, browser):
    with SiteServer(site) as server:
        for name, count in ((ARTICLE, 5), (NODE_PART, 1)):
            tab = browser.page(width=PHONE, height=844)
            tab.goto(server.base + name)
            assert tab.wait_for(CHARTS_DRAWN), name
            charts = json.loads(tab.js(CHART_TEXT))
            assert len(charts) == count, name
            for chart in charts:
                assert chart["texts"] > 10 and chart["smallest"] >= 10, (name, chart)
                assert chart["scroll"] <= chart["client"], (name, chart)
            # Turned to a wider screen, the charts are drawn again at their own width, once each.
            tab.call("Emulation.setDeviceMetricsOverride",
                     {"width": DESKTOP, "height": 900, "deviceScaleFactor": 1, "mobile": False})
            assert tab.wait_for("[...document.querySelectorAll('div.vega-chart svg.marks')]"
                                ".every(s => s.width.baseVal.value > 500)"), name
            charts = json.loads(tab.js(CHART_STATE))
            assert [(c["svg"], c["scroll"] <= c["client"]) for c in charts] == [(1, True)] * count, name


def site_name() -> str:
    return yaml.safe_load((PROJECT / "mkdocs.yml").read_text())["site_name"]


def test_index_title_names_the_site_once(site):
    page = (site / "index.html").read_text()
    title = re.search(r"<title>(.*?)</title>", page, re.S).group(1).strip()
    h1 = re.sub(r"<[^>]+>|&para;", "", re.search(r"<h1\b.*?</h1>", page, re.S).group(0)).strip()
    assert title == h1 == site_name()
    part = (site / ARTICLE).read_text()
    assert re.search(r"<title>Part 2: .* - (.*?)</title>", part).group(1) == site_name()


LINKS = """
JSON.stringify([...document.querySelectorAll('[href], [src]')].map(e => e.href || e.src))
"""


def test_404_page_links_work_from_disk(site, browser):
    tab = browser.page()
    tab.goto((site / "404.html").as_uri())
    links = [urlsplit(u) for u in json.loads(tab.js(LINKS))]
    local = [u for u in links if u.scheme == "file"]
    assert len(local) >= 10 and all(u.scheme in ("file", "https") for u in links), links
    for u in local:
        path = Path(unquote(u.path))
        assert path.is_file() and site.resolve() in path.resolve().parents, u.geturl()
    assert tab.js("getComputedStyle(document.querySelector('.md-header')).position") == "sticky"
    home = next(u.geturl() for u in local if u.path.endswith("/index.html"))
    tab.goto(home)
    assert tab.js("document.title") == site_name()
    assert tab.js("document.querySelector('.md-content h1').textContent").startswith(site_name())


# ---------------------------------------------------------------- hostile names in a real browser

@pytest.fixture(scope="module")
def hostile_site(hostile_render) -> Path:
    return hostile_render.root / "data" / "site"


def visit_all(browser, site: Path) -> dict[str, dict]:
    """Every page of the site loaded in one tab that traps dialogs, each link hovered."""
    tab = browser.page()
    tab.trap_dialogs()
    out = {}
    with SiteServer(site) as server:
        for path in sorted(site.rglob("*.html")):
            name = path.relative_to(site).as_posix()
            tab.goto(server.base + name)
            out[name] = tab.provoke()
    out["dialogs"] = tab.dialogs()
    return out


def test_the_probe_sees_a_handler_fire(browser, tmp_path):
    """The check below can fail: a page with an inline handler and a javascript: link is caught."""
    (tmp_path / "bad.html").write_text(
        '<html><body><article><a href="#x" title="t" onmouseover="alert(1)">run</a> '
        '<a href="javascript:alert(2)">x</a></article></body></html>')
    seen = visit_all(browser, tmp_path)["bad.html"]
    assert seen["fired"] and seen["fired"][0] == "alert(1)"
    assert seen["handlers"] == ["a onmouseover"] and seen["scriptUrls"] == ["javascript:alert(2)"]
    assert static_scan(tmp_path) != []


def test_hostile_names_run_no_script_in_any_page(browser, hostile_site):
    assert static_scan(hostile_site) == []
    seen = visit_all(browser, hostile_site)
    assert seen.pop("dialogs") == []
    # every page: the Parts, index, Compare, Warehouse, blog archive and an audit page per run
    assert len(seen) >= 15 and sum(n.startswith("audit/") for n in seen) >= 3
    assert seen["part-local-cpu.html"]["targets"] > 20
    for name, page in seen.items():
        assert page["fired"] == [] and page["handlers"] == [] and page["scriptUrls"] == [], (name, page)
    article = (hostile_site / "part-local-cpu.html").read_text()
    assert HOSTILE_RUN in [a.get("title") for _, a in tags(article)]
