"""The trace store: one SQLite file (via sqlite-utils) holding traces, spans, eval runs, artifacts.

Tables (see ``docs/architecture.md``)::

    meta       key TEXT PK, value TEXT                       (schema_version, format)
    traces     trace_id PK, name, started_ns, ended_ns, status, attributes JSON, digest
    spans      span_id PK, trace_id, parent_span_id, name, kind (task/llm/tool), task, site,
               started_ns, ended_ns, status (ok/error), input JSON, output JSON, error JSON,
               attributes JSON, digest
    eval_runs  id PK (digest of the canonical record), task, created_ns, verdict, record JSON
    artifacts  id PK ("sha256:" of the wasm bytes), task, generation, created_ns, manifest JSON,
               wasm BLOB

Guarantees:

* **WAL + busy timeout.** The file is opened in WAL mode with ``busy_timeout`` = 30 000 ms, and
  every write transaction (``BEGIN IMMEDIATE``) is retried on ``SQLITE_BUSY`` until that
  deadline, so several processes can record into one store at once and lose nothing.
* **Digests at ingest.** Each span's ``digest`` is :func:`auto.canonical.digest` over its content
  fields (:data:`SPAN_FIELDS`, JSON columns as parsed values), each trace's over
  :data:`TRACE_FIELDS`. :meth:`Store.verify` re-derives them all.
* **Immutable traces and spans.** Insert-only: re-ingesting an id with the same content is a
  no-op, with different content an :class:`~auto.errors.IngestError`; SQLite triggers refuse
  ``UPDATE``/``DELETE`` on both tables.
* **All-or-nothing batches.** :meth:`Store.ingest` validates and writes a batch in one
  transaction; a failing batch leaves nothing behind.
* **Schema versions.** ``meta.schema_version`` names the layout; :data:`MIGRATIONS` lists the
  steps that bring an older store up to :data:`SCHEMA_VERSION`. A newer store raises
  :class:`~auto.errors.SchemaTooNew`; a file that is not an SQLite database (or an SQLite
  database that is not an Auto store) raises :class:`~auto.errors.NotAStore`.

Times are integer nanoseconds since the Unix epoch (``time.time_ns()``). Ids: trace ids are 32
lowercase hex digits (16 bytes), span ids 16 hex digits (8 bytes), as in OpenTelemetry.
"""

from __future__ import annotations

import json
import os
import random
import re
import sqlite3
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

import sqlite_utils

from auto.canonical import canonical_json, digest, digest_bytes
from auto.errors import IngestError, IntegrityError, NotAStore, SchemaTooNew, StoreError

SCHEMA_VERSION = 1
"""The store layout this version of Auto writes (``meta.schema_version``)."""

STORE_FORMAT = "auto.store"
"""``meta.format``: marks an SQLite file as an Auto store."""

BUSY_TIMEOUT_MS = 30_000
"""SQLite ``busy_timeout`` and the deadline of the retry loop on ``SQLITE_BUSY`` (ms)."""

SPAN_FIELDS = (
    "trace_id", "span_id", "parent_span_id", "name", "kind", "task", "site",
    "started_ns", "ended_ns", "status", "input", "output", "error", "attributes",
)
"""The content fields of a span; its digest is ``digest({f: span[f] for f in SPAN_FIELDS})``."""

TRACE_FIELDS = ("trace_id", "name", "started_ns", "ended_ns", "status", "attributes")
"""The content fields of a trace; its digest is ``digest({f: trace[f] for f in TRACE_FIELDS})``."""

SPAN_KINDS = ("task", "llm", "tool")
STATUSES = ("ok", "error")
_JSON_SPAN_COLUMNS = ("input", "output", "error", "attributes")
_HEX32 = re.compile(r"^[0-9a-f]{32}$")
_HEX16 = re.compile(r"^[0-9a-f]{16}$")
_SQLITE_MAGIC = b"SQLite format 3\x00"


# ----------------------------------------------------------------------------- records


