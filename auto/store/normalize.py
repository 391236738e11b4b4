"""What a span and a trace are to the store: fields, ids, digests, checks and their row form.

* Ids: trace ids are 32 lowercase hex digits (16 bytes), span ids 16 hex digits (8 bytes), as in
  OpenTelemetry (:func:`new_trace_id`, :func:`new_span_id`).
* Digests: a span's is :func:`auto.canonical.digest` over its content fields
  (:data:`SPAN_FIELDS`, JSON columns as parsed values), a trace's over :data:`TRACE_FIELDS`.
* :func:`normalize_span` / :func:`normalize_trace` check one record and add its digest;
  :func:`span_row` / :func:`span_from_row` (and the trace forms) convert to and from the JSON-text
  columns of the tables.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any, Callable

from auto.canonical import canonical_json, digest
from auto.errors import IngestError, IntegrityError

SPAN_FIELDS = (
    "trace_id", "span_id", "parent_span_id", "name", "kind", "task", "site",
    "started_ns", "ended_ns", "status", "input", "output", "error", "attributes",
)
"""The content fields of a span; its digest is ``digest({f: span[f] for f in SPAN_FIELDS})``."""

TRACE_FIELDS = ("trace_id", "name", "started_ns", "ended_ns", "status", "attributes")
"""The content fields of a trace; its digest is ``digest({f: trace[f] for f in TRACE_FIELDS})``."""

SPAN_KINDS = ("task", "llm", "tool")
STATUSES = ("ok", "error")
JSON_SPAN_COLUMNS = ("input", "output", "error", "attributes")
"""Span columns stored as canonical JSON text."""

_HEX32 = re.compile(r"^[0-9a-f]{32}$")
_HEX16 = re.compile(r"^[0-9a-f]{16}$")


def new_trace_id() -> str:
    """A fresh random trace id (16 bytes, 32 hex digits)."""
    return os.urandom(16).hex()


def new_span_id() -> str:
    """A fresh random span id (8 bytes, 16 hex digits)."""
    return os.urandom(8).hex()


def span_digest(span: dict) -> str:
    """The digest of a span dict (JSON fields as parsed values) over :data:`SPAN_FIELDS`."""
    return digest({f: span.get(f) for f in SPAN_FIELDS})


def trace_digest(trace: dict) -> str:
    """The digest of a trace dict over :data:`TRACE_FIELDS`."""
    return digest({f: trace.get(f) for f in TRACE_FIELDS})


# ----------------------------------------------------------------------------- checks


def _as_dict(obj: Any) -> dict:
    if isinstance(obj, dict):
        return obj
    if hasattr(obj, "model_dump"):
        return obj.model_dump()
    if hasattr(obj, "__dataclass_fields__"):
        return {k: getattr(obj, k) for k in obj.__dataclass_fields__}
    raise IngestError(f"expected a dict, got {type(obj).__name__}")


def _check_int(name: str, value: Any, where: str, nullable: bool = False) -> None:
    if value is None and nullable:
        return
    if not isinstance(value, int) or isinstance(value, bool):
        raise IngestError(f"{where}: {name} must be an integer (ns), got {value!r}")


def _fields(raw: Any, fields: tuple[str, ...], id_field: str, what: str) -> tuple[dict, dict, str]:
    """``(given record, its content fields, where)``; unknown fields are refused."""
    given = _as_dict(raw)
    where = f"{what} {given.get(id_field)!r}"
    unknown = set(given) - set(fields) - {"digest"}
    if unknown:
        raise IngestError(f"{where}: unknown field(s) {sorted(unknown)}")
    return given, {f: given.get(f) for f in fields}, where


def _check_trace_id(out: dict, where: str) -> None:
    if not isinstance(out["trace_id"], str) or not _HEX32.match(out["trace_id"]):
        raise IngestError(f"{where}: trace_id must be 32 lowercase hex digits")


def _check_status(out: dict, where: str) -> None:
    if out["status"] not in STATUSES:
        raise IngestError(f"{where}: status must be one of {STATUSES}, got {out['status']!r}")


def _check_times_attributes(out: dict, where: str, ended_nullable: bool) -> None:
    """Integer ns times; attributes a dict (None becomes ``{}``)."""
    _check_int("started_ns", out["started_ns"], where)
    _check_int("ended_ns", out["ended_ns"], where, nullable=ended_nullable)
    if out["attributes"] is None:
        out["attributes"] = {}
    if not isinstance(out["attributes"], dict):
        raise IngestError(f"{where}: attributes must be a dict")


def _check_keys(value: Any, where: str) -> None:
    """Every object key in ``value`` is a string (JSON's only key type: ``{1: "a"}`` would be
    stored as ``{"1": "a"}`` and read back changed, ``{1: "a", "1": "b"}`` as duplicate keys)."""
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, dict):
            for k, x in v.items():
                if not isinstance(k, str):
                    raise IngestError(f"{where}: content is not canonical JSON: object key {k!r} is not a string")
                stack.append(x)
        elif isinstance(v, (list, tuple)):
            stack.extend(v)


def _with_digest(out: dict, given: dict, where: str, derive: Callable[[dict], str]) -> dict:
    """``out`` plus its derived digest, which a supplied ``digest`` must equal (object keys must
    be strings)."""
    _check_keys(out, where)
    try:
        d = derive(out)
    except (TypeError, ValueError) as exc:
        raise IngestError(f"{where}: content is not canonical JSON: {exc}") from None
    if given.get("digest") is not None and given["digest"] != d:
        raise IngestError(f"{where}: supplied digest {given['digest']} does not match its content ({d})")
    out["digest"] = d
    return out


def normalize_span(raw: Any) -> dict:
    """The span's content fields plus its ``digest``, checked.

    Args:
        raw: a dict (or dataclass / pydantic model) with the :data:`SPAN_FIELDS` (missing ones are
            None) and optionally ``digest``.

    Raises:
        IngestError: an unknown field, a malformed id, kind, status, name, task, site or time,
            attributes that are not a dict, content that is not canonical JSON, or a supplied
            digest that does not match.
    """
    given, out, where = _fields(raw, SPAN_FIELDS, "span_id", "span")
    if not isinstance(out["span_id"], str) or not _HEX16.match(out["span_id"]):
        raise IngestError(f"{where}: span_id must be 16 lowercase hex digits")
    _check_trace_id(out, where)
    if out["parent_span_id"] is not None and (
        not isinstance(out["parent_span_id"], str) or not _HEX16.match(out["parent_span_id"])
    ):
        raise IngestError(f"{where}: parent_span_id must be 16 lowercase hex digits or None")
    if out["kind"] not in SPAN_KINDS:
        raise IngestError(f"{where}: kind must be one of {SPAN_KINDS}, got {out['kind']!r}")
    _check_status(out, where)
    if not isinstance(out["name"], str) or not out["name"]:
        raise IngestError(f"{where}: name must be a non-empty string")
    for f in ("task", "site"):
        if out[f] is not None and not isinstance(out[f], str):
            raise IngestError(f"{where}: {f} must be a string or None")
    if out["kind"] == "task" and not out["task"]:
        raise IngestError(f"{where}: a task span needs its task name")
    _check_times_attributes(out, where, ended_nullable=False)
    return _with_digest(out, given, where, span_digest)


def normalize_trace(raw: Any) -> dict:
    """The trace's content fields plus its ``digest``, checked (``ended_ns`` may be None).

    Raises:
        IngestError: as :func:`normalize_span`, for the :data:`TRACE_FIELDS`.
    """
    given, out, where = _fields(raw, TRACE_FIELDS, "trace_id", "trace")
    _check_trace_id(out, where)
    _check_status(out, where)
    _check_times_attributes(out, where, ended_nullable=True)
    return _with_digest(out, given, where, trace_digest)


def dedupe(items: list[dict], key: str, what: str) -> list[dict]:
    """``items`` (normalized) with repeats of one ``key`` dropped; raises :class:`IngestError`
    when a repeat has different content."""
    seen: dict[str, dict] = {}
    for it in items:
        prev = seen.get(it[key])
        if prev is None:
            seen[it[key]] = it
        elif prev["digest"] != it["digest"]:
            raise IngestError(f"{what} {it[key]} appears twice in the batch with different content")
    return list(seen.values())


# ----------------------------------------------------------------------------- rows


def _loads(text: str | None, table: str = "spans", key: Any = None, column: str = "") -> Any:
    """A JSON column's value (NULL is None).

    Raises:
        IntegrityError: the column holds text that is not JSON (it was written behind the store's
            back: ingest only stores canonical JSON), naming the row and the column.
    """
    if text is None:
        return None
    try:
        return json.loads(text)
    except (TypeError, ValueError) as exc:
        raise IntegrityError(f"{table[:-1]} {key}: column {column!r} is not JSON ({exc}); the row was changed "
                             f"outside Auto: `auto store verify` lists every such row") from None


def dumps(value: Any) -> str | None:
    """Canonical JSON text of a column value (None stays NULL)."""
    return None if value is None else canonical_json(value)


def span_row(s: dict) -> dict:
    """A normalized span as a ``spans`` row (JSON columns as canonical JSON text)."""
    row = dict(s)
    for f in JSON_SPAN_COLUMNS:
        row[f] = dumps(s[f])
    return row


def trace_row(t: dict) -> dict:
    """A normalized trace as a ``traces`` row."""
    return {**t, "attributes": dumps(t["attributes"])}


def span_from_row(row: dict) -> dict:
    """A ``spans`` row as a span dict (JSON columns parsed; attributes ``{}`` when NULL).

    Raises:
        IntegrityError: a JSON column is not JSON.
    """
    out = dict(row)
    for f in JSON_SPAN_COLUMNS:
        out[f] = _loads(row.get(f), "spans", row.get("span_id"), f)
    if out.get("attributes") is None:
        out["attributes"] = {}
    return out


def trace_from_row(row: dict) -> dict:
    """A ``traces`` row as a trace dict (attributes parsed).

    Raises:
        IntegrityError: the attributes column is not JSON.
    """
    out = dict(row)
    out["attributes"] = _loads(row.get("attributes"), "traces", row.get("trace_id"), "attributes") or {}
    return out
