"""launch_quote: a launch's server.log quoted at the lines that tell how it went
(stages/render/quotes.py, site/quotes.yaml), on the node campaign's logs and on public logs read
where they are in ../shared/real_logs."""
from __future__ import annotations

import html
import re
import subprocess
from pathlib import Path

import duckdb
import pytest

from helpers.render_campaign import RUN16_FAILED, build_campaign
from helpers.shared_folder import REAL_LOGS
from stages.formats.sglang_log import parse_sglang_log
from stages.formats.vllm_log import parse_vllm_log
from stages.render.errors import FactError
from stages.render.facts import FactBook
from stages.render.page_macros import PageMacros
from stages.render.quotes import _parse, load_quotes, pick, quote_block, render_quote

ROOT = Path(__file__).resolve().parent.parent
NODE_RUNS = ROOT / "tests" / "fixtures" / "node_campaign" / "runs"
RUN_IDS = sorted(d.name for d in NODE_RUNS.iterdir() if d.is_dir())
DEP8 = "dsv4_pro__dep8__781k__vllm__1116-110000"
QUOTES = load_quotes()


def launch(log: Path, engine: str = "vllm") -> tuple[str, int | None]:
    """A log's launch as the launches table has it: ready or failed, and its first error line."""
    facts = (parse_sglang_log if engine == "sglang" else parse_vllm_log)(log.read_bytes()).facts
    errors = sorted(f.line for f in facts if f.fact == "error")
    return ("ready" if any(f.fact == "ready" for f in facts) else "failed"), (errors[0] if errors else None)


def node_quote(run_id: str) -> str:
    status, error_line = launch(NODE_RUNS / run_id / "server.log")
    return render_quote(run_id, status, error_line, runs_dir=NODE_RUNS, root=ROOT)


def read_block(block: str) -> tuple[str, list[str]]:
    """An evidence block's command and output lines, as the reader sees them."""
    m = re.fullmatch(r'<pre class="evidence"><code><span class="evidence-cmd">\$ (.*?)</span>\n(.*)</code></pre>',
                     block, re.S)
    return html.unescape(m.group(1)), html.unescape(m.group(2)).split("\n")


def numbered(lines: list[str]) -> dict[int, str]:
    return {int(m.group(1)): m.group(2) for m in map(re.compile(r"(\d+):(.*)").fullmatch, lines) if m}


def ran(command: str, cwd: Path = ROOT) -> dict[int, str]:
    """What the block's command prints when run for real (in `cwd`), by line number."""
    out = subprocess.run(["bash", "-c", command], cwd=cwd, capture_output=True, check=True).stdout
    return numbered(out.decode("utf-8", errors="replace").rstrip("\n").split("\n"))


def assert_command_prints_the_quote(block: str, text: str, status: str, error_line: int | None):
    command, lines = read_block(block)
    printed = ran(command)
    for n, shown in numbered(lines).items():
        assert n in printed, (n, command)
        assert printed[n].rstrip("\r").startswith(shown.removesuffix(" …")), n
    for q in pick(text, status, error_line, QUOTES).quoted:      # and the copies it folds
        assert {q.line, *q.copies} <= set(printed)


# ---------------------------------------------------------------- the node campaign's launches

@pytest.mark.parametrize("run_id", [r for r in RUN_IDS if launch(NODE_RUNS / r / "server.log")[0] == "ready"])
def test_a_ready_launch_shows_its_pool_and_concurrency_and_each_ranks_line_once(run_id):
    log = NODE_RUNS / run_id / "server.log"
    _, lines = read_block(node_quote(run_id))
    text = "\n".join(lines)
    assert text.count("GPU KV cache size:") == 1 and text.count("Maximum concurrency for") == 1
    ranks = log.read_text().count("Model loading took")
    assert ranks > 1 and text.count("Model loading took") == 1
    at = next(i for i, line in enumerate(lines) if "Model loading took" in line)
    first = int(lines[at].split(":", 1)[0])
    assert lines[at + 1] == (f"  … and {ranks - 1} more with the same message but other numbers "
                             f"(lines {first + 1}-{first + ranks - 1})")


def test_the_dep8_launch_is_quoted_at_its_weights_its_negative_kv_memory_and_its_error():
    _, lines = read_block(node_quote(DEP8))
    shown = numbered(lines)
    assert list(shown) == [16, 24, 40]       # log order, one line per kind, copies folded
    assert "Model loading took 121.84 GiB" in shown[16]
    assert "Available KV cache memory: -2.87 GiB" in shown[24]
    assert "ValueError: No available memory for the cache blocks" in shown[40]
    assert lines[1] == "  … and 7 more with the same message but other numbers (lines 17-23)"
    assert lines[-1].startswith("# vLLM raises this when")


def test_an_error_no_rule_explains_is_quoted_alone():
    run_id = "minimax_m3__tep8__1024k__vllm__1116-091000"
    command, lines = read_block(node_quote(run_id))
    assert list(numbered(lines)) == [35] and len(lines) == 1
    assert command.startswith(f"head -n 35 tests/fixtures/node_campaign/runs/{run_id}/server.log | grep")


@pytest.mark.parametrize("run_id", RUN_IDS)
def test_the_command_prints_every_line_the_node_quote_shows(run_id):
    log = NODE_RUNS / run_id / "server.log"
    status, error_line = launch(log)
    assert_command_prints_the_quote(node_quote(run_id), log.read_text(), status, error_line)