@dataclass(frozen=True)
class Witness:
    """One observed execution of a task (a task span), as the census and distiller see it.

    Attributes:
        input: the bound arguments, e.g. ``{"ticket": "..."}``.
        output: the task's return value (JSON), ``None`` for failed executions.
        status: ``"ok"`` or ``"error"``.
        error: ``{"type": ..., "message": ...}`` for failed executions, else ``None``.
        trace_id, span_id: where it was recorded.
        started_ns: start time (ns since the epoch).
        digest: the span digest (provenance).
        attributes: the span attributes (``auto.*``, e.g. cost, llm call count).
    """

    input: dict
    output: Any
    status: str
    error: dict | None
    trace_id: str
    span_id: str
    started_ns: int
    digest: str = ""
    attributes: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Artifact:
    """A stored compiled artifact: ``id`` is ``"sha256:<hex>"`` of ``wasm``."""

    id: str
    task: str
    generation: int
    created_ns: int
    manifest: dict
    wasm: bytes


@dataclass
class VerifyReport:
    """The result of :meth:`Store.verify`.

    Attributes:
        ok: no mismatch was found.
        spans, traces, eval_runs, artifacts: how many rows were re-derived.
        mismatches: one dict per bad row: ``{"table", "id", "stored", "derived"}``.
        store_digest: :meth:`Store.digest` at verification time.
    """

    ok: bool
    spans: int
    traces: int
    eval_runs: int
    artifacts: int
    mismatches: list[dict]
    store_digest: str

    def raise_for_mismatch(self) -> None:
        """Raise :class:`~auto.errors.IntegrityError` naming the first mismatches, if any."""
        if not self.ok:
            first = ", ".join(f"{m['table']}:{m['id']}" for m in self.mismatches[:5])
            raise IntegrityError(f"{len(self.mismatches)} stored digest(s) do not match their content ({first})")


# ----------------------------------------------------------------------------- migrations


def _migrate_v1(db: sqlite_utils.Database) -> None:
    """Version 1: the five tables, their indexes and the immutability triggers."""
    db["meta"].create({"key": str, "value": str}, pk="key", if_not_exists=True)
    db["traces"].create(
        {"trace_id": str, "name": str, "started_ns": int, "ended_ns": int, "status": str,
         "attributes": str, "digest": str},
        pk="trace_id", not_null={"digest"}, if_not_exists=True,
    )
    db["spans"].create(
        {"span_id": str, "trace_id": str, "parent_span_id": str, "name": str, "kind": str,
         "task": str, "site": str, "started_ns": int, "ended_ns": int, "status": str,
         "input": str, "output": str, "error": str, "attributes": str, "digest": str},
        pk="span_id", not_null={"trace_id", "digest"}, if_not_exists=True,
    )
    db["eval_runs"].create(
        {"id": str, "task": str, "created_ns": int, "verdict": str, "record": str},
        pk="id", if_not_exists=True,
    )
    db["artifacts"].create(
        {"id": str, "task": str, "generation": int, "created_ns": int, "manifest": str, "wasm": bytes},
        pk="id", if_not_exists=True,
    )
    db["spans"].create_index(["trace_id"], if_not_exists=True)
    db["spans"].create_index(["task", "kind", "started_ns"], if_not_exists=True)
    db["artifacts"].create_index(["task", "generation"], if_not_exists=True)
    for table in ("traces", "spans"):
        for op in ("UPDATE", "DELETE"):
            db.execute(
                f"CREATE TRIGGER IF NOT EXISTS {table}_no_{op.lower()} BEFORE {op} ON {table} "
                f"BEGIN SELECT RAISE(ABORT, '{table} are immutable (insert-only)'); END"
            )


def _bump(db: sqlite_utils.Database, key: str, n: int) -> None:
    """Add ``n`` to the row counter ``key`` in ``meta`` (inside the caller's transaction).

    The counters let :meth:`Store.verify` detect deleted rows, which digests alone cannot; a store
    written before the counters existed starts counting from its current rows.
    """
    row = db.execute("SELECT value FROM meta WHERE key = ?", [key]).fetchone()
    if row is None:
        table = "spans" if key == "span_count" else "traces"
        current = db.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
        db.execute("INSERT INTO meta (key, value) VALUES (?, ?)", [key, str(current)])
    else:
        db.execute("UPDATE meta SET value = ? WHERE key = ?", [str(int(row[0]) + n), key])


MIGRATIONS: list[tuple[int, Callable[[sqlite_utils.Database], None]]] = [
    (1, _migrate_v1),
]
"""``(version, step)`` in order; ``step`` brings a store at ``version - 1`` to ``version``.
To add version 2: append ``(2, _migrate_v2)`` and bump :data:`SCHEMA_VERSION`."""


