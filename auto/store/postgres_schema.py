"""The store's layout on PostgreSQL: the tables of schema version 3, their indexes and triggers.

The same tables and columns as the SQLite layout (:mod:`auto.store.schema`), in PostgreSQL
types: integers are ``BIGINT`` (ns times, ``seq`` and ids as identity columns), blobs ``BYTEA``,
text ``TEXT COLLATE "C"`` (byte order, as SQLite compares, so ``ORDER BY`` and store digests
agree). Immutability: a PL/pgSQL trigger function refuses ``UPDATE`` and ``DELETE`` row by row
and ``TRUNCATE`` on the insert-only tables. A PostgreSQL store starts at version 3 (there were
no PostgreSQL stores before it); later versions append steps to :data:`PG_MIGRATIONS`.
"""

from __future__ import annotations

from typing import Any, Callable

from auto.errors import NotAStore, SchemaTooNew
from auto.store.schema import IMMUTABLE_TABLES, SCHEMA_VERSION, SPAN_INDEXES, STORE_FORMAT, immutability_triggers

T = 'TEXT COLLATE "C"'

TABLES = (
    f"CREATE TABLE IF NOT EXISTS meta (key {T} PRIMARY KEY, value TEXT)",
    f"CREATE TABLE IF NOT EXISTS traces (trace_id {T} PRIMARY KEY, name {T}, started_ns BIGINT, ended_ns BIGINT, "
    f"status {T}, attributes TEXT, digest {T} NOT NULL)",
    "CREATE TABLE IF NOT EXISTS payloads (id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, "
    "digest BYTEA NOT NULL UNIQUE, codec SMALLINT NOT NULL, dict_id BIGINT, size INTEGER NOT NULL, body BYTEA NOT NULL)",
    f"CREATE TABLE IF NOT EXISTS spans (seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, span_id {T} NOT NULL UNIQUE, "
    f"trace_id {T} NOT NULL, parent_span_id {T}, name {T} NOT NULL, kind {T} NOT NULL, task {T}, site {T}, "
    f"started_ns BIGINT NOT NULL, ended_ns BIGINT, status {T} NOT NULL, input_id BIGINT, output_id BIGINT, "
    f"error_id BIGINT, attributes_id BIGINT, logical_call_id {T}, attempt INTEGER NOT NULL DEFAULT 0, "
    f"digest {T} NOT NULL)",
    f"CREATE TABLE IF NOT EXISTS eval_runs (id {T} PRIMARY KEY, task {T}, created_ns BIGINT, verdict {T}, record TEXT)",
    f"CREATE TABLE IF NOT EXISTS artifacts (id {T} PRIMARY KEY, task {T}, generation INTEGER, created_ns BIGINT, "
    "manifest TEXT, wasm BYTEA)",
    "CREATE TABLE IF NOT EXISTS ratchet_events (id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, "
    f"task {T} NOT NULL, kind {T} NOT NULL, generation INTEGER, artifact_id {T}, created_ns BIGINT, detail TEXT NOT NULL)",
    f"CREATE TABLE IF NOT EXISTS witness_sets (digest {T} PRIMARY KEY, task {T} NOT NULL, n INTEGER NOT NULL, "
    "through_seq BIGINT NOT NULL, created_ns BIGINT NOT NULL)",
)

INDEXES = (
    *SPAN_INDEXES,
    "CREATE INDEX IF NOT EXISTS idx_artifacts_task_generation ON artifacts (task, generation)",
    "CREATE INDEX IF NOT EXISTS idx_ratchet_events_task_kind_id ON ratchet_events (task, kind, id)",
)

IMMUTABLE_FUNCTION = (
    "CREATE OR REPLACE FUNCTION auto_insert_only() RETURNS trigger LANGUAGE plpgsql AS $$ "
    "BEGIN RAISE EXCEPTION '% are immutable (insert-only)', TG_TABLE_NAME; END $$"
)


def _create_v3(cur: Any) -> None:
    for stmt in (*TABLES, *INDEXES, IMMUTABLE_FUNCTION):
        cur.execute(stmt)
    for table, op, name in immutability_triggers():
        cur.execute(f"DROP TRIGGER IF EXISTS {name} ON {table}")
        cur.execute(f"CREATE TRIGGER {name} BEFORE {op} ON {table} FOR EACH ROW EXECUTE FUNCTION auto_insert_only()")
    for table in IMMUTABLE_TABLES:
        cur.execute(f"DROP TRIGGER IF EXISTS {table}_no_truncate ON {table}")
        cur.execute(f"CREATE TRIGGER {table}_no_truncate BEFORE TRUNCATE ON {table} "
                    "FOR EACH STATEMENT EXECUTE FUNCTION auto_insert_only()")


PG_MIGRATIONS: list[tuple[int, Callable[[Any], None]]] = [(3, _create_v3)]
"""``(version, step)`` for PostgreSQL stores, in order (they start at version 3)."""


def read_version_pg(cur: Any, label: str) -> int:
    """The stored schema version in the current schema (0 when it holds no tables).

    Raises:
        NotAStore: the schema holds other tables, or ``meta`` without the format marker.
        SchemaTooNew: the version is newer than :data:`SCHEMA_VERSION`.
    """
    cur.execute("SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()")
    tables = {r[0] for r in cur.fetchall()}
    if "meta" not in tables:
        if tables:
            raise NotAStore(f"{label} is a PostgreSQL database but not an Auto store "
                            f"(its schema holds other tables: {', '.join(sorted(tables)[:5])})")
        return 0
    cur.execute("SELECT key, value FROM meta WHERE key IN ('schema_version', 'format')")
    meta = dict(cur.fetchall())
    if meta.get("format") != STORE_FORMAT or "schema_version" not in meta:
        raise NotAStore(f"{label} is a PostgreSQL database but not an Auto store (no format marker)")
    try:
        version = int(meta["schema_version"])
    except ValueError:
        raise NotAStore(f"{label}: unreadable schema_version {meta['schema_version']!r}") from None
    if version > SCHEMA_VERSION:
        raise SchemaTooNew(f"{label} has schema version {version}; this Auto understands up to "
                           f"{SCHEMA_VERSION}: upgrade Auto to read it")
    return version


def migrate_pg(cur: Any, version: int) -> None:
    """Bring the store from ``version`` to :data:`SCHEMA_VERSION` inside the caller's
    transaction (which holds the migration advisory lock)."""
    for v, step in PG_MIGRATIONS:
        if v > version:
            step(cur)
            for key, value in (("schema_version", str(v)), ("format", STORE_FORMAT)):
                cur.execute("INSERT INTO meta (key, value) VALUES (%s, %s) ON CONFLICT (key) DO UPDATE "
                            "SET value = EXCLUDED.value", [key, value])
