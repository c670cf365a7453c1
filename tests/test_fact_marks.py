"""No number without its caveat: a number resting on a provisional run, a capacity-limited point,
a point the prefix cache served or a statistic over one request carries a mark where it is
printed (stages/render/marks.py, stages/render/sql/facts/marks.yaml): its link's classes and title,
the page's legend, its audit entry and facts.json.

The rules are checked on a small hand-made campaign database; then the synthetic node campaign
(tests/fixtures/node_campaign) is built twice, from its own folders with `dvc repro` and imported
without meta.json, and every fact link of every page of both sites is checked against facts.json,
and every fact's marks against bench_points, gates and pareto_compare read directly from the
campaign database the render read.
"""
from __future__ import annotations

import html
import json
import re
from pathlib import Path

import duckdb
import pytest

from helpers import PROJECT
from stages.render import marks as marks_lib
from stages.render.declared import ChangeFact
from stages.render.escape import escape_text
from stages.render.marks import FactMarks, legend, link_classes, link_title, load_rules
from stages.render.queries import COLUMN_FACTS, FACTS_SQL, column_facts

RULES = load_rules()
MARK_NAMES = list(RULES.marks)
CSS = PROJECT / "site" / "assets" / "campaign.css"
# A fact link as page_macros.fact_markup writes it: text, target (page, anchor), title, attr_list.
LINK = re.compile(r'\[([^\]]*)\]\((?:\.\./)*audit/([^)#\s]+)\.html#([^)\s]+) "([^"]*)"\)\{([^}]*)\}')
HTML_LINK = re.compile(r"<a\s([^>]*)>")
ATTR = re.compile(r'([\w-]+)="([^"]*)"')
CACHED_MARK_PCT = 10       # params.yaml profiles.h200x8.rules.cached_mark_pct


# ---------------------------------------------------------------- the rules, by hand

P, OK, AGENTS = "m__tp8__1m__vllm__1116-060000", "m__tp8__1m__vllm__1116-070000", "m__tp8__1m__vllm__1116-080000"


@pytest.fixture()
def hand_made():
    """A provisional run P (a one-request point, a capacity-limited point whose second repeat
    the cache served), a run OK whose point at four users the cache served, and a run with only
    agent sessions, provisional."""
    con = duckdb.connect()
    con.execute("create table bench_points (run_id varchar, point_id varchar, workload varchar, "
                "concurrency integer, provisional boolean, capacity_limited boolean, cached boolean, "
                "ttft_requests integer, completed integer)")
    con.executemany("insert into bench_points values (?, ?, 'long', ?, ?, ?, ?, ?, ?)", [
        (P, "long__c1", 1, True, False, False, 1, 1),
        (P, "long__c4", 4, True, False, False, 4, 4),
        (P, "long__c8", 8, True, True, False, 8, 8),
        (P, "long__c8__r2", 8, True, True, True, 8, 8),
        (OK, "long__c4", 4, False, False, True, 4, 4)])
    con.execute("create table agent_runs (run_id varchar, provisional boolean)")
    con.execute(f"insert into agent_runs values ('{AGENTS}', true), ('{OK}', false)")
    con.execute("create table ramp_turns (run_id varchar, provisional boolean)")
    calls = []

    def query(sql):
        calls.append(sql)
        cur = con.execute(sql)
        return [d[0] for d in cur.description], cur.fetchall()

    yield FactMarks(query), calls
    con.close()