# ----------------------------------------------------------------------------- helpers


def _is_busy(exc: BaseException) -> bool:
    msg = str(exc).lower()
    return isinstance(exc, sqlite3.OperationalError) and ("locked" in msg or "busy" in msg)


def _loads(text: str | None) -> Any:
    return None if text is None else json.loads(text)


def _dumps(value: Any) -> str | None:
    return None if value is None else canonical_json(value)


def span_digest(span: dict) -> str:
    """The digest of a span dict (JSON fields as parsed values) over :data:`SPAN_FIELDS`."""
    return digest({f: span.get(f) for f in SPAN_FIELDS})


def trace_digest(trace: dict) -> str:
    """The digest of a trace dict over :data:`TRACE_FIELDS`."""
    return digest({f: trace.get(f) for f in TRACE_FIELDS})


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


def _normalize_span(raw: Any) -> dict:
    s = _as_dict(raw)
    where = f"span {s.get('span_id')!r}"
    unknown = set(s) - set(SPAN_FIELDS) - {"digest"}
    if unknown:
        raise IngestError(f"{where}: unknown field(s) {sorted(unknown)}")
    out = {f: s.get(f) for f in SPAN_FIELDS}
    if not isinstance(out["span_id"], str) or not _HEX16.match(out["span_id"]):
        raise IngestError(f"{where}: span_id must be 16 lowercase hex digits")
    if not isinstance(out["trace_id"], str) or not _HEX32.match(out["trace_id"]):
        raise IngestError(f"{where}: trace_id must be 32 lowercase hex digits")
    if out["parent_span_id"] is not None and (
        not isinstance(out["parent_span_id"], str) or not _HEX16.match(out["parent_span_id"])
    ):
        raise IngestError(f"{where}: parent_span_id must be 16 lowercase hex digits or None")
    if out["kind"] not in SPAN_KINDS:
        raise IngestError(f"{where}: kind must be one of {SPAN_KINDS}, got {out['kind']!r}")
    if out["status"] not in STATUSES:
        raise IngestError(f"{where}: status must be one of {STATUSES}, got {out['status']!r}")
    if not isinstance(out["name"], str) or not out["name"]:
        raise IngestError(f"{where}: name must be a non-empty string")
    for f in ("task", "site"):
        if out[f] is not None and not isinstance(out[f], str):
            raise IngestError(f"{where}: {f} must be a string or None")
    if out["kind"] == "task" and not out["task"]:
        raise IngestError(f"{where}: a task span needs its task name")
    _check_int("started_ns", out["started_ns"], where)
    _check_int("ended_ns", out["ended_ns"], where)
    if out["attributes"] is None:
        out["attributes"] = {}
    if not isinstance(out["attributes"], dict):
        raise IngestError(f"{where}: attributes must be a dict")
    try:
        d = span_digest(out)
    except (TypeError, ValueError) as exc:
        raise IngestError(f"{where}: content is not canonical JSON: {exc}") from None
    if s.get("digest") is not None and s["digest"] != d:
        raise IngestError(f"{where}: supplied digest {s['digest']} does not match its content ({d})")
    out["digest"] = d
    return out


def _normalize_trace(raw: Any) -> dict:
    t = _as_dict(raw)
    where = f"trace {t.get('trace_id')!r}"
    unknown = set(t) - set(TRACE_FIELDS) - {"digest"}
    if unknown:
        raise IngestError(f"{where}: unknown field(s) {sorted(unknown)}")
    out = {f: t.get(f) for f in TRACE_FIELDS}
    if not isinstance(out["trace_id"], str) or not _HEX32.match(out["trace_id"]):
        raise IngestError(f"{where}: trace_id must be 32 lowercase hex digits")
    if out["status"] not in STATUSES:
        raise IngestError(f"{where}: status must be one of {STATUSES}, got {out['status']!r}")
    _check_int("started_ns", out["started_ns"], where)
    _check_int("ended_ns", out["ended_ns"], where, nullable=True)
    if out["attributes"] is None:
        out["attributes"] = {}
    if not isinstance(out["attributes"], dict):
        raise IngestError(f"{where}: attributes must be a dict")
    try:
        d = trace_digest(out)
    except (TypeError, ValueError) as exc:
        raise IngestError(f"{where}: content is not canonical JSON: {exc}") from None
    if t.get("digest") is not None and t["digest"] != d:
        raise IngestError(f"{where}: supplied digest does not match its content")
    out["digest"] = d
    return out


