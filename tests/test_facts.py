"""Facts: named queries evaluated against campaign.duckdb, with the raw line each rests on."""
from __future__ import annotations

import html
import json
from pathlib import Path

import duckdb
import pytest
import yaml

from helpers.render_campaign import RUN4, RUN16, RUN16_FAILED, SCRIPT_ANSWER, audit_ref, build_campaign
from stages.core.config import Paths
from stages.render import digits, escape, facts, queries, trace
from stages.render.errors import FactError
from stages.render.digits import FactCheckError
from stages.render.facts import FactBook
from stages.render.page_macros import PageMacros, said_once
from stages.render.inputs import input_rows
from stages.render.numbers import table_displays, with_unit


@pytest.fixture
def campaign(tmp_path: Path):
    db = build_campaign(tmp_path)
    con = duckdb.connect(str(db), read_only=True)
    yield tmp_path, con
    con.close()


@pytest.fixture
def macros(campaign):
    root, con = campaign
    book = FactBook(con, root=root, sha="a" * 40)
    return PageMacros(book, page="part-x.md", runs_dir=root / "data" / "runs", root=root)


@pytest.mark.parametrize("value,expected", [
    (1573325, "1,573,325"),
    (71.3, "71.3"),
    (609.14, "609.1"),
    (5659136.0, "5,659,136"),
    (5.4, "5.40"),
    (0.1, "0.1"),
    (0.2305, "0.231"),
    (0.0, "0"),
    (None, "-"),
    (True, "yes"),
    ("0.32.0", "0.32.0"),
])
def test_format_value(value, expected):
    assert facts.format_value(value) == expected


def test_a_table_prints_each_unit_at_one_precision():
    cells = [(0.02, "s", "0.02"), (0.0244, "s", "0.0244"), (2.6, "s", "2.60"), (7.5, "ms", "7.50"),
             (12.25, "ms", "12.2"), (16, "users", "16"), (4294967296.0, None, "4 GiB"), (None, "s", "-")]
    assert table_displays(cells) == ["0.0200", "0.0244", "2.6000", "7.50", "12.25", "16", "4 GiB", "-"]
    assert table_displays([(1573325.0, "tokens", "1,573,325"), (8192.0, "tokens", "8,192")]) == \
        ["1,573,325", "8,192"]


def test_a_unit_follows_its_value_and_a_percent_sign_takes_no_space():
    assert (with_unit("71.3", "s"), with_unit("-9.1", "%"), with_unit("0.5", None)) == ("71.3 s", "-9.1%", "0.5")
    assert with_unit("-", "%") == "-"


def test_fact_carries_value_run_source_and_raw_excerpt(campaign):
    root, con = campaign
    book = FactBook(con, root=root, sha=None)
    fact = book.evaluate("launch_kv_tokens", {"run_id": RUN4}, page="p.md")
    assert fact.value == 8192 and fact.display == "8,192" and fact.unit == "tokens"
    assert fact.run_ids == [RUN4]
    assert fact.source_file == f"data/runs/{RUN4}/server.log"
    raw = (root / fact.source_file).read_text().splitlines()[fact.source_line - 1]
    assert fact.excerpt == raw and "CPU KV cache size" in raw
    assert fact.stage == "derive" and fact.pages == ["p.md"]
    record = fact.record()
    for key in ("id", "name", "params", "value", "unit", "sql", "run_ids", "source_file",
                "source_line", "excerpt", "stage", "git_sha"):
        assert key in record
    assert "$run_id" in record["sql"]


def test_null_value_prints_a_dash(campaign):
    root, con = campaign
    fact = FactBook(con, root=root, sha=None).evaluate("launch_ready_s", {"run_id": RUN16_FAILED})
    assert fact.value is None and fact.display == "-"


def test_aggregate_fact_lists_its_runs(campaign):
    root, con = campaign
    fact = FactBook(con, root=root, sha=None).evaluate("profile_launches", {"profile": "local-cpu"})
    assert fact.value == 3 and len(fact.run_ids) == 3 and fact.source_file is None


