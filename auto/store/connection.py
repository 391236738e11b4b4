"""One SQLite connection to a store file: opening, WAL, busy retries, transactions, forks.

* **WAL + busy timeout.** The file is opened in WAL mode with ``busy_timeout`` =
  :data:`BUSY_TIMEOUT_MS`, and every write transaction (``BEGIN IMMEDIATE``) is retried on
  ``SQLITE_BUSY`` with jittered exponential backoff (5 ms doubling to 250 ms) until that deadline,
  so several processes can record into one store at once and lose nothing.
* **Schema on open.** A file that is not an SQLite database, or an SQLite database that is not an
  Auto store, is refused before anything is changed in it; an older store is migrated
  (:mod:`auto.store.schema`).
* **Threads and forks.** One connection guarded by a lock; a child process reopens the file on
  first use (a connection is never shared across processes).
* **One interface for two databases.** :meth:`Connection.write` hands its function a
  :class:`~auto.store.tx.SqliteTx` (``execute`` / ``executemany`` / ``query`` with ``?`` placeholders), and
  :meth:`Connection.snapshot` a :class:`~auto.store.tx.Reader`; :class:`auto.store.postgres.PgConnection` offers
  the same methods over PostgreSQL, so :class:`auto.store.Store` is written once.
"""

from __future__ import annotations

import contextlib
import os
import random
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

import sqlite_utils

from auto.errors import IngestError, NotAStore, StoreError
from auto.store.schema import SCHEMA_VERSION, SQLITE_MAGIC, migrate, read_version
from auto.store.tx import Reader, SqliteTx

BUSY_TIMEOUT_MS = 30_000
"""SQLite ``busy_timeout`` and the deadline of the retry loop on ``SQLITE_BUSY`` (ms)."""


def _is_busy(exc: BaseException) -> bool:
    msg = str(exc).lower()
    return isinstance(exc, sqlite3.OperationalError) and ("locked" in msg or "busy" in msg)


def store_error(exc: sqlite3.Error, path: Path) -> StoreError:
    """The :class:`StoreError` for an SQLite failure on ``path`` (one line, with a hint where
    one helps: a lock held too long, a corrupt file, a full disk)."""
    msg = str(exc)
    low = msg.lower()
    if isinstance(exc, sqlite3.IntegrityError):
        return IngestError(f"batch rejected by the database: {msg}")
    if _is_busy(exc):
        return StoreError(f"{path}: {msg} (another process holds the store locked; retry when it is done)")
    if "malformed" in low or "not a database" in low or "corrupt" in low:
        return StoreError(f"{path} is corrupt ({msg}); nothing was changed: restore it from a copy or record into a new store")
    if "full" in low or "disk i/o" in low:
        return StoreError(f"{path}: {msg} (the disk is full or failing; nothing of this write was kept)")
    return StoreError(f"{path}: the database failed: {msg}")


def retry_busy(fn: Callable[[], Any]) -> Any:
    """Run ``fn``, retrying on SQLITE_BUSY/locked with jittered backoff for up to
    :data:`BUSY_TIMEOUT_MS`; other errors (and busy past the deadline) propagate."""
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


