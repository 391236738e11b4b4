"""OpenTelemetry spans in and out: OTLP/JSON with GenAI attributes.

**The file.** OTLP/JSON is the JSON encoding of ``ExportTraceServiceRequest`` (OpenTelemetry
protocol specification, "JSON Protobuf Encoding": ``resourceSpans[].scopeSpans[].spans[]``, ids
as hex strings, 64-bit integers as decimal strings, attributes as ``{"key", "value": AnyValue}``).
A file holds one such object, or one per line (JSON Lines, as the OpenTelemetry Collector's file
exporter writes). Ids may also be base64 (what protobuf's ``json_format`` writes for ``bytes``
fields), enums their names (``"STATUS_CODE_ERROR"``).

**Import** (:func:`import_otlp`). Each span becomes an Auto span, read by
:mod:`auto.interchange.genai` (the GenAI semantic conventions, current and previous forms, and
OpenInference):

* ``llm`` — a model call (``gen_ai.operation.name`` ``chat`` / ``text_completion`` /
  ``generate_content``, or OpenInference kind ``LLM``); its input is the request body the recorder
  writes, its output ``{"content", "finish_reason", "tool_calls", "refusal"}``. A chat completion
  is imported under the recorder's span name :data:`MODEL_CALL_SPAN` (its own name kept as
  ``auto.otlp.span_name``), so site discovery finds it as it finds a proxied call: the same
  request gives the same site however the instrumentation named the span;
* ``tool`` — ``execute_tool`` or OpenInference ``TOOL`` (input ``{"name", "arguments"}``);
* ``task`` — ``invoke_agent`` (task ``gen_ai.agent.name``), input ``{"messages": […]}``;
* a span marked ``auto.tier = 1``, or whose system fingerprint is ``auto-gen<N>`` (a tier-1
  answer Auto exported, with or without its ``auto.*`` attributes) is imported under
  :data:`auto.store.TIER1_SPAN`, never as a model call: an artifact's answers are not its witnesses;
* spans exported by Auto (:func:`export_otlp`) carry ``auto.*`` attributes and come back exactly
  (same content, same digests: the span digest travels as ``auto.span_digest`` and is checked);
* any other span is skipped (counted). A file of which no span can be imported is refused.

The task of a model call is ``auto.task``, else ``gen_ai.agent.name``, else its nearest
``invoke_agent`` ancestor's. The file is read and checked completely before anything is written
(:func:`load_otlp`, then :func:`write_otlp`); a bad record fails the import with one line naming
it (file, line, path of the span, span id), and nothing is written.

**Export** (:func:`export_otlp`): every span of the store (tier-1 answers the proxy recorded
too: a ``chat {model}`` span like a forwarded call's, with ``auto.tier = 1``,
``auto.generation`` and ``auto.artifact_id``, so an observability stack sees the compiled path), one ``ExportTraceServiceRequest`` per
trace batch per line, with ``gen_ai.*`` attributes for other tools and ``auto.*`` attributes
(``auto.kind``, ``auto.task``, ``auto.site``, ``auto.input``, ``auto.output``, ``auto.error``,
``auto.attributes`` as canonical JSON, ``auto.span_digest``) for a lossless round trip.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from auto.jsonlimits import json_depth_ok
from auto.canonical import canonical_json
from auto.errors import IngestError
from auto.interchange import genai
from auto.interchange.parquet import InterchangeError
from auto.record.template import site as site_of_call
from auto.record.template import template_digest
from auto.store import TIER1_SPAN

MODEL_CALL_SPAN = "chat.completions"
"""The span name a chat-completion span is imported under (the recorder's and the proxy's), so
a call is one site however its instrumentation named the span (``openai.chat``, ``chat {model}``,
``ChatCompletion``); the span's own name is kept as the attribute ``auto.otlp.span_name``."""

AUTO_KEYS = ("auto.kind", "auto.task", "auto.site", "auto.input", "auto.output", "auto.error", "auto.attributes",
             "auto.span_digest", "auto.span_name")
"""Attributes :func:`export_otlp` adds for a lossless round trip."""

SPAN_KIND = {"llm": 3, "tool": 1, "task": 1}
"""OTLP ``SpanKind`` per Auto kind (3 = CLIENT, 1 = INTERNAL)."""

BATCH = 2000
"""Spans ingested per transaction on import."""


# ----------------------------------------------------------------------------- AnyValue



