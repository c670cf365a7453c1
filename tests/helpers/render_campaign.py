"""A small campaign for the render tests: public tables in campaign.duckdb plus raw run folders.

The rows are plausible for the local-cpu profile; the raw files are written so that every
source_file/source_line in the tables points at a real line.
"""
from __future__ import annotations

import json
from pathlib import Path

import duckdb

from helpers import FIXTURES as ALL_FIXTURES, PROJECT
from helpers.public_tables import PUBLIC_DDL, add_later_columns, in_schema_order

FIXTURES = ALL_FIXTURES / "render"

RUN4 = "tiny-llama__cpu_seqs4__4k__vllm__1130-051200"
RUN16 = "tiny-llama__cpu_seqs16__4k__vllm__1130-052400"
RUN16_FAILED = "tiny-llama__cpu_seqs16__4k__vllm__1130-050100"
KV_TOKENS = 8192
WORKLOADS = {"long": (2048, 64), "chat": (256, 64)}
CONCURRENCY = [1, 2, 4, 8, 16]
# The fixture log's KV line, rewritten to the pool the tables hold (KV_TOKENS), so that every fact
# cites a line that holds its value.
KV_LINE = ("CPU KV cache size: 1,048,576 tokens, Maximum concurrency for 4,096 tokens per request: 256.00x",
           "CPU KV cache size: 8,192 tokens, Maximum concurrency for 4,096 tokens per request: 2.00x")
POINT_ERROR_LINE = "point_error=long__c16 ReadTimeout: <timed out>\n"
SCRIPT_ANSWER = "<script>alert('x')</script> the code is 42"


def _cmd(run_id: str, seqs: int) -> str:
    return (
        "#!/bin/sh\n"
        "cd \"$(dirname \"$0\")/../../..\"\n"
        "export VLLM_CPU_KVCACHE_SPACE=1\n"
        "VLLM_CPU_KVCACHE_SPACE=1 .venv/bin/python -m vllm.entrypoints.openai.api_server "
        f"--model data/models/tiny-llama --port 8011 --load-format dummy --dtype bfloat16 "
        f"--max-model-len 4096 --max-num-seqs {seqs} --num-gpu-blocks-override 128\n"
    )


def _line_of(path: Path, needle: str) -> int:
    for i, line in enumerate(path.read_text().splitlines(), start=1):
        if needle in line:
            return i
    raise AssertionError(f"{needle!r} not in {path}")


def tpot_ms(concurrency: int, seqs: int) -> float:
    return 6.0 + concurrency * (1.5 if seqs == 4 else 1.0)


def output_tok_s(concurrency: int, limit: int, seqs: int) -> float:
    """A point's output rate, as its result file and bench_points hold it."""
    return min(concurrency, limit) * 1000 / tpot_ms(concurrency, seqs)


