"""The SQLite side of the store's transaction interface: a write transaction and a snapshot reader.

:class:`auto.store.Store` talks to its database only through these methods (and their
PostgreSQL twins in :mod:`auto.store.postgres`): ``execute`` / ``executemany`` / ``query`` with
``?`` placeholders inside a write, and ``reader(sql, params)`` / ``reader.iter(...)`` inside a
snapshot.
"""

from __future__ import annotations

import sqlite3
from typing import Any, Iterable, Iterator

import sqlite_utils


class SqliteTx:
    """One write transaction on an SQLite store (what :meth:`Connection.write` passes its function).

    SQL uses ``?`` placeholders and the subset both databases speak (``ON CONFLICT … DO NOTHING``,
    ``RETURNING``, window functions).
    """

    dialect = "sqlite"

    def __init__(self, db: sqlite_utils.Database) -> None:
        self.db = db
        self._conn = db.conn

    def execute(self, sql: str, params: Iterable[Any] = ()) -> None:
        """Run one statement."""
        self._conn.execute(sql, list(params))

    def executemany(self, sql: str, rows: Iterable[Iterable[Any]]) -> None:
        """Run one statement per parameter row."""
        self._conn.executemany(sql, rows)

    def query(self, sql: str, params: Iterable[Any] = ()) -> list[tuple]:
        """The rows of one statement, as tuples."""
        return self._conn.execute(sql, list(params)).fetchall()

    def lock_ingest(self) -> None:
        """Nothing to do: ``BEGIN IMMEDIATE`` already holds the file's write lock."""


class Reader:
    """Reads inside one snapshot (:meth:`Connection.snapshot`): ``reader(sql, params)`` returns
    the rows as dicts, :meth:`iter` streams them as tuples in batches of ``size``."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    def __call__(self, sql: str, params: Iterable[Any] = ()) -> list[dict]:
        cur = self._conn.execute(sql, list(params))
        cols = [c[0] for c in cur.description]
        return [dict(zip(cols, r)) for r in cur.fetchall()]

    def iter(self, sql: str, params: Iterable[Any] = (), size: int = 5000) -> Iterator[tuple]:
        cur = self._conn.execute(sql, list(params))
        while True:
            rows = cur.fetchmany(size)
            if not rows:
                return
            yield from rows
