"""The chart specs a built site publishes (assets/charts/**/*.vl.json), read back as a reader's
browser gets them: the colour each series is drawn in, and the order of a chart's panels."""
from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any, Iterator


def specs(site: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    """(page folder, spec) of every chart of the site."""
    for path in sorted((site / "assets" / "charts").rglob("*.vl.json")):
        yield path.parent.name, json.loads(path.read_text())


def _scales(node: Any) -> Iterator[dict[str, Any]]:
    if isinstance(node, dict):
        enc = node.get("encoding") or {}
        colour = enc.get("color") or {}
        if colour.get("field") in ("series", "setup") and isinstance(colour.get("scale"), dict):
            yield colour["scale"]
        for value in node.values():
            yield from _scales(value)
    elif isinstance(node, list):
        for value in node:
            yield from _scales(value)


def series_colours(site: Path) -> dict[str, set[tuple[str, str]]]:
    """Each series a chart colours, with every (colour, page) it is drawn in on the site."""
    seen: dict[str, set[tuple[str, str]]] = defaultdict(set)
    for page, spec in specs(site):
        for scale in _scales(spec):
            for name, colour in zip(scale.get("domain") or [], scale.get("range") or []):
                seen[name].add((colour, page))
    return seen


def panel_orders(site: Path) -> list[tuple[str, list[str]]]:
    """(chart file, workloads in the order its panels are drawn) for each workload-faceted chart."""
    out = []
    for path in sorted((site / "assets" / "charts").rglob("*.vl.json")):
        spec = json.loads(path.read_text())
        facet = spec.get("facet") or {}
        if facet.get("field") != "workload":
            continue
        rows = [r for values in (spec.get("datasets") or {}).values() for r in values]
        ranks = {r["workload"]: r["workload_rank"] for r in rows}
        sort = facet.get("sort")
        assert sort == {"field": "workload_rank", "op": "min"}, (path.name, sort)
        out.append((path.name, sorted(ranks, key=ranks.get)))
    return out