def test_unknown_fact_and_wrong_parameters_fail(campaign):
    root, con = campaign
    book = FactBook(con, root=root, sha=None)
    with pytest.raises(FactError, match="unknown fact 'launch_speed'"):
        book.evaluate("launch_speed", {"run_id": RUN4})
    with pytest.raises(FactError, match="binds"):
        book.evaluate("launch_ready_s", {"run": RUN4})
    with pytest.raises(FactError, match="0 rows"):
        book.evaluate("launch_ready_s", {"run_id": "no-such-run"})


def test_fact_macro_links_to_audit_page_behind_a_placeholder(macros):
    held = macros.fact("launch_ready_s", run_id=RUN4)
    assert digits.PLACEHOLDER.fullmatch(str(held))
    out = macros.substitute(f"ready after {held} s")
    target = audit_ref(f"launch_ready_s--{RUN4}", RUN4)
    assert out == (f'ready after [71.3]({target} "audit trail"){{.fact}} s')
    assert macros.tables_used == ["launches"]


def test_check_digits_fails_on_a_typed_number_and_names_it():
    with pytest.raises(FactCheckError, match=r"part-x\.md.*'71\.3'"):
        digits.check_digits("part-x.md", "The engine was ready after 71.3 seconds.")


def test_check_digits_allows_list_links_and_placeholders():
    text = ("# Part 1: notes\nOn 8 GPUs of an H200 node, p90 stays low [S12].\n"
            "See [the audit](audit/x--run__1130-051200.md \"audit trail\") and @@MAB@@.\n")
    digits.check_digits("part-x.md", text)


def test_table_cells_are_facts_and_text_is_escaped(macros):
    held = macros.table("probe_rows", run_id=RUN4, columns=[
        ["Depth", "fact:probe_depth"], ["Outcome", "outcome"], ["Answer", "answer"]])
    out = macros.substitute(str(held))
    lines = out.splitlines()
    # every probe of the fixture missed: its outcome is said once, above the table
    assert lines[0] == "The same in every row: **Outcome** missed." and lines[1] == ""
    assert lines[2] == "| Depth | Answer |" and lines[3] == "| ---: | --- |"
    assert f"({audit_ref(f'probe_depth--0--{RUN4}', RUN4)}" in lines[4]
    assert "<script>" not in out and "&lt;script&gt;alert" in out


def test_a_column_the_same_in_every_row_is_said_once_above_the_table(macros):
    """A text or run column whose cell is the same in every row leaves the table for one line
    above it; a column of facts stays while each row holds its own fact, even of one value, and
    is said once (its link and marks whole) only when it is one fact; a table of one row, a
    column blank in every row and the last column left are kept as they are."""
    held = macros.table("probe_rows", run_id=RUN4, columns=[
        ["Run", "run:run_id"], ["Depth", "fact:probe_depth"], ["Outcome", "outcome"]])
    out = html.unescape(macros.substitute(str(held)))
    said, blank, head, align, *rows = out.splitlines()
    assert said.startswith('The same in every row: **Run** <span class="run-ref') and f'title="{RUN4}"' in said
    assert said.endswith("vllm · 05:12</span></span>; **Outcome** missed.") and blank == ""
    assert head == "| Depth |" and align == "| ---: |" and len(rows) >= 2
    assert all("(audit/" in row for row in rows)
    link = "[8](audit/r.html#n-1 \"audit trail · provisional\"){.fact .provisional}"
    other = "[8](audit/r.html#n-2 \"audit trail\"){.fact}"
    assert said_once([["a", link, "x"]]) == ([], [0, 1, 2])
    assert said_once([["a", link, "x", ""], ["b", link, "x", ""]]) == ([(1, link), (2, "x")], [0])
    assert said_once([["a", link], ["b", other]]) == ([], [0, 1])      # one value, two facts
    assert said_once([["a", "x"], ["a", "x"]]) == ([(1, "x")], [0])    # a column stays


