"""The node campaign's Parts, built from the committed synthetic node campaign
(tests/fixtures/node_campaign) the way a team builds them: run folders in data/runs, the node
profile active, `dvc repro`. Checks the series (Parts left out when their
run set is empty), one section per model with its launch story, gate, speeds, charts and caveats,
derived facts, and the Part in headless Chromium (charts drawn, failed launches quoted).
"""
from __future__ import annotations

import html
import json
import re

import pytest
import yaml

from helpers.chart_specs import panel_orders, series_colours
from helpers.node_campaign import GIANTS, QUAD, plain, repro_site
from helpers.site_browser import CHART_MARKS, charts_drawn, charts_named, open_site_page


@pytest.fixture(scope="module")
def built(node_repro) -> dict:
    """The node campaign as a team builds it: its run folders in data/runs, the node profile
    active, no spec to launch, `dvc repro` (the session's build, tests/conftest.py)."""
    return repro_site(node_repro.root, node_repro.said)


def test_parts_without_runs_are_left_out_with_a_notice(built):
    assert "part-local-cpu.md: left out, its run set (profile=local-cpu) selects no runs" in built["stderr"]
    assert not (built["docs"] / "posts" / "part-local-cpu.md").exists()
    index = (built["docs"] / "index.md").read_text()
    assert "part-giants.md" in index and "part-quad.md" in index and "part-local-cpu.md" not in index


def test_one_section_per_model_in_order_of_first_launch(built):
    heads = re.findall(r"(?m)^## (.+)$", built["giants"])
    assert [h for h in heads if h in ("GLM-5.3", "MiniMax-M3", "DeepSeek-V4-Pro")] == \
        ["GLM-5.3", "MiniMax-M3", "DeepSeek-V4-Pro"]
    for section in ("### Does it still read", "### Reading and writing, one user at a time",
                    "## How it scales with users", "## How many sequences fit", "## Caveats",
                    "### Conversations that grow"):
        assert section in built["giants"], section
    # the story links its reference page, which holds each model's exhaustive blocks
    assert "](../reference/part-giants.md)" in built["giants"]
    assert re.findall(r"(?m)^## (.+)$", built["giants_ref"])[:3] == ["GLM-5.3", "MiniMax-M3", "DeepSeek-V4-Pro"]
    for section in ("### The tails", "### Within the latency targets", "### Caveats from the data"):
        assert section in built["giants_ref"], section


def quotes(text: str) -> dict[str, list[tuple[int, str]]]:
    """Each launch quote of a page (plain text): run id -> its numbered lines."""
    found = {}
    for m in re.finditer(r"\$ (?:head -n \d+ )?(?:grep -a -n -E '[^\n]*' )?data/runs/([^/]+)/server\.log[^\n]*\n"
                         r"((?:(?:\d+:|  \u2026)[^\n]*\n?)+)", text):
        found[m.group(1)] = [(int(n), line) for n, line in re.findall(r"(?m)^(\d+):(.*)$", m.group(2))]
    return found


def test_failed_launches_are_quoted_at_their_error_and_the_lines_it_depends_on(built):
    text = plain(built["giants"])
    runs = built["root"] / "data" / "runs"
    quoted = {run: lines for run, lines in quotes(text).items() if "__1116-0600" in run
              or "__1116-0910" in run or "dep8" in run}
    assert len(quoted) == 3, quoted          # glm53's first launch, minimax on v0.31.0, dsv4 dep8
    for run_id, lines in quoted.items():
        raw = (runs / run_id / "server.log").read_text().splitlines()
        assert lines and all(raw[n - 1] == shown for n, shown in lines)
    errors = "\n".join(shown for lines in quoted.values() for _, shown in lines)
    assert "NotImplementedError" in errors and "RuntimeError" in errors
    # the out-of-memory launch: the weights it loaded and the KV memory left, before its error
    dep8 = [shown for run, lines in quoted.items() if "dep8" in run for _, shown in lines]
    assert [any(k in l for l in dep8) for k in ("Model loading took", "Available KV cache memory: -",
                                                "No available memory for the cache blocks")] == [True] * 3


def test_the_next_launch_shows_what_changed(built):
    text = plain(built["giants"])
    assert re.search(r"\| flag added \| --dcp-comm-backend \|\s*\| ag_rs \|", text)
    quad = plain(built["quad"])
    assert re.search(r"\| image changed \| image \| vllm/vllm-openai:v0\.31\.0 \| vllm/vllm-openai:nightly", quad)