def test_the_macro_reads_the_launch_from_the_database(tmp_path):
    con = duckdb.connect(str(build_campaign(tmp_path)))     # the render tests' campaign, and
    for run_id in RUN_IDS:                                  # the node campaign's launches
        status, line = launch(NODE_RUNS / run_id / "server.log")
        con.execute("insert into launches (run_id, status, error_source_file, error_source_line)"
                    " values (?, ?, ?, ?)", [run_id, status, line and f"data/runs/{run_id}/server.log", line])
    con.execute("insert into launches (run_id, status, error_type, error_source_file, error_source_line)"
                " values ('nolog', 'failed', 'Slurm', 'data/runs/nolog/launch.out', 3)")
    macros = PageMacros(FactBook(con, root=ROOT, sha=None), page="p.md", runs_dir=NODE_RUNS, root=ROOT)
    shown = lambda run_id: macros.outputs[str(macros.launch_quote(run_id))]  # noqa: E731
    assert shown(DEP8) == node_quote(DEP8) and "launches" in macros.tables_used
    glm = "glm53__tp8_dcp8__1024k__vllm__1116-062500"
    assert shown(glm) == node_quote(glm)
    assert read_block(shown("nolog"))[1] == ["(no server.log in tests/fixtures/node_campaign/runs/nolog)"]
    assert read_block(shown("not_a_launch"))[1] == [
        "(no server.log in tests/fixtures/node_campaign/runs/not_a_launch)"]
    # the render tests' failed launch: an error no rule names, quoted at its line alone
    macros = PageMacros(FactBook(con, root=tmp_path, sha=None), page="p.md",
                        runs_dir=tmp_path / "data" / "runs", root=tmp_path)
    command, lines = read_block(macros.outputs[str(macros.launch_quote(RUN16_FAILED))])
    assert len(lines) == 1 and "ValueError: max_num_seqs (16) exceeds available <cache> blocks" in lines[0]
    assert int(lines[0].split(":", 1)[0]) in ran(command, tmp_path)


def test_a_log_with_nothing_to_quote_says_so_in_one_line(tmp_path):
    (tmp_path / "r").mkdir()
    (tmp_path / "r" / "server.log").write_text("hello\n")
    _, lines = read_block(render_quote("r", "ready", None, runs_dir=tmp_path, root=tmp_path))
    assert lines == ["(no line of server.log matches these patterns)"]


def test_a_pattern_grep_would_read_otherwise_is_refused():
    with pytest.raises(FactError, match="grep -E and Python"):
        _parse("ready: [{name: x, pattern: 'took \\d+ s'}]")
    with pytest.raises(FactError, match="grep -E and Python"):
        _parse("errors: [{name: x, match: '(?i)oom', explain: []}]")


# ---------------------------------------------------------------- public logs

REAL_CASES = {
    # ready, tp8: every rank printed its weights, KV memory, pool and concurrency
    "vllm_08_v010_tp8_vllmworker_rank_8kvlines.log": ("vllm", {
        106: "Attention backend", 186: "Model loading took 27.6656 GiB", 261: "Available KV cache memory",
        269: "GPU KV cache size: 1,594,928 tokens", 270: "Maximum concurrency for 32,768", 302: "init engine"}),
    # the KV cache cannot hold one request of max_model_len
    "vllm_16_kv_too_small_valueerror.log": ("vllm", {
        86: "Model loading took 95.46 GiB", 103: "Available KV cache memory: 8.72 GiB",
        128: "ValueError: To serve at least one request"}),
    # torch OOM while loading the weights
    "vllm_23_torch_oom_ansi.log": ("vllm", {
        13: "Starting to load model", 15: "Failed to load model - not enough GPU memory",
        73: "torch.OutOfMemoryError: CUDA out of memory"}),
    "sglang_01_ready_swa_prefill_decode.log": ("sglang", {
        12: "Attention backend", 139: "Load weight end", 153: "KV Cache is allocated",
        170: "max_total_num_tokens=185897"}),
    "sglang_05_tail_torch_oom.log": ("sglang", {
        2: "Memory pool end", 3: "CUDA graph begin", 39: "torch.OutOfMemoryError"}),
    "sglang_11_rocm_torch_oom.log": ("sglang", {
        33: "Load weight begin", 99: "torch.OutOfMemoryError"}),
}


@pytest.mark.shared
@pytest.mark.parametrize("name", sorted(REAL_CASES))
def test_a_public_log_is_quoted_at_the_lines_its_rule_names(name):
    engine, expected = REAL_CASES[name]
    log = REAL_LOGS / name
    status, error_line = launch(log, engine)
    text = log.read_bytes().decode("utf-8", errors="replace")
    block = quote_block(text, status, error_line, str(log), QUOTES)
    _, lines = read_block(block)
    shown = numbered(lines)
    assert list(shown) == sorted(expected)
    for n, needle in expected.items():
        assert needle in shown[n] and "\x1b" not in shown[n], (n, shown[n])
    assert_command_prints_the_quote(block, text, status, error_line)


@pytest.mark.shared
def test_eight_ranks_pools_are_one_line_and_a_count():
    text = (REAL_LOGS / "vllm_08_v010_tp8_vllmworker_rank_8kvlines.log").read_bytes().decode()
    _, lines = read_block(quote_block(text, "ready", None, "vllm_08.log", QUOTES))
    at = next(i for i, line in enumerate(lines) if "GPU KV cache size" in line)
    assert lines[at + 1] == "  … and 7 more with the same message but other numbers (between lines 271 and 283)"
    assert sum("KV cache size" in line for line in lines) == 1
