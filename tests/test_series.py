"""The series file (site/series.yaml): Parts in order with their run sets, checked at load with a
one-line error for each kind of mistake; run sets resolved the same way for Parts and for diff."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from stages.core.config import CampaignError
from stages.render import run_sets
from stages.render.pages import load_series

PROJECT = Path(__file__).resolve().parent.parent
TEMPLATES = PROJECT / "site" / "templates"
SHIPPED = yaml.safe_load((PROJECT / "site" / "series.yaml").read_text())


def write(tmp_path: Path, parts) -> Path:
    path = tmp_path / "series.yaml"
    path.write_text(yaml.safe_dump({"parts": parts}))
    return path


def part(**over):
    entry = {"part": 3, "title": "T", "date": "2026-12-01", "description": "D",
             "template": "part-giants.md.j2", "runs": {"profile": "h200x8"}}
    entry.update(over)
    return {k: v for k, v in entry.items() if v is not None}


def test_the_shipped_series_loads_in_order_with_its_run_sets():
    index, parts, _ = load_series(PROJECT / "site" / "series.yaml", TEMPLATES)
    assert index is not None
    assert [p.meta["part"] for p in parts] == sorted(e["part"] for e in SHIPPED["parts"])
    assert [p.name for p in parts] == ["posts/" + e["template"][: -len(".j2")] for e in SHIPPED["parts"]]
    rehearsal = next(p for p in parts if p.name == "posts/part-local-cpu.md")
    assert rehearsal.meta["run_set"] == {"profile": "local-cpu"}
    assert rehearsal.meta["profile"] == "local-cpu"


@pytest.mark.parametrize("entry, message", [
    (part(title=None), r"part entry 1: lacks title"),
    (part(colour="red"), r"unknown key\(s\) colour"),
    (part(template="nope.md.j2"), r"template 'nope.md.j2' is not a \.md\.j2 file"),
    (part(template="../mkdocs.yml"), r"is not a \.md\.j2 file"),
    (part(runs="no-such-set"), r"unknown run set 'no-such-set'"),
    (part(runs={"gpus": 8}), r"run set key\(s\) gpus not among profile, specs, models, image"),
    (part(runs={"models": "glm53"}), r"run set models must be a list"),
])
def test_a_bad_entry_is_a_one_line_error(tmp_path, entry, message):
    with pytest.raises(CampaignError, match=message) as err:
        load_series(write(tmp_path, [entry]), TEMPLATES, {"cpu": {"specs": ["tiny-seqs4"]}})
    assert "\n" not in str(err.value)


def test_a_part_listed_twice_or_with_front_matter_is_refused(tmp_path):
    with pytest.raises(CampaignError, match="part 3 is listed twice"):
        load_series(write(tmp_path, [part(), part(template="part-quad.md.j2")]), TEMPLATES)
    templates = tmp_path / "templates"
    templates.mkdir()
    (templates / "part-x.md.j2").write_text("---\ntitle: X\n---\nbody\n")
    with pytest.raises(CampaignError, match="settings live in series.yaml, not in front matter"):
        load_series(write(tmp_path, [part(template="part-x.md.j2")]), templates)


def test_a_named_run_set_comes_from_params(tmp_path):
    _, [p], _ = load_series(write(tmp_path, [part(runs="cpu")]), TEMPLATES, {"cpu": {"specs": ["tiny-seqs4"]}})
    assert p.meta["run_set"] == {"specs": ["tiny-seqs4"]} and p.meta["run_set_name"] == "cpu"


def test_run_set_selection_matches_every_key_given():
    import duckdb
    con = duckdb.connect()
    con.execute("""create table runs as select * from (values
        ('a1', 'glm53', 'glm-tp8', 'h200x8', 'vllm/vllm-openai:v0.31.0', true, timestamp '2026-11-16 06:00'),
        ('a2', 'glm53', 'glm-tp8', 'h200x8', 'vllm/vllm-openai:v0.31.0', false, timestamp '2026-11-16 05:00'),
        ('b1', 'qwen', 'qwen-tp4', 'h200x8', 'vllm/vllm-openai:nightly-abc', true, timestamp '2026-11-16 07:00'),
        ('c1', 'tiny', 'tiny-seqs4', 'local-cpu', null, true, timestamp '2026-11-30 05:00'))
        as t(run_id, model, spec, profile, image, is_current, started_at)""")
    assert run_sets.select(con, {"profile": "h200x8"}) == ["a2", "a1", "b1"]
    assert run_sets.select(con, {"profile": "h200x8"}, current_only=True) == ["a1", "b1"]
    assert run_sets.select(con, {"models": ["glm53", "tiny"]}) == ["a2", "a1", "c1"]
    assert run_sets.select(con, {"image": "nightly-abc"}) == ["b1"]
    assert run_sets.select(con, {"specs": ["qwen-tp4"], "image": "v0.31.0"}) == []