def test_ready_launches_are_summarised_with_memory_kv_and_backends(built):
    text = plain(built["giants"])
    assert re.search(r"Ready after [\d.,]+ s, with [\d.,]+ GiB of weights per GPU", text)
    assert re.search(r"by the engine's estimate [\d.,]+ requests of\s+[\d,]+ tokens at once", text)
    # every ready launch is quoted at its KV pool and concurrency lines, per-rank copies folded
    ready = {run: lines for run, lines in quotes(text).items()
             if run.endswith(("1116-062500", "1116-093000", "1116-112000"))}
    assert len(ready) == 3
    for lines in ready.values():
        shown = "\n".join(l for _, l in lines)
        assert "KV cache size:" in shown and "Maximum concurrency for" in shown
        assert shown.count("Model loading took") == 1
    assert "more with the same message" in text


def test_a_gate_that_missed_a_needle_is_a_provisional_box(built):
    assert '!!! warning "Provisional: minimax-m3-tep8 missed the needle"' in built["giants"]
    found, probes = (next(f for f in built["facts"].values()
                          if f["name"] == name and f["params"]["run_id"].startswith("minimax_m3__fx"))
                     for name in ("gate_passed_probes", "gate_probes"))
    assert (found["value"], probes["value"]) == (2, 3)


def test_one_request_at_a_time_has_prefill_rate(built):
    prefill = [f for f in built["facts"].values() if f["name"] == "point_prefill_tok_s"]
    assert {f["params"]["workload"] for f in prefill} >= {"short-1k", "doc-256k", "doc-512k", "doc-1m"}
    for f in prefill:
        ttft = built["facts"][f["id"].replace("point_prefill_tok_s", "point_ttft_median_s")]
        prompt = built["facts"][f["id"].replace("point_prefill_tok_s", "point_prompt_tokens")]
        # the median of per-request rates, close to the prompt over the median first token
        assert f["value"] == pytest.approx(prompt["value"] / ttft["value"], rel=0.25)


def test_caveats_show_cache_served_and_queueing_points_and_engine_stats(built):
    assert "Prompt tokens partly served by the prefix cache" in plain(built["giants"])
    text = plain(built["giants_ref"])
    # one point's flagged requests: the point said once above the table, a row per reason
    assert re.search(r"The same in every row: .*\*\*Workload\*\* doc-256k; \*\*Users\*\* 1; .*\n\n"
                     r"\| Reason \| Left out of \| Requests \|\n[^\n]*\n(\|[^\n]*\n)*"
                     r"\| prefix_cache \| first token \| 1 \|", text)
    assert "Points that sent more users than the engine could hold" in text
    assert "What the engine's own stats lines said" in text


def test_ratio_names_both_inputs_and_its_audit_page_links_them(built):
    ratios = [f for f in built["facts"].values() if f["name"] == "ratio"]
    assert ratios
    for r in ratios:
        a, b = (built["facts"][i] for i in r["inputs"])
        assert r["value"] == pytest.approx(a["value"] / b["value"])
        page = (built["docs"] / "audit" / f"{r['audit_page']}.html").read_text()
        for fid in r["inputs"]:
            target = built["facts"][fid]
            assert f'href="{target["audit_page"]}.html#{target["audit_anchor"]}"' in page


def test_every_number_links_to_an_audit_page_that_exists(built):
    for name in (GIANTS, QUAD):
        # a Part is a blog post in docs/posts/: its links climb out of that folder
        targets = re.findall(r"\]\(\.\./(audit/[^) #]+\.html)#([^) ]+) \"audit trail[^\"]*\"\)\{\.fact[^}]*\}",
                             built[name.split("-")[1]])
        assert len(targets) > 100
        pages = {}
        for target, anchor in set(targets):
            if target not in pages:
                pages[target] = (built["docs"] / target).read_text()
            assert f'id="{anchor}"' in pages[target], (target, anchor)


