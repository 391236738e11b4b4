"""Trace files of the published reference system's SDK (``auto-sdk``, trace format v0) in.

**The file** (the reference system's published trace specification, emission format v0): UTF-8
JSON Lines, blank lines allowed. A trace starts with a header line ``{"v": 0, "t": "trace", "trace_id": <32
hex>, "task", "started_at_ms", "sdk", "attrs", "task_input"?}``; then span lines ``{"v": 0, "t":
"span", "trace_id", "span_id": <u64>, "parent_span_id": <u64 or null>, "seq", "kind", "name",
"input", "output", "error": <string or null>, "started_at_ms", "duration_ms", "attrs": {str: str}}``
(written when a span closes, so a parent's line follows its children's; ``seq`` is the order),
and at most one ``{"v": 0, "t": "task_output", "trace_id", "output", "recorded_at_ms"}``. Span
kinds: ``model_call``, ``tool_call``, ``env_read``, ``memory_op``, ``branch`` (effectful) and
``span`` (structure only). One file holds one trace; files appended one after another (a new
header line starts the next trace) are read as several.

**Mapping** (:func:`load_auto_v0`), each trace into Auto spans:

* a trace whose header carries ``task_input`` and which declared a ``task_output`` gets a root
  ``task`` span (task = the header's ``task``; input the task input, an object as it is, any
  other value as ``{"input": value}``; output the task output): the whole run is one witness of
  the task, as the reference system's task-level census counts it. A trace with only one of the
  two has no task span (nothing is invented for the missing half);
* ``model_call`` → an ``llm`` span. A call whose input is a chat-completion request (an object
  with a ``messages`` list: what the reference system's recording proxy writes) is named
  ``chat.completions``, so site discovery finds its model-call site as it finds a call the
  proxy recorded; its output (the assistant text, or a whole ``chat.completion`` body) becomes
  the recorder's output ``{"content", "finish_reason", "tool_calls", "refusal"}``. Any other
  model call keeps its name and its values (the census counts it by task and name);
* ``tool_call`` → a ``tool`` span, input ``{"name", "arguments"}``; ``env_read``, ``memory_op``
  and ``branch`` → ``tool`` spans named ``"<kind> <name>"`` (the census counts each by its
  inputs, as the reference system does; ``env_read`` values were only ever recorded as digests);
* ``span`` (structure) is not imported: its children hang from the nearest imported ancestor.

Ids: the trace id is kept; each span id is the first 16 hex digits of the sha-256 of
``"<trace id>:<span id>"`` (the reference system's span ids are unique only within a trace), so
importing a file twice changes nothing. Times: milliseconds since the epoch, as nanoseconds.
A span's ``error`` makes it ``status = "error"`` with ``{"type": <text before the first colon>,
"message": <the text>}``. Attributes: the span's own (strings), ``auto.source = "auto-v0"``,
``auto.v0.kind``, ``auto.v0.seq``, ``auto.v0.sdk``; the reserved ``cost_usd_micros`` attribute
(decimal micro-dollars) becomes ``auto.cost_usd_micros`` (an integer).

The files are read and checked whole before anything is written (the same checks as the store,
:func:`auto.interchange.otlp.checked_batch`; secrets redacted as the recorder redacts them);
every malformed line is one error naming the file and line, and nothing is written.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any, Iterable

from auto.interchange.otlp import MODEL_CALL_SPAN, OtlpBatch, checked_batch
from auto.interchange.parquet import InterchangeError
from auto.jsonlimits import MAX_JSON_DEPTH, json_depth_ok
from auto.record.completion import assemble_completion
from auto.record.template import site as site_of_call
from auto.record.template import template_digest

FORMAT_VERSION = 0
"""The ``v`` of every line this reader accepts (the reference system's emission format v0)."""

EFFECTFUL = ("model_call", "tool_call", "env_read", "memory_op", "branch")
"""The reference system's effectful span kinds; ``span`` is structure only."""

SPAN_FIELDS = {"v", "t", "trace_id", "span_id", "parent_span_id", "seq", "kind", "name", "input", "output",
               "error", "started_at_ms", "duration_ms", "attrs"}
HEADER_FIELDS = {"v", "t", "trace_id", "task", "started_at_ms", "sdk", "attrs", "task_input"}
OUTPUT_FIELDS = {"v", "t", "trace_id", "output", "recorded_at_ms"}

MS = 1_000_000
"""Nanoseconds per millisecond."""


def _span_id(trace_id: str, span_id: int) -> str:
    return hashlib.sha256(f"{trace_id}:{span_id}".encode()).hexdigest()[:16]


def _int(v: Any, what: str, where: str) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise InterchangeError(f"{where}: {what} must be a non-negative integer, got {v!r:.40}")
    return v


def _lines(path: Path) -> Iterable[tuple[str, dict]]:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InterchangeError(f"{path}: cannot read: {exc}") from None
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        where = f"{path} line {n}"
        if not json_depth_ok(line.encode("utf-8", "surrogatepass")):
            raise InterchangeError(f"{where}: nests arrays/objects deeper than {MAX_JSON_DEPTH} levels")
        try:
            obj = json.loads(line)
        except ValueError as exc:
            raise InterchangeError(f"{where}: not JSON (truncated?): {exc}") from None
        if not isinstance(obj, dict):
            raise InterchangeError(f"{where}: not a JSON object")
        if obj.get("v") != FORMAT_VERSION:
            hint = " (an OTLP/JSON file? import it with --otlp)" if "resourceSpans" in obj else ""
            raise InterchangeError(f"{where}: not an auto-v0 trace line (v is {obj.get('v')!r:.20}, expected 0){hint}")
        yield where, obj


def _output(value: Any) -> Any:
    """A chat model call's recorded output as the recorder's ``{"content", "finish_reason",
    "tool_calls", "refusal"}``: the assistant text, or a whole ``chat.completion`` body."""
    if isinstance(value, dict) and isinstance(value.get("choices"), list):
        return assemble_completion(value)[0]
    if isinstance(value, dict) and ("content" in value or "tool_calls" in value):
        return {"content": value.get("content"), "finish_reason": value.get("finish_reason"),
                "tool_calls": value.get("tool_calls"), "refusal": value.get("refusal")}
    if isinstance(value, str) or value is None:
        return {"content": value, "finish_reason": "stop", "tool_calls": None, "refusal": None}
    return {"content": json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":")),
            "finish_reason": "stop", "tool_calls": None, "refusal": None}