@pytest.mark.parametrize("text, shown, title", [
    ("vllm bench serve", "vllm bench serve", None),
    ("vllm/vllm-openai:nightly-1a001d584244bd21829a5e5bd4a376ea141c0ce3",
     "vllm/vllm-openai:nightly-1a001d58…", "vllm/vllm-openai:nightly-1a001d584244bd21829a5e5bd4a376ea141c0ce3"),
])
def test_a_long_cell_is_shortened_with_the_whole_text_its_tooltip(text, shown, title):
    out = html.unescape(escape.escape_label(text))
    if title is None:
        assert out == shown
    else:
        assert out == f'<span class="cut" title="{title}">{shown}</span>'


def test_a_setup_is_labelled_by_model_layout_engine_and_image_tag():
    setup = "qwen3_235b | tp4 | vllm | vllm/vllm-openai:nightly-7c41e9a0d2b35f1864c0e27fa9b1d5e3c8a6f402"
    assert escape.setup_label(setup) == "qwen3_235b · tp4 · vllm · nightly-7c41e9a0"
    assert escape.setup_label("ma | tp8 | vllm | local") == "ma · tp8 · vllm · local"
    cell = html.unescape(escape.setup_label_text(setup))
    assert cell == f'<span class="setup-ref" title="{setup}">qwen3_235b · tp4 · vllm · nightly-7c41e9a0</span>'


def test_a_failed_probe_shows_its_reason_in_the_table_and_the_audit(tmp_path):
    """A probe that timed out is 'failed', its reason where the answer would be, and the gate's
    audit counts it as missed for that reason."""
    db = build_campaign(tmp_path)
    reason = "no answer within the probe's timeout of 74.4 s (ReadTimeout)"
    with duckdb.connect(str(db)) as con:
        con.execute("update gate_probes set answer = '', failure = ? where run_id = ? and probe_idx = 0",
                    [reason, RUN4])
    with duckdb.connect(str(db), read_only=True) as con:
        macros = PageMacros(FactBook(con, root=tmp_path, sha="a" * 40), page="part-x.md",
                            runs_dir=tmp_path / "data" / "runs", root=tmp_path)
        out = html.unescape(macros.substitute(str(macros.table("probe_rows", run_id=RUN4, columns=[
            ["Depth", "fact:probe_depth"], ["Outcome", "outcome"], ["Answer", "answer"]]))))
        _, inputs = input_rows(con, "gate_passed_probes", {"run_id": RUN4})
    first, second = out.splitlines()[2:4]
    assert "| failed | " + reason in first and "| missed |" in second
    assert [r["reason"] for r in inputs][:2] == [reason, "missed the needle"]


def test_table_refuses_a_numeric_text_column(macros):
    with pytest.raises(FactError, match="numeric"):
        macros.table("probe_rows", run_id=RUN4, columns=[["Index", "probe_idx"]])


def test_evidence_runs_commands_on_raw_files_and_escapes(macros, campaign):
    root, _ = campaign
    cat = html.unescape(macros.substitute(str(macros.evidence("cat", RUN4, "launch.out"))))
    assert f"$ cat data/runs/{RUN4}/launch.out" in cat and "ready_s=71.3" in cat
    grep = html.unescape(macros.substitute(str(macros.evidence("grep -m1", RUN4, "server.log",
                                                               pattern="KV cache size"))))
    assert grep.count("\n") == 1 and "CPU KV cache size: 8,192 tokens" in grep
    head = macros.substitute(str(macros.evidence("head", RUN4, "niah.log", lines=2, cut=40)))
    assert "&#124; cut -c1-40" in head and len(head.split("</span>\n", 1)[1].splitlines()) == 2
    niah = macros.substitute(str(macros.evidence("cat", RUN4, "niah.log")))
    assert "<script>" not in niah and "&lt;script&gt;" in niah
    missing = macros.substitute(str(macros.evidence("cat", RUN16_FAILED, "niah.log")))
    assert "No such file or directory" in missing
    with pytest.raises(FactError, match="unknown evidence command"):
        macros.evidence("rm -rf", RUN4, "cmd.sh")
    with pytest.raises(FactError, match="bad run id"):
        macros.evidence("cat", RUN4, "../../../etc/passwd")