def test_the_part_in_a_browser_draws_its_charts_and_quotes_failed_launches(built):
    with open_site_page(built["site"], f"{GIANTS}.html") as (tab, server):
        drawn = tab.wait_for(charts_drawn())
        state = json.loads(tab.js("""JSON.stringify({
          charts: document.querySelectorAll('div.vega-chart').length,
          drawn: document.querySelectorAll('div.vega-chart svg.marks').length,
          evidence: [...document.querySelectorAll('pre.evidence')].map(e => e.innerText),
        })"""))
        marks = json.loads(tab.js(CHART_MARKS))
        errors = tab.console_errors()
        # follow a first-token figure of a table to its audit entry: the requests it rests on
        href = tab.js("[...document.querySelectorAll('table a.fact')]"
                      ".map(a => a.getAttribute('href')).find(h => h.includes('#point_ttft_median_s-'))")
        tab.goto(server.base + "audit/" + href.split("audit/", 1)[1])
        entry = tab.js(f"""(() => {{
          const entry = document.getElementById({json.dumps(href.split('#', 1)[1])});
          return entry ? entry.innerText : ''; }})()""")
    assert "Computed from" in entry and re.search(r"ttfts\[\d+\]", entry), entry[:500]
    # three per model, then the Part's models on shared axes (prefill rate, decode speed) and
    # where each run's time went
    assert drawn and state["charts"] == state["drawn"] == 12, state
    for kind, count in (("ttft_chart", 3), ("decode_chart", 4), ("throughput_chart", 3), ("prefill_chart", 1)):
        assert len(charts_named(marks, kind)) == count, kind
    assert all(c["marks"] > 5 for c in charts_named(marks, "prefill_chart")), marks
    quoted = [e for e in state["evidence"] if e.startswith("$ head -n")]
    assert len(quoted) == 3 and any("NotImplementedError" in q for q in quoted)
    assert errors == []
    # the reference page: the latency CDF and the request timeline of each model, drawn
    with open_site_page(built["site"], f"reference/{GIANTS}.html") as (tab, server):
        tab.wait_for(charts_drawn())
        marks = json.loads(tab.js(CHART_MARKS))
        assert tab.console_errors() == []
    for kind in ("latency_cdf_chart", "request_timeline_chart"):
        ours = charts_named(marks, kind)
        assert len(ours) == 3 and all(c["svg"] == 1 and c["marks"] > 10 for c in ours), (kind, ours)


def test_arms_keep_their_labels_and_the_original_stays_beside_its_rescue(built):
    text = plain(built["giants"])
    assert "dsv4_pro__dep8__781k__vllm__1116-110000 *(superseded by dsv4-pro-tep8)*:" in text
    assert "dsv4_pro__tep8__781k__vllm__1116-112000 *(follow-up of dsv4-pro-dep8)* changed from" in text
    assert "*(superseded by minimax-m3-tep8)*:" in text


def test_every_fact_read_from_one_raw_line_cites_a_line_that_holds_its_value(built):
    """And a fact read from a flag of cmd.sh cites a line naming the flag (fact_lines.FLAGS); the
    same campaign imported, its commands continued over lines and its results pretty-printed:
    tests/test_imported_campaign.py."""
    from helpers.fact_lines import cited_files, line_problems
    facts_file = built["root"] / "data" / "facts.json"
    checked, problems = line_problems(facts_file, built["root"] / "data" / "runs")
    cited = cited_files(facts_file)
    assert checked > 200 and cited["cmd.sh"] >= 5 and cited["json"] > 80 and cited["server.log"] > 50
    assert problems == []


def test_a_median_lists_its_inputs_and_they_give_the_published_value(built):
    from stages.render.inputs import recompute
    listed = [f for f in built["facts"].values() if f["statistic"]]
    assert {f["name"] for f in listed} >= {"point_ttft_median_s", "point_decode_tok_s",
                                           "point_tpot_median_ms", "point_prefill_tok_s"}
    for fact in listed:
        assert fact["input_rows"], fact["id"]
        assert recompute(fact["statistic"], fact["input_rows"]) == pytest.approx(fact["value"]), fact["id"]
    # the cache-served request is listed, left out, with its reason
    fact = next(f for f in listed if f["name"] == "point_ttft_median_s"
                and f["params"]["run_id"].startswith("dsv4_pro__tep8") and f["params"]["concurrency"] == 1)
    left_out = [r for r in fact["input_rows"] if not r["used"]]
    assert len(left_out) == 1 and "prefix_cache" in left_out[0]["reason"]
    page = (built["docs"] / "audit" / f"{fact['audit_page']}.html").read_text()
    entry = html.unescape(page.split(f'id="{fact["audit_anchor"]}"')[1].split("</section>")[0])
    assert re.search(r"<code>ttfts\[\d\]</code></td><td[^>]*>[\d.]+</td><td>no: cached_share, prefix_cache</td>",
                     entry)
    assert "Computed from 1 of these 2 inputs: the median of the values used." in entry


