"""The store's layout: tables, indexes, immutability triggers, row counters and migrations.

Tables (also in ``docs/architecture.md``)::

    meta       key TEXT PK, value TEXT                       (schema_version, format, row counters)
    traces     trace_id PK, name, started_ns, ended_ns, status, attributes JSON, digest
    spans      span_id PK, trace_id, parent_span_id, name, kind (task/llm/tool), task, site,
               started_ns, ended_ns, status (ok/error), input JSON, output JSON, error JSON,
               attributes JSON, digest
    eval_runs  id PK (digest of the canonical record), task, created_ns, verdict, record JSON
    artifacts  id PK ("sha256:" of the wasm bytes), task, generation, created_ns, manifest JSON,
               wasm BLOB
    ratchet_events  id PK (autoincrement), task, kind, generation, artifact_id, created_ns,
               detail JSON                                  (version 2; insert-only)

Version 3 (payloads by content digest, :mod:`auto.store.payloads`)::

    payloads   id PK, digest BLOB UNIQUE (sha-256 of the canonical JSON), codec, dict_id, size,
               body BLOB                                    (insert-only)
    spans      seq PK (insertion order), span_id UNIQUE, trace_id, parent_span_id, name, kind,
               task, site, started_ns, ended_ns, status, input_id, output_id, error_id,
               attributes_id (payload ids; NULL = JSON null), logical_call_id, attempt (copied
               from the attributes for the census), digest
    witness_sets  digest PK (of the set), task, n, through_seq, created_ns   (insert-only)

Indexes on ``spans``: ``(trace_id)``, ``(task, kind, started_ns)`` (the census and compile of
one task read only its rows), ``(logical_call_id) WHERE attempt > 0`` (retried model calls).

``meta.schema_version`` names the layout; :data:`MIGRATIONS` lists the steps that bring an older
store up to :data:`SCHEMA_VERSION` (:func:`migrate`). ``meta.format`` = :data:`STORE_FORMAT`
marks the file as an Auto store.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import sqlite_utils

from auto.errors import NotAStore, SchemaTooNew
from auto.store.normalize import legacy_span_texts, span_rows
from auto.store.payloads import PayloadWriter
from auto.store.tx import SqliteTx

SCHEMA_VERSION = 3
"""The store layout this version of Auto writes (``meta.schema_version``)."""

STORE_FORMAT = "auto.store"
"""``meta.format``: marks an SQLite file as an Auto store."""

SQLITE_MAGIC = b"SQLite format 3\x00"
"""The first 16 bytes of every SQLite 3 database file (SQLite file format, "The Database Header")."""

IMMUTABLE_TABLES = ("traces", "spans", "ratchet_events", "payloads", "witness_sets")
"""Tables whose rows SQLite triggers keep insert-only."""

COUNTED_TABLES = {"span_count": "spans", "trace_count": "traces"}
"""``meta`` row counter -> the table whose ingested rows it counts."""


def immutability_triggers() -> list[tuple[str, str, str]]:
    """``(table, operation, trigger name)`` of the triggers that refuse ``UPDATE``/``DELETE`` on
    :data:`IMMUTABLE_TABLES`."""
    return [(table, op, f"{table}_no_{op.lower()}") for table in IMMUTABLE_TABLES for op in ("UPDATE", "DELETE")]


def _create_triggers(db: sqlite_utils.Database, tables: tuple[str, ...]) -> None:
    for table, op, name in immutability_triggers():
        if table in tables:
            db.execute(
                f"CREATE TRIGGER IF NOT EXISTS {name} BEFORE {op} ON {table} "
                f"BEGIN SELECT RAISE(ABORT, '{table} are immutable (insert-only)'); END"
            )


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
    _create_triggers(db, ("traces", "spans"))


def _migrate_v2(db: sqlite_utils.Database) -> None:
    """Version 2: the ratchet's log (``ratchet_events``), insert-only."""
    db["ratchet_events"].create(
        {"id": int, "task": str, "kind": str, "generation": int, "artifact_id": str, "created_ns": int,
         "detail": str},
        pk="id", not_null={"task", "kind", "detail"}, if_not_exists=True,
    )
    db["ratchet_events"].create_index(["task", "kind", "id"], if_not_exists=True)
    _create_triggers(db, ("ratchet_events",))


SPANS_V3_COLUMNS = (
    "seq INTEGER PRIMARY KEY, span_id TEXT NOT NULL UNIQUE, trace_id TEXT NOT NULL, parent_span_id TEXT, "
    "name TEXT NOT NULL, kind TEXT NOT NULL, task TEXT, site TEXT, started_ns INTEGER NOT NULL, ended_ns INTEGER, "
    "status TEXT NOT NULL, input_id INTEGER, output_id INTEGER, error_id INTEGER, attributes_id INTEGER, "
    "logical_call_id TEXT, attempt INTEGER NOT NULL DEFAULT 0, digest TEXT NOT NULL"
)
"""The version-3 ``spans`` columns (SQLite types)."""

SPAN_INDEXES = (
    "CREATE INDEX IF NOT EXISTS idx_spans_trace_id ON spans (trace_id)",
    "CREATE INDEX IF NOT EXISTS idx_spans_task_kind_started_ns ON spans (task, kind, started_ns)",
    "CREATE INDEX IF NOT EXISTS idx_spans_retries ON spans (logical_call_id) WHERE attempt > 0",
)
"""The indexes of the version-3 ``spans`` table (the same statements on PostgreSQL)."""