def test_a_fact_carries_the_marks_of_what_it_rests_on_that_its_family_allows(hand_made):
    book, calls = hand_made
    point = {"run_id": P, "workload": "long"}
    assert book.of("point_ttft_median_s", {**point, "concurrency": 1}) == ["provisional", "one request"]
    assert book.of("point_output_tok_s", {**point, "concurrency": 1}) == ["provisional"]   # not a latency
    # every repeat of the point counts; a point named by its id is that repeat
    assert book.of("point_ttft_p90_s", {**point, "concurrency": 8}) == ["provisional", "capacity-limited", "cached"]
    assert book.of("pareto_tok_s_per_gpu", {"run_id": P, "point_id": "long__c8"}) == \
        ["provisional", "capacity-limited"]
    assert book.of("pareto_decode_tok_s_per_user", {"run_id": OK, "point_id": "long__c4"}) == ["cached"]
    # a run's workload (sessions, ramps, targets met): its gate only
    assert book.of("agent_ttft_median_s", {"run_id": AGENTS, "workload": "agents"}) == ["provisional"]
    assert book.of("slo_concurrency", {"run_id": P, "workload": "long"}) == ["provisional"]
    assert book.of("slo_concurrency", {"run_id": OK, "workload": "long"}) == []
    # settings, the caveats themselves, launches, gates, sequences that fit: never
    for name, params in (("point_concurrency", {**point, "concurrency": 8}),
                         ("point_cache_hit_pct", {**point, "concurrency": 8}),
                         ("launch_ready_s", {"run_id": P}), ("gate_score", {"run_id": P}),
                         ("fit_sequences", {"run_id": P, "workload": "long"}),
                         ("node_gpu_count", {"node_id": "n"}), ("no_such_fact", {"run_id": P})):
        assert book.of(name, params) == [], name
    # a change between two runs: the marks of the values it compares
    change = {"base_run_id": OK, "head_run_id": P, "workload": "long", "concurrency": 4}
    assert book.of("compare_point_change_pct", {**change, "metric": "ttft_median_s"}) == ["provisional", "cached"]
    change["concurrency"] = 1
    assert book.of("compare_point_change_pct", {**change, "metric": "ttft_median_s"}) == \
        ["provisional", "one request"]
    assert book.of("compare_point_change_pct", {**change, "metric": "output_tok_s"}) == ["provisional"]
    assert len(calls) == 1, "the caveats are read once per render"


def test_a_derived_fact_carries_its_inputs_marks_in_order(hand_made):
    book, _ = hand_made

    class Input:
        def __init__(self, *marks):
            self.marks = list(marks)
    assert book.union([Input("one request", "cached"), Input("provisional")]) == \
        ["provisional", "cached", "one request"]
    assert book.union([Input(), Input()]) == []


def test_a_marked_link_names_its_marks_and_the_legend_only_those_used():
    assert link_title([]) == "audit trail" and link_classes([]) == ".fact"
    assert link_title(["provisional", "one request"]) == "audit trail · provisional, one request"
    assert link_classes(["provisional", "one request"]) == ".fact .provisional .one-request"
    assert legend([]) == ""
    said = legend({"one request", "provisional"})
    assert said.startswith(f"\n## {marks_lib.LEGEND_TITLE}\n")
    assert re.findall(r'class="fact-mark ([\w-]+)"', said) == ["provisional", "one-request"]


def _css_signs() -> dict[str, str]:
    """Each mark class the stylesheet draws a sign for, and the sign (CSS escapes read)."""
    found = {}
    for css, value in re.findall(r'a\.fact\.([\w-]+) \{ --mark-[\w-]+: "([^"]*)"; \}', CSS.read_text()):
        value = re.sub(r"\\([0-9A-Fa-f]{1,6}) ?", lambda m: chr(int(m.group(1), 16)), value)
        found[css] = value.rstrip("\u2009")
    return found


def test_every_mark_has_a_one_word_class_and_the_stylesheet_draws_its_sign():
    assert set(MARK_NAMES) == {"provisional", "capacity-limited", "cached", "one request"}
    assert _css_signs() == {m.css: m.sign for m in RULES.marks.values()}
    assert len({m.sign for m in RULES.marks.values()}) == len(RULES.marks)
    content = re.search(r"content: (var\(--mark-[^;]*);", CSS.read_text()).group(1)
    assert re.findall(r"--mark-([\w-]+)", content) == [m.css for m in RULES.marks.values()]