def test_text_macro_refuses_numbers(macros):
    with pytest.raises(FactError, match="use fact"):
        macros.text(42)
    assert macros.substitute(str(macros.text(SCRIPT_ANSWER))).startswith("&lt;script&gt;")


def test_trace_prints_the_chain(campaign, tmp_path):
    root, con = campaign
    book = FactBook(con, root=root, sha=None)
    fact = book.evaluate("launch_ready_s", {"run_id": RUN4})
    path = tmp_path / "facts.json"
    path.write_text(json.dumps(book.records()))
    params = yaml.safe_load((Path(__file__).resolve().parent.parent / "params.yaml").read_text())
    found = trace.find(trace.load_facts(path), fact.id)
    out = trace.chain(found, Paths.from_params(params, root))
    assert f"data/runs/{RUN4}/launch.out:2" in out and "ready_s=71.3" in out
    assert "dvc repro derive" in out


@pytest.mark.parametrize("run_id,spec,label", [
    ("tiny-llama__cpu_seqs4__4k__vllm__1130-051200", "tiny-seqs4", "tiny-seqs4 · 05:12"),
    ("glm53__tp8_dcp8__1024k__vllm__1010-053939", None, "glm53__tp8_dcp8__1024k__vllm · 05:39"),
    ("odd-name", "spec-a", "spec-a"),
])
def test_run_label_is_spec_and_start_time(run_id, spec, label):
    assert escape.run_label(run_id, spec) == label


def test_table_run_labels_link_only_to_sections_on_the_page(macros):
    columns = [["Run", "run:run_id"], ["Workload", "workload"]]
    without = macros.substitute(str(macros.table("fit_rows", profile="local-cpu", columns=columns)))
    shown = RUN4.replace("_", "&#95;")
    assert f'<span class="run-ref" title="{shown}">tiny-seqs4 · 05:12</span>' in without
    assert 'href="#run-' not in without
    heading = macros.substitute(str(macros.run_ref(RUN4, anchor=True)))
    assert heading == f"<code>{shown}</code> {{#run-{RUN4}}}"
    linked = macros.substitute(str(macros.table("fit_rows", profile="local-cpu", columns=columns)))
    assert f'<a class="run-ref" href="#run-{RUN4}" title="{shown}">tiny-seqs4 · 05:12</a>' in linked


# ---------------------------------------------------------------- facts declared in columns.yaml

def declare(folder: Path, text: str) -> Path:
    folder.mkdir(exist_ok=True)
    (folder / queries.COLUMN_FACTS).write_text(text)
    return folder


CURRENT_POINTS = """
- count: bench_points
  keys: [runs.profile]
  facts:
    points:
      where: {runs.is_current: true, workload: chat}
      unit: points
      description: Chat points of a profile.
    point_runs:
      where: {runs.is_current: true}
      of: runs
      description: Runs with points.
"""


LAUNCH_READY = """
- table: launches
  keys: [run_id]
  facts:
    ready:
      value: ready_s
      unit: s
      description: Seconds until ready.
"""


def test_a_declared_fact_is_generated_whole_with_its_parameters_bound(campaign, tmp_path):
    root, con = campaign
    folder = declare(tmp_path / "facts", LAUNCH_READY)
    sql = queries.fact_sql("ready", folder)
    assert sql.startswith("-- Seconds until ready.\nwith source as (")
    assert "where run_id = $run_id\n" in sql and "ready_s as value" in sql
    assert queries.sql_params(sql) == ["run_id"] and queries.tables_in(sql) == ["launches"]
    fact = FactBook(con, root=root, sha=None, facts_sql=folder).evaluate("ready", {"run_id": RUN4})
    assert (fact.value, fact.unit, fact.run_ids, fact.sql) == (71.3, "s", [RUN4], sql)
    assert RUN4 not in fact.sql
    assert queries.fact_query_path("ready", folder).endswith("columns.yaml (ready)")
    assert queries.fact_query_path("launch_ready_s") == "stages/render/sql/facts/columns.yaml (launch_ready_s)"
    assert queries.fact_query_path("ramp_needle_turns") == "stages/render/sql/facts/ramp_needle_turns.sql"


