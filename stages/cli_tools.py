"""The `campaign` commands of the tools no DVC stage runs: `import` and `archive` and `publish`
(stages/tools/exchange/), `bench` (stages/tools/bench/), `synth-node` (stages/tools/synth/),
`reliability` (stages/tools/faults/), and `diff` of two run sets. Registered on the command group
when stages/cli.py imports this module."""
from __future__ import annotations

from pathlib import Path

import click

from stages.core import locks
from stages.core.config import CampaignError
from stages.cli_common import echo_summary, load_project, main, progress, root_option, user_errors


@main.command("import")
@click.argument("sources", nargs=-1, required=True, metavar="SRC...")
@click.option("--profile", "profile_name", required=True,
              help="The profile the runs were made on (a key of params.yaml profiles); their "
                   "specs are looked for among its specs.")
@click.option("--results", "results_as", metavar="RUN_ID",
              help="SRC is a folder of benchmark result files (vllm bench serve, AIPerf, GenAI-Perf, "
                   "GuideLLM, LLMPerf, inference-perf): import it as the bench/ folder of a new run "
                   "RUN_ID, which names its setup (<model>__<layout>__<ctx>__<engine>__<MMDD-HHMMSS>).")
@root_option
@user_errors
def import_cmd(sources: tuple[str, ...], profile_name: str, results_as: str | None, root: str) -> None:
    """Bring run folders made before this project (no meta.json) into the runs folder: each is
    copied byte for byte (mtimes kept, every copy's sha256 checked), given an import.json (source,
    host, time, user, the spec of params.yaml its run id names, every file's sha256) and sealed.
    All or nothing: every SRC is checked first, and one that is refused (not a run folder, a run
    id already there, a link or FIFO inside, a manifest, another profile's meta.json) refuses
    them all; an interrupted import leaves the runs folder as it was.

    With --results RUN_ID, SRC is one folder of a benchmark tool's result files, imported the
    same way as the bench/ folder of a new run RUN_ID.

    \b
    Example:
      campaign import /old/runs/glm53__tp8_dcp8__1024k__vllm__1010-053939 --profile h200x8
      campaign import /old/runs/*__vllm__* --profile h200x8
      campaign import ./aiperf-artifacts --profile h200x8 --results llama8b__tp1__128k__vllm__1201-090000
    """
    from stages.tools.exchange import import_runs

    params, paths = load_project(root)
    with locks.writing(paths.root, [paths.runs], "campaign import"):
        try:
            summary = import_runs.run(list(sources), profile=profile_name, params=params,
                                      runs=paths.runs, progress=progress, results_as=results_as)
        except KeyboardInterrupt as exc:
            raise CampaignError(f"interrupted ({str(exc) or 'SIGINT'}): nothing was imported") from None
    echo_summary(summary)


@main.command()
@root_option
@user_errors
def publish(root: str) -> None:
    """Pack the built site into one versioned, reproducible archive with a sha256 MANIFEST.

    Example: campaign publish   (writes data/publish/site-<version>-<date>.tar.gz)
    """
    from stages.tools.exchange import publish as publish_mod

    _, paths = load_project(root)
    with locks.writing(paths.root, [paths.publish], "campaign publish"):
        archive_file = publish_mod.run(site_dir=paths.site, out_dir=paths.publish, root=paths.root)
    click.echo(str(archive_file))


@main.command()
@click.option("--scale", default=1.0, show_default=True,
              help="Campaign size: 1.0 is about 300 runs and 5 GB of logs.")
@click.option("--keep-data", is_flag=True, help="Keep the generated campaign after measuring.")
@click.option("--only", type=click.Choice(["ingest", "render", "client"]),
              help="Measure one section only (default: all).")
@root_option
@user_errors
def bench(scale: float, keep_data: bool, only: str | None, root: str) -> None:
    """Measure ingest and render on generated campaigns, and the benchmark client's own time per
    point, and write data/bench/report.md.

    Example: campaign bench --scale 0.1   (the full size takes about 15 minutes)
    """
    from stages.tools.bench import benchmark

    params, paths = load_project(root)
    first = params["specs"][params["run_specs"][0]]          # the client's tokenizer: the first spec's model
    report = benchmark.run(out_dir=paths.bench, scale=scale, keep_data=keep_data,
                           sections=(only,) if only else ("ingest", "render", "client"),
                           client_model=params["models"][first["model"]], progress=progress)
    click.echo(f"report: {report}")


