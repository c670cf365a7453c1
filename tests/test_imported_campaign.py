"""A campaign run before this project, brought in with `campaign import`, publishes like the
project's own. The synthetic node campaign (tests/fixtures/node_campaign) stands in for it: its
folders without meta.json (and without the manifest that lists it), imported with --profile
h200x8, must give the same published numbers as the folders with meta.json; and with no spec of
params.yaml matching them, each run is still drawn, named and placed by its setup, its GPU count
marked as inferred with the line it came from.
"""
from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from helpers.chart_specs import series_colours
from helpers.node_campaign import GIANTS, build, built_site, campaign, node_project, plain, stripped_copies
from helpers.site_browser import CHART_MARKS, charts_drawn, open_site_page

GLM_READY = "glm53__tp8_dcp8__1024k__vllm__1116-062500"
GLM_FAILED = "glm53__tp8_dcp8__1024k__vllm__1116-060000"


def line_of(path: Path, text: str) -> int:
    """The line of `path` that holds `text` (the first)."""
    return next(n for n, line in enumerate(path.read_text().splitlines(), start=1) if text in line)


@pytest.fixture(scope="module")
def sites(tmp_path_factory, node_repro, imported_node) -> dict:
    """The node campaign three ways: its own folders (`dvc repro`, the session's build); stripped and
    imported (specs in params.yaml, the session's build); stripped and imported into a project whose
    params.yaml has none of its specs, with one more stripped folder copied in by hand, which no
    import gave a profile."""
    made = {"own": built_site(node_repro.root, node_repro.said),
            "imported": built_site(imported_node.root, imported_node.said),
            "imported_import": imported_node.made}
    root = tmp_path_factory.mktemp("no_spec")
    node_project(root, specs=False)
    sources = stripped_copies(tmp_path_factory.mktemp("no_spec-elsewhere"))
    made["no_spec_import"] = campaign(root, "import", *map(str, sources), "--profile", "h200x8")
    # one more folder, copied in by hand: no import gave it a profile
    stray = sources[0].with_name(sources[0].name.replace("1116-110000", "1117-110000"))
    shutil.copytree(sources[0], root / "data" / "runs" / stray.name)
    made["stray"] = stray.name
    made["no_spec"] = build(root)
    return made


def test_imported_folders_publish_the_same_numbers_as_with_meta_json(sites):
    own, imported = sites["own"]["facts"], sites["imported"]["facts"]
    assert len(own) > 1000 and set(own) == set(imported)
    for fid, fact in own.items():
        other = imported[fid]
        assert other["display"] == fact["display"], fid
        if isinstance(fact["value"], float):
            assert other["value"] == pytest.approx(fact["value"], rel=1e-9), fid
        else:
            assert other["value"] == fact["value"], fid


def test_each_import_says_what_it_brought_in(sites):
    said = sites["imported_import"].stdout + sites["imported_import"].stderr
    assert said.count("imported ") >= 8 and "spec glm53-tp8-dcp8" in said


def test_without_a_spec_every_run_is_named_by_its_setup_and_drawn(sites):
    page = plain(sites["no_spec"]["giants"])
    assert "Spec -" not in page and "Spec :" not in page
    assert (f"{GLM_FAILED}, a run of no spec of `params.yaml` named by its "
            "setup, brought in by `campaign import` without a `meta.json`:") in page
    quoted = re.findall(r'evidence-cmd">\$ head -n \d+ data/runs/([^/]+)/server.log', sites["no_spec"]["giants"])
    assert len(quoted) == 3 and GLM_FAILED.replace("_", "&#95;") in quoted   # every failed launch
    charts = sites["no_spec"]["root"] / "data" / "site" / "assets" / "charts" / GIANTS
    for spec_file in sorted(charts.glob("*_chart-*.vl.json")):
        domains = re.findall(r'"domain":\[([^\]]*)\]', spec_file.read_text())
        if spec_file.name.startswith(("ttft", "decode", "throughput", "completed", "latency_cdf")):
            assert any('__vllm"' in d for d in domains), spec_file.name


@pytest.mark.parametrize("name", ["own", "imported", "no_spec"])
def test_every_fact_read_from_one_raw_line_cites_a_line_that_holds_its_value(sites, name):
    """Imported, the commands go on over lines (`docker run ... \\`, each option a line) and the
    result files hold a figure a line: a flag's value cites the line that holds it and names the
    flag, a result's figure its own line (not the command's first, nor the object's `{`)."""
    from helpers.fact_lines import cited_files, line_problems
    root = sites[name]["root"]
    checked, problems = line_problems(root / "data" / "facts.json", root / "data" / "runs")
    cited = cited_files(root / "data" / "facts.json")
    assert checked > 200 and cited["cmd.sh"] >= 5 and cited["json"] > 80
    assert problems == []
    if name != "own":
        seq_caps = [f for f in sites[name]["facts"].values() if f["name"] == "launch_seq_cap"]
        assert seq_caps and all(f["source_line"] > 3 for f in seq_caps)
        assert all(re.fullmatch(r"\s*--max-num-seqs \d+(?: \\)?", f["excerpt"]) for f in seq_caps)
        figures = [f for f in sites[name]["facts"].values() if f["name"] == "point_output_tok_s"]
        assert figures and all(f["excerpt"].strip().startswith('"output_throughput": ') for f in figures)