OTLP_MAX_DEPTH = 128
"""Deepest nesting of arrays and objects read from an OTLP/JSON document (file or request body):
an ExportTraceServiceRequest nests about 12 levels to a span attribute's value (resourceSpans, a
resource span, scopeSpans, a scope span, spans, a span, attributes, an attribute, its AnyValue),
so 128 leaves room for nested array and key-value list values while staying far below the depth
at which Python's JSON decoder fails (about 1,000)."""

def any_value(v: Any) -> dict:
    """A JSON value as an OTLP ``AnyValue`` (ints as decimal strings, objects as ``kvlistValue``)."""
    if v is None:
        return {}
    if isinstance(v, bool):
        return {"boolValue": v}
    if isinstance(v, int):
        return {"intValue": str(v)}
    if isinstance(v, float):
        return {"doubleValue": v}
    if isinstance(v, str):
        return {"stringValue": v}
    if isinstance(v, list):
        return {"arrayValue": {"values": [any_value(x) for x in v]}}
    if isinstance(v, dict):
        return {"kvlistValue": {"values": [{"key": k, "value": any_value(x)} for k, x in v.items()]}}
    return {"stringValue": str(v)}


def from_any_value(v: Any, where: str) -> Any:
    """An OTLP ``AnyValue`` as a JSON value.

    Raises:
        InterchangeError: not an AnyValue object.
    """
    if not isinstance(v, dict):
        raise InterchangeError(f"{where}: attribute value is not an AnyValue object")
    if not v:
        return None
    if "stringValue" in v:
        return v["stringValue"]
    if "boolValue" in v:
        return bool(v["boolValue"])
    if "intValue" in v:
        try:
            return int(v["intValue"])
        except (TypeError, ValueError):
            raise InterchangeError(f"{where}: intValue {v['intValue']!r} is not an integer") from None
    if "doubleValue" in v:
        x = v["doubleValue"]
        if isinstance(x, str):  # NaN / Infinity as strings: not JSON
            raise InterchangeError(f"{where}: doubleValue {x!r} is not a finite number")
        if not isinstance(x, (int, float)):
            raise InterchangeError(f"{where}: doubleValue {x!r:.40} is not a number")
        return float(x)
    if "arrayValue" in v:
        values = _array(_object(v["arrayValue"], f"{where} arrayValue").get("values"), f"{where} arrayValue.values")
        return [from_any_value(x, where) for x in values]
    if "kvlistValue" in v:
        return attributes_of(_array(_object(v["kvlistValue"], f"{where} kvlistValue").get("values"),
                                    f"{where} kvlistValue.values"), where)
    if "bytesValue" in v:
        return v["bytesValue"]
    raise InterchangeError(f"{where}: unknown AnyValue {sorted(v)}")


def attributes_of(kvs: Any, where: str) -> dict:
    """OTLP ``KeyValue`` list -> dict (a later key wins)."""
    if not isinstance(kvs, list):
        raise InterchangeError(f"{where}: attributes must be a list of KeyValue")
    out = {}
    for kv in kvs:
        if not isinstance(kv, dict) or not isinstance(kv.get("key"), str):
            raise InterchangeError(f"{where}: an attribute without a string key")
        out[kv["key"]] = from_any_value(kv.get("value", {}), f"{where} attribute {kv['key']!r}")
    return out


# ----------------------------------------------------------------------------- reading


def read_requests(path: str | os.PathLike) -> Iterator[tuple[str, dict]]:
    """``(where, ExportTraceServiceRequest)`` of an OTLP/JSON file: the whole file as one JSON
    object, else one object per non-empty line.

    Raises:
        InterchangeError: unreadable, not JSON (truncated?), or not an object with
            ``resourceSpans`` — naming the file and line.
    """
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InterchangeError(f"{p}: cannot read: {exc}") from None
    raw = text.encode("utf-8", "surrogatepass")
    if not json_depth_ok(raw, OTLP_MAX_DEPTH):
        raise InterchangeError(f"{p}: nests arrays/objects deeper than {OTLP_MAX_DEPTH} levels "
                               "(not an OTLP/JSON file this tool can read)")
    try:
        whole = json.loads(text)
    except ValueError:
        whole = None
    if isinstance(whole, dict):
        docs: Iterable[tuple[str, Any]] = [(f"{p}", whole)]
    else:
        def lines() -> Iterator[tuple[str, Any]]:
            for n, line in enumerate(text.splitlines(), 1):
                if not line.strip():
                    continue
                try:
                    yield f"{p} line {n}", json.loads(line)
                except ValueError as exc:
                    raise InterchangeError(f"{p} line {n}: not JSON (truncated?): {exc}") from None
        docs = lines()
    for where, doc in docs:
        if not isinstance(doc, dict) or not isinstance(doc.get("resourceSpans"), list):
            hint = (" (a trace file of the reference Auto SDK? import it with --format auto-v0)"
                    if isinstance(doc, dict) and doc.get("v") == 0 and doc.get("t") in ("trace", "span") else "")
            raise InterchangeError(f"{where}: not an OTLP/JSON ExportTraceServiceRequest (no resourceSpans list){hint}")
        yield where, doc