class Connection:
    """The store file's connection (created if missing).

    Raises (from the constructor):
        NotAStore: the file is a directory, not an SQLite database, or one that holds other tables.
        SchemaTooNew: ``meta.schema_version`` is newer than :data:`~auto.store.schema.SCHEMA_VERSION`.
        StoreError: the file cannot be opened.
    """

    dialect = "sqlite"

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        self.label = str(self.path)
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
            if head != SQLITE_MAGIC:
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
            retry_busy(lambda: conn.execute("PRAGMA journal_mode = WAL").fetchone())
            conn.execute("PRAGMA synchronous = NORMAL")
        except sqlite3.DatabaseError as exc:
            conn.close()
            if "not a database" in str(exc):
                raise NotAStore(f"{self.path} is not an Auto store: {exc}") from None
            if "malformed" in str(exc):  # an SQLite file (the header checked) with damaged pages
                raise store_error(exc, self.path) from None
            raise StoreError(f"cannot open store {self.path}: {exc}") from None
        except BaseException:
            conn.close()
            raise
        self._pid = os.getpid()

    def _migrate(self) -> None:
        """Create or upgrade the schema (one transaction) when the stored version is older."""
        db = self._db
        assert db is not None
        if retry_busy(lambda: read_version(db, self.path)) == SCHEMA_VERSION:
            return
        retry_busy(lambda: self._transaction(db, lambda d: migrate(d, self.path)))

    def _database(self) -> sqlite_utils.Database:
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

    # -- transactions --------------------------------------------------------------------

    @staticmethod
    def _transaction(db: sqlite_utils.Database, fn: Callable[[sqlite_utils.Database], Any]) -> Any:
        """``fn(db)`` inside ``BEGIN IMMEDIATE`` … ``COMMIT`` (rolled back if it raises)."""
        db.conn.execute("BEGIN IMMEDIATE")
        try:
            result = fn(db)
            db.conn.execute("COMMIT")
            return result
        except BaseException:
            if db.conn.in_transaction:
                db.conn.execute("ROLLBACK")
            raise

    def write(self, fn: Callable[[SqliteTx], Any]) -> Any:
        """Run ``fn(tx)`` inside one ``BEGIN IMMEDIATE`` transaction (retried on busy, so ``fn``
        may run more than once and must start from scratch each time); all of it is written or
        none."""
        with self._lock:
            db = self._database()
            try:
                return retry_busy(lambda: self._transaction(db, lambda d: fn(SqliteTx(d))))
            except sqlite3.Error as exc:
                raise store_error(exc, self.path) from None

    def snapshot(self, fn: Callable[[Reader], Any]) -> Any:
        """Run ``fn(reader)`` where every read of the :class:`Reader` sees one consistent
        snapshot of the file (one read transaction: in WAL mode writers keep committing, and none
        of their commits after the first read is seen). Retried on busy."""
        with self._lock:
            db = self._database()
            query = Reader(db.conn)

            def attempt() -> Any:
                db.conn.execute("BEGIN")  # deferred: the snapshot is taken at the first read
                try:
                    result = fn(query)
                    db.conn.execute("COMMIT")
                    return result
                except BaseException:
                    if db.conn.in_transaction:
                        db.conn.execute("ROLLBACK")
                    raise

            try:
                return retry_busy(attempt)
            except sqlite3.Error as exc:
                raise store_error(exc, self.path) from None

    @contextlib.contextmanager
    def bulk(self, cache_mib: int, checkpoint_mib: int) -> Iterator[None]:
        """Settings for writing many large transactions, restored at the end: a page cache of
        ``cache_mib`` MiB (a transaction's dirty index pages stay in memory until its commit
        instead of spilling to the WAL and being read back) and an automatic WAL checkpoint every
        ``checkpoint_mib`` MiB (SQLite's default is 1,000 pages, 4 MiB: a checkpoint after
        nearly every large commit); the WAL is checkpointed and truncated at the end."""
        with self._lock:
            db = self._database()
            conn = db.conn
            cache = conn.execute("PRAGMA cache_size").fetchone()[0]
            auto_cp = conn.execute("PRAGMA wal_autocheckpoint").fetchone()[0]
            page = conn.execute("PRAGMA page_size").fetchone()[0]
            conn.execute(f"PRAGMA cache_size = -{int(cache_mib) * 1024}")
            conn.execute(f"PRAGMA wal_autocheckpoint = {max(1, int(checkpoint_mib) * 2**20 // page)}")
        try:
            yield
        finally:
            with self._lock:
                if self._db is not None and os.getpid() == self._pid:
                    conn = self._db.conn
                    conn.execute(f"PRAGMA cache_size = {int(cache)}")
                    conn.execute(f"PRAGMA wal_autocheckpoint = {int(auto_cp)}")
                    try:
                        retry_busy(lambda: conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone())
                    except sqlite3.Error as exc:
                        raise store_error(exc, self.path) from None

    def quick_check(self, max_errors: int = 5) -> list[str]:
        """SQLite's ``PRAGMA quick_check`` of every page of the file (linear in its size): ``[]``
        when the file is sound, else up to ``max_errors`` problems, one line each.

        Raises:
            StoreError: the check itself could not read the file (one line).
        """
        rows = self.read(f"PRAGMA quick_check({int(max_errors)})")
        lines = [ln for r in rows for v in r.values() for ln in str(v).splitlines()]
        return [] if lines == ["ok"] else [ln for ln in lines if not ln.startswith("***")]

    def read(self, sql: str, params: Iterable[Any] = ()) -> list[dict]:
        """The rows of one query as dicts (column name -> value), retried on busy."""
        with self._lock:
            db = self._database()
            try:
                cur = retry_busy(lambda: db.execute(sql, list(params)))
                cols = [c[0] for c in cur.description]
                return [dict(zip(cols, r)) for r in cur.fetchall()]
            except sqlite3.Error as exc:
                raise store_error(exc, self.path) from None

    def stream(self, sql: str, params: Iterable[Any] = (), size: int = 5000) -> Iterator[tuple]:
        """Stream the rows of one query as tuples, in batches of ``size``, from a connection of
        its own (one statement reads one snapshot in WAL mode); memory stays bounded by ``size``."""
        try:
            conn = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, timeout=BUSY_TIMEOUT_MS / 1000)
        except sqlite3.Error as exc:
            raise store_error(exc, self.path) from None
        try:
            conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            cur = retry_busy(lambda: conn.execute(sql, list(params)))
            while True:
                rows = cur.fetchmany(size)
                if not rows:
                    return
                yield from rows
        except sqlite3.Error as exc:
            raise store_error(exc, self.path) from None
        finally:
            conn.close()

    def trigger_names(self, query: Callable[..., list[dict]] | None = None) -> set[str]:
        """Names of the triggers defined in the store (read through ``query`` when given: a
        snapshot's reader)."""
        q = query or self.read
        return {r["name"] for r in q("SELECT name FROM sqlite_master WHERE type = 'trigger'")}

    def size_bytes(self) -> int:
        """Bytes the store occupies on disk (the file, its WAL and shared-memory index)."""
        total = 0
        for suffix in ("", "-wal", "-shm"):
            p = Path(str(self.path) + suffix)
            if p.exists():
                total += p.stat().st_size
        return total
