"""Nothing a real engine writes stops a stage: a field of tens of MB is stored whole and shown short.

vLLM answered some requests of a 1M-token run with a "generated text" of millions of characters
(its prompt echoed back), and render stopped on the CSV downloads (`field larger than field
limit`). Here the synthetic node campaign gets one request whose generated text is 24 MB and one
needle probe whose answer is 6 MB (each ending in a marker), and goes through ingest, derive and
render: every stage exits 0, the warehouse, the campaign database and the downloads keep both
whole, the pages and the audit show them shortened with a note of what was left out, and no page,
audit page or chart spec holds them whole.
"""
from __future__ import annotations

import csv
import html
import json
import random
import re
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest
import yaml

BIN = Path(sys.executable).parent
PROJECT = Path(__file__).resolve().parent.parent
NODE_RUNS = Path(__file__).parent / "fixtures" / "node_campaign" / "runs"
RUN = "qwen3_235b__tp4__256k__vllm__1116-140000"
RESULT = "bench/doc-256k__c02.json"
TEXT_CHARS = 24_000_000
ANSWER_CHARS = 6_000_000
TEXT_END = "ECHOED-PROMPT-ENDS-HERE"
ANSWER_END = "ECHOED-GATE-PROMPT-ENDS-HERE"


def campaign(root: Path, *args: str) -> subprocess.CompletedProcess:
    out = subprocess.run([str(BIN / "campaign"), *args, "--root", str(root)], cwd=root,
                         capture_output=True, text=True)
    assert out.returncode == 0, (args, out.stdout[-2000:], out.stderr[-2000:])
    return out


def project(root: Path) -> None:
    """The project's files (tracked, and untracked but not ignored; tests aside) in root, the
    node profile active and no spec to launch."""
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
                            cwd=PROJECT, capture_output=True, check=True).stdout.decode()
    for name in filter(None, listed.split("\0")):
        if (PROJECT / name).is_file() and not name.startswith("tests/"):
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(PROJECT / name, root / name)
    params = yaml.safe_load((root / "params.yaml").read_text())
    params.update(profile="h200x8", run_specs=[])
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))