@pytest.mark.parametrize("values", [[3.0], [1.0, 2.0], [5.0, 1.0, 4.0, 2.0, 3.0], [0.1 * i ** 2 for i in range(17)]])
def test_recomputed_statistics_agree_with_duckdb(values):
    import duckdb
    from stages.render.inputs import recompute
    rows = [{"value": v, "used": True} for v in values] + [{"value": 99.0, "used": False}]
    median, p90, p99 = duckdb.connect().execute(
        "select median(v), quantile_cont(v, 0.9), quantile_cont(v, 0.99) from unnest($v) as t(v)",
        {"v": values}).fetchone()
    assert recompute("median", rows) == pytest.approx(median)
    assert recompute("p90", rows) == pytest.approx(p90)
    assert recompute("p99", rows) == pytest.approx(p99)
    assert recompute("per_second", rows) == pytest.approx(1000 / median)
    assert recompute("count", rows) == len(values)


def section(markdown: str, heading: str) -> list[str]:
    """The text of each section under `heading` (### level), up to the next heading of its level."""
    return re.findall(rf"(?ms)^### {re.escape(heading)}\n(.*?)(?=^##+ |\Z)", plain(markdown))


def test_goodput_tables_give_each_model_its_most_users_within_the_targets(built):
    giants = section(built["giants_ref"], "Within the latency targets")
    assert len(giants) == 3 and len(section(built["quad_ref"], "Within the latency targets")) == 1
    facts = built["facts"].values()
    most = {f["params"]["run_id"].split("__")[0] + "/" + f["params"]["workload"]: f
            for f in facts if f["name"] == "slo_concurrency"}
    assert {"glm53/doc-256k", "minimax_m3/short-1k", "dsv4_pro/doc-256k", "qwen3_235b/short-1k"} <= set(most)

    def of(name, fact):
        return next(f["value"] for f in facts if f["name"] == name and f["params"] == fact["params"])
    # minimax at short-1k met the p99 targets at 8 users and missed at 64: interpolated between them
    m = most["minimax_m3/short-1k"]
    met, failed = of("slo_met_concurrency", m), of("slo_failed_concurrency", m)
    share_met, share_failed, p = of("slo_met_share_pct", m), of("slo_failed_share_pct", m), of("slo_percentile", m)
    assert (met, failed, p) == (8, 64, 99.0) and share_failed < p <= share_met
    assert m["value"] == pytest.approx(met + (share_met - p) * (failed - met) / (share_met - share_failed))
    assert "Interpolated" in m["source_note"]
    # qwen met them at every level measured: the highest measured, said to be a lower bound
    q = most["qwen3_235b/short-1k"]
    assert q["value"] == 8 and "lower bound" in q["source_note"]
    # the targets in one table, where they were met in the next
    assert re.search(r"\| short-1k \| 99\.0 \| 2\.00 \| 50\.0 \|\n", "\n".join(giants)), giants
    assert re.search(r"\| short-1k \| 8 \| 100\.0 \| 64 \| 25\.0 \| 8\.75 \| interpolated \|",
                     "\n".join(giants)), giants
    # each point's share met and goodput are facts; the share recomputes from the requests listed
    shares = [f for f in facts if f["name"] == "point_slo_share_pct"]
    assert len(shares) >= 15
    for f in shares:
        judged = [r for r in f["input_rows"] if r["used"]]
        assert f["value"] == pytest.approx(100.0 * sum(r["value"] for r in judged) / len(judged))
        goodput = next(g for g in facts if g["name"] == "point_goodput_req_s" and g["params"] == f["params"])
        met = next(g for g in facts if g["name"] == "point_slo_met_requests" and g["params"] == f["params"])
        assert met["value"] == sum(r["value"] for r in judged)
        assert (goodput["value"] > 0) == (met["value"] > 0)