@pytest.mark.parametrize("text, change, message", [
    (LAUNCH_READY, ("table: launches", "table: raw_launches"), "is not a public table"),
    (LAUNCH_READY, ("keys: [run_id]", "keys: [run_id; drop]"), "bad key"),
    (LAUNCH_READY, ("unit: s", "unit: s' as x"), "bad unit"),
    (LAUNCH_READY, ("value: ready_s", "value: ready_s; select 1"), "not a column or plain arithmetic"),
    (LAUNCH_READY, ("value: ready_s", "value: ready_s -- x"), "bad value"),
    (LAUNCH_READY, ("keys: [run_id]", "keys: [run_id]\n  where: {status: \"a'b\"}"), "bad filter value"),
    (LAUNCH_READY, ("description: Seconds until ready.", "description: \"one\\ntwo\""), "one line"),
    (CURRENT_POINTS, ("keys: [runs.profile]", "keys: [launches.profile]"), "bad key"),
    (CURRENT_POINTS, ("of: runs", "of: points"), "of is rows or runs"),
    (CURRENT_POINTS, ("facts:", "where: {gate: niah}\n  facts:"), "each give their own where"),
    (CURRENT_POINTS, ("- count: bench_points", "- count: bench_points\n  table: runs"), "a group has table"),
])
def test_a_declaration_outside_the_safe_shapes_is_refused(tmp_path, text, change, message):
    folder = declare(tmp_path / "facts", text.replace(*change))
    with pytest.raises(FactError, match=message):
        queries.fact_sql("ready" if text is LAUNCH_READY else "points", folder)


def test_a_declared_column_the_table_lacks_fails_at_evaluation(campaign, tmp_path):
    root, con = campaign
    folder = declare(tmp_path / "facts", LAUNCH_READY.replace("value: ready_s", "value: 100.0 * ready_secs"))
    book = FactBook(con, root=root, sha=None, facts_sql=folder)
    with pytest.raises(FactError, match="launches has no column"):
        book.evaluate("ready", {"run_id": RUN4})


def test_a_fact_both_declared_and_written_or_neither_is_an_error(tmp_path):
    folder = declare(tmp_path / "facts", LAUNCH_READY)
    (folder / "other.sql").write_text("select 1 as value")
    assert queries.fact_sql("other", folder) == "select 1 as value"
    with pytest.raises(FactError, match=r"unknown fact 'missing' \(known: other, ready\)"):
        queries.fact_sql("missing", folder)
    (folder / "ready.sql").write_text("select 1 as value")
    with pytest.raises(FactError, match="both declared"):
        queries.fact_sql("ready", folder)


def test_every_declared_fact_names_columns_of_its_table(campaign):
    _, con = campaign
    declared = queries.column_facts(queries.FACTS_SQL / queries.COLUMN_FACTS)
    assert len(declared) >= 40
    for decl in declared.values():
        for table, named in decl.named_columns().items():
            columns = {r[0] for r in con.execute(
                "select column_name from information_schema.columns where table_name = $t",
                {"t": table}).fetchall()}
            assert named <= columns, decl.name
        assert not (queries.FACTS_SQL / f"{decl.name}.sql").exists()


def test_a_declared_count_joins_the_runs_and_lists_them(campaign, tmp_path):
    root, con = campaign
    folder = declare(tmp_path / "facts", CURRENT_POINTS)
    sql = queries.fact_sql("points", folder)
    assert "inner join runs as r on r.run_id = t.run_id" in sql
    assert "where r.profile = $profile and r.is_current and t.workload = 'chat'\n" in sql
    assert queries.sql_params(sql) == ["profile"] and queries.tables_in(sql) == ["runs", "bench_points"]
    book = FactBook(con, root=root, sha=None, facts_sql=folder)
    points = book.evaluate("points", {"profile": "local-cpu"})
    expected = con.execute(
        "select count(*), list(distinct p.run_id order by p.run_id) from bench_points as p "
        "join runs as r using (run_id) where r.profile = 'local-cpu' and r.is_current "
        "and p.workload = 'chat'").fetchone()
    assert expected[0] > len(expected[1]) > 0
    assert (points.value, points.unit, points.run_ids, points.source_file) == \
        (expected[0], "points", expected[1], None)
    runs = book.evaluate("point_runs", {"profile": "local-cpu"})
    assert (runs.value, runs.unit) == (len(runs.run_ids), None) and runs.value >= len(expected[1])
    with pytest.raises(FactError, match="bench_points has no column"):
        FactBook(con, root=root, sha=None, facts_sql=declare(tmp_path / "bad", CURRENT_POINTS.replace(
            "workload: chat", "load: chat"))).evaluate("points", {"profile": "local-cpu"})