def test_the_gpu_count_of_a_run_without_meta_json_is_marked_inferred_with_its_line(sites):
    facts = sites["no_spec"]["facts"]
    gpus = [f for f in facts.values() if f["name"] == "pareto_gpus" and GLM_READY in f["run_ids"]]
    assert gpus and all(f["value"] == 8 for f in gpus)
    fact = gpus[0]
    cmd_sh = sites["no_spec"]["root"] / "data" / "runs" / GLM_READY / "cmd.sh"
    assert fact["source_file"] == f"data/runs/{GLM_READY}/cmd.sh"
    assert fact["source_line"] == line_of(cmd_sh, "--gpus ") > 3       # the command goes on over lines
    assert fact["source_note"].startswith("The GPU count was inferred (the run has no meta.json): "
                                          "the device list of `docker run --gpus")
    audit = (sites["no_spec"]["root"] / "data" / "site" / "audit" / f"{GLM_READY}.html").read_text()
    assert "The run has no <code>meta.json</code>" in audit and "The GPU count was inferred" in audit
    per_gpu = [f for f in facts.values() if f["name"] == "pareto_tok_s_per_gpu" and GLM_READY in f["run_ids"]]
    assert per_gpu and all("The GPU count was inferred" in f["source_note"] for f in per_gpu)


def test_the_setups_part_places_every_point_of_the_imported_runs(sites):
    own = [f for f in sites["own"]["facts"].values() if f["name"] == "pareto_tok_s_per_gpu"]
    mine = [f for f in sites["no_spec"]["facts"].values() if f["name"] == "pareto_tok_s_per_gpu"]
    assert len(own) == len(mine) > 20
    assert "no GPU set" not in plain(sites["no_spec"]["setups"])


def test_the_cached_share_of_prompt_tokens_is_a_caveat(sites):
    assert "Prompt tokens partly served by the prefix cache" in plain(sites["no_spec"]["giants"])
    page = plain(sites["no_spec"]["root"].joinpath("data", "docs", "reference", f"{GIANTS}.md").read_text())
    assert "Part of the prompt tokens of these points were served from the engine's prefix cache" in page
    cached = [f for f in sites["no_spec"]["facts"].values()
              if f["name"] == "point_cache_hit_pct" and f["value"] and f["value"] > 0]
    assert cached


def test_render_names_the_runs_no_part_covers(sites):
    lines = [l for l in sites["no_spec"]["render"].splitlines() if "belong to no Part" in l]
    assert len(lines) == 1 and sites["stray"] in lines[0] and "1 of no profile" in lines[0], lines
    assert "belong to no Part" not in sites["own"]["render"]


def test_charts_of_imported_runs_without_a_spec_draw_as_many_marks_as_with_one(sites):
    counts = {}
    for name in ("own", "no_spec"):
        with open_site_page(sites[name]["root"] / "data" / "site", f"{GIANTS}.html") as (tab, _):
            tab.wait_for(charts_drawn())
            counts[name] = sorted(c["marks"] for c in json.loads(tab.js(CHART_MARKS)))
    # three per model, the prefill rate and the decode speed of all three on shared axes, and
    # where each run's time went
    assert len(counts["own"]) == 12 and counts["no_spec"] == counts["own"]


def test_trace_says_the_gpu_count_was_inferred_and_from_which_line(sites):
    root = sites["no_spec"]["root"]
    fact = next(f for f in sites["no_spec"]["facts"].values()
                if f["name"] == "pareto_gpus" and GLM_READY in f["run_ids"])
    out = campaign(root, "trace", fact["id"]).stdout
    gpus_line = line_of(root / "data" / "runs" / GLM_READY / "cmd.sh", "--gpus ")
    assert f"raw       data/runs/{GLM_READY}/cmd.sh:{gpus_line}" in out
    assert "note      The GPU count was inferred (the run has no meta.json)" in out
    assert "image     vllm/vllm-openai:v0.31.0" in out and "engine vllm 0.31.0" in out
    assert "inferred  engine_version, gpu_count, gpus, image, max_model_len" in out


def test_the_imported_parts_read_as_stories_too(sites):
    from helpers.article_text import article_text, repeated_sentences, words
    site = sites["no_spec"]["root"] / "data" / "site"
    for part in (GIANTS, "part-quad", "part-setups"):
        story = article_text(site / f"{part}.html")
        assert words(story) <= 4500 and repeated_sentences(story) == {}, part
        assert repeated_sentences(article_text(site / "reference" / f"{part}.html")) == {}, part


def test_a_setup_has_one_colour_and_keeps_it_when_imported_without_specs(sites):
    palettes = {}
    for name in ("own", "no_spec"):
        colours = series_colours(sites[name]["root"] / "data" / "site")
        assert all(len({c for c, _ in seen}) == 1 for seen in colours.values()), (name, colours)
        palettes[name] = {series: {c for c, _ in seen}.pop() for series, seen in colours.items()}
    # named differently (a spec; a setup), placed alike: the order each was first run
    assert sorted(palettes["own"].values()) == sorted(palettes["no_spec"].values())
    assert palettes["own"]["glm53-tp8-dcp8"] == palettes["no_spec"]["glm53__tp8_dcp8__1024k__vllm"]
    assert len([s for s in palettes["no_spec"] if s.startswith("qwen3_235b__tp4__256k__vllm · ")]) == 2
