"""The PostgreSQL store: one database shared by agents and compilers on many hosts.

``Store("postgresql://user:password@host:5432/db")`` (any libpq connection URI; ``postgres://``
too) opens the store in the database's current schema (``?options=-csearch_path%3Dname`` picks
another). It offers what :class:`~auto.store.connection.Connection` offers over an SQLite file —
``write`` / ``snapshot`` / ``read`` / ``stream`` — so :class:`auto.store.Store` and everything
above it (the census, the compile ladder, the ratchet) run on it unchanged. Requires psycopg 3
(``pip install 'auto[postgres]'``).

* **Same schema.** The tables, indexes, immutability triggers and row counters of schema
  version 3 (:mod:`auto.store.postgres_schema`), text columns with ``COLLATE "C"`` so orderings
  (and so store digests) equal SQLite's; payloads and digests are computed by the same code.
* **Transactions.** A write is one transaction; ingests take a transaction-scoped advisory lock
  first, so span ``seq`` values are committed in order (what a witness set and an incremental
  verification rely on) and the row counters stay exact with many writers. A snapshot is a
  ``REPEATABLE READ READ ONLY`` transaction: one consistent view, as in SQLite's WAL mode.
* **A server that goes away.** A write whose connection fails (server down, restarted,
  network cut) is retried on a new connection with jittered backoff until
  :data:`RETRY_DEADLINE_S`; a transaction that did not commit left nothing behind, and an ingest
  that did is recognized on retry (same ids and digests: unchanged), so nothing is half-written
  or doubled. Past the deadline the write fails with one :class:`~auto.errors.StoreError` line.
"""

from __future__ import annotations

import contextlib
import os
import random
import re
import threading
import time
from typing import Any, Callable, Iterable, Iterator
from urllib.parse import urlsplit, urlunsplit

from auto.errors import IngestError, NotAStore, StoreError
from auto.store.postgres_schema import migrate_pg, read_version_pg
from auto.store.schema import SCHEMA_VERSION

DSN_PREFIXES = ("postgresql://", "postgres://")
"""URI schemes that name a PostgreSQL store (libpq connection URIs)."""

RETRY_DEADLINE_S = 30.0
"""How long a write keeps retrying on a failed connection before it raises (s)."""

CONNECT_TIMEOUT_S = 5
"""libpq ``connect_timeout`` of each connection attempt (s)."""

INGEST_LOCK = 0x6175746F_01
"""Key of the transaction-scoped advisory lock every ingest takes (``"auto"`` + 1)."""

MIGRATE_LOCK = 0x6175746F_02
"""Key of the advisory lock a schema migration takes."""

COMPILE_LOCK_CLASS = 0x6175746F
"""First key of the store's compile lock (``"auto"``; the second is the schema's hash:
:class:`auto.store.lock.PgCompileLock`). A two-key advisory lock never collides with the
one-key locks above: PostgreSQL keeps the two forms apart (``pg_locks.objsubid`` 2 and 1)."""


def is_dsn(location: Any) -> bool:
    """Whether ``location`` names a PostgreSQL store (a ``postgresql://`` URI)."""
    return isinstance(location, str) and location.startswith(DSN_PREFIXES)


_URI_LIKE = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]+):/")
"""A location that starts like a URI (``scheme:/``; one-letter schemes are drive letters)."""


def location_error(location: Any) -> str | None:
    """Why ``location`` names no store although it looks like a URI (a typo'd or unsupported
    scheme: ``postgresq://``, ``postgresql+psycopg://``, ``sqlite://``, ``postgresql:/host``),
    or None (a ``postgresql://`` URI, or a file path). The reason is one line, password removed.

    Such a location is never taken as a file path: ``postgresq://h/db`` would otherwise become
    an SQLite file ``postgresq:/h/db``."""
    if not isinstance(location, str) or is_dsn(location):
        return None
    m = _URI_LIKE.match(location)
    pg = location.lower().startswith(("postgresql:", "postgres:"))
    if m is None and not pg:
        return None
    shown = _without_password(location)
    if pg:
        return f"{shown!r} is not a store: a PostgreSQL URI starts with postgresql:// or postgres:// (lower case)"
    return (f"{shown!r} is not a store: unknown scheme {m.group(1) + '://'!r} (a store is an SQLite file path "
            "or a postgresql:// URI, e.g. postgresql://user:password@host:5432/db)")


def _without_password(text: str) -> str:
    """``text`` as written, less a ``user:password@`` password and a ``password=`` parameter."""
    text = re.sub(r"^([^/]*//[^/@:]*):[^@]*@", r"\1@", text)
    return re.sub(r"(?i)([?&]password=)[^&]*", r"\1***", text)


def location_label(location: Any) -> str:
    """``location`` as messages show it: a URI with its password removed, a path as given."""
    text = str(location)
    if is_dsn(text):
        return redact(text)
    return _without_password(text) if location_error(text) else text