def prompt_text(chars: int, end: str, seed: int) -> str:
    """Prompt-like text of `chars` characters (words a secret needs among them, as in real text,
    so that redaction looks at all of it), ending in `end`."""
    words = "the ledger record signal token key of a needle haystack document step: x=1".split()
    rng = random.Random(seed)
    chunk = " ".join(rng.choice(words) for _ in range(5000)) + " "
    body = (chunk * (chars // len(chunk) + 1))[: chars - len(end)]
    return body + end


def with_large_fields(folder: Path) -> dict[str, str]:
    """The run folder, unsealed (its manifest lists the files as they were), with one request of
    RESULT echoing a 24 MB text and the second needle probe a 6 MB answer; the two texts."""
    (folder / "MANIFEST.sha256").unlink()
    for path in [folder, *folder.rglob("*")]:
        path.chmod(path.stat().st_mode | 0o200)
    text = prompt_text(TEXT_CHARS, TEXT_END, 1)
    result = json.loads((folder / RESULT).read_text())
    result["generated_texts"][0] = text
    (folder / RESULT).write_text(json.dumps(result))   # one line, as vllm bench serve writes it
    lines = (folder / "niah.log").read_text().splitlines()
    probe = json.loads(lines[1])
    probe["answer"] = probe["answer"] + " " + prompt_text(ANSWER_CHARS, ANSWER_END, 2)
    lines[1] = json.dumps(probe)
    (folder / "niah.log").write_text("\n".join(lines) + "\n")
    return {"text": text, "answer": probe["answer"]}


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("large")
    project(root)
    for folder in sorted(NODE_RUNS.iterdir()):
        shutil.copytree(folder, root / "data" / "runs" / folder.name)
    fields = with_large_fields(root / "data" / "runs" / RUN)
    outs = {stage: campaign(root, stage) for stage in ("ingest", "derive", "render")}
    return {"root": root, "outs": outs, **fields}


def shown_files(root: Path) -> list[Path]:
    """Every file of the docs and the site a reader's browser loads: pages, audit pages, chart
    specs and rows (the CSV downloads of the public tables aside)."""
    data = root / "data"
    return [p for top in (data / "docs", data / "site") for p in top.rglob("*")
            if p.is_file() and "downloads" not in p.relative_to(top).parts]


def test_every_stage_passes_and_the_site_is_built(built):
    assert (built["root"] / "data" / "site" / "index.html").is_file()
    assert "site_index=" in built["outs"]["render"].stdout


def test_the_warehouse_and_the_campaign_database_keep_the_fields_whole(built):
    data = built["root"] / "data"
    with duckdb.connect(str(data / "warehouse.duckdb"), read_only=True) as db:
        stored = db.execute("select generated_text from raw_bench_requests where run_id = $r and "
                            "point_id = 'doc-256k__c02' and request_idx = 0", {"r": RUN}).fetchall()
        answer = db.execute("select answer from raw_gate_probes where run_id = $r and source_line = 2",
                            {"r": RUN}).fetchall()
    assert len(stored[0][0]) == TEXT_CHARS and stored[0][0] == built["text"]
    assert len(answer[0][0]) == len(built["answer"]) and answer[0][0] == built["answer"]
    with duckdb.connect(str(data / "campaign.duckdb"), read_only=True) as db:
        public = db.execute("select length(generated_text) from bench_requests where run_id = $r and "
                            "point_id = 'doc-256k__c02' and request_idx = 0", {"r": RUN}).fetchall()
    assert public == [(TEXT_CHARS,)]


def test_the_downloads_keep_the_fields_whole(built):
    site = built["root"] / "data" / "site" / "downloads"
    csv.field_size_limit(1 << 30)
    for table, column, whole in (("bench_requests", "generated_text", built["text"]),
                                 ("gate_probes", "answer", built["answer"])):
        with (site / f"{table}.csv").open(newline="") as fh:
            found = [row[column] for row in csv.DictReader(fh) if len(row[column] or "") > 1000]
        assert found == [whole], table


def test_no_page_audit_page_or_chart_holds_a_field_whole(built):
    files = shown_files(built["root"])
    assert any(p.suffix == ".json" for p in files)      # chart specs are among them
    for path in files:
        assert path.stat().st_size < 4_000_000, path
        data = path.read_bytes()
        assert TEXT_END.encode() not in data and ANSWER_END.encode() not in data, path


def test_a_table_shows_the_answer_shortened_with_the_characters_left_out(built):
    from stages.render.shown import SHOWN_CHARS

    page = html.unescape((built["root"] / "data" / "docs" / "reference" / "part-quad.md").read_text())
    notes = re.findall(r"… \(([\d,]+) more characters not shown\)", page)
    # the cell's tooltip: the answer's first SHOWN_CHARS characters and how many more it has
    assert f"{len(built['answer']) - SHOWN_CHARS:,}" in notes


def test_the_audit_shows_the_result_line_shortened_with_the_characters_left_out(built):
    from stages.render.evidence import EXCERPT_MAX

    root = built["root"]
    line = (root / "data" / "runs" / RUN / RESULT).read_text().rstrip("\n")
    audit = html.unescape((root / "data" / "site" / "audit" / f"{RUN}.html").read_text())
    assert f"{len(line) - EXCERPT_MAX:,} more characters not shown" in audit
    niah = (root / "data" / "runs" / RUN / "niah.log").read_text().splitlines()[1]
    assert f"{len(niah) - EXCERPT_MAX:,} more characters not shown" in audit


# ---------------------------------------------------------------- the pieces, small


def test_shorten_keeps_a_short_text_and_cuts_a_long_one_saying_how_much_it_left_out():
    from stages.render.shown import SHOWN_CHARS, shorten

    assert shorten("x" * SHOWN_CHARS) == "x" * SHOWN_CHARS
    assert shorten("x" * (SHOWN_CHARS + 1)) == "x" * SHOWN_CHARS + " … (1 more character not shown)"
    assert shorten("y" * 10_000_000, 400) == "y" * 400 + " … (9,999,600 more characters not shown)"
    # a secret the cut would split is redacted before the cut
    text = "a" * 385 + " HF_TOKEN=hf_" + "s" * 30 + " " + "b" * 5000
    shown = shorten(text, 400)
    assert "hf_" not in shown and "sss" not in shown and shown.startswith("a" * 385 + " HF_TOKEN=*** b")


def test_a_csv_download_with_a_field_over_the_csv_limit_is_redacted_and_kept_whole(tmp_path):
    from stages.render.downloads import redact_csv

    big = "echo " * 100_000                     # 500,000 characters, over csv's 131,072
    path = tmp_path / "t.csv"
    with path.open("w", newline="") as fh:
        csv.writer(fh, lineterminator="\n").writerows(
            [["id", "text", "note"], ["1", big, "HF_TOKEN=hf_abcdefghijklmnopqrstu"], ["2", "x", "y"]])
    before = csv.field_size_limit()
    redact_csv(path)
    assert csv.field_size_limit() == before
    csv.field_size_limit(1 << 30)
    try:
        with path.open(newline="") as fh:
            rows = list(csv.reader(fh))
    finally:
        csv.field_size_limit(before)
    assert rows == [["id", "text", "note"], ["1", big, "HF_TOKEN=***"], ["2", "x", "y"]]
    assert not list(tmp_path.glob(".*"))          # no partial file left beside it


def test_the_plain_search_finds_every_text_the_redaction_pattern_would():
    from stages.core.secrets import _MAYBE, may_hold_secret

    alphabet = list("tokenysecrpawdialuhf_-gbjxzTOKEYSCAIZ =:\"'é") + ["\u0130", "\u0131", "\u017f", "\u212a"]
    rng = random.Random(7)
    for _ in range(20_000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 12)))
        assert bool(_MAYBE.search(text)) == may_hold_secret(text), text


def test_a_row_query_gives_a_long_text_shortened_to_what_a_page_or_chart_shows(tmp_path):
    from stages.render.facts import FactBook
    from stages.render.shown import SHOWN_CHARS

    (tmp_path / "long_rows.sql").write_text(
        "select 'r1' as run_id, repeat('ab', 3000000) as said, 7 as n, 'short' as label")
    con = duckdb.connect()
    book = FactBook(con, root=tmp_path, sha=None, rows_sql=tmp_path)
    _, rows = book.rows("long_rows", {})
    assert rows[0]["said"] == "ab" * (SHOWN_CHARS // 2) + f" … ({6_000_000 - SHOWN_CHARS:,} more characters not shown)"
    assert (rows[0]["run_id"], rows[0]["n"], rows[0]["label"]) == ("r1", 7, "short")
