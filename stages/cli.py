"""`campaign`: the project's command line. DVC stages call it, so a stage and a person do the same.

    campaign model [NAME ...]      generate the models of params.yaml `models` (config + tokenizer)
    campaign run tiny-seqs4        launch, gate and benchmark one spec
    campaign schedule              the run_specs over the node's GPU sets (--executor slurm: as jobs)
    campaign ingest                raw run folders -> data/warehouse.duckdb
    campaign seal [RUN_ID ...]     make run folders write-once (manifest, read-only)
    campaign import SRC... --profile NAME   run folders made before the project, copied in and sealed
    campaign derive                SQL models, data tests, CSV exports
    campaign plan [RUN_SET|SPEC]   will each spec fit, how long will it take, at what cost
    campaign render                article series -> mkdocs site (only what changed is made again)
    campaign preview               serve the site, render it again on every edit, reload the page
    campaign trace FACT            a published number back to its run, raw line and command
    campaign diff --base A --head B    two run sets (specs, images, revisions) point by point
    campaign archive               track the raw run folders with DVC and push them
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from stages.core import locks
from stages.core.files import divert_stderr
from stages.core.config import CampaignError, Paths, derive_settings
from stages.cli_common import echo_summary, load_project, main, progress, root_option, user_errors


def parse_gpus(text: str) -> list[int]:
    """'0-3' -> [0, 1, 2, 3]; '4,5,6,7' -> [4, 5, 6, 7]."""
    out: list[int] = []
    try:
        for part in text.split(","):
            lo, _, hi = part.partition("-")
            out += list(range(int(lo), int(hi or lo) + 1))
    except ValueError:
        raise CampaignError(f"--gpus {text!r}: expected a list like 0-3 or 4,5,6,7") from None
    return out


def parse_port(text: str | None) -> int | str | None:
    """'8001' -> 8001; 'auto' stays 'auto'; None stays None."""
    if text is None or text == "auto":
        return text
    try:
        port = int(text)
    except ValueError:
        port = 0
    if not 0 < port < 65536:
        raise CampaignError(f"--port {text!r}: expected a port number or 'auto'")
    return port


@main.command()
@click.argument("names", nargs=-1)
@root_option
@user_errors
def model(names: tuple[str, ...], root: str) -> None:
    """Generate the Llama-architecture model folders of params.yaml `models` (all, or NAMES).

    Example: campaign model tiny-llama
    """
    from stages.run import model as model_stage

    params, paths = load_project(root)
    shapes = params.get("models") or {}
    unknown = [n for n in names if n not in shapes]
    if unknown:
        raise CampaignError(f"unknown model {unknown[0]!r} (params.yaml models: {', '.join(shapes) or 'none'})")
    for name in names or shapes:
        out = paths.models / name
        with locks.writing(paths.root, [out], "campaign model"):
            model_stage.run(out=out, **shapes[name])
        progress(f"model {name} written to {out}")


@main.command("run")
@click.argument("spec")
@click.option("--dry-run", is_flag=True, help="Print the engine command and exit.")
@click.option("--gpus", default=None, help="GPU set, e.g. 0-3 or 4,5,6,7 (default: the spec's).")
@click.option("--port", default=None,
              help="The engine's port, or 'auto' for the first free one from the profile's "
                   "(default: the profile's).")
@click.option("--executor", type=click.Choice(["local", "docker", "slurm"]), default=None,
              help="Override the profile's executor ('slurm': this process is a Slurm job).")
@click.option("--run-id", default=None, help="The run's id, chosen by the scheduler that submitted it.")
@root_option
@user_errors
def run_cmd(spec: str, dry_run: bool, gpus: str | None, port: str | None, executor: str | None,
            run_id: str | None, root: str) -> None:
    """Launch SPEC's engine, gate it with the needle, run its benchmarks, stop it.

    Example: campaign run qwen3-235b-tp4 --gpus 4-7 --port 8001
    """
    from stages.run import schedule as sched
    from stages.run import stage as run_stage

    params, paths = load_project(root)
    gpu_set = parse_gpus(gpus) if gpus else None
    port_arg = parse_port(port)
    if dry_run:         # writes nothing; the command is printed with its secrets redacted
        launch = run_stage.run(spec_name=spec, params=params, paths=paths, dry_run=True, gpus=gpu_set,
                               port=port_arg, executor=executor)
        click.echo(launch.shell())
        return
    ledger = sched.spec_ledger(paths.ledger, spec)
    with locks.writing(paths.root, [ledger], f"campaign run {spec}"):
        result = run_stage.run(spec_name=spec, params=params, paths=paths, progress=progress,
                               gpus=gpu_set, port=port_arg, run_id=run_id, executor=executor)
        run_stage.write_ledger(ledger, result, spec)
    click.echo(f"{result.run_id} {result.status} {result.run_status} points={result.points}")
    # the benchmark client's libraries (triton's bindings) list their objects at exit: kept off
    # the console, in the ledger beside the spec's entry
    divert_stderr(sched.exit_log(paths.ledger, spec))


@main.command()
@click.argument("specs", nargs=-1)
@click.option("--dry-run", is_flag=True, help="Print the timeline and the commands; run nothing.")
@click.option("--executor", type=click.Choice(["local", "docker", "slurm"]), default=None,
              help="Override the profile's executor; slurm: each spec one Slurm job.")
@root_option
@user_errors
def schedule(specs: tuple[str, ...], dry_run: bool, executor: str | None, root: str) -> None:
    """Run specs over GPU sets: quad-sized ones two at a time, 8-GPU ones on the whole node (one at
    a time without GPUs), each engine on its own port. A spec whose entry in the schedule's ledger
    records a finished run with the same settings and protocol is not launched again.

    With the slurm executor each spec is one Slurm job (sbatch), placed by the cluster; the
    command waits, showing the jobs' queue state, ingests each run as its job ends, and on an
    interrupt cancels the jobs it submitted.

    Example: campaign schedule --dry-run qwen3-235b-tp4 qwen3-235b-sglang-tp4 glm53-tp8-dcp8
             campaign schedule --executor slurm
    (no SPECS: the run_specs of params.yaml, as the run stage does)
    """
    from stages.run import schedule as sched

    params, paths = load_project(root)
    names = list(specs) or list(params.get("run_specs") or [])
    if dry_run:         # on the node of the specs' profile, as `run --dry-run` shows their commands
        click.echo(sched.dry_run(params, names, executor=executor, root=paths.root,
                                 ledger_dir=paths.ledger, runs=paths.runs))
        return
    with locks.writing(paths.root, [paths.ledger / sched.LEDGER_FILE], "campaign schedule"):
        try:
            failed = sched.run_specs(params, names, root=paths.root, ledger_dir=paths.ledger,
                                     progress=progress, executor=executor, runs=paths.runs)
        except KeyboardInterrupt as exc:
            raise CampaignError(f"interrupted ({exc}): the jobs submitted were cancelled") from None
    if failed:
        raise CampaignError(f"runs that did not finish: {', '.join(failed)}")


@main.command()
@root_option
@user_errors
def ingest(root: str) -> None:
    """Read every raw run folder (only those that changed) and node probe into the warehouse.

    Example: campaign ingest
    """
    from stages.ingest import stage as ingest_stage
    from stages.ingest import nodes as ingest_nodes

    _, paths = load_project(root)
    with locks.writing(paths.root, [paths.warehouse], "campaign ingest"):
        summary = ingest_stage.run(runs_dir=paths.runs, warehouse=paths.warehouse, root=paths.root,
                                   progress=progress, seal_unsealed=True)
        echo_summary(summary)
        nodes = ingest_nodes.run(nodes_dir=paths.nodes, warehouse=paths.warehouse, root=paths.root,
                                 progress=progress)
    echo_summary(nodes)


@main.command()
@click.argument("run_ids", nargs=-1, metavar="[RUN_ID]...")
@root_option
@user_errors
def seal(run_ids: tuple[str, ...], root: str) -> None:
    """Make run folders write-once: a folder without MANIFEST.sha256 gets one (an existing one
    is never rewritten), then every file and folder in it is made read-only. With no RUN_ID,
    every run folder under paths.runs that no run is still writing.

    Example: campaign seal
              campaign seal tiny-llama__cpu_seqs4__4k__vllm__1130-053610
    """
    from stages.ingest.folders import seal_run_folders

    _, paths = load_project(root)
    echo_summary(seal_run_folders(paths.runs, list(run_ids), click.echo))


@main.command()
@click.argument("names", nargs=-1, metavar="[RUN_SET|SPEC]...")
@click.option("--write", is_flag=True, help="Also write the plans under paths.plan (the plan stage).")
@root_option
@user_errors
def plan(names: tuple[str, ...], write: bool, root: str) -> None:
    """Plan specs before the node is booked: will each fit (weights a GPU, KV cache, pool, the
    sequences that fit, with the arithmetic), how long it will take (from earlier launches of the
    same model and engine, else the profile's rates), its GPU-hours and cost; then the totals of
    each run set and Part. With --write (the plan stage), also write the plans under paths.plan.

    Example: campaign plan dsv4-pro-dep8 dsv4-pro-tep8
    (no NAMES: the run_specs of params.yaml)
    """
    from stages.plan import report, stage as plan_stage

    params, paths = load_project(root)
    specs, groups = report.resolve(params, list(names))
    out_dir = paths.plan if write else None
    if write and out_dir is None:
        raise CampaignError("params.yaml: paths.plan is not set (where the plan stage writes)")
    plans = plan_stage.run(params, names=specs, models_dir=paths.models, campaign_db=paths.campaign_db,
                           out_dir=out_dir)
    click.echo(report.text(params, plans, groups, report.parts(params, paths.series)))
    if write:
        progress(f"plan: {len(plans)} specs written under {out_dir}")


@main.command()
@click.option("--strict", is_flag=True,
              help="Fail on any row that breaks a data test instead of holding it back.")
@root_option
@user_errors
def derive(strict: bool, root: str) -> None:
    """Build the public tables from the warehouse with the SQL models, and test them; a row that
    breaks a test is held back in the quarantine table and the rest is published.

    Example: campaign derive --strict
    """
    from stages.derive import stage as derive_stage

    params, paths = load_project(root)
    with locks.writing(paths.root, [paths.campaign_db, paths.derived, paths.metrics], "campaign derive"):
        summary = derive_stage.run(warehouse=paths.warehouse, campaign_db=paths.campaign_db,
                                   derived_dir=paths.derived, metrics_file=paths.metrics,
                                   strict=strict, planning=params, models_dir=paths.models,
                                   **derive_settings(params))
    if summary.get("quarantine"):
        progress(f"derive: {summary['quarantine']} row(s) held back in the quarantine table "
                 "(the Warehouse page lists them; --strict fails on them)")
    echo_summary(summary)


@main.command()
@click.option("--no-build", is_flag=True, help="Write the docs folder only; skip mkdocs build.")
@click.option("--timings", type=click.Path(dir_okay=False),
              help="Write the seconds each phase of the render took to this JSON file.")
@root_option
@user_errors
def render(no_build: bool, timings: str | None, root: str) -> None:
    """Render the article series and build the site.

    Example: campaign render
    """
    params, paths = load_project(root)
    summary = _render_once(params, paths, build=not no_build)
    for notice in summary.pop("notices"):
        progress(f"render: {notice}")
    if timings:
        Path(timings).write_text(json.dumps(summary["phases"], indent=1) + "\n")
    echo_summary(summary)


def _render_once(params: dict, paths: Paths, *, build: bool = True, memo=None,
                 command: str = "campaign render") -> dict:
    """One render of the series (and the site when `build`), holding render's locks."""
    from stages.render import stage as render_stage

    with locks.writing(paths.root, [paths.docs, paths.site, paths.facts], command):
        return render_stage.run_params(params, paths, build=build, memo=memo)


@main.command()
@click.option("--port", default=8000, show_default=True, help="Port to serve on (0: any free port).")
@root_option
@user_errors
def preview(port: int, root: str) -> None:
    """Serve the site on http://127.0.0.1:PORT and render it again on every edit of the templates,
    series.yaml, sources.yaml, params.yaml, mkdocs.yml or the campaign database; the open page
    reloads itself. A failed render shows its error on one line, here and on the page, and the
    last good site stays served.

    Example: campaign preview --port 8001
    """
    from stages.render import preview as preview_mod
    from stages.render.site_memo import SiteMemo

    _, paths = load_project(root)
    memo = SiteMemo(paths.chart_cache)

    def render_now() -> dict:
        params, fresh = load_project(root)     # params.yaml is watched too
        summary = _render_once(params, fresh, memo=memo, command="campaign preview")
        for notice in summary.pop("notices"):
            progress(f"render: {notice}")
        return summary

    site_folder = paths.templates.parent if paths.templates else paths.root / "site"
    watched = [site_folder, paths.series, paths.sources, paths.table_docs, paths.mkdocs,
               paths.campaign_db, paths.root / "params.yaml"]
    preview_mod.serve(render=render_now, site_dir=paths.site, port=port,
                      watched=list(dict.fromkeys(p for p in watched if p is not None)),
                      say=progress, ready=lambda address: click.echo(f"preview: {address}"))


@main.command()
@click.argument("fact", required=False)
@click.option("--value", "value", help="Find the facts printed with this value.")
@click.option("--verify", is_flag=True, help="Recompute the fact from the raw files now.")
@click.option("--limit", default=20, show_default=True,
              help="Inputs listed for a fact computed from many rows (0: none).")
@root_option
@user_errors
def trace(fact: str | None, value: str | None, verify: bool, limit: int, root: str) -> None:
    """Follow a published number back to its run, raw file and line, command and stage.

    Example: campaign trace launch_kv_tokens--<run_id>
              campaign trace --value 16,384
              campaign trace --verify launch_kv_tokens--<run_id>
    """
    from stages.render import trace as trace_mod

    params, paths = load_project(root)
    facts = trace_mod.load_facts(paths.facts)
    if value is not None:
        hits = trace_mod.find_by_value(facts, value)
        if not hits:
            raise CampaignError(f"no published fact has the value {value}")
        for hit in hits:
            click.echo(f"{hit['id']}  {hit.get('display')}  ({', '.join(hit.get('pages') or [])})")
        return
    if not fact:
        raise CampaignError("give a fact id, or --value")
    found = trace_mod.find(facts, fact)
    click.echo(trace_mod.chain(found, paths, limit=max(limit, 0)))
    if verify:
        from stages.tools.rederive import rederived

        with rederived(paths, params, progress) as campaign_db:
            verdict = trace_mod.verify(found, paths=paths, campaign_db=campaign_db)
        click.echo(f"verify    {'OK' if verdict.matches else 'MISMATCH'}: {verdict.detail}")
        if not verdict.matches:
            sys.exit(1)


from stages import cli_tools  # noqa: E402,F401 (registers the tools' commands on main)

if __name__ == "__main__":
    main()
