"""An open store: its connection, the read barrier every read takes, and payload texts.

:class:`StoreBase` opens the database (an SQLite file through :mod:`auto.store.connection`, a
PostgreSQL database through :mod:`auto.store.postgres`). Every read of every part of the
:class:`~auto.store.Store` goes through :meth:`StoreBase._read`, :meth:`StoreBase._snapshot`,
:meth:`StoreBase._stream` or :meth:`StoreBase._rows`, which first call the read barriers
registered for the same database in this process (:meth:`StoreBase.add_read_barrier`: a
recorder's background writer registers its ``flush``, so what this process recorded is read back).
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from auto.errors import ArgumentError, IntegrityError, NotAStore, StoreError
from auto.store.connection import Connection
from auto.store.payloads import PayloadMismatch, PayloadTexts, PayloadWriter
from auto.store.postgres import PgConnection, is_dsn, location_error

_BARRIERS: dict[str, list[Callable[[], Any]]] = {}
"""Read barriers of this process by database (:meth:`Store.add_read_barrier`)."""
_BARRIERS_LOCK = threading.Lock()



class StoreBase:
    """The open database under every part of a :class:`~auto.store.Store` (see its constructor
    for the arguments and errors)."""

    def __init__(self, path: str | os.PathLike, *, create: bool = True):
        bad = location_error(path)
        if bad is not None:
            raise ArgumentError(bad)
        if is_dsn(path):
            self._conn: Any = PgConnection(str(path), create=create)
            self.path: Path | None = None
        else:
            if not create:
                p = Path(path)
                if not p.is_file():
                    raise NotAStore(f"{p}: no such store (nothing was created)")
                if p.stat().st_size == 0:
                    raise NotAStore(f"{p} is an empty file, not an Auto store (nothing was changed)")
            self._conn = Connection(path)
            self.path = self._conn.path
        self.location: str = self._conn.label
        """The file path, or the URI with its password removed."""
        self.dialect: str = self._conn.dialect
        """``"sqlite"`` or ``"postgresql"``."""
        self._payloads = PayloadWriter()
        self._texts = PayloadTexts(self._fetch_payloads)
        self._local = threading.local()

    # -- read barriers -------------------------------------------------------------------

    def _barrier_key(self) -> str:
        return self.location if self.dialect == "postgresql" else os.path.realpath(self.location)

    def add_read_barrier(self, fn: Callable[[], Any]) -> None:
        """Call ``fn()`` before every read through any store of this process open on the same
        database (a recorder's background writer registers its ``flush``, so what was recorded
        in this process is read back, through this store or another one opened on the file)."""
        with _BARRIERS_LOCK:
            _BARRIERS.setdefault(self._barrier_key(), []).append(fn)

    def remove_read_barrier(self, fn: Callable[[], Any]) -> None:
        """Undo :meth:`add_read_barrier` (no error when absent)."""
        with _BARRIERS_LOCK:
            fns = _BARRIERS.get(self._barrier_key(), [])
            if fn in fns:
                fns.remove(fn)
            if not fns:
                _BARRIERS.pop(self._barrier_key(), None)

    def _barrier(self) -> None:
        if _BARRIERS and not getattr(self._local, "busy", False):
            with _BARRIERS_LOCK:
                fns = list(_BARRIERS.get(self._barrier_key(), ()))
            for fn in fns:
                fn()

    def _read(self, sql: str, params: Iterable[Any] = ()) -> list[dict]:
        self._barrier()
        return self._conn.read(sql, params)

    def _snapshot(self, fn: Callable[[Any], Any]) -> Any:
        self._barrier()

        def run(q: Any) -> Any:
            self._local.busy = True  # reads inside a snapshot never wait on a writer
            try:
                return fn(q)
            finally:
                self._local.busy = False

        return self._conn.snapshot(run)

    def _stream(self, sql: str, params: Iterable[Any] = (), size: int = 5000) -> Iterator[tuple]:
        self._barrier()
        return self._conn.stream(sql, params, size=size)

    def close(self) -> None:
        """Close the connection (idempotent)."""
        self._conn.close()

    def __enter__(self) -> "StoreBase":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Store({self.location!r})"

    def check(self) -> None:
        """Read every page of the file (SQLite ``quick_check``; linear in the file's size), so a
        damaged store is refused before anything is written into it.

        Raises:
            StoreError: the file has damaged pages (the first problems named, one line).
        """
        problems = self._conn.quick_check()
        if problems:
            raise StoreError(f"{self.location} is corrupt ({'; '.join(problems[:3])}); nothing was changed: restore it "
                             f"from a copy or record into a new store")

    # -- meta ----------------------------------------------------------------------------

    @property
    def schema_version(self) -> int:
        """``meta.schema_version`` of the open store."""
        rows = self._read("SELECT value FROM meta WHERE key = 'schema_version'")
        return int(rows[0]["value"])

    def size_bytes(self) -> int:
        """Bytes the store occupies (SQLite: the file with its WAL; PostgreSQL: its tables,
        indexes and TOAST)."""
        return self._conn.size_bytes()

    def _fetch_payloads(self, ids: list[int]) -> list[tuple]:
        out: list[tuple] = []
        for k in range(0, len(ids), 500):
            chunk = ids[k:k + 500]
            rows = self._read(f"SELECT id, codec, dict_id, body, digest FROM payloads WHERE id IN "
                                   f"({','.join('?' * len(chunk))})", chunk)
            out.extend((r["id"], r["codec"], r["dict_id"], r["body"], r["digest"]) for r in rows)  # (checked on read)
        return out

    def payload_texts(self, ids: Iterable[int | None]) -> dict[int, str]:
        """``{payload id: canonical JSON text}`` of the given ids (None skipped).

        Raises:
            IntegrityError: a payload is missing or does not decode (``auto store verify``).
        """
        try:
            return self._texts.texts(ids)
        except PayloadMismatch as exc:
            raise IntegrityError(f"{self.location}: {exc}: it was written outside Auto: `auto store verify` lists "
                                 f"every such row") from None
        except ValueError as exc:
            raise IntegrityError(f"{self.location}: {exc}") from None

    # -- reads, each through the barrier ------------------------------------------------

    def _rows(self, sql: str, params: Iterable[Any] = ()) -> list[tuple]:
        """The rows of one query as tuples, from one snapshot."""
        return self._snapshot(lambda q: list(q.iter(sql, params, size=10_000)))

    @staticmethod
    def _set_meta(tx: Any, key: str, value: str) -> None:
        if tx.query("SELECT value FROM meta WHERE key = ?", [key]):
            tx.execute("UPDATE meta SET value = ? WHERE key = ?", [value, key])
        else:
            tx.execute("INSERT INTO meta (key, value) VALUES (?, ?)", [key, value])