def test_tails_print_p99_beside_median_and_p90_with_their_inputs(built):
    tails = section(built["giants_ref"], "The tails")
    assert len(tails) == 3
    assert all("| First token, median (s) | p90 | p99 |" in t and "| Per token, median (ms) | p90 | p99 |" in t
               for t in tails)
    facts = built["facts"]
    p99s = [f for f in facts.values() if f["name"] == "point_ttft_p99_s"]
    assert len(p99s) >= 15
    for f in p99s:
        p90 = facts[f["id"].replace("point_ttft_p99_s", "point_ttft_p90_s")]
        assert f["value"] >= p90["value"] and f["statistic"] == "p99" and f["input_rows"]
    tpot = [f for f in facts.values() if f["name"] == "point_tpot_p99_ms"]
    assert tpot and all(f["value"] >= facts[f["id"].replace("p99", "p90")]["value"] for f in tpot)


def test_latency_cdf_and_request_timeline_come_with_their_rows_as_csv(built):
    import csv
    charts = built["docs"] / "assets" / "charts" / GIANTS
    for kind in ("latency_cdf_chart", "request_timeline_chart"):
        files = sorted(charts.glob(f"{kind}-*.csv"))
        assert len(files) == 3, kind
        for path in files:
            rows = list(csv.DictReader(path.open()))
            spec = json.loads(path.with_suffix(".vl.json").read_text())
            assert len(rows) == len(next(iter(spec["datasets"].values()))) > 0
            assert f"[CSV](../assets/charts/{GIANTS}/{path.name})" in built["giants_ref"]
    # the CDF of a point climbs to every request: its last share is one
    cdf = list(csv.DictReader(sorted(charts.glob("latency_cdf_chart-minimax_m3*.csv"))[0].open()))
    at64 = [r for r in cdf if r["concurrency"] == "64"]
    assert len(at64) == 64 and max(float(r["share"]) for r in at64) == 1.0
    # the timeline: each request sent, then its first token, then its last
    timeline = list(csv.DictReader(sorted(charts.glob("request_timeline_chart-minimax_m3*.csv"))[0].open()))
    assert timeline and all(float(r["sent_s"]) <= float(r["first_token_s"]) <= float(r["last_token_s"])
                            for r in timeline)
    assert min(float(r["sent_s"]) for r in timeline) == 0.0


@pytest.mark.parametrize("part", [GIANTS, QUAD, "part-setups"])
def test_a_part_reads_as_a_story_with_its_reference_one_click_away(built, part):
    from helpers.article_text import article_text, repeated_sentences, words
    story = article_text(built["site"] / f"{part}.html")
    reference = article_text(built["site"] / "reference" / f"{part}.html")
    assert words(story) <= 4500, words(story)
    assert repeated_sentences(story) == {} and repeated_sentences(reference) == {}
    assert 'href="reference/' + part + '.html"' in (built["site"] / f"{part}.html").read_text()
    assert f'href="../{part}.html"' in (built["site"] / "reference" / f"{part}.html").read_text()


def test_the_giants_story_cites_its_sources_from_the_prose(built):
    cited = re.findall(r"\[\[(S\d+)\]\]\(#source-s\d+\)", built["giants"])
    assert len(set(cited)) >= 8, sorted(set(cited))
    listed = re.findall(r'<a id="source-(s\d+)"></a>', built["giants"])
    assert [s.upper() for s in listed] == list(dict.fromkeys(cited))     # numbered by first citation


def test_one_colour_per_setup_on_every_page_and_two_images_told_apart(built):
    colours = series_colours(built["site"])
    assert len(colours) >= 5, sorted(colours)
    assert {name: {c for c, _ in seen} for name, seen in colours.items()
            if len({c for c, _ in seen}) > 1} == {}
    drawn = {name: {c for c, _ in seen}.pop() for name, seen in colours.items()}
    assert len(set(drawn.values())) == len(drawn)            # no two setups share a colour
    # the quad's spec ran under two images: two series, each named with its image's tag
    qwen = sorted(n for n in drawn if n.startswith("qwen3-235b-tp4"))
    assert qwen == ["qwen3-235b-tp4 · nightly-7c41e9a0", "qwen3-235b-tp4 · v0.31.0"]
    # a setup keeps its colour from the giants and quad Parts to the setups Part's Pareto charts
    pages = {page for seen in colours.values() for _, page in seen}
    assert {"part-giants", "part-quad", "part-setups"} <= pages


def test_every_workload_faceted_chart_is_in_prompt_length_order(built):
    params = yaml.safe_load((built["root"] / "params.yaml").read_text())
    length = {w: (spec["prompt_tokens"], spec["output_tokens"])
              for w, spec in params["workloads"]["h200x8"].items() if "prompt_tokens" in spec}
    orders = panel_orders(built["site"])
    assert len(orders) >= 20
    for name, order in orders:
        assert order == sorted(order, key=lambda w: (*length[w], w)), (name, order)