def _migrate_v3(db: sqlite_utils.Database) -> None:
    """Version 3: span payloads stored once by content digest (``payloads``), integer ``seq``
    (insertion order), the census's retry columns, ``witness_sets``. Existing spans are copied
    in insertion order, their digests unchanged (a digest is over the values, not the layout)."""

    db.execute("CREATE TABLE IF NOT EXISTS payloads (id INTEGER PRIMARY KEY, digest BLOB NOT NULL UNIQUE, "
               "codec INTEGER NOT NULL, dict_id INTEGER, size INTEGER NOT NULL, body BLOB NOT NULL)")
    db.execute("CREATE TABLE IF NOT EXISTS witness_sets (digest TEXT PRIMARY KEY, task TEXT NOT NULL, "
               "n INTEGER NOT NULL, through_seq INTEGER NOT NULL, created_ns INTEGER NOT NULL)")
    db.execute(f"CREATE TABLE spans_v3 ({SPANS_V3_COLUMNS})")
    tx = SqliteTx(db)
    writer = PayloadWriter()
    writer.begin()
    cur = db.conn.execute("SELECT rowid, * FROM spans ORDER BY rowid")
    cols = [c[0] for c in cur.description]
    while True:
        batch = cur.fetchmany(2000)
        if not batch:
            break
        rows = [dict(zip(cols, r)) for r in batch]
        prepared = [(r, legacy_span_texts(r)) for r in rows]
        rows_out = span_rows(tx, writer, prepared)
        tx.executemany(
            "INSERT INTO spans_v3 (seq, span_id, trace_id, parent_span_id, name, kind, task, site, started_ns, "
            "ended_ns, status, input_id, output_id, error_id, attributes_id, logical_call_id, attempt, digest) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [(r["rowid"], *row) for r, row in zip(rows, rows_out)])
    db.execute("DROP TABLE spans")
    db.execute("ALTER TABLE spans_v3 RENAME TO spans")
    for stmt in SPAN_INDEXES:
        db.execute(stmt)
    _create_triggers(db, ("spans", "payloads", "witness_sets"))


MIGRATIONS: list[tuple[int, Callable[[sqlite_utils.Database], None]]] = [
    (1, _migrate_v1),
    (2, _migrate_v2),
    (3, _migrate_v3),
]
"""``(version, step)`` in order; ``step`` brings a store at ``version - 1`` to ``version``.
To add version 4: append ``(4, _migrate_v4)`` and bump :data:`SCHEMA_VERSION`."""


def read_version(db: sqlite_utils.Database, path: Path) -> int:
    """The stored schema version (0 for an empty database).

    Raises:
        NotAStore: the database holds other tables, or has no (or a foreign) format marker, or an
            unreadable version.
        SchemaTooNew: the version is newer than :data:`SCHEMA_VERSION`.
    """
    tables = set(db.table_names())
    if "meta" not in tables:
        if tables:
            raise NotAStore(
                f"{path} is an SQLite database but not an Auto store "
                f"(it holds other tables: {', '.join(sorted(tables)[:5])})"
            )
        return 0
    row = db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    fmt = db.execute("SELECT value FROM meta WHERE key = 'format'").fetchone()
    if row is None or fmt is None or fmt[0] != STORE_FORMAT:
        raise NotAStore(f"{path} is an SQLite database but not an Auto store (no format marker)")
    try:
        version = int(row[0])
    except ValueError:
        raise NotAStore(f"{path}: unreadable schema_version {row[0]!r}") from None
    if version > SCHEMA_VERSION:
        raise SchemaTooNew(
            f"{path} has schema version {version}; this Auto understands up to "
            f"{SCHEMA_VERSION}: upgrade Auto to read it"
        )
    return version


def migrate(db: sqlite_utils.Database, path: Path) -> None:
    """Bring the store up to :data:`SCHEMA_VERSION`, inside the caller's write transaction (the
    version is re-read under the lock). Raises as :func:`read_version`."""
    version = read_version(db, path)
    for v, step in MIGRATIONS:
        if v > version:
            step(db)
            db["meta"].upsert({"key": "schema_version", "value": str(v)}, pk="key")
            db["meta"].upsert({"key": "format", "value": STORE_FORMAT}, pk="key")


def bump_counter(tx: Any, key: str, n: int) -> None:
    """Add ``n`` to the row counter ``key`` (:data:`COUNTED_TABLES`) in ``meta``, inside the
    caller's transaction ``tx`` (an SQLite or PostgreSQL Tx), *before* the ``n`` rows are
    inserted (on PostgreSQL the counter row's lock then orders the writers).

    The counters let :meth:`~auto.store.Store.verify` detect deleted rows, which digests alone
    cannot; a store written before the counters existed starts counting from its current rows.
    """
    rows = tx.query("SELECT value FROM meta WHERE key = ?", [key])
    if not rows:
        current = tx.query(f"SELECT count(*) FROM {COUNTED_TABLES[key]}")[0][0]
        tx.execute("INSERT INTO meta (key, value) VALUES (?, ?)", [key, str(current + n)])
    else:
        tx.execute("UPDATE meta SET value = ? WHERE key = ?", [str(int(rows[0][0]) + n), key])
