"""perf_analyzer's profile export (`<name>.json`, {"experiments": [...]}), which GenAI-Perf
summarises: one request row per request of each experiment, its tokens counted from the streamed
responses (OpenAI chat or completions events) where the export holds no usage."""
from __future__ import annotations

import json
from pathlib import PurePosixPath
from typing import Any

from stages.core.numbers import positive_count
from stages.formats.lines import decode
from stages.ingest.parsers.tools import common
from stages.ingest.parsers.tools.common import BenchParse, ParseError
from stages.ingest.parsers.tools.genai_perf.names import (
    SUMMARY_SUFFIX, TOOL, base_names, first_line, plain_name)


# ---------------------------------------------------------------- perf_analyzer's export

def parse_export(name: str, data: bytes, siblings: frozenset[str]) -> BenchParse:
    result = BenchParse()
    text = decode(data)
    obj, invalid = common.load_json(text, "not valid JSON", "no request read")
    if invalid is not None:
        result.errors.append(invalid)
        return result
    line = first_line(text)
    experiments = obj.get("experiments") if isinstance(obj, dict) else None
    if not isinstance(experiments, list):
        result.errors.append(ParseError(line, "perf_analyzer export without an experiments list; "
                                              "no request read"))
        return result
    service_kind = obj.get("service_kind")
    openai = service_kind == "openai"
    # The point the requests belong to is the one the summary beside them names: from the JSON,
    # with its concurrency; from the CSV alone, which states none, by its position.
    stem = PurePosixPath(plain_name(name)).name.partition(".")[0]
    beside = base_names(siblings)
    by_position = (f"{stem}{SUMMARY_SUFFIX}.json" not in beside
                   and f"{stem}{SUMMARY_SUFFIX}.csv" in beside)
    for k, experiment in enumerate(experiments):
        where = common.path("experiments", k)
        if not isinstance(experiment, dict) or not isinstance(experiment.get("requests"), list):
            result.errors.append(ParseError(line, f"{where} has no requests list; left out"))
            continue
        mode = common.dig(experiment, ("experiment", "mode"))
        concurrency = (positive_count(common.dig(experiment, ("experiment", "value")))
                       if mode == "concurrency" else None)
        pid = common.point_id(name, None if by_position else concurrency, k + 1)
        bad = 0
        first = len(result.requests)
        for i, record in enumerate(experiment["requests"]):
            row = _request_row(record, openai)
            if row is None:
                bad += 1
                row = {"error": "not a request record"}
            result.requests.append({
                "point_id": pid, "request_idx": i, "input_tokens": None, "output_tokens": None,
                "ttft_s": None, "latency_s": None, "itl_count": None, "itl_sum_s": None,
                "start_time_s": None, "error": None, "tpot_ms": None, "field_paths": None,
                **row, "record_path": common.path("experiments", k, "requests", i),
                "source_line": line})
        if bad:
            result.errors.append(ParseError(line, f"{pid}: {bad} record(s) of {where}.requests are "
                                                  "not request objects; their rows hold no figures"))
        rows = result.requests[first:]
        if rows and not bad and _summary_missing(stem, beside):
            rate = common.finite(common.dig(experiment, ("experiment", "value")))
            result.points.append(common.point_from_requests(
                pid, rows, tool=TOOL, line=line, concurrency=concurrency,
                concurrency_from=f"{where}.experiment.value (mode concurrency)",
                request_rate=rate if mode == "request_rate" and rate else None,
                rate_from=f"{where}.experiment.value (mode request_rate)",
                settings={"point_from": f"{PurePosixPath(plain_name(name)).name} alone: no "
                                        f"{stem}{SUMMARY_SUFFIX}.json or .csv beside it",
                          "service_kind": service_kind, "endpoint": obj.get("endpoint"),
                          "version": obj.get("version")}))
    return result


def _summary_missing(stem: str, beside: set[str]) -> bool:
    """Whether no GenAI-Perf summary of this export (JSON or CSV) is beside it: then the export
    alone gives its points, each made from its requests."""
    return not ({f"{stem}{SUMMARY_SUFFIX}.json", f"{stem}{SUMMARY_SUFFIX}.csv"} & beside)


