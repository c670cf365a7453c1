"""A campaign derived again from the raw files alone, into a scratch folder: the run folders and
node probes ingested into a fresh warehouse, then derived as `campaign derive` builds it (rows that
break a data test held back, not raised). `campaign trace --verify` recomputes a published fact
against it (stages/render/trace.py judges the result).

Example:
    with rederived(paths, params) as campaign_db:
        verdict = trace.verify(fact, paths=paths, campaign_db=campaign_db)
"""
from __future__ import annotations

import contextlib
import tempfile
from pathlib import Path
from typing import Callable, Iterator

from stages.core.config import Paths, derive_settings
from stages.derive import stage as derive
from stages.ingest import nodes as ingest_nodes
from stages.ingest import stage as ingest


@contextlib.contextmanager
def rederived(paths: Paths, params: dict, progress: Callable[[str], None] = lambda s: None) -> Iterator[Path]:
    """The campaign database derived again from paths.runs and paths.nodes now, removed after."""
    with tempfile.TemporaryDirectory(prefix="campaign-verify-") as tmp:
        tmp = Path(tmp)
        progress(f"re-reading the raw run folders into {tmp}")
        ingest.run(runs_dir=paths.runs, warehouse=tmp / "warehouse.duckdb", root=paths.root)
        ingest_nodes.run(nodes_dir=paths.nodes, warehouse=tmp / "warehouse.duckdb", root=paths.root)
        progress("re-deriving the public tables")
        derive.run(warehouse=tmp / "warehouse.duckdb", campaign_db=tmp / "campaign.duckdb",
                   derived_dir=tmp / "derived", metrics_file=tmp / "metrics.json",
                   strict=False, **derive_settings(params))   # as `campaign derive` built it
        yield tmp / "campaign.duckdb"