def _span_row(s: dict) -> dict:
    row = dict(s)
    for f in _JSON_SPAN_COLUMNS:
        row[f] = _dumps(s[f])
    return row


def _span_from_row(row: dict) -> dict:
    out = dict(row)
    for f in _JSON_SPAN_COLUMNS:
        out[f] = _loads(row.get(f))
    if out.get("attributes") is None:
        out["attributes"] = {}
    return out


def _trace_from_row(row: dict) -> dict:
    out = dict(row)
    out["attributes"] = _loads(row.get("attributes")) or {}
    return out


def _dedupe(items: list[dict], key: str, what: str) -> list[dict]:
    seen: dict[str, dict] = {}
    for it in items:
        prev = seen.get(it[key])
        if prev is None:
            seen[it[key]] = it
        elif prev["digest"] != it["digest"]:
            raise IngestError(f"{what} {it[key]} appears twice in the batch with different content")
    return list(seen.values())


def new_trace_id() -> str:
    """A fresh random trace id (16 bytes, 32 hex digits)."""
    return os.urandom(16).hex()


def new_span_id() -> str:
    """A fresh random span id (8 bytes, 16 hex digits)."""
    return os.urandom(8).hex()


# ----------------------------------------------------------------------------- the store


class Store:
    """An Auto trace store over one SQLite file (created if missing).

    Thread-safe (one connection guarded by a lock) and fork-aware (a child process reopens the
    file on first use). Use as a context manager or call :meth:`close`.

    Raises (from the constructor):
        NotAStore: the file is not an SQLite database, or is one that holds other tables.
        SchemaTooNew: ``meta.schema_version`` is newer than :data:`SCHEMA_VERSION`.
        StoreError: the file cannot be opened.
    """

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self._lock = threading.RLock()
        self._pid = os.getpid()
        self._db: sqlite_utils.Database | None = None
        self._check_file()
        self._open()

    # -- opening -------------------------------------------------------------------------

    def _check_file(self) -> None:
        p = self.path
        if p.is_dir():
            raise NotAStore(f"{p} is a directory, not an Auto store (an SQLite file)")
        if p.exists() and p.stat().st_size > 0:
            with open(p, "rb") as fh:
                head = fh.read(16)
            if head != _SQLITE_MAGIC:
                raise NotAStore(f"{p} is not an Auto store: not an SQLite database file (bad header)")

    def _open(self) -> None:
        try:
            conn = sqlite3.connect(str(self.path), timeout=BUSY_TIMEOUT_MS / 1000, check_same_thread=False)
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open store {self.path}: {exc}") from None
        conn.isolation_level = None  # we issue BEGIN/COMMIT ourselves
        try:
            conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            self._db = sqlite_utils.Database(conn, execute_plugins=False)
            self._migrate()  # refuses a foreign database before anything is changed in it
            self._retry(lambda: conn.execute("PRAGMA journal_mode = WAL").fetchone())
            conn.execute("PRAGMA synchronous = NORMAL")
        except sqlite3.DatabaseError as exc:
            conn.close()
            if "not a database" in str(exc) or "malformed" in str(exc):
                raise NotAStore(f"{self.path} is not an Auto store: {exc}") from None
            raise StoreError(f"cannot open store {self.path}: {exc}") from None
        except BaseException:
            conn.close()
            raise
        self._pid = os.getpid()

    def _read_version(self) -> int:
        """The stored schema version (0 for an empty database); raises NotAStore/SchemaTooNew."""
        db = self._db
        assert db is not None
        tables = set(db.table_names())
        if "meta" not in tables:
            if tables:
                raise NotAStore(
                    f"{self.path} is an SQLite database but not an Auto store "
                    f"(it holds other tables: {', '.join(sorted(tables)[:5])})"
                )
            return 0
        row = db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        fmt = db.execute("SELECT value FROM meta WHERE key = 'format'").fetchone()
        if row is None or fmt is None or fmt[0] != STORE_FORMAT:
            raise NotAStore(f"{self.path} is an SQLite database but not an Auto store (no format marker)")
        try:
            version = int(row[0])
        except ValueError:
            raise NotAStore(f"{self.path}: unreadable schema_version {row[0]!r}") from None
        if version > SCHEMA_VERSION:
            raise SchemaTooNew(
                f"{self.path} has schema version {version}; this Auto understands up to "
                f"{SCHEMA_VERSION}: upgrade Auto to read it"
            )
        return version

    def _migrate(self) -> None:
        """Create or upgrade the schema (one transaction) when the stored version is older."""
        db = self._db
        assert db is not None
        if self._retry(self._read_version) == SCHEMA_VERSION:
            return

        def step() -> None:
            self._begin()
            try:
                version = self._read_version()  # re-read under the write lock
                for v, fn in MIGRATIONS:
                    if v > version:
                        fn(db)
                        db["meta"].upsert({"key": "schema_version", "value": str(v)}, pk="key")
                        db["meta"].upsert({"key": "format", "value": STORE_FORMAT}, pk="key")
                db.conn.execute("COMMIT")
            except BaseException:
                self._rollback()
                raise

        self._retry(step)

    def _conn_db(self) -> sqlite_utils.Database:
        if self._db is None:
            raise StoreError(f"store {self.path} is closed")
        if os.getpid() != self._pid:  # forked: never share a connection across processes
            self._db = None
            self._open()
        assert self._db is not None
        return self._db

    def close(self) -> None:
        """Close the connection (idempotent)."""
        with self._lock:
            if self._db is not None and os.getpid() == self._pid:
                self._db.conn.close()
            self._db = None

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Store({str(self.path)!r})"

    # -- transactions --------------------------------------------------------------------

    def _begin(self) -> None:
        assert self._db is not None
        self._db.conn.execute("BEGIN IMMEDIATE")

    def _rollback(self) -> None:
        if self._db is not None and self._db.conn.in_transaction:
            self._db.conn.execute("ROLLBACK")

    @staticmethod
    def _retry(fn: Callable[[], Any]) -> Any:
        """Run ``fn``, retrying on SQLITE_BUSY/locked with jittered backoff for up to 30 s."""
        deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
        delay = 0.005
        while True:
            try:
                return fn()
            except sqlite3.OperationalError as exc:
                if not _is_busy(exc) or time.monotonic() > deadline:
                    raise
                time.sleep(delay * (0.5 + random.random()))
                delay = min(delay * 2, 0.25)

    def _write(self, fn: Callable[[sqlite_utils.Database], Any]) -> Any:
        """Run ``fn(db)`` inside one ``BEGIN IMMEDIATE`` transaction (retried on busy)."""
        with self._lock:
            db = self._conn_db()

            def attempt() -> Any:
                self._begin()
                try:
                    result = fn(db)
                    db.conn.execute("COMMIT")
                    return result
                except BaseException:
                    self._rollback()
                    raise

            return self._retry(attempt)

    def _read(self, sql: str, params: Iterable[Any] = ()) -> list[dict]:
        with self._lock:
            db = self._conn_db()
            cur = self._retry(lambda: db.execute(sql, list(params)))
            cols = [c[0] for c in cur.description]
            return [dict(zip(cols, r)) for r in cur.fetchall()]

    # -- meta ----------------------------------------------------------------------------

    @property
    def schema_version(self) -> int:
        """``meta.schema_version`` of the open store."""
        rows = self._read("SELECT value FROM meta WHERE key = 'schema_version'")
        return int(rows[0]["value"])

    # -- ingest --------------------------------------------------------------------------

    def ingest(self, spans: Iterable[Any] = (), traces: Iterable[Any] = ()) -> dict:
        """Write spans and traces in one transaction: all of them or none.

        Args:
            spans: span dicts with the :data:`SPAN_FIELDS` (``input``/``output``/``error``/
                ``attributes`` as JSON values, not text); a ``digest`` key, if present, must
                match. Dataclasses/pydantic models with those fields are accepted.
            traces: trace dicts with the :data:`TRACE_FIELDS`.

        Returns:
            ``{"spans": inserted, "traces": inserted, "unchanged": already present}``.

        Raises:
            IngestError: a record is malformed, not canonical JSON, or re-uses an existing id
                with different content. Nothing of the batch is written.
        """
        ns = [_normalize_span(s) for s in spans]
        nt = [_normalize_trace(t) for t in traces]
        ns = _dedupe(ns, "span_id", "span")
        nt = _dedupe(nt, "trace_id", "trace")

        def write(db: sqlite_utils.Database) -> dict:
            new_spans = self._new_rows(db, "spans", "span_id", ns)
            new_traces = self._new_rows(db, "traces", "trace_id", nt)
            if new_spans:
                db["spans"].insert_all([_span_row(s) for s in new_spans], pk="span_id")
                _bump(db, "span_count", len(new_spans))
            if new_traces:
                db["traces"].insert_all(
                    [{**t, "attributes": _dumps(t["attributes"])} for t in new_traces], pk="trace_id"
                )
                _bump(db, "trace_count", len(new_traces))
            unchanged = len(ns) - len(new_spans) + len(nt) - len(new_traces)
            return {"spans": len(new_spans), "traces": len(new_traces), "unchanged": unchanged}

        try:
            return self._write(write)
        except sqlite3.IntegrityError as exc:
            raise IngestError(f"batch rejected by the database: {exc}") from None

    @staticmethod
    def _new_rows(db: sqlite_utils.Database, table: str, key: str, items: list[dict]) -> list[dict]:
        if not items:
            return []
        existing: dict[str, str] = {}
        ids = [it[key] for it in items]
        for i in range(0, len(ids), 500):
            chunk = ids[i : i + 500]
            q = f"SELECT {key}, digest FROM {table} WHERE {key} IN ({','.join('?' * len(chunk))})"
            existing.update({r[0]: r[1] for r in db.execute(q, chunk).fetchall()})
        out = []
        for it in items:
            d = existing.get(it[key])
            if d is None:
                out.append(it)
            elif d != it["digest"]:
                raise IngestError(
                    f"{table[:-1]} {it[key]} already exists with different content "
                    f"({d} != {it['digest']}); {table} are immutable"
                )
        return out

    def add_witness(
        self,
        task: str | dict,
        input: dict | None = None,
        output: Any = None,
        *,
        status: str = "ok",
        error: dict | None = None,
        attributes: dict | None = None,
        started_ns: int | None = None,
        ended_ns: int | None = None,
        trace_id: str | None = None,
        span_id: str | None = None,
    ) -> str:
        """Write one task span (and a new trace holding it) from a captured execution.

        Used by the runtime's deopt capture sink: the reference agent answered an input the
        artifact declined, and that answer becomes a new witness for the next generation.
        ``Tiered(..., capture=store.add_witness)`` works directly: called with one dict
        ``{"task", "input", "output", ...}``, the other keys (``reason``, ``artifact_id``,
        ``generation``, ``latency_us``, ...) become attributes ``auto.capture.<key>``.

        Args:
            task: task name (or the capture dict, see above); input: the bound arguments (JSON
                object); output: the result (JSON).
            status: ``"ok"`` or ``"error"``; error: ``{"type", "message"}`` when failed.
            attributes: extra span attributes (``auto.source`` defaults to ``"add_witness"``,
                ``"capture"`` for a capture dict).
            started_ns, ended_ns: times in ns (default: now).
            trace_id, span_id: ids (default: fresh random ids; with a given ``trace_id`` no
                trace row is written).

        Returns:
            the span id.

        Raises:
            IngestError: the values are not canonical JSON, the ids collide, or the capture
                dict lacks ``task``/``input``.
        """
        if isinstance(task, dict):
            rec = dict(task)
            try:
                task, input, output = rec.pop("task"), rec.pop("input"), rec.pop("output", output)
            except KeyError as exc:
                raise IngestError(f"capture record lacks {exc.args[0]!r}") from None
            extra = {f"auto.capture.{k}": v for k, v in rec.items()}
            attributes = {"auto.source": "capture", **extra, **(attributes or {})}
        if not isinstance(task, str) or not isinstance(input, dict):
            raise IngestError("add_witness needs a task name and an input object (dict)")
        now = time.time_ns()
        started = now if started_ns is None else started_ns
        if ended_ns is not None:
            ended = ended_ns
        else:
            ended = now if started_ns is None else started_ns
        tid = trace_id or new_trace_id()
        sid = span_id or new_span_id()
        attrs = {"auto.source": "add_witness", **(attributes or {})}
        span = {
            "trace_id": tid, "span_id": sid, "parent_span_id": None, "name": task, "kind": "task",
            "task": task, "site": None, "started_ns": started, "ended_ns": ended, "status": status,
            "input": input, "output": output, "error": error, "attributes": attrs,
        }
        trace = {"trace_id": tid, "name": task, "started_ns": started, "ended_ns": ended,
                 "status": status, "attributes": {"auto.source": attrs["auto.source"]}}
        self.ingest([span], [trace] if trace_id is None else [])
        return sid

    # -- reading -------------------------------------------------------------------------

    def spans(self, trace_id: str | None = None, task: str | None = None, kind: str | None = None) -> list[dict]:
        """Spans as dicts (JSON columns parsed), ordered by ``(started_ns, span_id)``.

        Filters combine with AND: ``trace_id``; ``task`` (the span's task column: a task span
        and the model calls made inside it); ``kind`` (``task``/``llm``/``tool``).
        """
        where, params = [], []
        for col, val in (("trace_id", trace_id), ("task", task), ("kind", kind)):
            if val is not None:
                where.append(f"{col} = ?")
                params.append(val)
        sql = "SELECT * FROM spans" + (" WHERE " + " AND ".join(where) if where else "")
        sql += " ORDER BY started_ns, span_id"
        return [_span_from_row(r) for r in self._read(sql, params)]

    def traces(self) -> list[dict]:
        """All traces as dicts, ordered by ``(started_ns, trace_id)``."""
        rows = self._read("SELECT * FROM traces ORDER BY started_ns, trace_id")
        return [_trace_from_row(r) for r in rows]

    def tasks(self) -> dict[str, int]:
        """``{task name: number of task spans}`` over the whole store."""
        rows = self._read("SELECT task, count(*) AS n FROM spans WHERE kind = 'task' GROUP BY task ORDER BY task")
        return {r["task"]: r["n"] for r in rows}

    def witnesses(self, task: str, include_errors: bool = False) -> list[Witness]:
        """The task spans of ``task`` as :class:`Witness` records, ordered by start time.

        By default only successful executions (status ``ok``: a *witness* in the architecture's
        words); ``include_errors=True`` adds failed ones (``output`` None, ``error`` set).
        """
        sql = "SELECT * FROM spans WHERE kind = 'task' AND task = ?"
        if not include_errors:
            sql += " AND status = 'ok'"
        sql += " ORDER BY started_ns, span_id"
        out = []
        for r in self._read(sql, [task]):
            s = _span_from_row(r)
            out.append(Witness(
                input=s["input"] if isinstance(s["input"], dict) else {},
                output=s["output"], status=s["status"], error=s["error"],
                trace_id=s["trace_id"], span_id=s["span_id"], started_ns=s["started_ns"],
                digest=s["digest"], attributes=s["attributes"],
            ))
        return out

    # -- eval runs -----------------------------------------------------------------------

    def put_eval_run(self, record: dict) -> str:
        """Store an eval-run record; returns its content-addressed id ``digest(record)``.

        ``task`` and ``verdict`` columns are copied from ``record`` when present. Storing the
        same record twice is a no-op.
        """
        rid = digest(record)
        row = {"id": rid, "task": record.get("task"), "created_ns": time.time_ns(),
               "verdict": None if record.get("verdict") is None else str(record.get("verdict")),
               "record": canonical_json(record)}
        self._write(lambda db: db.execute(
            "INSERT OR IGNORE INTO eval_runs (id, task, created_ns, verdict, record) VALUES (?, ?, ?, ?, ?)",
            [row["id"], row["task"], row["created_ns"], row["verdict"], row["record"]],
        ))
        return rid

    def get_eval_run(self, id: str) -> dict | None:
        """The record stored under ``id``, or ``None``."""
        rows = self._read("SELECT record FROM eval_runs WHERE id = ?", [id])
        return json.loads(rows[0]["record"]) if rows else None

    def eval_runs(self, task: str | None = None) -> list[dict]:
        """Eval-run rows ``{id, task, created_ns, verdict, record}`` (record parsed), oldest first."""
        sql = "SELECT * FROM eval_runs" + (" WHERE task = ?" if task else "") + " ORDER BY created_ns, id"
        rows = self._read(sql, [task] if task else [])
        return [{**r, "record": json.loads(r["record"])} for r in rows]

    # -- artifacts -----------------------------------------------------------------------

    def put_artifact(self, wasm: bytes, manifest: dict, task: str, generation: int) -> str:
        """Store an artifact; returns its id ``"sha256:<hex>"`` of ``wasm`` (idempotent)."""
        aid = digest_bytes(bytes(wasm))
        man = canonical_json(manifest)
        self._write(lambda db: db.execute(
            "INSERT OR IGNORE INTO artifacts (id, task, generation, created_ns, manifest, wasm) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            [aid, task, int(generation), time.time_ns(), man, sqlite3.Binary(bytes(wasm))],
        ))
        return aid

    def get_artifact(self, id: str) -> Artifact | None:
        """The artifact stored under ``id``, or ``None``."""
        rows = self._read("SELECT * FROM artifacts WHERE id = ?", [id])
        return self._artifact(rows[0]) if rows else None

    def latest_artifact(self, task: str) -> Artifact | None:
        """The artifact of ``task`` with the highest generation (latest stored on ties), or None."""
        rows = self._read(
            "SELECT * FROM artifacts WHERE task = ? ORDER BY generation DESC, created_ns DESC, id LIMIT 1", [task]
        )
        return self._artifact(rows[0]) if rows else None

    @staticmethod
    def _artifact(r: dict) -> Artifact:
        return Artifact(id=r["id"], task=r["task"], generation=r["generation"], created_ns=r["created_ns"],
                        manifest=json.loads(r["manifest"]), wasm=bytes(r["wasm"]))

    # -- provenance ----------------------------------------------------------------------

    def digest(self, task: str | None = None) -> str:
        """The store digest: ``digest([span digests ordered by (started_ns, span_id)])``.

        With ``task``, only the spans whose task column is ``task``. Independent of insertion
        order, so two stores holding the same spans have the same digest.
        """
        sql = "SELECT digest FROM spans" + (" WHERE task = ?" if task else "") + " ORDER BY started_ns, span_id"
        rows = self._read(sql, [task] if task else [])
        return digest([r["digest"] for r in rows])

    def verify(self) -> VerifyReport:
        """Re-derive every stored digest (spans, traces, eval-run ids, artifact ids).

        Returns a :class:`VerifyReport`; ``report.ok`` is False on any mismatch (the CLI exits
        non-zero), and ``report.raise_for_mismatch()`` raises :class:`IntegrityError`.
        """
        mismatches: list[dict] = []

        def check(table: str, key: str, stored: str, derive: Callable[[], str]) -> None:
            try:
                d = derive()
            except (TypeError, ValueError) as exc:
                d = f"<unreadable: {exc}>"
            if d != stored:
                mismatches.append({"table": table, "id": key, "stored": stored, "derived": d})

        spans = self._read("SELECT * FROM spans ORDER BY started_ns, span_id")
        for r in spans:
            check("spans", r["span_id"], r["digest"], lambda r=r: span_digest(_span_from_row(r)))
        traces = self._read("SELECT * FROM traces")
        for r in traces:
            check("traces", r["trace_id"], r["digest"], lambda r=r: trace_digest(_trace_from_row(r)))
        evals = self._read("SELECT id, record FROM eval_runs")
        for r in evals:
            check("eval_runs", r["id"], r["id"], lambda r=r: digest(json.loads(r["record"])))
        arts = self._read("SELECT id, wasm FROM artifacts")
        for r in arts:
            check("artifacts", r["id"], r["id"], lambda r=r: digest_bytes(bytes(r["wasm"])))
        # rows deleted behind the store's back: the counters kept at ingest no longer match
        for key, table, n in (("span_count", "spans", len(spans)), ("trace_count", "traces", len(traces))):
            row = self._read("SELECT value FROM meta WHERE key = ?", [key])
            if row and int(row[0]["value"]) != n:
                mismatches.append({"table": table, "id": "*", "stored": f"{row[0]['value']} rows ingested",
                                   "derived": f"{n} rows present"})
        triggers = {r["name"] for r in self._read("SELECT name FROM sqlite_master WHERE type = 'trigger'")}
        for table in ("traces", "spans"):
            for op in ("update", "delete"):
                if f"{table}_no_{op}" not in triggers:
                    mismatches.append({"table": table, "id": "*", "stored": f"trigger {table}_no_{op}",
                                       "derived": "missing (rows may have been changed)"})
        return VerifyReport(
            ok=not mismatches, spans=len(spans), traces=len(traces), eval_runs=len(evals),
            artifacts=len(arts), mismatches=mismatches,
            store_digest=digest([r["digest"] for r in spans]),
        )