def _write_runs(root: Path) -> dict[str, Path]:
    runs = root / "data" / "runs"
    folders = {}
    for run_id, seqs, ok in ((RUN4, 4, True), (RUN16, 16, True), (RUN16_FAILED, 16, False)):
        d = runs / run_id
        d.mkdir(parents=True)
        (d / "cmd.sh").write_text(_cmd(run_id, seqs))
        if ok:
            (d / "server.log").write_text((FIXTURES / "server.log").read_text().replace(*KV_LINE))
            (d / "launch.out").write_text(
                f"status=ready\nready_s={71.3 if seqs == 4 else 68.9}\nengine_kv_tokens={KV_TOKENS}\n"
                + (POINT_ERROR_LINE if seqs == 4 else ""))
            probes = [
                {"key": 0, "depth": depth, "prompt_tokens": 3686, "ok": False,
                 "latency_s": 4.2 + i, "answer": SCRIPT_ANSWER if i == 1 else "Powopo 417 juquloba"}
                for i, depth in enumerate((0.1, 0.5, 0.9))
            ]
            (d / "niah.log").write_text(
                "".join(json.dumps(p) + "\n" for p in probes) + "GATE niah score= 0.0\n")
            (d / "ramp.log").write_text("".join(json.dumps(line) + "\n" for line in [
                {"event": "workload", "workload": "ramp", "kind": "ramp", "sessions": 1, "turns": 2,
                 "output_tokens": 32},
                *({"event": "request", "workload": "ramp", "kind": "ramp", "point_id": f"ramp__t0{t}",
                   "session": 0, "turn": t, "request_idx": t - 1, "input_tokens": 1500 * t,
                   "output_tokens": 32, "ttft_s": 0.05 * t * (2 if seqs == 4 else 1), "needle_ok": False,
                   "error": ""}
                  for t in (1, 2)),
                {"event": "done", "workload": "ramp", "requests": 2, "failed": 0}]))
            (d / "agents.agents.jsonl").write_text(json.dumps(
                {"event": "workload", "workload": "agents", "kind": "agents", "sessions": 4, "turns": 4,
                 "output_tokens": 64}) + "\n")
            (d / "bench").mkdir()
            for w, (prompt, output) in WORKLOADS.items():
                limit = min(KV_TOKENS // (prompt + output), seqs)
                for c in CONCURRENCY:
                    (d / "bench" / f"{w}__c{c:02d}.json").write_text(json.dumps(
                        {"date": "20261130-052000", "workload": w, "concurrency": str(c),
                         "run_id": run_id, "completed": 2 * c, "failed": 0,
                         "output_throughput": output_tok_s(c, limit, seqs)}) + "\n")
        else:
            (d / "server.log").write_text(
                "(APIServer pid=9) INFO 11-30 05:01:02 [api_utils.py:347] version 0.32.0\n"
                "(EngineCore pid=12) ERROR 11-30 05:01:40 [core.py:1100] ValueError: "
                "max_num_seqs (16) exceeds available <cache> blocks\n"
                "(EngineCore pid=12) ERROR 11-30 05:01:40 [core.py:1101] EngineCore failed to start.\n")
            (d / "launch.out").write_text("status=failed\nexit_code=1\n")
        folders[run_id] = d
    return folders


def build_campaign(root: Path) -> Path:
    """Write run folders under root/data/runs and root/data/campaign.duckdb; return the db path."""
    folders = _write_runs(root)
    rel = lambda p: p.relative_to(root).as_posix()  # noqa: E731
    db = root / "data" / "campaign.duckdb"
    con = duckdb.connect(str(db))
    con.execute(PUBLIC_DDL)
    con.executemany("insert into run_events values (?, ?, ?, ?, ?, ?)", [
        [RUN16_FAILED, "launch_failed", None, "the engine did not become ready (status=failed)",
         rel(folders[RUN16_FAILED] / "launch.out"), 1],
        [RUN4, "point_failed", "long__c16", "ReadTimeout: <timed out>",
         rel(folders[RUN4] / "launch.out"), 4],
    ])
    for run_id, layout, attempt, latest, status, seqs in (
        (RUN16_FAILED, "cpu_seqs16", 1, False, "failed", 16),
        (RUN4, "cpu_seqs4", 1, True, "ready", 4),
        (RUN16, "cpu_seqs16", 2, True, "ready", 16),
    ):
        d = folders[run_id]
        spec = "tiny-seqs4" if seqs == 4 else "tiny-seqs16"
        hhmmss = run_id.rsplit("-", 1)[1]
        started = f"2026-11-30T{hhmmss[:2]}:{hhmmss[2:4]}:{hhmmss[4:]}Z"
        con.execute(
            "insert into runs values (?, ?, 'local-cpu', 'tiny-llama', ?, '4k', 'vllm', '0.32.0', "
            "null, null, 'local', ?, ?, null, ?, ?, ?, 'complete', ?, true, false, null, null, 'run', null,"
            " ?, 1, ?, null, null, null, null, null, null, null)",
            [run_id, spec, layout, started, started, f"{spec} | no image | 0.32.0", attempt, latest, latest,
             rel(d / "cmd.sh"), spec])
        cmd_line = _line_of(d / "cmd.sh", "--max-num-seqs")
        if status == "ready":
            kv_line = _line_of(d / "server.log", "CPU KV cache size")
            ready_s = 71.3 if seqs == 4 else 68.9
            con.execute(
                "insert into launches values (?, 'ready', ?, ?, 1.0, 0.01, 0.11, 32.75, 4096, ?, ?, 1, 1,"
                " null, null, null, null, null, 'auto', ?, ?, ?, ?, 2, ?, ?, null, null, null, ?, 1)",
                [run_id, ready_s, KV_TOKENS, seqs, seqs, "python -m vllm.entrypoints.openai.api_server",
                 rel(d / "server.log"), kv_line, rel(d / "launch.out"), rel(d / "cmd.sh"), cmd_line,
                 rel(d / "launch.out")])
        else:
            err_line = _line_of(d / "server.log", "ValueError")
            con.execute(
                "insert into launches values (?, 'failed', null, null, null, null, null, null, 4096, ?, ?,"
                " 1, 1, null, null, 'ValueError', ?, 'EngineCore', 'auto', ?, null, null, null, null, ?,"
                " ?, null, ?, ?, ?, ?)",
                [run_id, seqs, seqs, "max_num_seqs (16) exceeds available <cache> blocks",
                 "python -m vllm.entrypoints.openai.api_server", rel(d / "cmd.sh"), cmd_line,
                 rel(d / "server.log"), err_line, rel(d / "cmd.sh"), cmd_line])
            continue
        niah = d / "niah.log"
        con.execute("insert into gates values (?, 'niah', 0.0, 3, 0, 0, true, ?, 4)", [run_id, rel(niah)])
        for i, line in enumerate(niah.read_text().splitlines()[:3]):
            p = json.loads(line)
            con.execute("insert into gate_probes values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                        [run_id, i, p["depth"], p["prompt_tokens"], p["ok"], p["latency_s"],
                         p["answer"], p.get("failure"), p.get("reasoning_tokens"), rel(niah), i + 1])
        for w, (prompt, output) in WORKLOADS.items():
            fit_kv = KV_TOKENS // (prompt + output)
            limit = min(fit_kv, seqs)
            con.execute("insert into sequences_fit values (?, ?, ?, ?, ?, ?, 1, ?, ?, ?, false, ?, ?)",
                        [run_id, w, prompt, output, prompt + output, KV_TOKENS, seqs, fit_kv, limit,
                         rel(d / "server.log"), kv_line])
            for c in CONCURRENCY:
                f = d / "bench" / f"{w}__c{c:02d}.json"
                ttft = (0.2 if w == "chat" else 1.1) * (1 + max(0, c - limit))
                tpot = tpot_ms(c, seqs)
                con.execute(
                    "insert into bench_points values (?, ?, ?, ?, 1, ?, ?, ?, ?, 0, ?, ?, ?, ?, ?, ?, ?, 'requests',"
                    " ?, ?, 0.0, 0, ?, ?, true, ?, 1)",
                    [run_id, f"{w}__c{c:02d}", w, c, prompt, output, 2 * c, 2 * c, 2 * c, ttft, ttft * 1.4,
                     ttft * 1.5, tpot, tpot * 1.05, tpot * 1.1, 1000 / tpot, output_tok_s(c, limit, seqs),
                     limit, c > limit, rel(f)])
        for t in (1, 2):
            con.execute("insert into ramp_turns values (?, 'ramp', ?, 1, 1, ?, ?, ?, 0, 1, ?, true, ?, ?)",
                        [run_id, t, 1500 * t, 0.05 * t * (2 if seqs == 4 else 1), 0.2 * t,
                         None if t == 1 else 80.0, rel(d / "ramp.log"), t + 1])
        agents = (0.371, 568.5) if seqs == 4 else (0.147, 792.0)
        con.execute("insert into agent_runs values (?, 'agents', 4, 4, 16, 16, 16, 0, 3017, ?, ?, ?, 3.0,"
                    " 333.3, ?, 78.8, true, ?, 1)",
                    [run_id, agents[0], agents[0] * 1.2, agents[0] * 1.3, agents[1],
                     rel(d / "agents.agents.jsonl")])
        con.execute("insert into sequences_fit values (?, 'long8k', 8192, 64, 8256, ?, 1, ?, 0, null,"
                    " true, ?, ?)", [run_id, KV_TOKENS, seqs, rel(d / "server.log"), kv_line])
    # every point ran once: its repeats taken together are its own figures
    con.execute("insert into point_repeats select run_id, workload, concurrency, 1, point_id, ttft_median_s,"
                " ttft_median_s, ttft_median_s, tpot_median_ms, tpot_median_ms, tpot_median_ms, output_tok_s,"
                " output_tok_s, output_tok_s, completed, sent from bench_points")
    add_later_columns(con)
    in_schema_order(con)
    con.close()
    export_tables(root)
    return db