@main.command("synth-node")
@click.option("--out", required=True, type=click.Path(file_okay=False),
              help="Folder to write the run folders into (their names must not exist there yet).")
@root_option
@user_errors
def synth_node(out: str, root: str) -> None:
    """Write the scripted node campaign (profile h200x8) as raw run folders, the same bytes each time.

    Example: campaign synth-node --out tests/fixtures/node_campaign/runs
    """
    from stages.tools.synth import synth_node as synth_node_mod

    for run_id in synth_node_mod.run(out_dir=Path(out), root=Path(root)):
        click.echo(run_id)


@main.command()
@root_option
@user_errors
def reliability(root: str) -> None:
    """Inject faults (damaged run folders, a killed engine, bad input) and report what happened.

    Example: campaign reliability   (writes data/reliability/report.md)
    """
    from stages.tools.faults import reliability as rel

    _, paths = load_project(root)
    report = rel.run(root=paths.root, out_dir=paths.reliability, progress=progress)
    click.echo(report.read_text().split("## Summary", 1)[1].strip())
    click.echo(f"report: {report}")


@main.command()
@click.option("--no-push", is_flag=True, help="Only record the run folders; do not push.")
@root_option
@user_errors
def archive(no_push: bool, root: str) -> None:
    """Track the raw run folders with DVC and push them (and stage outputs) to the DVC remote.

    Example: campaign archive   (then: git add data/runs.dvc dvc.lock && git commit)
    """
    from stages.tools.exchange import archive as archive_mod

    _, paths = load_project(root)
    summary = archive_mod.run(paths=paths, push=not no_push, progress=progress)
    click.echo(" ".join(f"{k}={v}" for k, v in summary.items()))


@main.command()
@click.option("--base", required=True, help="Run set, spec, image (or tag), or git revision.")
@click.option("--head", required=True, help="Run set, spec, image (or tag), or git revision.")
@click.option("--format", "fmt", type=click.Choice(["table", "markdown", "csv", "json"]),
              default="table", show_default=True)
@click.option("--tolerance", default=5.0, show_default=True,
              help="Changes within this percentage are marked 'same'.")
@click.option("--facts", "facts_mode", is_flag=True,
              help="Compare the published numbers of two git revisions ('workspace': as now).")
@root_option
@user_errors
def diff(base: str, head: str, fmt: str, tolerance: float, facts_mode: bool, root: str) -> None:
    """Compare two run sets point by point: better, worse, same or unclear from each change's
    confidence interval (params.yaml diff:), new failure, fixed, not comparable. With --facts,
    the published numbers that differ between two revisions, and whether each median or p90
    moved outside its own interval.

    \b
    Example:
      campaign diff --base tiny-seqs4 --head tiny-seqs16
      campaign diff --base v0.31.0 --head nightly --format markdown
      campaign diff --base HEAD~3 --head HEAD --format json
      campaign diff --facts --base HEAD~1 --head workspace
    """
    import duckdb

    from stages.render import diff as diff_mod
    from stages.render import diff_facts, diff_stats

    params, paths = load_project(root)
    try:
        stats = diff_stats.Settings.from_params(params.get("diff"))
    except (TypeError, ValueError) as exc:
        raise CampaignError(f"params.yaml diff: {exc}") from None
    if facts_mode:
        rows = diff_facts.diff_facts(diff_facts.facts_at(paths, base), diff_facts.facts_at(paths, head), stats)
        click.echo(diff_facts.render_facts(rows, fmt, base, head), nl=False)
        return
    if not paths.campaign_db.exists():
        raise CampaignError(f"{paths.campaign_db}: not found (run `dvc repro derive` first)")
    with duckdb.connect(str(paths.campaign_db), read_only=True) as current:
        sides = [diff_mod.resolve(t, params=params, paths=paths, current=current) for t in (base, head)]
        result = diff_mod.compare(*sides, tolerance_pct=tolerance, stats=stats)
    click.echo(diff_mod.render(result, fmt), nl=False)