def test_the_prefill_chart_draws_the_rates_the_tables_print(built):
    import pandas as pd
    (csv,) = (built["site"] / "assets" / "charts" / GIANTS).glob("prefill_chart-*.csv")
    rows = pd.read_csv(csv)
    assert len(rows) >= 7 and set(rows["series"]) >= {"glm53-tp8-dcp8", "dsv4-pro-tep8"}
    for r in rows.itertuples():
        fact = built["facts"][f"point_prefill_tok_s--1--{r.run_id}--{r.workload}"]
        assert r.prefill_tok_s == pytest.approx(fact["value"], rel=1e-9), r
    glm = rows[rows["series"] == "glm53-tp8-dcp8"]
    assert list(glm["prompt_tokens"]) == sorted(glm["prompt_tokens"]) and len(glm) == 5   # 1K to 1M
    # the point whose prompts came partly from the prefix cache is drawn apart, as a diamond
    assert set(rows.loc[rows["cached"], "kind"]) == {"partly from the prefix cache"}
    assert rows["cached"].any() and rows["provisional"].any()


LEGENDS = """JSON.stringify([...document.querySelectorAll('div.vega-chart svg.marks g.role-legend')]
  .filter(lg => (lg.querySelector('.role-legend-title text') || {}).textContent === 'Setup')
  .flatMap(lg => {
    const labels = [...lg.querySelectorAll('.role-legend-label text')].map(t => t.textContent);
    const fills = [...lg.querySelectorAll('.role-legend-symbol path')].map(p => p.getAttribute('fill'));
    return labels.map((label, i) => [label, fills[i]]);
  }))"""


def test_in_a_browser_each_setup_is_one_colour_and_its_legend_label_is_whole(built):
    seen: dict[str, set[tuple[str, str]]] = {}
    for page in (f"{GIANTS}.html", f"{QUAD}.html", "part-setups.html", f"reference/{GIANTS}.html"):
        with open_site_page(built["site"], page) as (tab, _):
            tab.wait_for(charts_drawn())
            for label, fill in json.loads(tab.js(LEGENDS)):
                seen.setdefault(label, set()).add((fill, page))
    assert len(seen) >= 5, seen
    assert {label: pages for label, pages in seen.items() if len({f for f, _ in pages}) > 1} == {}
    assert not [label for label in seen if label.endswith("…")]
    assert any("nightly-7c41e9a0" in label for label in seen)


TABLE_WIDTHS = """JSON.stringify([...document.querySelectorAll('article table')].map(t => {
  const w = t.closest('.md-typeset__scrollwrap') || t.parentElement;
  return {head: [...t.rows[0].cells].map(c => c.textContent.trim()).join(' | ').slice(0, 100),
          scroll: w.scrollWidth, client: w.clientWidth};
}))"""


def test_every_table_of_the_node_parts_fits_its_column_in_a_wide_window(built):
    """At a 1,400-pixel window no table of the giants, quad or setups Part, story or reference,
    is wider than the article column (a column the same in every row is said once above its
    table, wide tables are split, long labels shortened with the whole text their tooltip)."""
    from helpers.site_browser import Browser, SiteServer, find_chromium
    pages = [f"{part}.html" for part in (GIANTS, QUAD, "part-setups")]
    pages += [f"reference/{page}" for page in pages]
    binary = find_chromium()
    assert binary, "headless Chromium not found: install the `chromium` package"
    measured = {}
    with Browser(binary) as browser, SiteServer(built["site"]) as server:
        for page in pages:
            tab = browser.page(width=1400, height=900)
            tab.goto(server.base + page)
            tab.wait_for("!document.querySelector('article table:not(.md-typeset__scrollwrap table)')", 5)
            measured[page] = json.loads(tab.js(TABLE_WIDTHS))
    assert all(measured.values()), {page: len(tables) for page, tables in measured.items()}
    assert sum(len(tables) for tables in measured.values()) >= 40
    wide = [(page, t) for page, tables in measured.items() for t in tables if t["scroll"] > t["client"]]
    assert wide == []
    said = [line for page in ("giants_ref", "quad_ref") for line in built[page].splitlines()
            if line.startswith("The same in every row: ")]
    assert any("**Measured with** vllm bench serve" in line for line in said), said
