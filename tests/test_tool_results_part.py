"""Results of the other benchmark tools published beside `vllm bench serve`'s: the real one-GPU run
(tests/fixtures/gpu_h200x1) and, for each of AIPerf, GenAI-Perf, GuideLLM, LLMPerf and
inference-perf, a folder of its result files imported with `campaign import --results` as a run of
the same model. The one-GPU Part then shows a point of each tool beside the engine's own points,
every figure a fact whose audit entry names the tool, the file and where in it the value is.
"""
from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from helpers.node_campaign import build, campaign, node_project, plain

FIXTURES = Path(__file__).parent / "fixtures"
ROOT = Path(__file__).resolve().parent.parent
TOOLS = FIXTURES / "bench_tools"
GPU_RUN = next((FIXTURES / "gpu_h200x1").glob("llama-1b__*"))
PART = "part-one-gpu"
# One result set of each tool: the files of one run of it, as the tool names them.
RESULTS = {
    "aiperf": ["aiperf/aiperf_0.10.x_schema1.3/tiny-vl-2b-openai-chat-concurrency2/*"],
    "genai_perf": ["genai_perf/0.0.15_streaming/*"],
    "guidellm": ["guidellm/guidellm_v02-v03_concurrent.json"],
    "llmperf": ["llmperf/v2/*"],
    "inference_perf": ["inference_perf/v040_stage_1_lifecycle_metrics.json"],
}


def run_id(tool: str, n: int) -> str:
    return f"llama-1b__{tool.replace('_', '-')}__32k__vllm__1202-17{n:02d}00"


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("tools")
    node_project(root, profile="h200x1")
    shutil.copytree(GPU_RUN, root / "data" / "runs" / GPU_RUN.name)
    imports = {}
    for n, (tool, patterns) in enumerate(sorted(RESULTS.items()), start=1):
        folder = tmp_path_factory.mktemp(f"{tool}-results")
        for pattern in patterns:
            for path in sorted(TOOLS.glob(pattern)):
                shutil.copy2(path, folder / path.name)
        imports[tool] = campaign(root, "import", str(folder), "--profile", "h200x1",
                                 "--results", run_id(tool, n))
    made = build(root)
    made["page"] = (root / "data" / "docs" / "posts" / f"{PART}.md").read_text()
    made["imports"] = imports
    return made


def tool_facts(site: dict, tool: str, name: str) -> list[dict]:
    n = sorted(RESULTS).index(tool) + 1
    return [f for f in site["facts"].values() if f["name"] == name and run_id(tool, n) in f["run_ids"]]


@pytest.mark.parametrize("tool", sorted(RESULTS))
def test_each_tool_s_points_are_facts_that_name_the_tool_file_and_path(site, tool):
    for name in ("point_ttft_median_s", "point_tpot_median_ms"):
        facts = tool_facts(site, tool, name)
        assert facts, f"no {name} of {tool} published"
        for fact in facts:
            assert f"a result file of {tool}" in (fact["source_note"] or ""), fact["source_note"]
            reader = re.search(r"its reader: (\S+?/)\)", fact["source_note"]).group(1)
            assert (ROOT / reader / "__init__.py").is_file(), reader       # the path it names is there
            paths = [r["path"] for r in fact["input_rows"]]
            assert paths and all(re.search(r"[A-Za-z_]", p) for p in paths), paths
            assert not any(p.startswith(("ttfts[", "median_ttft_ms", "(latencies[")) for p in paths), paths
            assert all("/bench/" in r["file"] for r in fact["input_rows"])


def test_the_part_names_the_tool_of_every_point_beside_vllm_bench_serve(site):
    page = plain(site["page"])
    tails = page[page.index("### The tails"):page.index("### Within the latency targets")]
    for tool in ["vllm bench serve", *RESULTS]:
        assert f"| {tool} |" in tails, tool
    assert "benchmark results alone, the result files of" in page


def test_no_file_of_the_result_sets_is_left_unread(site):
    import duckdb
    con = duckdb.connect(str(site["root"] / "data" / "campaign.duckdb"), read_only=True)
    errors = con.execute("select source_file, reason from ingest_errors").fetchall()
    assert errors == [], errors
