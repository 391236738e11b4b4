"""The compile lock of a store: one compile at a time allocates a store's next generation.

A generation number is the store's highest plus one, read when a compile starts and written
when it ends; two compiles of one store at once would both take the same number. A ratchet
takes the lock without waiting (another process compiling is a reason to skip); ``auto compile``
waits for it. :func:`compile_lock` picks the lock of a store's location:

* an SQLite store: an exclusive ``fcntl.flock`` on ``<store>.compile.lock``
  (:class:`CompileLock`), released when its holder closes it or its process dies (a killed
  compiler never blocks the others);
* a PostgreSQL store: a session-level advisory lock in its database (:class:`PgCompileLock`),
  so compiles on every host that shares the store take turns, and released when its holder's
  connection closes, the process dies included (the server ends the session).
"""

from __future__ import annotations

import fcntl
import os
from typing import Any

from auto.errors import StoreError
from auto.store.postgres import CONNECT_TIMEOUT_S, COMPILE_LOCK_CLASS, is_dsn, psycopg_module, redact


class CompileLock:
    """The exclusive compile lock of the store at ``store_path`` (its file ``<store>.compile.lock``).

    Raises:
        StoreError: from :meth:`acquire`, when the lock file cannot be created or opened, or
            a blocking wait fails.
    """

    def __init__(self, store_path: str | os.PathLike) -> None:
        self.path = f"{os.fspath(store_path)}.compile.lock"
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        """Whether this object holds the lock."""
        return self._fd is not None

    def acquire(self, blocking: bool = False) -> bool:
        """Take the lock; returns False when another holder has it and ``blocking`` is False
        (with ``blocking`` True, waits until it is free). Taking a lock this object already
        holds returns True."""
        if self._fd is not None:
            return True
        try:
            fd = os.open(self.path, os.O_CREAT | os.O_RDWR, 0o644)
        except OSError as e:
            raise StoreError(f"{self.path}: cannot open the compile lock ({e.strerror or e})") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
        except OSError as e:
            os.close(fd)
            if blocking:
                raise StoreError(f"{self.path}: cannot take the compile lock ({e.strerror or e})") from None
            return False
        self._fd = fd
        return True

    def release(self) -> None:
        """Give the lock back (nothing when it is not held)."""
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None


class PgCompileLock:
    """The compile lock of the PostgreSQL store at ``dsn``: the advisory lock
    ``(COMPILE_LOCK_CLASS, hashtext(current_schema()))`` of its database, held by a connection of
    its own (same methods as :class:`CompileLock`). A server restart while it is held ends the
    session and so releases it; the compile that held it still finishes.

    Raises:
        StoreError: from :meth:`acquire`, when the server cannot be reached (one line, password
            removed) or psycopg is not installed.
    """

    _SQL = "SELECT {fn}(%s, hashtext(current_schema()))"

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        self.path = redact(dsn)
        """The store's URI without its password (for messages)."""
        self._conn: Any = None

    @property
    def held(self) -> bool:
        """Whether this object holds the lock."""
        return self._conn is not None

    def acquire(self, blocking: bool = False) -> bool:
        """Take the lock; returns False when another holder has it and ``blocking`` is False
        (with ``blocking`` True, waits until it is free). Taking a lock this object already
        holds returns True."""
        if self._conn is not None:
            return True
        pg = psycopg_module()
        try:
            conn = pg.connect(self.dsn, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S)
        except pg.Error as e:
            raise StoreError(f"{self.path}: cannot reach the store for its compile lock ({_line(e)})") from None
        try:
            fn = "pg_advisory_lock" if blocking else "pg_try_advisory_lock"
            row = conn.execute(self._SQL.format(fn=fn), [COMPILE_LOCK_CLASS]).fetchone()
        except pg.Error as e:
            conn.close()
            raise StoreError(f"{self.path}: cannot take the compile lock ({_line(e)})") from None
        if not blocking and not row[0]:
            conn.close()
            return False
        self._conn = conn
        return True

    def release(self) -> None:
        """Give the lock back (nothing when it is not held): its connection is closed."""
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()
            except Exception:  # noqa: BLE001 - a connection the server already ended
                pass


def compile_lock(location: str | os.PathLike) -> CompileLock | PgCompileLock:
    """The compile lock of the store at ``location`` (see the module docstring): a
    :class:`PgCompileLock` for a ``postgresql://`` URI, else the :class:`CompileLock` of the
    SQLite file."""
    if is_dsn(location):
        return PgCompileLock(str(location))
    return CompileLock(location)


def _line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


__all__ = ["CompileLock", "PgCompileLock", "compile_lock"]