def test_a_declared_order_picks_one_row_and_a_display_prints_bytes(campaign, tmp_path):
    root, con = campaign
    folder = declare(tmp_path / "facts", """
- table: bench_points
  keys: [run_id, workload]
  order: [output_tok_s desc, concurrency]
  facts:
    best_users:
      value: concurrency
      description: Users at the best output.
    best_bytes:
      value: concurrency * 1048576
      display: bytes
      description: A size.
""")
    sql = queries.fact_sql("best_users", folder)
    assert "and output_tok_s is not null\n    order by output_tok_s desc, concurrency\n    limit 1\n" in sql
    best = con.execute("select concurrency from bench_points where run_id = $r and workload = 'chat' "
                       "order by output_tok_s desc, concurrency limit 1", {"r": RUN4}).fetchone()[0]
    book = FactBook(con, root=root, sha=None, facts_sql=folder)
    assert book.evaluate("best_users", {"run_id": RUN4, "workload": "chat"}).value == best
    sized = book.evaluate("best_bytes", {"run_id": RUN4, "workload": "chat"})
    assert sized.value == best * 1048576 and sized.display == f"{best} MiB"
    with pytest.raises(FactError, match="display is one of bytes"):
        queries.fact_sql("x", declare(tmp_path / "bad", """
- table: runs
  keys: [run_id]
  facts:
    x: {value: run_id, display: hex, description: X.}
"""))


def test_a_declared_change_compares_two_runs_and_cites_no_line(campaign):
    root, con = campaign
    book = FactBook(con, root=root, sha=None)
    both = {"base_run_id": RUN4, "head_run_id": RUN16}
    ready = book.evaluate("compare_launch_change_pct", {**both, "item": "ready_s"})
    assert ready.value == pytest.approx(100.0 * (68.9 - 71.3) / 71.3) and ready.display == "-3.4"
    assert (ready.unit, ready.run_ids, ready.source_file) == ("%", [RUN4, RUN16], None)
    assert "base and head values" in ready.source_note
    kv = book.evaluate("compare_launch_change_pct", {**both, "item": "kv_tokens"})
    assert kv.display == "+0.0" and kv.source_file is None
    # a run without the figure (a failed launch has no gate) prints a dash, not an error
    gate = book.evaluate("compare_launch_change_pct",
                         {"base_run_id": RUN4, "head_run_id": RUN16_FAILED, "item": "gate_score"})
    assert gate.value is None and gate.source_file is None and gate.run_ids == [RUN4, RUN16_FAILED]


@pytest.mark.parametrize("of, message", [
    ("{a: node_power}", "not a declared column fact"),
    ("{a: count_of}", "not a declared column fact"),
    ("{a: ready, b: per_point}", "keyed alike"),
    ("{a: missing}", "not a declared column fact"),
    ("{\"x'y\": ready}", "bad item"),
])
def test_a_change_names_column_facts_of_runs_keyed_alike(tmp_path, of, message):
    folder = declare(tmp_path / "facts", LAUNCH_READY + f"""
- table: node_gpus
  keys: [node_id, gpu_index]
  facts:
    node_power: {{value: power_limit_w, description: Watts.}}
- table: bench_points
  keys: [run_id, workload]
  facts:
    per_point: {{value: sent, description: Sent.}}
- count: runs
  keys: [run_id]
  facts:
    count_of: {{description: Runs.}}
- change: item
  facts:
    moved: {{of: {of}, description: Change.}}
""")
    with pytest.raises(FactError, match=message):
        queries.fact_sql("moved", folder)
