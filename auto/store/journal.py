"""A store's journal: spans accepted for writing but not yet committed, kept in a local file so a
killed process loses none of them.

A writer that commits in the background (:mod:`auto.record.writer`) first appends each batch as
one record to its own journal file — ``<local path>.journal/<host>-<pid>-<random>.journal``
(:func:`auto.store.local_path`) — holding an exclusive ``flock`` on it while it lives, and
truncates the file whenever everything appended has been committed. A record is
:data:`MAGIC`, the payload's length (4 bytes, little-endian) and the batch ``{"spans", "traces"}``
in Python's ``marshal`` format (plain data only; several times faster to write than JSON, and
the journal never leaves the host that wrote it). One ``write(2)`` costs microseconds and
survives the process being killed (the data is in the kernel's page cache; a machine crash is
another matter: the journal is not fsynced).

A short ``write`` (a full disk writes part of a record) is undone at once: the file is cut
back to the end of the last whole record and :meth:`Journal.append` raises ``OSError``, so a
later record is never appended after a torn one.

When a store is opened, journals whose lock can be taken — their writer is gone — are replayed
(:func:`replay`): every complete record is ingested (idempotent: same ids, same content), and the
file is removed. A torn record (a kill in the middle of a ``write``, or one another Python
version cannot read) is reported (logged as an error naming the file, the offset and the bytes
skipped; counted in :data:`TORN`) and skipped; reading resumes at the next record start after it.
"""

from __future__ import annotations

import fcntl
import logging
import marshal
import os
import socket
import threading
from pathlib import Path
from typing import Any, Callable

log = logging.getLogger("auto")

SUFFIX = ".journal"

TORN: list[tuple[str, int, int]] = []
"""``(file, offset, bytes skipped)`` of every torn record replay met in this process (most recent
last; tests and ``auto store verify`` read it)."""

MAGIC = b"AJ1"
"""Start of every journal record (format version 1)."""


def journal_dir(local_path: str) -> Path:
    """The journal folder of a store whose local path is ``local_path``."""
    return Path(local_path + SUFFIX)


class Journal:
    """One process's journal file (created on the first :meth:`append`).

    Thread-safe; ``append``, ``truncate`` and ``close`` serialize on one lock.
    """

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.path: Path | None = None
        self._fd: int | None = None
        self._pid = os.getpid()
        self._lock = threading.Lock()
        self.bytes = 0

    def _open(self) -> int:
        if self._fd is None or self._pid != os.getpid():
            self._pid = os.getpid()
            self.folder.mkdir(parents=True, exist_ok=True)
            name = f"{socket.gethostname()}-{os.getpid()}-{os.urandom(4).hex()}.journal"
            self.path = self.folder / name
            fd = os.open(self.path, os.O_CREAT | os.O_WRONLY | os.O_APPEND, 0o600)
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            self._fd = fd
            self.bytes = 0
        return self._fd

    def append(self, spans: list[dict], traces: list[dict]) -> bytes:
        """Append one batch as one record (one ``write`` call).

        Returns:
            the record's payload (:func:`load_batch` reads the batch back from it: a writer that
            keeps these bytes instead of the batch's objects until it commits them keeps the
            garbage collector's work small).

        Raises:
            OSError: the journal cannot be written (the caller falls back to writing directly).
            ValueError: a value is not plain data.
        """
        body = marshal.dumps({"spans": spans, "traces": traces})
        record = MAGIC + len(body).to_bytes(4, "little") + body
        with self._lock:
            fd = self._open()
            try:
                n = os.write(fd, record)
            except OSError:
                self._cut(fd)
                raise
            if n != len(record):
                self._cut(fd)
                raise OSError(28, f"short write to the journal ({n} of {len(record)} bytes): is the disk full?")
            self.bytes += len(record)
        return body

    def _cut(self, fd: int) -> None:
        """Cut the file back to its last whole record (after a failed or short write)."""
        try:
            os.ftruncate(fd, self.bytes)
        except OSError:
            log.error("auto: the journal %s could not be cut back after a failed write", self.path)

    def truncate(self) -> None:
        """Everything appended so far is committed: empty the file."""
        with self._lock:
            if self._fd is not None and self.bytes and self._pid == os.getpid():
                os.ftruncate(self._fd, 0)
                self.bytes = 0

    def locked(self) -> Any:
        """The journal's lock (hold it to keep :meth:`append` out while deciding to truncate)."""
        return self._lock

    def close(self) -> None:
        """Remove the (empty) file and release its lock."""
        with self._lock:
            if self._fd is not None and self._pid == os.getpid():
                try:
                    if self.bytes == 0 and self.path is not None:
                        self.path.unlink(missing_ok=True)
                finally:
                    os.close(self._fd)
            self._fd = None


def replay(folder: Path, ingest: Callable[[list[dict], list[dict]], Any]) -> int:
    """Ingest the batches of every journal in ``folder`` whose writer is gone, then remove it.

    Returns:
        the number of spans replayed (already-stored ones included).
    """
    if not folder.is_dir():
        return 0
    n = 0
    for p in sorted(folder.glob("*.journal")):
        try:
            fd = os.open(p, os.O_RDWR)
        except OSError:
            continue
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                continue  # its writer is alive
            with os.fdopen(os.dup(fd), "rb") as f:
                data = f.read()
            torn: list[tuple[int, int]] = []
            for batch in records(data, torn):
                ingest(batch.get("spans") or [], batch.get("traces") or [])
                n += len(batch.get("spans") or [])
            for at, skipped in torn:
                TORN.append((str(p), at, skipped))
                log.error("auto: journal %s: a torn record at byte %d (%d bytes skipped; its batch was never "
                          "acknowledged as durable)", p, at, skipped)
            p.unlink(missing_ok=True)
        finally:
            os.close(fd)
    return n


def load_batch(payload: bytes) -> tuple[list[dict], list[dict]]:
    """``(spans, traces)`` of a record's payload (as :meth:`Journal.append` returned it)."""
    batch = marshal.loads(payload)
    return batch["spans"], batch["traces"]


def records(data: bytes, torn: list[tuple[int, int]] | None = None) -> list[dict]:
    """The complete, readable records of a journal's bytes, in order. A torn or unreadable one
    is skipped: reading resumes at the next :data:`MAGIC` after it that starts a readable record;
    ``torn`` (when given) gets ``(offset, bytes skipped)`` for each."""
    out, i = [], 0
    while i < len(data):
        batch, end = _record_at(data, i)
        if batch is not None:
            if isinstance(batch, dict):
                out.append(batch)
            i = end
            continue
        j = data.find(MAGIC, i + 1)
        while j != -1 and _record_at(data, j)[0] is None:
            j = data.find(MAGIC, j + 1)
        nxt = len(data) if j == -1 else j
        if torn is not None:
            torn.append((i, nxt - i))
        i = nxt
    return out


def _record_at(data: bytes, i: int) -> tuple[Any, int]:
    """``(batch, end)`` of a whole readable record at offset ``i``, else ``(None, i)``."""
    if data[i:i + 3] != MAGIC or i + 7 > len(data):
        return None, i
    n = int.from_bytes(data[i + 3:i + 7], "little")
    if i + 7 + n > len(data):
        return None, i
    try:
        return marshal.loads(data[i + 7:i + 7 + n]), i + 7 + n
    except (ValueError, EOFError, TypeError):
        return None, i
