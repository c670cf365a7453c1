"""A GuideLLM report's JSON or YAML document, read with the line each of its parts starts on."""
from __future__ import annotations

import json
from typing import Any

import yaml

from stages.ingest.parsers.tools.common import ParseError


class Lines:
    """The line a JSON path starts on: the document's first line for JSON (one object on one
    line, as the tool writes it), each node's own line for YAML."""

    def __init__(self, first: int, root: Any = None):
        self.first = first
        self.root = root

    def at(self, *parts: str | int) -> int:
        node = self.root
        if node is None:
            return self.first
        for part in parts:
            if isinstance(node, yaml.MappingNode) and isinstance(part, str):
                node = next((v for k, v in node.value if getattr(k, "value", None) == part), None)
            elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
                node = node.value[part]
            else:
                node = None
            if node is None:
                return self.first
        return node.start_mark.line + 1


def load_report(text: str) -> tuple[Any, Lines | None, list[ParseError]]:
    """The document and where its parts start; or the error that stops it being read."""
    stripped = text.lstrip()
    first = text.count("\n", 0, len(text) - len(stripped)) + 1
    if not stripped:
        return None, None, [ParseError(1, "empty GuideLLM report")]
    if stripped.startswith("{"):
        try:
            return json.loads(stripped), Lines(first), []
        except json.JSONDecodeError as exc:
            line = exc.lineno + first - 1
            return None, None, [ParseError(line, f"not valid JSON: {exc.msg} (line {line} column "
                                                 f"{exc.colno}); the report is not read")]
        except RecursionError:
            return None, None, [ParseError(first, "JSON nested too deep; the report is not read")]
    loader_class = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    loader = loader_class(text)
    try:
        node = loader.get_single_node()
        doc = loader.construct_document(node) if node is not None else None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else first
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        return None, None, [ParseError(line, f"not valid YAML: {problem} (line {line}); "
                                             "the report is not read")]
    except (ValueError, TypeError, RecursionError) as exc:
        return None, None, [ParseError(first, f"not valid YAML: {exc}; the report is not read")]
    finally:
        loader.dispose()
    return doc, Lines(first, node), []
