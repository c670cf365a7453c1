"""The render tests' campaign (render_campaign.build_campaign) with the node probe of a two-GPU
H200 machine (data/nodes), derived and rendered: Part 1, the node, is shown."""
from __future__ import annotations

import shutil
from pathlib import Path

import duckdb

from helpers.derive_rows import RULES
from helpers.render_campaign import PROJECT, build_campaign, render_kwargs
from stages.derive import stage as derive
from stages.ingest import nodes as ingest_nodes
from stages.render import stage as render

NODE = "h200x2__1130-054711"
REAL_NODE = PROJECT / "data" / "nodes" / NODE
NODE_TABLES = ("nodes", "node_gpus", "node_topology", "node_p2p", "node_allreduce", "node_allreduce_peak")


def add_node(root: Path) -> None:
    """The render fixture's campaign plus the node tables derive builds from the real probe."""
    nodes = root / "data" / "nodes"
    shutil.copytree(REAL_NODE, nodes / NODE)
    scratch = root / "scratch"
    ingest_nodes.run(nodes_dir=nodes, warehouse=scratch / "warehouse.duckdb", root=root)
    derive.run(warehouse=scratch / "warehouse.duckdb", campaign_db=scratch / "campaign.duckdb",
               derived_dir=scratch / "derived", metrics_file=scratch / "metrics.json",
               rules=RULES, workloads={})
    con = duckdb.connect(str(root / "data" / "campaign.duckdb"))
    try:
        con.execute("attach $path as derived (read_only)", {"path": str(scratch / "campaign.duckdb")})
        for table in NODE_TABLES:
            con.execute(f"insert into {table} by name select * from derived.{table}")
    finally:
        con.close()


def render_node_campaign(root: Path, **extra) -> dict:
    """The render fixture's campaign with the node probe (add_node), rendered into root with
    `extra` render settings; render's summary."""
    build_campaign(root)
    add_node(root)
    return render.run(**render_kwargs(root, nodes_dir=root / "data" / "nodes", **extra))