def export_tables(root: Path) -> None:
    """The CSV exports of root/data/campaign.duckdb in root/data/derived, as derive writes them (the
    site's downloads are copied from there): again after the tables are changed."""
    from stages.derive import stage as derive
    with duckdb.connect(str(root / "data" / "campaign.duckdb"), read_only=True) as con:
        derive.export_csv(con, root / "data" / "derived", derive.load_schema())


def render_kwargs(root: Path, **extra) -> dict:
    data = root / "data"
    kwargs = dict(
        campaign_db=data / "campaign.duckdb", derived_dir=data / "derived", docs_dir=data / "docs",
        site_dir=data / "site",
        facts_file=data / "facts.json", runs_dir=data / "runs", root=root,
        templates_dir=PROJECT / "site" / "templates", sources_file=PROJECT / "site" / "sources.yaml",
        mkdocs_config=PROJECT / "mkdocs.yml", build=False, static_images=("svg", "png"))
    kwargs.update(extra)
    return kwargs


# ---------------------------------------------------------------- hostile data

HOSTILE_RUN = 'tiny[x](mailto:a onmouseover=alert(1);")__cpu_seqs16__4k__vllm__1129-000007'
HOSTILE_FAILED = "tiny[y](javascript:alert(2))`{onclick=alert(3)}__cpu_seqs16__4k__vllm__1129-000008"
HOSTILE_TEXT = ('[z](javascript:alert(4)) <img src=x onerror=alert(5)> "><svg onload=alert(6)> '
                "`{onmouseover=alert(7)}` ![i](javascript:alert(8)) | *_")
