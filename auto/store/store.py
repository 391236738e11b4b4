"""The Store API: ingest spans and traces, read witnesses, keep eval runs and artifacts, verify.

:class:`Store` is the face of its parts, one idea each: the open database and its read
barrier (:mod:`auto.store.base`), ingest (:mod:`auto.store.ingest`), reads of spans, traces
and the census (:mod:`auto.store.reads`, whose SQL is :mod:`auto.store.census_sql`), witnesses
(:mod:`auto.store.witnesses`), verification (:mod:`auto.store.verification`), eval runs and
artifacts (:mod:`auto.store.evidence`), the ratchet's log (:mod:`auto.store.ratchet_log`).

Guarantees (over :mod:`auto.store.connection` / :mod:`auto.store.postgres` and
:mod:`auto.store.schema`):

* **One API, two databases.** ``Store(path)`` opens an embedded SQLite file; ``Store(dsn)``
  with a ``postgresql://`` URI opens a PostgreSQL database shared by many hosts
  (:mod:`auto.store.postgres`). Same tables, migrations, immutability rules and digests.
* **Digests at ingest.** Each span and trace is checked and digested on the way in
  (:mod:`auto.store.normalize`); :meth:`Store.verify` re-derives every digest, or (with
  ``task=`` and ``incremental=True``) those of one task's rows added since its last check.
* **Payloads once.** A span's JSON values are stored once by content digest, compressed
  (:mod:`auto.store.payloads`).
* **Immutable traces and spans.** Insert-only: re-ingesting an id with the same content is a
  no-op, with different content an :class:`~auto.errors.IngestError`; triggers refuse
  ``UPDATE``/``DELETE`` on them, and row counters in ``meta`` reveal deleted rows.
* **All-or-nothing batches.** :meth:`Store.ingest` validates and writes a batch in one
  transaction; a failing batch leaves nothing behind.

Times are integer nanoseconds since the Unix epoch (``time.time_ns()``).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from auto.errors import StoreError
from auto.store import journal
from auto.store.evidence import Evidence
from auto.store.ingest import Ingest
from auto.store.postgres import is_dsn
from auto.store.ratchet_log import RatchetLog
from auto.store.witnesses import Witnesses


def local_path(location: str | os.PathLike) -> str:
    """Where files that belong with a store on this host go (a ratchet's artifact folder
    ``<local_path>.artifacts``, a recorder's journal ``<local_path>.journal``, an SQLite store's
    compile lock ``<local_path>.compile.lock``): an SQLite store's own path; for a PostgreSQL
    store, ``$XDG_CACHE_HOME/auto/pg-<digest>`` (default ``~/.cache/auto``, created), the digest
    taken over the URI without its password.

    Raises:
        StoreError: that folder cannot be created (one line naming it; set ``XDG_CACHE_HOME``).
    """
    if not is_dsn(location):
        return str(location)
    from auto.store.postgres import redact

    shown = redact(str(location))
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "auto"
    try:
        base.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise StoreError(f"{base}: cannot create the folder for this host's files of the store {shown} "
                         f"({e.strerror or e}); set XDG_CACHE_HOME to a writable folder") from None
    return str(base / ("pg-" + hashlib.sha256(shown.encode("utf-8")).hexdigest()[:16]))


class Store(Ingest, Witnesses, Evidence, RatchetLog):
    """An Auto trace store over one SQLite file (created if missing) or one PostgreSQL database.

    Thread-safe (one connection guarded by a lock) and fork-aware (a child process reopens its
    connection on first use). Use as a context manager or call :meth:`close`.

    Args:
        path: a file path (SQLite), or a ``postgresql://`` / ``postgres://`` URI (libpq
            connection string; :mod:`auto.store.postgres`).
        create: create the store when there is none (a missing or empty file, a database
            schema without tables); False: only open an existing store (what a reading
            command wants: it never leaves a new store behind).

    Raises (from the constructor):
        ArgumentError: ``path`` looks like a URI of another scheme (a typo'd ``postgresql://``:
            :func:`auto.store.postgres.location_error`); nothing is created.
        NotAStore: the file is not an SQLite database, or the database holds other tables;
            with ``create=False``, there is no store there (nothing is created).
        SchemaTooNew: ``meta.schema_version`` is newer than :data:`~auto.store.schema.SCHEMA_VERSION`.
        StoreError: the store cannot be opened (a PostgreSQL server that cannot be reached, or
            psycopg not installed: ``pip install 'auto[postgres]'``).
    """

    def __init__(self, path: str | os.PathLike, *, create: bool = True):
        super().__init__(path, create=create)
        self.replayed = journal.replay(journal.journal_dir(local_path(self.location)), self._replay_batch)
        """Spans replayed at open from journals of writers that died (:mod:`auto.store.journal`)."""
