"""The synthetic node campaign (tests/fixtures/node_campaign) built the ways a team builds it: in a
copy of the project with its run folders in data/runs and a node profile active, by `dvc repro`
(repro_with_runs) or stage by stage with `campaign` (node_project, then build), its folders
brought in without meta.json by `campaign import` (stripped_copies); and the scripted node
campaign at scale (scripted_node_campaign)."""
from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import yaml

from stages.core.files import user_cache_home
from helpers import FIXTURES, PROJECT

NODE_RUNS = FIXTURES / "node_campaign" / "runs"
GIANTS, QUAD = "part-giants", "part-quad"
BIN = Path(sys.executable).parent


def project_copy(root: Path) -> None:
    """The project's files (tracked, and untracked but not ignored) copied into root."""
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
                            cwd=PROJECT, capture_output=True, check=True).stdout.decode()
    for name in filter(None, listed.split("\0")):
        source = PROJECT / name
        if source.is_file() and not name.startswith("tests/"):
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, root / name)


def repro_with_runs(root: Path, profile: str, runs: Path) -> subprocess.CompletedProcess:
    """A project copy in root whose run folders are the folders in `runs`, `profile` active and no spec
    to launch, built by `dvc repro` as a team that brings its runs builds it."""
    project_copy(root)
    params = (root / "params.yaml").read_text()
    params = re.sub(r"(?m)^profile: local-cpu\b", f"profile: {profile}", params)
    params = re.sub(r"(?m)^run_specs: \[[^\]]*\]", "run_specs: []", params)
    (root / "params.yaml").write_text(params)
    for folder in sorted(d for d in runs.iterdir() if d.is_dir()):
        shutil.copytree(folder, root / "data" / "runs" / folder.name)
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    # a home of its own, and the machine's user cache (the site's Vega bundle, files.user_cache)
    env = {"PATH": f"{BIN}:/usr/bin:/bin", "HOME": str(root), "PYTHONPATH": str(PROJECT),
           "XDG_CACHE_HOME": str(user_cache_home())}
    out = subprocess.run([str(BIN / "dvc"), "repro"], cwd=root, env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    return out


def repro_site(root: Path, said: str) -> dict:
    """What the node campaign's `dvc repro` in root made (`said`: what it printed): its facts and
    Part pages."""
    docs, site = root / "data" / "docs", root / "data" / "site"
    facts = {f["id"]: f for f in json.loads((root / "data" / "facts.json").read_text())}
    return {"root": root, "docs": docs, "site": site, "stderr": said,
            "facts": facts, "giants": (docs / "posts" / f"{GIANTS}.md").read_text(),
            "quad": (docs / "posts" / f"{QUAD}.md").read_text(),
            "giants_ref": (docs / "reference" / f"{GIANTS}.md").read_text(),
            "quad_ref": (docs / "reference" / f"{QUAD}.md").read_text()}


def plain(markdown: str) -> str:
    """The page's text with fact links reduced to their values and HTML references decoded."""
    import html
    text = re.sub(r"\[([^\]]*)\]\((?:\.\./)?audit/[^)]*\)\{\.fact[^}]*\}", r"\1", markdown)
    return html.unescape(re.sub(r"<[^>]+>", "", text))


def campaign(root: Path, *args: str) -> subprocess.CompletedProcess:
    out = subprocess.run([str(BIN / "campaign"), *args, "--root", str(root)], cwd=root,
                         capture_output=True, text=True)
    assert out.returncode == 0, (args, out.stdout[-2000:], out.stderr[-2000:])
    return out


def node_project(root: Path, *, specs: bool = True, profile: str = "h200x8") -> None:
    """A project copy with `profile` active and no spec to launch; without `specs`, params.yaml
    lists no spec of the node campaign (nor arms or comparisons naming one), as a team's own
    params.yaml may not."""
    project_copy(root)
    params = yaml.safe_load((root / "params.yaml").read_text())
    params.update(profile=profile, run_specs=[])
    if not specs:
        node = {name for name, spec in params["specs"].items() if spec["profile"] == "h200x8"}
        params["specs"] = {k: v for k, v in params["specs"].items() if k not in node}
        params["arms"] = {k: v for k, v in params["arms"].items() if k not in node}
        params["compare"] = [c for c in params["compare"] if not {c["base"], c["head"]} & node]
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))