def test_every_fact_is_placed_in_one_family():
    declared = column_facts(FACTS_SQL / COLUMN_FACTS)
    names = set(declared) | {p.stem for p in FACTS_SQL.glob("*.sql")}
    unplaced = sorted(n for n in names if RULES.family(n) is None)
    assert not unplaced, f"place these facts in a family of {marks_lib.MARKS_FILE.name}: {unplaced}"
    listed = {f for family in RULES.families for f in family.facts}
    assert not listed - names, f"{marks_lib.MARKS_FILE.name} lists facts that do not exist: {sorted(listed - names)}"
    # `one request` is for statistics over a point's requests only
    for family in RULES.families:
        if "one request" in family.marks:
            for name in family.facts:
                assert re.search(r"ttft|tpot|prefill|decode|latency", name), name


# ---------------------------------------------------------------- two builds of the node campaign

def site_of(root: Path) -> dict:
    docs = root / "data" / "docs"
    facts = json.loads((root / "data" / "facts.json").read_text())
    con = duckdb.connect(str(root / "data" / "campaign.duckdb"), read_only=True)
    try:
        tables = {}
        for t in ("bench_points", "gates", "invalid_rows", "pareto_compare", "pareto_points"):
            cur = con.execute(f"select * from {t}")
            columns = [d[0] for d in cur.description]
            tables[t] = [dict(zip(columns, row)) for row in cur.fetchall()]
    finally:
        con.close()
    return {"root": root, "facts": {f["id"]: f for f in facts}, "records": facts,
            "by_target": {(f["audit_page"], f["audit_anchor"]): f for f in facts},
            "pages": {p.relative_to(docs).as_posix(): p.read_text() for p in sorted(docs.rglob("*.md"))},
            "html": {p.relative_to(root / "data" / "site").as_posix(): p.read_text()
                     for p in sorted((root / "data" / "site").rglob("*.html"))
                     if "audit" not in p.relative_to(root / "data" / "site").parts},
            "tables": tables}


@pytest.fixture(scope="module")
def sites(node_repro, imported_node) -> dict:
    """The node campaign from its own folders (`dvc repro`, as a team builds it), and stripped of
    meta.json and manifest, imported with --profile h200x8 (the session's builds, tests/conftest.py)."""
    return {"own": site_of(node_repro.root), "imported": site_of(imported_node.root)}


CAMPAIGNS = ("own", "imported")


def links(text: str) -> list[tuple[str, str, str, str, list[str]]]:
    """Every fact link of a Markdown page: (text, audit page, anchor, title, classes)."""
    return [(m[0], m[1], m[2], m[3], m[4].split()) for m in LINK.findall(text)]


@pytest.mark.parametrize("which", CAMPAIGNS)
def test_every_link_carries_exactly_its_facts_marks(sites, which):
    site = sites[which]
    seen = {m: 0 for m in MARK_NAMES}
    for name, text in site["pages"].items():
        found = links(text)
        # no fact link escapes the pattern (a title or class list written another way)
        assert text.count('"audit trail') == len(found), name
        for shown, page, anchor, title, classes in found:
            fact = site["by_target"].get((page, anchor))
            assert fact is not None, (name, page, anchor)
            assert classes == link_classes(fact["marks"]).split(), (name, fact["id"], classes)
            assert title == link_title(fact["marks"]), (name, fact["id"], title)
            for m in fact["marks"]:
                seen[m] += 1
    assert all(seen.values()), seen      # the campaign prints a number under each caveat


@pytest.mark.parametrize("which", CAMPAIGNS)
def test_the_classes_survive_into_the_built_pages(sites, which):
    site = sites[which]
    by_target = site["by_target"]
    checked = marked = 0
    for name, text in site["html"].items():
        for tag in HTML_LINK.findall(text):
            attrs = dict(ATTR.findall(tag))
            m = re.search(r"audit/([^/#]+)\.html#(.+)$", attrs.get("href", ""))
            if not m or "fact" not in attrs.get("class", "").split():
                continue
            fact = by_target[(m.group(1), m.group(2))]
            assert attrs["class"].split() == ["fact", *(RULES.marks[k].css for k in fact["marks"])], (name, tag)
            assert html.unescape(attrs["title"]) == link_title(fact["marks"]), (name, tag)
            checked += 1
            marked += bool(fact["marks"])
    assert checked > 500 and marked > 50, (checked, marked)


