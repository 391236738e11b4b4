"""What a span and a trace are to the store: fields, ids, digests, checks and their row form.

* Ids: trace ids are 32 lowercase hex digits (16 bytes), span ids 16 hex digits (8 bytes), as in
  OpenTelemetry (:func:`new_trace_id`, :func:`new_span_id`). A fresh trace id starts with the
  time, so the store's trace-id indexes grow at their end instead of at random places.
* Digests: a span's is :func:`auto.canonical.digest` over its content fields
  (:data:`SPAN_FIELDS`, JSON columns as parsed values), a trace's over :data:`TRACE_FIELDS`.
* :func:`normalize_span` / :func:`normalize_trace` check one record and add its digest;
  :func:`normalize_span_texts` also returns the canonical JSON texts of its JSON fields (computed
  once: the digest is assembled from them, :func:`span_text`, and the payloads store them);
  :func:`span_rows` / :func:`span_from_row` convert a span to and from its ``spans`` row (payload
  ids, :mod:`auto.store.payloads`); :func:`trace_row` / :func:`trace_from_row` the trace forms.
"""

from __future__ import annotations

import json
import os
import random
import re
import time
from json.encoder import encode_basestring as _encode_str
from typing import Any, Callable

from auto.canonical import canonical_json, digest, digest_bytes
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
"""Span fields whose values are JSON, stored as payloads (``<field>_id`` columns)."""

SPAN_COLUMNS = (
    "span_id", "trace_id", "parent_span_id", "name", "kind", "task", "site", "started_ns", "ended_ns", "status",
    "input_id", "output_id", "error_id", "attributes_id", "logical_call_id", "attempt", "digest",
)
"""The ``spans`` columns a span is written as (``seq`` is assigned by the database)."""

SPAN_SELECT_COLUMNS = tuple(c for c in SPAN_COLUMNS if c not in ("logical_call_id", "attempt"))
"""The columns :func:`span_from_row` reads."""

SPAN_SELECT = ", ".join(SPAN_SELECT_COLUMNS)
"""The select list of :data:`SPAN_SELECT_COLUMNS`."""


_HEX32 = re.compile(r"^[0-9a-f]{32}$")
_HEX16 = re.compile(r"^[0-9a-f]{16}$")


_IDS = random.Random(os.urandom(32))
"""The id generator: Python's Mersenne Twister seeded from 256 bits of ``os.urandom``, reseeded
in a forked child (ids are unique, not secret; drawing them costs no system call, which would
let another thread take the interpreter lock on the recording path)."""
os.register_at_fork(after_in_child=lambda: _IDS.seed(os.urandom(32)))


