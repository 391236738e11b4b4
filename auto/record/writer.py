"""The recorder's span writer: spans are written from a background thread, batched, off the
agent's call path.

A synchronous write costs one SQLite transaction per span (``BEGIN IMMEDIATE`` … ``COMMIT``) in
the agent's thread — most of the recorder's time per model call (measured by
``bench/scale/recording.py``). :class:`SpanWriter` takes the spans of a finished scope into a
queue and returns; one thread writes whatever has queued up in one transaction (falling back to
one transaction per submitted batch when a merged write fails, so one bad batch never takes
others with it: each batch is still all-or-nothing).

Guarantees: each batch is appended to the store's journal (:mod:`auto.store.journal`: one
``write(2)`` in the calling thread) before :meth:`SpanWriter.submit` returns, so a process killed
outright loses only its open spans — the next open of the store replays what was not committed;
a batch the database could not take (a PostgreSQL server down past its retry deadline) is
reported and stays in the journal, replayed by the next open of the store; a batch the store
refuses (an :class:`~auto.errors.IngestError`) is reported and dropped;
:meth:`SpanWriter.flush` returns once everything submitted before it is written (or has failed,
reported through ``on_error``); the recorder flushes at stop, and the store flushes before every
read through it (read-your-writes in the recording process); at interpreter exit every live
writer is flushed. When the journal cannot be written the batch is written in the calling thread.
``AUTO_RECORD_SYNC=1`` (or ``Recorder(sync=True)``) always writes in the calling thread.
"""

from __future__ import annotations

import atexit
import os
import threading
import time
import weakref
from collections import deque
from typing import Any, Callable

from auto.errors import IngestError

MAX_MERGED_SPANS = 2000
"""At most this many spans are merged into one write transaction."""

IDLE_S = 0.05
"""The writer commits once no batch has been submitted for this long (s), or when
:data:`MAX_MERGED_SPANS` are queued, or on :meth:`SpanWriter.flush`. Its work (checking,
digesting, compressing) holds Python's GIL; done while the agent is busy making calls, it would
stall them, so it waits for a pause — the spans are safe in the journal meanwhile."""

_LIVE: "weakref.WeakSet[SpanWriter]" = weakref.WeakSet()


class SpanWriter:
    """Writes ``(spans, traces)`` batches into ``store`` from a background thread.

    Args:
        store: the :class:`~auto.store.Store`.
        on_written: called with the number of spans of each batch written.
        on_error: called with ``(n_spans, exception)`` for each batch that could not be written.
    """

    def __init__(self, store: Any, on_written: Callable[[int], None],
                 on_error: Callable[[int, BaseException], None], journal: Any = None) -> None:
        self.store = store
        self._on_written = on_written
        self._on_error = on_error
        self._journal = journal
        self._reset()
        _LIVE.add(self)

    def _reset(self) -> None:
        self._pid = os.getpid()
        self._q: deque = deque()
        self._cv = threading.Condition()
        self._pending = 0
        self._queued_spans = 0
        self._last_submit = 0.0
        self._urgent = False
        self._closed = False
        self._keep_journal = False  # a batch failed for the database's sake: replay it later
        self._thread: threading.Thread | None = None

    def submit(self, spans: list[dict], traces: list[dict]) -> None:
        """Journal and queue one batch (returns at once); written in this thread when the
        journal cannot be written."""
        if os.getpid() != self._pid:  # forked: the parent writes what it queued; start afresh
            self._reset()
        with self._cv:
            if self._journal is not None:
                try:
                    self._journal.append(spans, list(traces))
                except (OSError, ValueError):
                    self._write([(spans, list(traces))])
                    return
            self._q.append((spans, list(traces)))
            self._pending += 1
            self._queued_spans += len(spans)
            self._last_submit = time.monotonic()
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="auto-span-writer", daemon=True)
                self._thread.start()
            self._cv.notify_all()

    def flush(self, timeout: float | None = None) -> bool:
        """Write now, and wait until every batch submitted so far is written or failed; False
        on timeout."""
        if os.getpid() != self._pid or threading.current_thread() is self._thread:
            return True  # a forked child's copy, or a read made by the writer itself
        with self._cv:
            if self._pending:
                self._urgent = True
                self._cv.notify_all()
            return self._cv.wait_for(lambda: self._pending == 0, timeout)

    def close(self) -> None:
        """Flush, stop the thread, remove the (empty) journal."""
        self.flush()
        with self._cv:
            self._closed = True
            self._cv.notify_all()
            if self._journal is not None and self._pending == 0:
                self._journal.close()  # removed when empty; kept (and replayed at the next open) otherwise

    def _take(self) -> list[tuple[list[dict], list[dict]]]:
        with self._cv:
            while True:
                if not self._q:
                    if self._closed:
                        return []
                    self._cv.wait()
                    continue
                idle = time.monotonic() - self._last_submit
                if self._urgent or self._closed or self._queued_spans >= MAX_MERGED_SPANS or idle >= IDLE_S:
                    break
                self._cv.wait(IDLE_S - idle)
            items, n = [], 0
            while self._q and (not items or n + len(self._q[0][0]) <= MAX_MERGED_SPANS):
                item = self._q.popleft()
                items.append(item)
                n += len(item[0])
            self._queued_spans -= n
            if not self._q:
                self._urgent = False
            return items

    def _done(self, k: int) -> None:
        with self._cv:
            self._pending -= k
            if self._pending == 0 and self._journal is not None and not self._keep_journal:
                try:
                    self._journal.truncate()  # everything journaled is committed (or reported)
                except OSError:
                    pass
            self._cv.notify_all()

    def _run(self) -> None:
        while True:
            items = self._take()
            if not items:
                return
            try:
                self._write(items)
            finally:
                self._done(len(items))

    def _write(self, items: list[tuple[list[dict], list[dict]]]) -> None:
        if len(items) > 1:
            try:
                self.store.ingest([s for sp, _ in items for s in sp], [t for _, tr in items for t in tr])
                self._on_written(sum(len(sp) for sp, _ in items))
                return
            except Exception:  # noqa: BLE001 - retried batch by batch below, so one bad batch is isolated
                pass
        for spans, traces in items:
            try:
                self.store.ingest(spans, traces)
                self._on_written(len(spans))
            except Exception as exc:  # noqa: BLE001 - recording must not break the agent
                if not isinstance(exc, IngestError):  # the database failed, not the batch
                    self._keep_journal = True
                self._on_error(len(spans), exc)


@atexit.register
def _flush_all() -> None:
    for w in list(_LIVE):
        try:
            w.flush(timeout=30.0)
        except Exception:  # noqa: BLE001 - best effort at exit
            pass