def stripped_copies(dest: Path) -> list[Path]:
    """The node campaign's folders as a team without this project has them: no meta.json, no
    manifest, writable; the engine command of cmd.sh written over several lines (`docker run ...
    \\`, an option a line) and the result files pretty-printed (a figure a line)."""
    out = []
    for folder in sorted(NODE_RUNS.iterdir()):
        copy = dest / folder.name
        shutil.copytree(folder, copy, ignore=shutil.ignore_patterns("meta.json", "MANIFEST.sha256"))
        for path in [copy, *copy.rglob("*")]:
            path.chmod(path.stat().st_mode | 0o200)
        continued(copy / "cmd.sh")
        for result in sorted((copy / "bench").glob("*.json")):
            result.write_text(json.dumps(json.loads(result.read_text()), indent=4) + "\n")
        out.append(copy)
    return out


def continued(cmd_sh: Path) -> None:
    """cmd.sh's command lines split before each option, continued with a backslash."""
    out = []
    for line in cmd_sh.read_text().splitlines():
        if line.startswith("#") or not line.strip():
            out.append(line)
            continue
        groups: list[list[str]] = []
        for word in shlex.split(line):
            if word.startswith("-") or not groups:
                groups.append([])
            groups[-1].append(shlex.quote(word))
        out.append(" \\\n    ".join(" ".join(g) for g in groups))
    cmd_sh.write_text("\n".join(out) + "\n")


def build(root: Path) -> dict:
    """ingest, derive and render in `root`: the facts, what render said, and each Part's page."""
    campaign(root, "ingest")
    campaign(root, "derive")
    out = campaign(root, "render")
    return built_site(root, out.stdout + out.stderr)


def built_site(root: Path, render_said: str) -> dict:
    """What build made in root (`render_said`: what render printed): the facts and each Part's page."""
    facts = {f["id"]: f for f in json.loads((root / "data" / "facts.json").read_text())}
    pages = {p.stem: p.read_text() for p in (root / "data" / "docs" / "posts").glob("*.md")}
    return {"root": root, "facts": facts, "render": render_said, "pages": pages,
            "giants": pages.get(GIANTS), "setups": pages.get("part-setups")}


def imported_node_campaign(root: Path, elsewhere: Path) -> tuple[subprocess.CompletedProcess, str]:
    """The node campaign stripped (stripped_copies, into `elsewhere`), imported with --profile
    h200x8 into a project copy in root and built: what the import said, and what render printed."""
    node_project(root)
    sources = stripped_copies(elsewhere)
    said = campaign(root, "import", *map(str, sources), "--profile", "h200x8")
    return said, build(root)["render"]


def scripted_node_campaign(root: Path) -> Path:
    """The scripted node campaign, one group and a half (launches that fail, gates, repeats,
    multi-turn workloads, capacity-limited points), written into root, ingested and derived;
    its campaign.duckdb."""
    from stages.tools.synth import synth_node_scale
    from stages.tools.synth.synth_node_plan import SCENARIO
    synth_node_scale.write(out_root=root, runs=len(SCENARIO) + 3, root=PROJECT)
    env = {**os.environ, "PYTHONPATH": str(PROJECT)}
    for stage in ("ingest", "derive"):
        subprocess.run([sys.executable, "-m", "stages.cli", stage, "--root", str(root)], env=env,
                       check=True, capture_output=True)
    return root / "data" / "campaign.duckdb"


def scripted_book(build) -> Iterator:
    """A FactBook on the database of the scripted node campaign (scripted_node_campaign, a shared
    Build whose `made` is its campaign.duckdb), opened read-only, with `sections_here`: the model
    sections a render of it draws, one attempt of a model alone, and a model no run is of."""
    import duckdb

    from stages.render.facts import FactBook
    con = duckdb.connect(str(build.made), read_only=True)
    try:
        book = FactBook(con, root=build.root, sha=None)
        runs = con.execute("select run_id, model from runs order by run_id").fetchall()
        book.sections_here = [(tuple(r for r, _ in runs), m) for m in sorted({m for _, m in runs})] + [
            (tuple(r for r, m in runs if m == runs[0][1])[-1:], runs[0][1]),   # one attempt of a model
            ((runs[0][0],), "no-such-model")]
        yield book
    finally:
        con.close()