class _Trace:
    def __init__(self, where: str, header: dict) -> None:
        extra = set(header) - HEADER_FIELDS
        if extra:
            raise InterchangeError(f"{where}: unknown header field(s) {sorted(extra)}")
        tid = header.get("trace_id")
        if not isinstance(tid, str) or len(tid) != 32 or any(c not in "0123456789abcdefABCDEF" for c in tid):
            raise InterchangeError(f"{where}: trace_id must be 32 hex digits, got {tid!r:.40}")
        if not isinstance(header.get("task"), str) or not header["task"]:
            raise InterchangeError(f"{where}: task must be a non-empty string")
        self.where, self.trace_id, self.task = where, tid.lower(), header["task"]
        self.started_ms = _int(header.get("started_at_ms"), "started_at_ms", where)
        self.sdk = header.get("sdk")
        self.task_input = header.get("task_input")
        self.task_output: Any = None
        self.output_ms: int | None = None
        self.spans: dict[int, tuple[str, dict]] = {}
        self.seqs: set[int] = set()

    def add(self, where: str, obj: dict) -> None:
        if str(obj.get("trace_id", "")).lower() != self.trace_id:
            raise InterchangeError(f"{where}: trace_id {obj.get('trace_id')!r:.40} differs from the header's "
                                   f"({self.where})")
        if obj["t"] == "task_output":
            extra = set(obj) - OUTPUT_FIELDS
            if extra:
                raise InterchangeError(f"{where}: unknown task_output field(s) {sorted(extra)}")
            if self.output_ms is not None:
                raise InterchangeError(f"{where}: a second task_output line for trace {self.trace_id}")
            self.task_output = obj.get("output")
            self.output_ms = _int(obj.get("recorded_at_ms"), "recorded_at_ms", where)
            return
        extra = set(obj) - SPAN_FIELDS
        if extra:
            raise InterchangeError(f"{where}: unknown span field(s) {sorted(extra)}")
        sid = _int(obj.get("span_id"), "span_id", where)
        seq = _int(obj.get("seq"), "seq", where)
        if obj.get("kind") not in (*EFFECTFUL, "span"):
            raise InterchangeError(f"{where}: unknown span kind {obj.get('kind')!r:.40}")
        if not isinstance(obj.get("name"), str):
            raise InterchangeError(f"{where}: name must be a string")
        if obj.get("error") is not None and not isinstance(obj["error"], str):
            raise InterchangeError(f"{where}: error must be a string or null")
        if obj.get("parent_span_id") is not None:
            _int(obj["parent_span_id"], "parent_span_id", where)
        _int(obj.get("started_at_ms"), "started_at_ms", where)
        _int(obj.get("duration_ms"), "duration_ms", where)
        if not isinstance(obj.get("attrs", {}), dict):
            raise InterchangeError(f"{where}: attrs must be an object")
        if sid in self.spans or seq in self.seqs:
            raise InterchangeError(f"{where}: span_id {sid} or seq {seq} appears twice in trace {self.trace_id}")
        self.spans[sid] = (where, obj)
        self.seqs.add(seq)

    def auto_spans(self) -> tuple[list[dict], int]:
        """``(Auto spans, structural spans skipped)`` of this trace (see the module docstring)."""
        for sid, (where, obj) in self.spans.items():
            p = obj.get("parent_span_id")
            if p is not None and (p not in self.spans or self.spans[p][1]["seq"] >= obj["seq"]):
                raise InterchangeError(f"{where}: parent_span_id {p} is not a span that opened before it")
        whole = self.task_input is not None and self.output_ms is not None
        root_id = _span_id(self.trace_id, 0) if whole else None  # (v0 span ids start at 1)
        out: list[dict] = []
        skipped = 0

        def parent_of(obj: dict) -> str | None:
            p = obj.get("parent_span_id")
            while p is not None:
                _, pobj = self.spans[p]
                if pobj["kind"] != "span":
                    return _span_id(self.trace_id, p)
                p = pobj.get("parent_span_id")
            return root_id

        ends = [self.started_ms]
        for sid, (where, obj) in sorted(self.spans.items(), key=lambda kv: kv[1][1]["seq"]):
            start, dur = obj["started_at_ms"], obj["duration_ms"]
            ends.append(start + dur)
            kind = obj["kind"]
            if kind == "span":
                skipped += 1
                continue
            attrs: dict[str, Any] = {str(k): v for k, v in (obj.get("attrs") or {}).items()}
            cost = attrs.get("cost_usd_micros")
            if isinstance(cost, str) and cost.isdigit():
                attrs["auto.cost_usd_micros"] = int(cost)
            attrs.update({"auto.source": "auto-v0", "auto.v0.kind": kind, "auto.v0.seq": obj["seq"]})
            if self.sdk is not None:
                attrs["auto.v0.sdk"] = str(self.sdk)
            err = obj.get("error")
            error = None if err is None else {"type": err.split(":", 1)[0].strip() or "error", "message": err}
            name, inp, output, site = obj["name"], obj.get("input"), obj.get("output"), None
            if kind == "model_call":
                akind = "llm"
                if isinstance(inp, dict) and isinstance(inp.get("messages"), list):
                    attrs["auto.v0.name"] = name
                    name = MODEL_CALL_SPAN
                    output = None if error else _output(output)
                    site = site_of_call(self.task, name, template_digest(inp["messages"], {}))
            elif kind == "tool_call":
                akind, inp = "tool", {"name": name, "arguments": inp}
            else:
                akind, name, inp = "tool", f"{kind} {name}", {"name": f"{kind} {name}", "arguments": inp}
            out.append({"trace_id": self.trace_id, "span_id": _span_id(self.trace_id, sid),
                        "parent_span_id": parent_of(obj), "name": name, "kind": akind, "task": self.task,
                        "site": site, "started_ns": start * MS, "ended_ns": (start + dur) * MS,
                        "status": "error" if error else "ok", "input": inp, "output": None if error else output,
                        "error": error, "attributes": attrs, "_where": where})
        if whole:
            ti = self.task_input if isinstance(self.task_input, dict) else {"input": self.task_input}
            ends.append(self.output_ms or 0)
            out.insert(0, {"trace_id": self.trace_id, "span_id": root_id, "parent_span_id": None, "name": self.task,
                           "kind": "task", "task": self.task, "site": None, "started_ns": self.started_ms * MS,
                           "ended_ns": max(ends) * MS, "status": "ok", "input": ti, "output": self.task_output,
                           "error": None, "attributes": {"auto.source": "auto-v0", "auto.v0.sdk": str(self.sdk)},
                           "_where": self.where})
        return out, skipped