def _points(site: dict) -> dict[tuple, list[dict]]:
    by = {}
    for row in site["tables"]["bench_points"]:
        by.setdefault((row["run_id"], row["workload"], int(row["concurrency"])), []).append(row)
        by.setdefault((row["run_id"], row["point_id"]), []).append(row)
    return by


def _run_provisional(site: dict, run_id: str) -> bool:
    """derive's rule (int_run_gate_flags): any gate below the minimum, or no gate at all."""
    gates = [g for g in site["tables"]["gates"] if g["run_id"] == run_id]
    return not gates or any(g["provisional"] for g in gates)


def _point_marks(rows: list[dict]) -> set[str]:
    out = set()
    for r in rows:
        out |= {m for m, on in (("provisional", r["provisional"]), ("capacity-limited", r["capacity_limited"]),
                                ("cached", r["cached"]),
                                ("one request", r["ttft_requests"] == 1 or r["completed"] == 1)) if on}
    return out


def expected_marks(site: dict, name: str, params: dict) -> list[str]:
    """A fact's marks from the tables, read here without the render's queries."""
    family = RULES.family(name)
    if family is None or not family.marks:
        return []
    points = _points(site)
    found: set[str] = set()
    if name in family.frontier:
        role = family.frontier[name]
        rows = [r for r in site["tables"]["pareto_compare"]
                if r["setup"] == params["setup"] and r["workload"] == params["workload"]]
        if role == "at_speed":
            keys = [(r[f"{side}_run_id"], r[f"{side}_point_id"]) for r in rows if r["bracketed"]
                    for side in ("lower", "upper")]
        else:
            frontier = [p for p in site["tables"]["pareto_points"] if p["on_frontier"]
                        and p["setup"] == params["setup"] and p["workload"] == params["workload"]]
            pick = min if role == "slowest" else max
            best = pick(p["decode_tok_s_per_user"] for p in frontier) if frontier else None
            keys = [(p["run_id"], p["point_id"]) for p in frontier if p["decode_tok_s_per_user"] == best][:1]
        for key in keys:
            found |= _point_marks(points[key])
    elif "base_run_id" in params:
        change = column_facts(FACTS_SQL / COLUMN_FACTS)[name]
        assert isinstance(change, ChangeFact)
        item = dict(change.items)[params[change.by]].name
        rest = {k: v for k, v in params.items() if k not in ("base_run_id", "head_run_id", change.by)}
        for side in ("base_run_id", "head_run_id"):
            found |= set(expected_marks(site, item, {**rest, "run_id": params[side]}))
    elif "point_id" in params:
        found = _point_marks(points.get((params["run_id"], params["point_id"]), []))
    elif "concurrency" in params:
        found = _point_marks(points.get((params["run_id"], params["workload"], int(params["concurrency"])), []))
    elif "run_id" in params and _run_provisional(site, params["run_id"]):
        found = {"provisional"}
    return [m for m in MARK_NAMES if m in found and m in family.marks]


@pytest.mark.parametrize("which", CAMPAIGNS)
def test_each_fact_has_the_marks_of_the_points_and_runs_it_rests_on(sites, which):
    site = sites[which]
    counted = {m: 0 for m in MARK_NAMES}
    for fact in site["records"]:
        assert isinstance(fact["marks"], list), fact["id"]
        if fact["inputs"]:
            continue
        assert fact["marks"] == expected_marks(site, fact["name"], fact["params"]), fact["id"]
        for m in fact["marks"]:
            counted[m] += 1
    assert all(counted.values()), counted