def redact(dsn: str) -> str:
    """``dsn`` with its password removed (for messages and ``Store.location``)."""
    parts = urlsplit(dsn)
    netloc = parts.netloc
    if "@" in netloc:
        cred, host = netloc.rsplit("@", 1)
        user = cred.split(":", 1)[0]
        netloc = f"{user}@{host}"
    query = "&".join(q for q in parts.query.split("&") if q and not q.lower().startswith("password="))
    return urlunsplit((parts.scheme, netloc, parts.path, query, ""))


def psycopg_module() -> Any:
    """The ``psycopg`` module.

    Raises:
        StoreError: psycopg 3 is not installed (``pip install 'auto[postgres]'``)."""
    try:
        import psycopg
    except ImportError:
        raise StoreError("a postgresql:// store needs psycopg 3: pip install 'auto[postgres]'") from None
    return psycopg


def _sql(sql: str) -> str:
    """Placeholders ``?`` -> ``%s`` (and a literal ``%`` escaped) for psycopg."""
    return sql.replace("%", "%%").replace("?", "%s")


class PgTx:
    """One write transaction on a PostgreSQL store (the twin of :class:`auto.store.tx.SqliteTx`)."""

    dialect = "postgresql"

    def __init__(self, cur: Any) -> None:
        self._cur = cur

    def execute(self, sql: str, params: Iterable[Any] = ()) -> None:
        self._cur.execute(_sql(sql), list(params))

    def executemany(self, sql: str, rows: Iterable[Iterable[Any]]) -> None:
        rows = [list(r) for r in rows]
        if rows:
            self._cur.executemany(_sql(sql), rows)

    def query(self, sql: str, params: Iterable[Any] = ()) -> list[tuple]:
        self._cur.execute(_sql(sql), list(params))
        return self._cur.fetchall()

    def lock_ingest(self) -> None:
        """Serialize ingests (see the module docstring)."""
        self._cur.execute("SELECT pg_advisory_xact_lock(%s)", [INGEST_LOCK])


class PgReader:
    """Reads inside one ``REPEATABLE READ`` snapshot (the twin of :class:`auto.store.tx.Reader`)."""

    def __init__(self, conn: Any) -> None:
        self._conn = conn
        self._n = 0

    def __call__(self, sql: str, params: Iterable[Any] = ()) -> list[dict]:
        with self._conn.cursor() as cur:
            cur.execute(_sql(sql), list(params))
            if cur.description is None:
                return []
            cols = [c.name for c in cur.description]
            return [dict(zip(cols, r)) for r in cur.fetchall()]

    def iter(self, sql: str, params: Iterable[Any] = (), size: int = 5000) -> Iterator[tuple]:
        self._n += 1
        with self._conn.cursor(name=f"auto_snapshot_{self._n}") as cur:
            cur.itersize = size
            cur.execute(_sql(sql), list(params))
            yield from cur


