"""The built site in a real browser: charts drawn by vega-embed, no errors, nothing fetched from
another host, a model answer holding <script> shown as text, and run names, specs and texts that
carry links and handlers running nothing on any page when hovered or focused.

Headless Chromium is required (Debian package `chromium`; `$CHROMIUM` names another binary). The
test fails, not skips, when it is missing: the site's promises are only checked here.
"""
from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from render_helpers import HOSTILE_RUN, RUN4, SCRIPT_ANSWER, build_campaign, make_hostile, render_kwargs
from site_browser import Browser, SiteServer, find_chromium, static_scan, tags
from stages.render import stage as render

ARTICLE = "part-local-cpu.html"
WAREHOUSE = "warehouse.html"
DESKTOP, NARROW = 1280, 560

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
def site(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("browser")
    build_campaign(root)
    render.run(**render_kwargs(root, build=True))
    return root / "data" / "site"


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
    audit = sorted(p for p in (site / "audit").glob("probe_*.html")
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


# ---------------------------------------------------------------- hostile names in a real browser

@pytest.fixture(scope="module")
def hostile_site(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("hostile-browser")
    build_campaign(root)
    make_hostile(root)
    render.run(**render_kwargs(root, build=True))
    return root / "data" / "site"


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
    assert len(seen) > 20 and seen["part-local-cpu.html"]["targets"] > 20
    for name, page in seen.items():
        assert page["fired"] == [] and page["handlers"] == [] and page["scriptUrls"] == [], (name, page)
    article = (hostile_site / "part-local-cpu.html").read_text()
    assert HOSTILE_RUN in [a.get("title") for _, a in tags(article)]