def new_trace_id() -> str:
    """A fresh trace id (16 bytes, 32 hex digits): the Unix time in ms (6 bytes, big-endian),
    then 10 random bytes (from the id generator above).

    Time first makes ids made one after another sort together, so inserting them touches the
    last pages of the B-tree indexes on ``trace_id`` instead of a random page per row (at 10M
    spans those indexes far exceed any page cache). The random part keeps ids unique (80 bits)
    and satisfies W3C Trace Context Level 2, which asks for the rightmost 7 bytes to be random.
    """
    return (time.time_ns() // 1_000_000).to_bytes(6, "big").hex() + f"{_IDS.getrandbits(80):020x}"


def new_span_id() -> str:
    """A fresh random span id (8 bytes, 16 hex digits)."""
    return f"{_IDS.getrandbits(64):016x}"


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


def _scalar_text(v: Any) -> str:
    """Canonical JSON of a span's scalar field (fast paths for str / int / None)."""
    if v is None:
        return "null"
    cls = v.__class__
    if cls is str:
        return _encode_str(v)
    if cls is int:
        return str(v)
    return canonical_json(v)


def span_text(span: dict, texts: dict[str, str | None]) -> str:
    """The canonical JSON text of ``{f: span[f] for f in SPAN_FIELDS}``, assembled from the
    canonical texts of its JSON fields (``texts[f]``; None = ``null``) without serializing them
    again: canonical JSON of an object is its sorted ``"key":value`` pairs joined by ``,``."""
    def j(f: str) -> str:
        t = texts[f]
        return "null" if t is None else t

    g, st = span.get, _scalar_text
    return (f'{{"attributes":{j("attributes")},"ended_ns":{st(g("ended_ns"))},"error":{j("error")},'
            f'"input":{j("input")},"kind":{st(g("kind"))},"name":{st(g("name"))},"output":{j("output")},'
            f'"parent_span_id":{st(g("parent_span_id"))},"site":{st(g("site"))},"span_id":{st(g("span_id"))},'
            f'"started_ns":{st(g("started_ns"))},"status":{st(g("status"))},"task":{st(g("task"))},'
            f'"trace_id":{st(g("trace_id"))}}}')


def span_digest_of_texts(span: dict, texts: dict[str, str | None]) -> str:
    """:func:`span_digest` computed through :func:`span_text` (the same value)."""
    return digest_bytes(span_text(span, texts).encode("utf-8"))


def json_texts(span: dict) -> dict[str, str | None]:
    """Canonical JSON texts of the span's :data:`JSON_SPAN_COLUMNS` (None for JSON null).

    Raises:
        TypeError, ValueError: a value is not canonical JSON.
    """
    return {f: (None if span.get(f) is None else canonical_json(span[f])) for f in JSON_SPAN_COLUMNS}


def normalize_span_texts(raw: Any) -> tuple[dict, dict[str, str | None]]:
    """:func:`normalize_span`, plus the canonical texts of the JSON fields (:func:`json_texts`).

    Raises:
        IngestError: as :func:`normalize_span`.
    """
    given, out, where = _fields(raw, SPAN_FIELDS, "span_id", "span")
    _check_span(out, where)
    try:
        texts = json_texts(out)
    except (TypeError, ValueError) as exc:
        raise IngestError(f"{where}: content is not canonical JSON: {exc}") from None
    return _with_digest(out, given, where, lambda o: span_digest_of_texts(o, texts)), texts


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
    return normalize_span_texts(raw)[0]


def _check_span(out: dict, where: str) -> None:
    """Raise :class:`IngestError` when a span's ids, kind, status, name, task, site, times or
    attributes are malformed (attributes None becomes ``{}``)."""
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


def column_json(text: str | None, table: str = "spans", key: Any = None, column: str = "") -> Any:
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


def site_key(span: dict) -> str:
    """The census's site key of a span: its ``site``, else ``task/name`` (``-`` for a missing
    part); the SQL census computes the same (:data:`SITE_KEY_SQL`)."""
    site = span.get("site")
    if site:
        return site
    return f"{span.get('task') or '-'}/{span.get('name') or '-'}"


SITE_KEY_SQL = ("COALESCE(NULLIF(site, ''), COALESCE(NULLIF(task, ''), '-') || '/' || "
                "COALESCE(NULLIF(name, ''), '-'))")
""":func:`site_key` as an SQL expression over the ``spans`` columns (SQLite, PostgreSQL, DuckDB)."""


def retry_columns(attributes: Any) -> tuple[str | None, int]:
    """``(logical_call_id, attempt)`` the census reads, from a span's attributes: the SDK
    retries of one model call share ``auto.logical_call_id`` (a string; falsy: none) and are
    ordered by ``auto.attempt`` (an integer; anything else counts as 0)."""
    if not isinstance(attributes, dict):
        return None, 0
    lid = attributes.get("auto.logical_call_id")
    att = attributes.get("auto.attempt", 0)
    if isinstance(att, bool) or not isinstance(att, (int, float)):
        att = 0
    return (str(lid) if lid else None), int(att)


def payload_items(span: dict, texts: dict[str, str | None]) -> list[tuple[bytes | None, tuple[str, str]]]:
    """``(canonical bytes or None, dictionary key)`` of the span's JSON fields in
    :data:`JSON_SPAN_COLUMNS` order; the key ``(field, site key)`` picks the preset dictionary
    (:mod:`auto.store.payloads`)."""
    key = site_key(span)
    return [(None if texts[f] is None else texts[f].encode("utf-8"), (f, key)) for f in JSON_SPAN_COLUMNS]


def span_rows(tx: Any, writer: Any, prepared: list[tuple[dict, dict[str, str | None]]]) -> list[tuple]:
    """The ``spans`` rows (:data:`SPAN_COLUMNS` order) of normalized spans with their texts,
    storing their payloads through ``writer`` (a :class:`~auto.store.payloads.PayloadWriter`)
    inside the transaction ``tx``."""
    items = []
    for s, texts in prepared:
        items.extend(payload_items(s, texts))
    ids = writer.store(tx, items)
    k = len(JSON_SPAN_COLUMNS)
    out = []
    for i, (s, _texts) in enumerate(prepared):
        attrs = s.get("attributes")
        if isinstance(attrs, str):
            attrs = column_json(attrs)
        lid, attempt = retry_columns(attrs)
        out.append((s["span_id"], s["trace_id"], s["parent_span_id"], s["name"], s["kind"], s["task"], s["site"],
                    s["started_ns"], s["ended_ns"], s["status"], *ids[i * k:(i + 1) * k], lid, attempt, s["digest"]))
    return out


def legacy_span_texts(row: dict) -> dict[str, str | None]:
    """The JSON texts of a version-1/2 ``spans`` row (JSON columns held canonical text;
    attributes NULL meant ``{}``)."""
    texts = {f: row.get(f) for f in JSON_SPAN_COLUMNS}
    if texts["attributes"] is None:
        texts["attributes"] = "{}"
    return texts


def trace_row(t: dict) -> dict:
    """A normalized trace as a ``traces`` row."""
    return {**t, "attributes": dumps(t["attributes"])}


def span_from_row(row: dict, texts: dict[int, str], parsed: dict[int, Any] | None = None) -> dict:
    """A ``spans`` row (:data:`SPAN_SELECT` columns) as a span dict: the :data:`SPAN_FIELDS` and
    ``digest``, JSON fields parsed from their payload ``texts`` (id -> canonical JSON).

    ``parsed``, when given, caches parsed *scalar* payloads (strings, numbers) across rows: a
    label shared by a million spans is parsed once; objects and lists are parsed per span, so no
    two spans share a mutable value.

    Raises:
        IntegrityError: a payload is not JSON (changed outside Auto).
    """
    out = {f: row[f] for f in SPAN_FIELDS if f not in JSON_SPAN_COLUMNS}
    for f in JSON_SPAN_COLUMNS:
        pid = row[f"{f}_id"]
        if pid is None:
            out[f] = None
        elif parsed is not None and pid in parsed:
            out[f] = parsed[pid]
        else:
            t = texts[pid]
            v = {} if t == "{}" else column_json(t, "spans", row.get("span_id"), f)
            if parsed is not None and not isinstance(v, (dict, list)):
                parsed[pid] = v
            out[f] = v
    if out["attributes"] is None:
        out["attributes"] = {}
    out["digest"] = row["digest"]
    return out


ROW_COLUMNS = ("seq", *SPAN_SELECT_COLUMNS)
"""A ``spans`` row as the store's checks and witness reads take it: a tuple in this order."""

ROW_KIND, ROW_STATUS, ROW_INPUT_ID, ROW_DIGEST = (ROW_COLUMNS.index(c) for c in ("kind", "status", "input_id", "digest"))
"""Positions in a :data:`ROW_COLUMNS` row (the payload ids run from ``ROW_INPUT_ID`` up to
``ROW_DIGEST``)."""


def span_text_of_values(row: tuple, texts: dict[int, str]) -> str:
    """The canonical JSON text a stored span's digest must be the digest of (:func:`span_text`),
    from its row (a tuple in :data:`ROW_COLUMNS` order) and its payloads' canonical texts
    (``texts``: payload id -> text), without parsing them.

    Raises:
        KeyError: a payload id without a text. TypeError, ValueError: a column value that is
            not JSON (changed outside Auto).
    """
    (_seq, span_id, trace_id, parent, name, kind, task, site, started, ended, status,
     iid, oid, eid, aid, _digest) = row
    st, enc = _scalar_text, _encode_str
    return (f'{{"attributes":{"null" if aid is None else texts[aid]},"ended_ns":{st(ended)},'
            f'"error":{"null" if eid is None else texts[eid]},"input":{"null" if iid is None else texts[iid]},'
            f'"kind":{enc(kind) if kind.__class__ is str else st(kind)},'
            f'"name":{enc(name) if name.__class__ is str else st(name)},'
            f'"output":{"null" if oid is None else texts[oid]},"parent_span_id":{st(parent)},"site":{st(site)},'
            f'"span_id":{enc(span_id) if span_id.__class__ is str else st(span_id)},"started_ns":{st(started)},'
            f'"status":{enc(status) if status.__class__ is str else st(status)},"task":{st(task)},'
            f'"trace_id":{enc(trace_id) if trace_id.__class__ is str else st(trace_id)}}}')


def trace_from_row(row: dict) -> dict:
    """A ``traces`` row as a trace dict (attributes parsed).

    Raises:
        IntegrityError: the attributes column is not JSON.
    """
    out = dict(row)
    out["attributes"] = column_json(row.get("attributes"), "traces", row.get("trace_id"), "attributes") or {}
    return out