@pytest.mark.parametrize("which", CAMPAIGNS)
def test_derive_marks_a_point_cached_by_its_counters_or_a_request_the_cache_answered(sites, which):
    site = sites[which]
    answered = {(r["run_id"], r["point_id"]) for r in site["tables"]["invalid_rows"] if r["reason"] == "prefix_cache"}
    rows = site["tables"]["bench_points"]
    for row in rows:
        by_counters = row["cache_hit_pct"] is not None and row["cache_hit_pct"] >= CACHED_MARK_PCT
        assert row["cached"] == (by_counters or (row["run_id"], row["point_id"]) in answered), row["point_id"]
    assert any(r["cached"] for r in rows) and not all(r["cached"] for r in rows)


@pytest.mark.parametrize("which", CAMPAIGNS)
def test_a_ratio_or_difference_carries_its_inputs_marks_and_says_which(sites, which):
    site = sites[which]
    derived = [f for f in site["records"] if f["inputs"]]
    assert derived and any(f["marks"] for f in derived)
    for fact in derived:
        inputs = [site["facts"][i] for i in fact["inputs"]]
        assert fact["marks"] == [m for m in MARK_NAMES if any(m in i["marks"] for i in inputs)], fact["id"]
        entry = audit_entry(site, fact)
        for m in fact["marks"]:
            said = re.search(rf'<p class="audit-mark {RULES.marks[m].css}">(.*?)</p>', entry).group(1)
            assert RULES.marks[m].rests in said
            assert all(i["id"] in said for i in inputs if m in i["marks"])


def audit_entry(site: dict, fact: dict) -> str:
    page = (site["root"] / "data" / "docs" / "audit" / f"{fact['audit_page']}.html").read_text()
    start = page.index(f'<section class="audit-entry" id="{fact["audit_anchor"]}">')
    return page[start:page.index("</section>", start)]


@pytest.mark.parametrize("which", CAMPAIGNS)
def test_the_audit_entry_of_every_fact_says_its_marks_one_line_each(sites, which):
    site = sites[which]
    pages: dict[str, str] = {}
    for fact in site["records"]:
        if fact["audit_page"] not in pages:
            pages[fact["audit_page"]] = (site["root"] / "data" / "docs" / "audit" /
                                         f"{fact['audit_page']}.html").read_text()
        page = pages[fact["audit_page"]]
        start = page.index(f'<section class="audit-entry" id="{fact["audit_anchor"]}">')
        entry = page[start:page.index("</section>", start)]
        said = re.findall(r'<p class="audit-mark ([\w-]+)"><strong>([^<]+)</strong>', entry)
        assert said == [(RULES.marks[m].css, m) for m in fact["marks"]], fact["id"]


@pytest.mark.parametrize("which", CAMPAIGNS)
def test_a_page_with_marks_has_their_legend_and_one_without_none(sites, which):
    site = sites[which]
    with_legend = 0
    for name, text in site["pages"].items():
        used = {m for _, page, anchor, _, _ in links(text) for m in site["by_target"][(page, anchor)]["marks"]}
        heading = f"\n## {marks_lib.LEGEND_TITLE}\n"
        if not used:
            assert heading not in text, name
            continue
        with_legend += 1
        assert text.count(heading) == 1, name
        legend_text = text[text.index(heading):].split("\n## ", 2)[1]
        shown = re.findall(r'<span class="fact-mark ([\w-]+)">([^<]+)</span>', legend_text)
        assert shown == [(RULES.marks[m].css, escape_text(RULES.marks[m].sign)) for m in MARK_NAMES if m in used], name
    assert with_legend >= 3


def test_both_builds_mark_the_same_numbers_alike(sites):
    own, imported = sites["own"]["facts"], sites["imported"]["facts"]
    assert set(own) == set(imported)
    assert {i: f["marks"] for i, f in own.items()} == {i: f["marks"] for i, f in imported.items()}