SECRETS = ("hf_AbCdEfGhIjKlMnOpQrStUv123", "sk-proj-AbCdEfGhIjKlMnOpQrSt456")
OUTSIDE_TEXT = "OUTSIDE-THE-PROJECT-root:x:0:0"


def make_hostile(root: Path) -> dict[str, str]:
    """Turn the campaign of build_campaign(root) hostile: run ids, specs, model, layout, image,
    error text, run events and gate answers carry markup, Markdown links and handlers; cmd.sh
    carries an HF token and an API key. Returns the renamed run ids."""
    runs = root / "data" / "runs"
    renamed = {RUN16: HOSTILE_RUN, RUN16_FAILED: HOSTILE_FAILED}
    for old, new in renamed.items():
        (runs / old).rename(runs / new)
    for d in runs.iterdir():
        cmd = d / "cmd.sh"
        cmd.write_text(cmd.read_text().replace(
            "VLLM_CPU_KVCACHE_SPACE=1 .venv", f"HF_TOKEN={SECRETS[0]} VLLM_CPU_KVCACHE_SPACE=1 .venv")
            .replace("--num-gpu-blocks-override 128", f"--num-gpu-blocks-override 128 --api-key {SECRETS[1]}"))
    log = runs / HOSTILE_RUN / "server.log"
    log.write_text(log.read_text().replace("CPU KV cache size", f"HF_TOKEN={SECRETS[0]} CPU KV cache size"))
    con = duckdb.connect(str(root / "data" / "campaign.duckdb"))
    tables = [r[0] for r in con.execute("select table_name from information_schema.columns "
                                        "where column_name = 'run_id'").fetchall()]
    for old, new in renamed.items():
        for table in tables:
            con.execute(f"update {table} set run_id = ? where run_id = ?", [new, old])
            for (col,) in con.execute("select column_name from information_schema.columns where "
                                      "table_name = ? and column_name like '%source_file'", [table]).fetchall():
                con.execute(f"update {table} set {col} = replace({col}, ?, ?)", [old, new])
    con.execute("update runs set spec = ? || spec, spec_label = ? || spec_label, model = ?, "
                "layout = ? || layout, image = ?", [HOSTILE_TEXT] * 5)
    con.execute("update launches set error_message = ?, command = ? where status = 'failed'",
                [HOSTILE_TEXT, f"vllm serve --api-key {SECRETS[1]}"])
    con.execute("update run_events set detail = ? || detail", [HOSTILE_TEXT])
    con.execute("update gate_probes set answer = ? || ? where probe_idx = 2",
                [HOSTILE_TEXT, f" Authorization: Bearer {SECRETS[1]}"])
    con.close()
    export_tables(root)
    return renamed


def render_hostile_campaign(root: Path) -> None:
    """The campaign of build_campaign(root), made hostile (make_hostile), rendered and its site built."""
    from stages.render import stage as render
    build_campaign(root)
    make_hostile(root)
    render.run(**render_kwargs(root, build=True))


def audit_ref(fid: str, page: str) -> str:
    """The link target of fact `fid`'s audit entry, relative to the docs root, when it is audited
    on `page` (its run, or node, or name): audit/<page>.html#<anchor>."""
    from stages.render.escape import audit_location
    _, anchor = audit_location(fid, fid.split("--")[0], [page], {})
    return f"audit/{page}.html#{anchor}"


def audit_entry(docs: Path, fid: str, page: str) -> str:
    """The entry of fact `fid` on its audit page (HTML): from its heading to the entry's end."""
    target, anchor = audit_ref(fid, page).split("#")
    text = (docs / target).read_text()
    return text.split(f'<section class="audit-entry" id="{anchor}">', 1)[1].split("</section>", 1)[0]


def published_ref(root: Path, fid: str) -> str:
    """The audit link target facts.json records for fact `fid` (audit/<page>.html#<anchor>)."""
    record = next(f for f in json.loads((root / "data" / "facts.json").read_text()) if f["id"] == fid)
    return f"audit/{record['audit_page']}.html#{record['audit_anchor']}"