def _request_row(record: Any, openai: bool) -> dict[str, Any] | None:
    """One request's columns (and field_paths), read as genai-perf reads it."""
    if not isinstance(record, dict):
        return None
    row: dict[str, Any] = {}
    fields: dict[str, str] = {}
    start = record.get("timestamp")
    start_ok = isinstance(start, int) and not isinstance(start, bool)
    if start_ok:
        row["start_time_s"] = start / 1e9
        fields["start_time_s"] = "timestamp"
    stamps = record.get("response_timestamps")
    outputs = record.get("response_outputs")
    if not isinstance(stamps, list) or not all(isinstance(t, int) and not isinstance(t, bool)
                                               for t in stamps):
        row["error"] = "response_timestamps is not a list of integers"
        row["field_paths"] = common.paths_json(fields)
        return row
    if not stamps:
        row["error"] = "no response"
        row["field_paths"] = common.paths_json(fields)
        return row
    kept = list(range(len(stamps)))
    error = None
    if openai:
        if not isinstance(outputs, list) or len(outputs) != len(stamps):
            row["error"] = "response_outputs and response_timestamps differ in length"
            row["field_paths"] = common.paths_json(fields)
            return row
        texts, error = zip(*(_openai_text(o) for o in outputs)) if outputs else ((), ())
        error = next((e for e in error if e), None)
        kept = [j for j, has_text in enumerate(texts) if has_text]
        usage = _usage(outputs)
        if usage:
            for column, (j, key, value) in usage.items():
                row[column] = value
                fields[column] = f"{common.path('response_outputs', j, 'response')} usage.{key}"
    if error:
        row["error"] = error
    elif not kept:
        row["error"] = "no response with text"
    if kept and start_ok:
        first, last = kept[0], kept[-1]
        row["latency_s"] = (stamps[last] - start) / 1e9
        fields["latency_s"] = f"{common.path('response_timestamps', last)} - timestamp"
        if _streamed(record.get("request_inputs"), openai):
            row["ttft_s"] = (stamps[first] - start) / 1e9
            fields["ttft_s"] = f"{common.path('response_timestamps', first)} - timestamp"
    row["field_paths"] = common.paths_json(fields)
    return row


def _streamed(inputs: Any, openai: bool) -> bool:
    """Whether the request asked for a streamed answer: `"stream": true` in its OpenAI payload,
    or a `stream` input of true (Triton). Without it, the first response is the whole answer."""
    if not isinstance(inputs, dict):
        return False
    if openai:
        payload = inputs.get("payload")
        if isinstance(payload, str):
            try:
                payload = json.loads(payload)
            except json.JSONDecodeError:
                return False
        return isinstance(payload, dict) and payload.get("stream") is True
    stream = inputs.get("stream")
    return stream is True or stream == [True]


def _events(output: Any) -> list[str]:
    response = output.get("response") if isinstance(output, dict) else None
    if not isinstance(response, str):
        return []
    return [e.strip() for e in response.strip().split("\n\n") if e.strip()]


def _event_json(event: str) -> Any:
    if event.startswith((":", "event:", "id:", "retry:")):
        return None
    body = event[len("data:"):].strip() if event.startswith("data:") else event
    if not body or body == "[DONE]":
        return None
    try:
        return json.loads(body)
    except json.JSONDecodeError:
        return None


def _openai_text(output: Any) -> tuple[bool, str | None]:
    """(whether the response carries text, the error event it holds), as genai-perf's
    llm_profile_data_parser decides it: SSE events split on blank lines, comments and non-data
    events ignored, `[DONE]` empty, the text of chat.completion (message.content),
    chat.completion.chunk (delta.content), text_completion or no object (text), generate
    (text_output) and Hugging Face (generated_text) answers."""
    has_text = False
    for event in _events(output):
        if event.startswith("event:") and "error" in event.lower():
            return False, f"error event: {event[:200]}"
        has_text = has_text or bool(_text_of(_event_json(event)))
    return has_text, None


def _text_of(data: Any) -> str:
    if isinstance(data, list):
        first = data[0] if data else None
        return str(first.get("generated_text") or "") if isinstance(first, dict) else ""
    if not isinstance(data, dict):
        return ""
    if "text_output" in data:
        return str(data.get("text_output") or "")
    choices = data.get("choices")
    choice = choices[0] if isinstance(choices, list) and choices and isinstance(choices[0], dict) else {}
    kind = data.get("object")
    if kind == "chat.completion":
        message = choice.get("message")
        return str(message.get("content") or "") if isinstance(message, dict) else ""
    if kind == "chat.completion.chunk":
        delta = choice.get("delta")
        return str(delta.get("content") or "") if isinstance(delta, dict) else ""
    return str(choice.get("text") or "")


def _usage(outputs: list) -> dict[str, tuple[int, str, int]]:
    """The server's token counts where a response carries `usage` (the last one that does)."""
    for j in range(len(outputs) - 1, -1, -1):
        for event in reversed(_events(outputs[j])):
            data = _event_json(event)
            usage = data.get("usage") if isinstance(data, dict) else None
            if not isinstance(usage, dict):
                continue
            found = {}
            for column, key in (("output_tokens", "completion_tokens"), ("input_tokens", "prompt_tokens")):
                value = usage.get(key)
                if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
                    found[column] = (j, key, value)
            if found:
                return found
    return {}