class PgConnection:
    """A PostgreSQL store's connection (schema created or migrated on open).

    Args:
        dsn: the libpq connection URI.
        create: create the store's tables in an empty schema (False: refuse it, creating
            nothing).

    Raises (from the constructor):
        StoreError: psycopg is missing, or the server cannot be reached (one line, password
            removed).
        NotAStore: the schema holds other tables and no Auto store; with ``create=False``,
            it holds no tables.
        SchemaTooNew: the store was written by a newer Auto.
    """

    dialect = "postgresql"

    def __init__(self, dsn: str, *, create: bool = True) -> None:
        self.dsn = dsn
        self.label = redact(dsn)
        self.path = None
        self._pg = psycopg_module()
        self._lock = threading.RLock()
        self._pid = os.getpid()
        self._conn: Any = None
        self._conn = self._connect()
        try:
            self._migrate(create)
        except BaseException:
            self.close()
            raise

    # -- connections ---------------------------------------------------------------------

    def _raw_connect(self) -> Any:
        return self._pg.connect(self.dsn, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S)

    def _connect(self) -> Any:
        try:
            return self._raw_connect()
        except self._pg.Error as exc:
            raise StoreError(f"cannot connect to the PostgreSQL store {self.label}: {_first_line(exc)}") from None

    def _connection(self) -> Any:
        """The open connection, reconnecting when it is gone (psycopg errors propagate, so a
        retry loop can wait for the server)."""
        if self._conn is None or self._conn.closed or os.getpid() != self._pid:
            if os.getpid() != self._pid:  # forked: never share a connection across processes
                self._pid = os.getpid()
            self._conn = None
            self._conn = self._raw_connect()
        return self._conn

    def _migrate(self, create: bool) -> None:
        conn = self._conn
        with conn.transaction():
            with conn.cursor() as cur:
                cur.execute("SELECT pg_advisory_xact_lock(%s)", [MIGRATE_LOCK])
                version = read_version_pg(cur, self.label)
                if version == 0 and not create:
                    raise NotAStore(f"{self.label} holds no Auto store (its schema has no tables; nothing was "
                                    "created): record into it first (auto record, auto proxy, auto store import)")
                if version < SCHEMA_VERSION:
                    migrate_pg(cur, version)

    @contextlib.contextmanager
    def bulk(self, cache_mib: int, checkpoint_mib: int) -> Iterator[None]:
        """Nothing to change: the server's buffer cache and checkpoints are its own settings."""
        yield

    def close(self) -> None:
        """Close the connection (idempotent)."""
        with self._lock:
            if self._conn is not None and os.getpid() == self._pid:
                try:
                    self._conn.close()
                except Exception:  # noqa: BLE001 - closing a broken connection
                    pass
            self._conn = None

    # -- errors and retries --------------------------------------------------------------

    def _error(self, exc: BaseException) -> StoreError:
        pg = self._pg
        if isinstance(exc, pg.errors.IntegrityError):
            return IngestError(f"batch rejected by the database: {_first_line(exc)}")
        if isinstance(exc, pg.errors.RaiseException):
            return StoreError(f"{self.label}: {_first_line(exc)}")
        return StoreError(f"{self.label}: the database failed: {_first_line(exc)}")

    def _retryable(self, exc: BaseException) -> bool:
        pg = self._pg
        return isinstance(exc, (pg.OperationalError, pg.errors.SerializationFailure, pg.errors.DeadlockDetected)) \
            and not isinstance(exc, pg.errors.QueryCanceled)

    def _run(self, attempt: Callable[[Any], Any]) -> Any:
        deadline = time.monotonic() + RETRY_DEADLINE_S
        delay = 0.05
        while True:
            try:
                return attempt(self._connection())
            except StoreError:
                raise
            except self._pg.Error as exc:
                if not self._retryable(exc) or time.monotonic() > deadline:
                    if self._retryable(exc):
                        raise StoreError(f"the PostgreSQL store {self.label} is unreachable "
                                         f"({_first_line(exc)}); gave up after {RETRY_DEADLINE_S:.0f} s, "
                                         "nothing of this write was kept") from None
                    raise self._error(exc) from None
                try:
                    if self._conn is not None and self._conn.closed is False and self._conn.broken:
                        self._conn.close()
                except Exception:  # noqa: BLE001
                    pass
                if self._conn is not None and (self._conn.closed or self._conn.broken):
                    self._conn = None
                time.sleep(delay * (0.5 + random.random()))
                delay = min(delay * 2, 1.0)

    # -- the interface -------------------------------------------------------------------

    def write(self, fn: Callable[[PgTx], Any]) -> Any:
        """Run ``fn(tx)`` in one transaction (retried from scratch on a failed connection or a
        serialization failure until :data:`RETRY_DEADLINE_S`); all of it is written or none."""
        def attempt(conn: Any) -> Any:
            with conn.transaction(), conn.cursor() as cur:
                return fn(PgTx(cur))

        with self._lock:
            return self._run(attempt)

    def snapshot(self, fn: Callable[[PgReader], Any]) -> Any:
        """Run ``fn(reader)`` inside one ``REPEATABLE READ READ ONLY`` transaction."""
        def attempt(conn: Any) -> Any:
            with conn.transaction():
                conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
                return fn(PgReader(conn))

        with self._lock:
            return self._run(attempt)

    def read(self, sql: str, params: Iterable[Any] = ()) -> list[dict]:
        """The rows of one query as dicts."""
        def attempt(conn: Any) -> list[dict]:
            return PgReader(conn)(sql, params)

        with self._lock:
            return self._run(attempt)

    def stream(self, sql: str, params: Iterable[Any] = (), size: int = 5000) -> Iterator[tuple]:
        """Stream one query's rows as tuples from a connection of its own (a server-side cursor
        in one snapshot), ``size`` rows at a time."""
        conn = self._connect()
        try:
            with conn.transaction():
                conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
                with conn.cursor(name="auto_stream") as cur:
                    cur.itersize = size
                    cur.execute(_sql(sql), list(params))
                    yield from cur
        except self._pg.Error as exc:
            raise self._error(exc) from None
        finally:
            conn.close()

    def trigger_names(self, query: Callable[..., list[dict]] | None = None) -> set[str]:
        """Names of the enabled user triggers on the store's tables."""
        q = query or self.read
        rows = q("SELECT t.tgname AS name FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid "
                 "WHERE c.relnamespace = current_schema()::regnamespace AND NOT t.tgisinternal "
                 "AND t.tgenabled <> 'D'")
        return {r["name"] for r in rows}

    def quick_check(self, max_errors: int = 5) -> list[str]:
        """Nothing to report: PostgreSQL checks its own pages as it reads them (and its data
        checksums, when the cluster has them, fail a read with an error); ``[]``."""
        return []

    def size_bytes(self) -> int:
        """Bytes of the store's tables with their indexes and TOAST (``pg_total_relation_size``)."""
        rows = self.read("SELECT COALESCE(sum(pg_total_relation_size(c.oid)), 0) AS n FROM pg_class c "
                         "WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind = 'r'")
        return int(rows[0]["n"])


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


__all__ = ["DSN_PREFIXES", "PgConnection", "is_dsn", "location_error", "location_label", "redact"]