def _hex(value: Any, n: int, what: str, where: str, nullable: bool = False) -> str | None:
    """A trace or span id as lower-case hex: given as ``n`` hex digits (OTLP/JSON, the
    Collector's file exporter) or as the base64 of its ``n // 2`` bytes (what protobuf's
    ``json_format`` writes for a ``bytes`` field)."""
    if value in (None, "") and nullable:
        return None
    if isinstance(value, str) and len(value) != n and len(value) == 4 * -(-(n // 2) // 3):
        try:
            raw = base64.b64decode(value, validate=True)
        except (ValueError, binascii.Error):
            raw = b""
        if len(raw) == n // 2:
            value = raw.hex()
    if not isinstance(value, str) or len(value) != n or any(c not in "0123456789abcdefABCDEF" for c in value):
        raise InterchangeError(f"{where}: {what} must be {n} hex digits (or base64 of {n // 2} bytes), "
                               f"got {value!r:.40}")
    if set(value) == {"0"}:
        if nullable:
            return None
        raise InterchangeError(f"{where}: {what} is all zeros (invalid in OTLP)")
    return value.lower()


def _ns(value: Any, what: str, where: str) -> int:
    try:
        n = int(value)
    except (TypeError, ValueError):
        raise InterchangeError(f"{where}: {what} must be an integer (ns), got {value!r:.40}") from None
    if n < 0:
        raise InterchangeError(f"{where}: {what} is negative")
    return n


def _object(value: Any, where: str) -> dict:
    """``value`` when it is a JSON object, ``{}`` when absent (null); anything else is a malformed
    record (OTLP/JSON: resources, scopes and status are messages)."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InterchangeError(f"{where}: not an object (got {type(value).__name__})")
    return value


def _array(value: Any, where: str) -> list:
    """``value`` when it is a JSON array, ``[]`` when absent (null); anything else is a malformed
    record (OTLP/JSON: repeated fields are arrays)."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise InterchangeError(f"{where}: not an array (got {type(value).__name__})")
    return value


def raw_spans(path: str | os.PathLike) -> Iterator[dict]:
    """Every span of an OTLP/JSON file (:func:`doc_spans` of each of its requests).

    Raises:
        InterchangeError: a malformed record (named).
    """
    for where, doc in read_requests(path):
        yield from doc_spans(doc, where)


def doc_spans(doc: Any, where: str) -> Iterator[dict]:
    """Every span of one OTLP/JSON ``ExportTraceServiceRequest`` (``where`` names it in errors)
    as ``{"where", "trace_id", "span_id", "parent_span_id", "name", "started_ns", "ended_ns",
    "status", "status_message", "attributes", "events"}``.

    Raises:
        InterchangeError: a malformed record (named).
    """
    if not isinstance(doc, dict) or not isinstance(doc.get("resourceSpans"), list):
        raise InterchangeError(f"{where}: not an OTLP/JSON ExportTraceServiceRequest (no resourceSpans list)")
    for i, rs in enumerate(doc["resourceSpans"]):
        rs = _object(rs, f"{where}: resourceSpans[{i}]")
        scopes = rs.get("scopeSpans") or rs.get("instrumentationLibrarySpans")
        for j, ss in enumerate(_array(scopes, f"{where}: resourceSpans[{i}].scopeSpans")):
            ss = _object(ss, f"{where}: resourceSpans[{i}].scopeSpans[{j}]")
            for k, sp in enumerate(_array(ss.get("spans"), f"{where}: resourceSpans[{i}].scopeSpans[{j}].spans")):
                w = f"{where}: resourceSpans[{i}].scopeSpans[{j}].spans[{k}]"
                if not isinstance(sp, dict):
                    raise InterchangeError(f"{w}: not an object")
                sid = sp.get("spanId")
                w = f"{w} (span {sid})" if isinstance(sid, str) else w
                for key in ("traceId", "spanId", "name", "startTimeUnixNano"):
                    if key not in sp:
                        raise InterchangeError(f"{w}: missing {key}")
                status = _object(sp.get("status"), f"{w}: status")
                code = status.get("code", 0)
                events = []
                for e in _array(sp.get("events"), f"{w}: events"):
                    if not isinstance(e, dict):
                        raise InterchangeError(f"{w}: an event is not an object")
                    events.append({"name": e.get("name"), "attributes": attributes_of(e.get("attributes") or [], w)})
                if not isinstance(sp["name"], str) or not sp["name"]:
                    raise InterchangeError(f"{w}: name must be a non-empty string")
                yield {
                    "where": w,
                    "trace_id": _hex(sp["traceId"], 32, "traceId", w),
                    "span_id": _hex(sp["spanId"], 16, "spanId", w),
                    "parent_span_id": _hex(sp.get("parentSpanId"), 16, "parentSpanId", w, nullable=True),
                    "name": sp["name"],
                    "started_ns": _ns(sp["startTimeUnixNano"], "startTimeUnixNano", w),
                    "ended_ns": _ns(sp.get("endTimeUnixNano", sp["startTimeUnixNano"]), "endTimeUnixNano", w),
                    "status": "error" if code in (2, "STATUS_CODE_ERROR") else "ok",
                    "status_message": status.get("message"),
                    "attributes": attributes_of(sp.get("attributes") or [], w),
                    "events": events,
                }


# ----------------------------------------------------------------------------- GenAI mapping


def _auto_json(attrs: dict, key: str, where: str) -> Any:
    try:
        return json.loads(attrs[key])
    except (TypeError, ValueError):
        raise InterchangeError(f"{where}: {key} is not JSON text") from None


def to_auto_spans(raws: list[dict]) -> tuple[list[dict], int]:
    """``(Auto spans, skipped)`` from :func:`raw_spans` records (all of one file, so tasks
    and templates can follow parents).

    Raises:
        InterchangeError: a span exported by Auto whose ``auto.*`` attributes are not JSON.
    """
    by_id = {r["span_id"]: r for r in raws}

    def kind_of(r: dict) -> str | None:
        a = r["attributes"]
        if a.get("auto.kind") in ("task", "llm", "tool"):
            return a["auto.kind"]
        return genai.span_kind(a)

    def agent_ancestor(r: dict) -> dict | None:
        seen = set()
        p = by_id.get(r["parent_span_id"]) if r["parent_span_id"] else None
        while p is not None and p["span_id"] not in seen:
            seen.add(p["span_id"])
            if kind_of(p) == "task":
                return p
            p = by_id.get(p["parent_span_id"]) if p["parent_span_id"] else None
        return None

    out, skipped = [], 0
    for r in raws:
        kind = kind_of(r)
        if kind is None:
            skipped += 1
            continue
        a, w = r["attributes"], r["where"]
        error = None
        if r["status"] == "error":
            error = {"type": str(a.get("error.type") or "otlp.error"), "message": str(r["status_message"] or "")}
        if "auto.input" in a:  # exported by Auto: exact content back
            span = {"input": _auto_json(a, "auto.input", w), "output": _auto_json(a, "auto.output", w),
                    "error": _auto_json(a, "auto.error", w) if "auto.error" in a else error,
                    "attributes": _auto_json(a, "auto.attributes", w) if "auto.attributes" in a else
                    {k: v for k, v in a.items() if k not in AUTO_KEYS},
                    "task": a.get("auto.task"), "site": a.get("auto.site")}
            if isinstance(a.get("auto.span_name"), str):
                r = {**r, "name": a["auto.span_name"]}
        else:
            anc = agent_ancestor(r)
            task = a.get("auto.task") or a.get("gen_ai.agent.name") or \
                (anc["attributes"].get("gen_ai.agent.name") or anc["name"] if anc else None)
            attrs = {**a, "auto.source": "otlp"}
            if kind == "llm":
                body = genai.request_body(a, r["events"])
                task_input = {}
                if anc is not None:
                    task_input = {"messages": genai.task_messages(anc["attributes"], anc["events"])}
                name = r["name"]
                if genai.is_tier1(a):  # a tier-1 answer an artifact gave: never a witness
                    name = TIER1_SPAN
                elif genai.is_chat(a) and body["messages"]:
                    name = MODEL_CALL_SPAN  # the recorder's and the proxy's name: one site however named
                    attrs["auto.otlp.span_name"] = r["name"]
                r = {**r, "name": name}
                span = {"input": body, "output": None if error else genai.response(a, r["events"]), "error": error,
                        "attributes": attrs, "task": task,
                        "site": site_of_call(task, name, template_digest(body["messages"], task_input))}
            elif kind == "tool":
                tin, tout = genai.tool_call(a, r["name"])
                span = {"input": tin, "output": None if error else tout,
                        "error": error, "attributes": attrs, "task": task, "site": None}
            else:
                task = a.get("gen_ai.agent.name") or r["name"]
                span = {"input": {"messages": genai.task_messages(a, r["events"])},
                        "output": None if error else (genai.response(a, r["events"]) or {}).get("content"),
                        "error": error, "attributes": attrs, "task": task, "site": None}
        if kind == "task" and not span.get("task"):
            span["task"] = r["name"]
        full = {"trace_id": r["trace_id"], "span_id": r["span_id"], "parent_span_id": r["parent_span_id"],
                "name": r["name"], "kind": kind, "started_ns": r["started_ns"], "ended_ns": r["ended_ns"],
                "status": r["status"], **span}
        if isinstance(a.get("auto.span_digest"), str):
            full["digest"] = a["auto.span_digest"]
        full["_where"] = w
        out.append(full)
    return out, skipped


def traces_of(spans: list[dict]) -> list[dict]:
    """One trace row per trace id: named after its root span (no parent in the file), spanning
    its spans' times, ``error`` when the root failed."""
    by_trace: dict[str, list[dict]] = defaultdict(list)
    for s in spans:
        by_trace[s["trace_id"]].append(s)
    out = []
    for tid, ss in by_trace.items():
        ids = {s["span_id"] for s in ss}
        roots = [s for s in ss if not s["parent_span_id"] or s["parent_span_id"] not in ids] or ss
        root = min(roots, key=lambda s: (s["started_ns"], s["span_id"]))
        out.append({"trace_id": tid, "name": root["name"], "started_ns": min(s["started_ns"] for s in ss),
                    "ended_ns": max(s["ended_ns"] for s in ss), "status": root["status"],
                    "attributes": {"auto.source": "otlp"}})
    return out


@dataclass
class OtlpBatch:
    """Spans read from OTLP and checked, ready to be written (:func:`load_otlp`, :func:`write_otlp`).

    Attributes:
        spans: Auto spans (redacted, each passed the store's checks), in file order.
        traces: one trace row per trace id (:func:`traces_of`).
        skipped: spans of no convention Auto reads (HTTP spans and the like).
        where: what was read (a file name, ``POST /v1/traces``), for messages.
        without_messages: model-call spans that recorded no messages (an instrumentation not
            told to capture content: :data:`CONTENT_HINT`). They are not in ``spans``: a call
            without its input and output is no witness (kept, one request with no messages
            would read as one input answered the same way every time).
    """

    spans: list[dict]
    traces: list[dict]
    skipped: int
    where: str
    without_messages: int = 0


CONTENT_HINT = ("an instrumentation records message content only when told to: for "
                "opentelemetry-instrumentation-openai-v2 set OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental "
                "and OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=SPAN_ONLY; for OpenLLMetry "
                "TRACELOOP_TRACE_CONTENT=true; for OpenInference OPENINFERENCE_HIDE_INPUTS/OUTPUTS unset")
"""What a user is told when model-call spans carry no messages (each package's documented switch)."""


def without_messages_line(n: int) -> str:
    """The one line a user reads when ``n`` model-call spans carry no message content."""
    return (f"{n} model-call span(s) carry no message content: a call without its input and output cannot become "
            f"a witness, so they were not kept; {CONTENT_HINT}")


def prepare(raws: list[dict], where: str, *, allow_empty: bool = False) -> OtlpBatch:
    """Map, redact and check :func:`doc_spans` records (see :func:`import_otlp`).

    Raises:
        InterchangeError: a malformed record; or nothing in them could be imported (no span of
            the GenAI conventions, OpenInference or Auto) unless ``allow_empty``.
        IngestError: a span does not pass the store's checks (named by its record).
    """
    spans, skipped = to_auto_spans(raws)
    if not spans and not allow_empty:
        raise InterchangeError(
            f"{where}: nothing to import: {skipped} span(s), none a model call, tool call or agent span of the "
            "GenAI semantic conventions (gen_ai.operation.name), OpenInference (openinference.span.kind) or Auto")
    batch = checked_batch(spans, skipped, where)
    if not batch.spans and not allow_empty:
        raise InterchangeError(f"{where}: nothing to import: {without_messages_line(batch.without_messages)}")
    return batch


def checked_batch(spans: list[dict], skipped: int, where: str) -> OtlpBatch:
    """Auto spans mapped from another format (each with ``_where`` naming its record), redacted
    as the recorder redacts and checked by the store's rules, with one trace row per trace id
    (:func:`traces_of`) — nothing written yet (:func:`write_otlp` writes it).

    Raises:
        IngestError: a span does not pass the store's checks (named by its record).
    """
    from auto.record.redact import Redactor
    from auto.store.normalize import normalize_span  # check every span before writing any

    redactor = Redactor()  # foreign spans are redacted as recorded ones are, before any check
    spans = [{**redactor.redact_span({k: v for k, v in s.items() if k != "_where"}), "_where": s["_where"]}
             for s in spans]
    for s in spans:
        try:
            normalize_span({k: v for k, v in s.items() if k != "_where"})
        except IngestError as exc:
            raise IngestError(f"{s['_where']}: {exc}") from None
    kept = [s for s in spans if not _without_messages(s)]
    return OtlpBatch([{k: v for k, v in s.items() if k != "_where"} for s in kept], traces_of(kept), skipped, where,
                     len(spans) - len(kept))


def _without_messages(span: dict) -> bool:
    """A model-call span that recorded no messages (its request's ``messages`` is empty)."""
    return (span["kind"] == "llm" and isinstance(span.get("input"), dict)
            and span["input"].get("messages") == [])


def load_otlp(path: str | os.PathLike) -> OtlpBatch:
    """Read, map and check every span of an OTLP/JSON file, writing nothing (see :func:`import_otlp`).

    Raises:
        InterchangeError, IngestError: as :func:`import_otlp`.
    """
    return prepare(list(raw_spans(path)), str(path))


def write_otlp(store: Any, batch: OtlpBatch, progress: Callable[[str], None] | None = None) -> dict:
    """Write a checked :class:`OtlpBatch` into ``store``: spans in batches of :data:`BATCH` inside
    :meth:`auto.store.Store.bulk_load` (writing the same spans again changes nothing: ids and
    contents are equal), then the trace rows not stored yet.

    Returns:
        ``{"spans": inserted, "traces": inserted, "unchanged": n, "skipped": spans of no convention,
        "without_messages": model calls that recorded no messages}``.

    Raises:
        IngestError: a span collides with a stored span of different content.
    """
    say = progress or (lambda _m: None)
    totals = {"spans": 0, "traces": 0, "unchanged": 0, "skipped": batch.skipped,
              "without_messages": batch.without_messages}
    clean = batch.spans
    with store.bulk_load():  # many batches: a large page cache, fewer WAL checkpoints
        for k in range(0, len(clean), BATCH):
            r = store.ingest(clean[k:k + BATCH])
            totals["spans"] += r["spans"]
            totals["unchanged"] += r["unchanged"]
            say(f"  imported {min(k + BATCH, len(clean))} of {len(clean)} spans")
    ids = [t["trace_id"] for t in batch.traces]
    existing = {t["trace_id"] for t in store.traces()} if ids else set()
    new_traces = [t for t in batch.traces if t["trace_id"] not in existing]
    if new_traces:
        totals["traces"] = store.ingest([], new_traces)["traces"]
    return totals


def import_otlp(store: Any, path: str | os.PathLike, progress: Callable[[str], None] | None = None) -> dict:
    """Import the GenAI spans of an OTLP/JSON file into ``store``.

    The whole file is parsed, mapped (:mod:`auto.interchange.genai`: the GenAI semantic
    conventions in their current and previous forms, and OpenInference) and checked first
    (:func:`load_otlp`; nothing is written when a record is bad or when nothing in the file can be
    imported), then written (:func:`write_otlp`). Secrets are redacted first, as the recorder
    redacts them (``auto.record.redact.Redactor``: well-known key formats, the environment's
    secret values), so a foreign span never stores one.

    Returns:
        ``{"spans": inserted, "traces": inserted, "unchanged": n, "skipped": non-GenAI spans,
        "without_messages": model calls that recorded no messages}``.

    Raises:
        InterchangeError: a malformed or truncated record (one line naming it), or no span of a
            convention Auto reads.
        IngestError: a span does not pass the store's checks (named by its record), or collides
            with a stored span of different content.
    """
    return write_otlp(store, load_otlp(path), progress)


# ----------------------------------------------------------------------------- export


def _json_value(text: Any) -> Any:
    if isinstance(text, str):
        try:
            return json.loads(text)
        except ValueError:
            return text
    return text


def _tool_call_parts(calls: Any) -> list[dict]:
    """Chat-completion tool calls as semantic-conventions ``tool_call`` parts."""
    return [{"type": "tool_call", "id": c.get("id"), "name": (c.get("function") or {}).get("name"),
             "arguments": _json_value((c.get("function") or {}).get("arguments"))}
            for c in calls or [] if isinstance(c, dict)]


def input_messages(msgs: list) -> tuple[list[dict], list[dict]]:
    """``(system instruction parts, input messages)`` of a chat-completion request's messages in
    the GenAI semantic conventions' form (≥ 1.37: ``gen_ai.system_instructions`` and
    ``gen_ai.input.messages``; every message ``{"role", "parts"}``: ``text`` parts, an assistant's
    ``tool_call`` parts, a tool message's ``tool_call_response`` part)."""
    system: list[dict] = []
    out: list[dict] = []
    for m in msgs:
        if not isinstance(m, dict):
            continue
        role, content = m.get("role"), m.get("content")
        if isinstance(content, str):
            parts: list[dict] = [{"type": "text", "content": content}]
        elif isinstance(content, list):
            parts = [{"type": "text", "content": p.get("text")} if isinstance(p, dict) and p.get("type") == "text"
                     else p for p in content]
        else:
            parts = []
        if role == "tool":
            out.append({"role": "tool", "parts": [{"type": "tool_call_response", "id": m.get("tool_call_id"),
                                                   "response": content}]})
            continue
        parts += _tool_call_parts(m.get("tool_calls"))
        if role in ("system", "developer") and not out:
            system += parts
            continue
        out.append({"role": role, "parts": parts})
    return system, out


def _model_of(s: dict) -> Any:
    a = s.get("attributes") or {}
    inp = s.get("input") if isinstance(s.get("input"), dict) else {}
    return a.get("gen_ai.request.model") or inp.get("model")


def is_chat_span(s: dict) -> bool:
    """Whether an Auto span is a chat completion (a model call with a ``messages`` list, not
    opaque): only those are exported with ``gen_ai.operation.name`` ``chat``."""
    a = s.get("attributes") or {}
    return (s["kind"] == "llm" and not a.get("auto.opaque") and isinstance(s.get("input"), dict)
            and isinstance(s["input"].get("messages"), list))


RENAMED_ATTRIBUTES = {
    "gen_ai.system": "gen_ai.provider.name",
    "gen_ai.openai.request.service_tier": "openai.request.service_tier",
    "gen_ai.openai.response.service_tier": "openai.response.service_tier",
    "gen_ai.openai.response.system_fingerprint": "openai.response.system_fingerprint",
}
"""Deprecated attribute names the recorder writes, and the current names the export writes for
them (OpenTelemetry semantic conventions: each deprecated name is "Replaced by" the other)."""


def otlp_span(s: dict) -> dict:
    """One Auto span (a dict from :meth:`auto.store.Store.iter_spans`) as an OTLP/JSON span.

    The GenAI semantic conventions (≥ 1.37) for other tools: a chat completion is named ``chat
    {model}`` with ``gen_ai.operation.name`` ``chat``, ``gen_ai.provider.name`` (the recorder's
    deprecated names are renamed: :data:`RENAMED_ATTRIBUTES`), the request's ``gen_ai.request.*`` parameters and
    ``gen_ai.tool.definitions``, ``gen_ai.system_instructions``,
    ``gen_ai.input.messages`` and ``gen_ai.output.messages`` (tool calls as ``tool_call`` parts,
    tool results as ``tool_call_response`` parts); a tool span is ``execute_tool {name}``, a task
    ``invoke_agent {task}``; a model-call span Auto does not understand (``auto.opaque``: ``GET
    /v1/models``) keeps its name and gets no operation. The ``auto.*`` attributes (the span's
    own name as ``auto.span_name``) bring the span back exactly (:func:`import_otlp`).
    """
    a = dict(s.get("attributes") or {})
    attrs: dict[str, Any] = dict(a)
    for old, new in RENAMED_ATTRIBUTES.items():
        if old in attrs:
            attrs.setdefault(new, attrs.pop(old))
    name = s["name"]
    if s["kind"] == "llm":
        if is_chat_span(s):
            attrs["gen_ai.operation.name"] = "chat"
            model = _model_of(s)
            name = f"chat {model}" if model else "chat"
            body = s["input"]
            for attr, field in genai.REQUEST_PARAMS.items():  # the request's parameters, as attributes
                if body.get(field) is not None and attr not in attrs:
                    v = body[field]
                    attrs[attr] = [v] if field == "stop" and isinstance(v, str) else v
            if body.get("max_completion_tokens") is not None:
                attrs.setdefault("gen_ai.request.max_tokens", body["max_completion_tokens"])
            if isinstance(body.get("tools"), list) and body["tools"]:
                attrs["gen_ai.tool.definitions"] = canonical_json([
                    {"type": t.get("type"), **t["function"]} if isinstance(t, dict) and isinstance(t.get("function"), dict)
                    else t for t in body["tools"]])
            system, msgs = input_messages(body["messages"])
            if system:
                attrs["gen_ai.system_instructions"] = canonical_json(system)
            attrs["gen_ai.input.messages"] = canonical_json(msgs)
            out = s.get("output")
            if isinstance(out, dict):
                parts = [{"type": "text", "content": out["content"]}] if out.get("content") is not None else []
                parts += _tool_call_parts(out.get("tool_calls"))
                attrs["gen_ai.output.messages"] = canonical_json([{
                    "role": "assistant", "parts": parts, "finish_reason": out.get("finish_reason")}])
        else:
            attrs.pop("gen_ai.operation.name", None)
    elif s["kind"] == "tool":
        attrs["gen_ai.operation.name"] = "execute_tool"
        tool = (s.get("input") or {}).get("name") if isinstance(s.get("input"), dict) else None
        if tool:
            attrs.setdefault("gen_ai.tool.name", tool)
            name = f"execute_tool {tool}"
    else:
        attrs["gen_ai.operation.name"] = "invoke_agent"
        if s.get("task"):
            attrs.setdefault("gen_ai.agent.name", s["task"])
            name = f"invoke_agent {s['task']}"
    attrs.update({
        "auto.kind": s["kind"], "auto.input": canonical_json(s.get("input")), "auto.output": canonical_json(s.get("output")),
        "auto.attributes": canonical_json(a), "auto.span_digest": s["digest"], "auto.span_name": s["name"],
    })
    if s.get("task") is not None:
        attrs["auto.task"] = s["task"]
    if s.get("site") is not None:
        attrs["auto.site"] = s["site"]
    if s.get("error") is not None:
        attrs["auto.error"] = canonical_json(s["error"])
    span = {"traceId": s["trace_id"], "spanId": s["span_id"], "name": name, "kind": SPAN_KIND[s["kind"]],
            "startTimeUnixNano": str(s["started_ns"]), "endTimeUnixNano": str(s["ended_ns"]),
            "attributes": [{"key": k, "value": any_value(v)} for k, v in attrs.items() if v is not None],
            "status": {"code": 2, "message": (s.get("error") or {}).get("message", "")} if s["status"] == "error"
            else {"code": 0}}
    if s.get("parent_span_id"):
        span["parentSpanId"] = s["parent_span_id"]
    return span


def export_otlp(store: Any, path: str | os.PathLike, batch: int = 1000) -> dict:
    """Write every span of ``store`` to ``path`` as OTLP/JSON Lines (one
    ``ExportTraceServiceRequest`` of up to ``batch`` spans per line), streamed; the file is
    written under a temporary name and renamed, so a reader never sees half of it, and removed
    when the export fails.

    Returns:
        ``{"spans", "lines", "bytes", "file"}``.

    Raises:
        OSError: ``path`` cannot be written (naming ``path``).
    """
    p = Path(path)
    tmp = p.with_name(p.name + ".tmp")
    n = lines = 0
    resource = {"attributes": [{"key": "service.name", "value": {"stringValue": "auto"}}]}
    scope = {"name": "auto", "version": "1"}

    def write(f: Any, spans: list[dict]) -> None:
        doc = {"resourceSpans": [{"resource": resource, "scopeSpans": [{"scope": scope, "spans": spans}]}]}
        f.write(json.dumps(doc, ensure_ascii=False, separators=(",", ":")) + "\n")

    try:
        with open(tmp, "w", encoding="utf-8") as f:
            buf: list[dict] = []
            for s in store.iter_spans():
                buf.append(otlp_span(s))
                n += 1
                if len(buf) >= batch:
                    write(f, buf)
                    lines += 1
                    buf = []
            if buf:
                write(f, buf)
                lines += 1
        tmp.replace(p)
    except BaseException as e:
        tmp.unlink(missing_ok=True)  # nothing half-written is left
        if isinstance(e, OSError) and e.filename == str(tmp):  # the user's path, not the temporary name
            raise OSError(e.errno, e.strerror, str(p)) from None
        raise
    return {"spans": n, "lines": lines, "bytes": p.stat().st_size, "file": str(p)}


__all__ = ["CONTENT_HINT", "MODEL_CALL_SPAN", "without_messages_line", "OtlpBatch", "any_value", "checked_batch", "doc_spans", "export_otlp", "from_any_value", "import_otlp",
           "load_otlp", "otlp_span", "prepare", "raw_spans", "to_auto_spans", "write_otlp"]
