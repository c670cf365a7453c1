"""The preview's timing for the render benchmark: what `campaign preview` does after an edit.

In one process, as the preview runs: a render (the preview's first), then one Part's template
gains a line and the series is rendered again; the second render is timed, by phase. Run as a
child process by benchmark_render, which reads the JSON it writes.

Example:
    python -m stages.tools.bench.benchmark_preview ROOT site/templates/scale-g000.md.j2 OUT.json
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from stages.core.config import Paths, load_params
from stages.render import stage as render_stage
from stages.render.site_memo import SiteMemo

CHANGE_LINE = "\nA line added to measure the preview after a one-template change.\n"


def measure(root: Path, template: Path, out: Path) -> dict:
    params = load_params(root)
    paths = Paths.from_params(params, root)
    memo = SiteMemo(paths.chart_cache)
    render_stage.run_params(params, paths, memo=memo)
    template.write_text(template.read_text() + CHANGE_LINE)
    started = time.perf_counter()
    summary = render_stage.run_params(params, paths, memo=memo)
    result = {"seconds": time.perf_counter() - started, "phases": summary["phases"],
              "pages_reused": summary["pages_reused"], "pages": len(summary["pages"])}
    out.write_text(json.dumps(result, indent=1) + "\n")
    return result


if __name__ == "__main__":
    measure(Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]))