def read_traces(paths: Iterable[str | os.PathLike]) -> list[_Trace]:
    """The traces of auto-v0 files, checked (see the module docstring).

    Raises:
        InterchangeError: unreadable, not JSON, not v0, a line before any header, an unknown
            line type, kind or field, a span of another trace, a repeated span id, seq or
            task output, a parent that does not exist or opened later — naming the file and line.
    """
    traces: list[_Trace] = []
    seen: set[str] = set()
    for raw in paths:
        path = Path(raw)
        current: _Trace | None = None
        for where, obj in _lines(path):
            t = obj.get("t")
            if t == "trace":
                current = _Trace(where, obj)
                if current.trace_id in seen:
                    raise InterchangeError(f"{where}: trace {current.trace_id} appears twice")
                seen.add(current.trace_id)
                traces.append(current)
            elif t in ("span", "task_output"):
                if current is None:
                    raise InterchangeError(f"{where}: a {t} line before the trace's header line "
                                           "(not an auto-v0 trace file)")
                current.add(where, obj)
            else:
                raise InterchangeError(f"{where}: unknown line type t={t!r:.40} (expected trace, span or task_output)")
        if current is None:
            raise InterchangeError(f"{path}: no header line: not an auto-v0 trace file")
    return traces


def load_auto_v0(paths: Iterable[str | os.PathLike]) -> OtlpBatch:
    """Read, map and check every trace of auto-v0 files, writing nothing (write it with
    :func:`auto.interchange.otlp.write_otlp`).

    Returns:
        An :class:`~auto.interchange.otlp.OtlpBatch`: ``skipped`` counts the structural spans.

    Raises:
        InterchangeError: a malformed line (:func:`read_traces`), or nothing to import.
        IngestError: a span does not pass the store's checks (named by its line).
    """
    paths = [str(p) for p in paths]
    spans: list[dict] = []
    skipped = 0
    traces = read_traces(paths)
    names = {}
    for tr in traces:
        got, n = tr.auto_spans()
        spans += got
        skipped += n
        names[tr.trace_id] = tr.task
    where = ", ".join(paths)
    if not spans:
        raise InterchangeError(f"{where}: nothing to import: {len(traces)} trace(s) with no effectful span and no "
                               "task input and output")
    batch = checked_batch(spans, skipped, where)
    for t in batch.traces:  # named after the task, marked with their source
        t["name"] = names.get(t["trace_id"], t["name"])
        t["attributes"] = {"auto.source": "auto-v0"}
    return batch


__all__ = ["EFFECTFUL", "FORMAT_VERSION", "load_auto_v0", "read_traces"]
