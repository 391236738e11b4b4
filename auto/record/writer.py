"""The recorder's span writer: spans are completed, redacted, journaled and written from a
background thread, batched, off the agent's call path.

Writing a span in the agent's thread costs one SQLite transaction (``BEGIN IMMEDIATE`` …
``COMMIT``), and completing a model-call span (parsing its response, its attributes and template
digest: :mod:`auto.record.model_call`), redacting it (:mod:`auto.record.redact`) and serialising
it for the journal cost hundreds of µs more (measured by ``bench/scale/recording.py``).
:meth:`SpanWriter.submit` only puts the finished scope's spans, and what completes them, into an
in-memory queue and returns (a few µs, no system call); one thread takes the batches in the
order they were submitted and, for each,

1. completes it (``complete``, given with the batch) and prepares it (``prepare``: the recorder
   redacts it); a batch that cannot be completed or prepared is reported and dropped — never
   written unredacted;
2. appends it to the store's journal (:mod:`auto.store.journal`: one ``write(2)``): from here the
   batch is **durable** (a process killed outright has it replayed by the next open of the store),
   and the writer keeps only the record's bytes, not the batch's objects;
3. once no batch has been submitted for :data:`IDLE_S` (or :data:`MAX_MERGED_SPANS` are waiting,
   or on :meth:`SpanWriter.flush`), writes whatever has been journaled in one transaction
   (falling back to one transaction per batch when a merged write fails, so one bad batch never
   takes others with it: each batch is still all-or-nothing).

While the agent keeps submitting, the writer takes the new batches every :data:`POLL_S` instead
of being woken by each (every handover of Python's GIL between the two threads costs the agent's
thread); the first batch after a pause wakes it at once.

Guarantees: only completed and redacted batches reach the journal or the store; a process killed
outright loses its open spans and the batches still in the queue — those that ended in the last
:data:`POLL_S` or so before the kill, not yet journaled (:meth:`SpanWriter.wait_durable` waits
until everything submitted is journaled) — and nothing that was journaled; a batch the database
could not take (a PostgreSQL server down past its retry deadline) is reported and stays in the
journal, replayed by the next open of the store; a batch the store refuses (an
:class:`~auto.errors.IngestError`) is reported and dropped; :meth:`SpanWriter.flush` returns once
everything submitted before it is written (or has failed, reported through ``on_error``); the
recorder flushes at stop, and the store flushes before every read through it (read-your-writes
in the recording process); at interpreter exit every live writer is flushed. When the journal
cannot be written the batch is written by the writer thread at once. ``AUTO_RECORD_SYNC=1`` (or
``Recorder(sync=True)``) always completes, redacts and writes in the calling thread.

:meth:`SpanWriter.wait_durable` says True only when every batch submitted so far is durable: a
batch that was dropped (it could not be prepared, the store refused it) or that was neither
journaled nor written (a full disk: the journal write failed and so did the direct write) makes
it False from then on; it waits at most :data:`DURABLE_WAIT_S` by default (a PostgreSQL outage
holds the writer thread in a commit's retries, so later batches wait to be journaled).
"""

from __future__ import annotations

import atexit
import os
import queue
import threading
import time
import weakref
from typing import Any, Callable

from auto.errors import IngestError
from auto.store.journal import load_batch

MAX_MERGED_SPANS = 2000
"""At most this many spans are merged into one write transaction."""

IDLE_S = 0.05
"""The writer commits once no batch has been submitted for this long (s), or when
:data:`MAX_MERGED_SPANS` are journaled and waiting, or on :meth:`SpanWriter.flush`. Its work
(checking, digesting, compressing) holds Python's GIL; done while the agent is busy making calls,
it would stall them, so it waits for a pause — the spans are safe in the journal meanwhile."""

POLL_S = 0.05
"""While batches keep coming (none idle for :data:`IDLE_S`), the writer takes the new ones every
this many seconds (s) instead of being woken by each submit: every handover of the GIL between
the agent's thread and the writer costs the agent's thread (``bench/scale/recording.py``-style
runs on a 2-core machine at load 7 measured the calling thread's CPU time per call above that
of a recorder whose writer does nothing: +94 µs looking every 1 ms, +46 µs every 20 ms, +26 µs
every 100 ms). A batch submitted while the agent is busy therefore waits up to about this long
for its journal write: the spans a process killed outright can lose beyond its open ones. The
first batch after a pause wakes the writer at once; :meth:`SpanWriter.flush`,
:meth:`SpanWriter.wait_durable` and :meth:`SpanWriter.close` wake it too."""

DURABLE_WAIT_S = 30.0
"""How long :meth:`SpanWriter.wait_durable` waits by default (s) before it says False."""

_LIVE: "weakref.WeakSet[SpanWriter]" = weakref.WeakSet()

_FLUSH = object()
"""Queue marker: commit what is journaled now (put by :meth:`SpanWriter.flush`)."""

_STOP = object()
"""Queue marker: commit and let the thread end (put by :meth:`SpanWriter.close`)."""

Batch = tuple[list[dict], list[dict]]


def _unchanged(spans: list[dict], traces: list[dict]) -> Batch:
    return spans, traces


class SpanWriter:
    """Prepares, journals and writes ``(spans, traces)`` batches into ``store`` from a background
    thread.

    Args:
        store: the :class:`~auto.store.Store`.
        on_written: called with the number of spans of each batch written.
        on_error: called with ``(n_spans, exception)`` for each batch that could not be prepared
            or written.
        journal: the :class:`~auto.store.journal.Journal` each prepared batch is appended to
            before it is queued for writing (None: not journaled).
        prepare: ``(spans, traces) -> (spans, traces)``, run on the writer thread before the
            journal write (the recorder's redaction); an exception drops the batch (reported).
    """

    def __init__(self, store: Any, on_written: Callable[[int], None],
                 on_error: Callable[[int, BaseException], None], journal: Any = None,
                 prepare: Callable[[list[dict], list[dict]], Batch] | None = None) -> None:
        self.store = store
        self._on_written = on_written
        self._on_error = on_error
        self._journal = journal
        self._prepare = prepare or _unchanged
        self._reset()
        _LIVE.add(self)

    def _reset(self) -> None:
        self._pid = os.getpid()
        self._inbox: queue.SimpleQueue = queue.SimpleQueue()
        self._mutex = threading.Lock()
        self._cv = threading.Condition(self._mutex)  # (submit takes the bare lock: no Python-level enter/exit)
        self._submitted = 0  # batches submitted
        self._finished = 0  # batches written, or failed and reported
        self._settled = 0  # batches journaled (durable), written, or failed and reported
        self._keep_journal = False  # a batch failed for the database's sake: replay it later
        self._lost = 0  # batches neither journaled nor written (dropped, or a failed direct write)
        self._thread: threading.Thread | None = None
        self._wake = threading.Event()

    def submit(self, spans: list[dict], traces: list[dict], complete: Callable[[], None] | None = None) -> None:
        """Queue one batch (returns at once: no copy, no serialisation; the caller hands the
        lists and what they hold over to the writer and does not change them afterwards).
        ``complete``: called on the writer thread first, fills in what the spans still lack
        (an exception drops the batch, reported)."""
        with self._mutex:  # (the condition's lock; a forked child's writers start afresh: _after_fork)
            self._submitted += 1
            self._inbox.put((spans, traces, complete))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="auto-span-writer", daemon=True)
                self._thread.start()

    def flush(self, timeout: float | None = None) -> bool:
        """Write now, and wait until every batch submitted so far is written or failed; False
        on timeout."""
        if os.getpid() != self._pid or threading.current_thread() is self._thread:
            return True  # a forked child's copy, or a read made by the writer itself
        with self._cv:
            target = self._submitted
            if self._finished >= target:
                return True
            self._inbox.put(_FLUSH)
            self._wake.set()
            return self._cv.wait_for(lambda: self._finished >= target, timeout)

    def wait_durable(self, timeout: float | None | object = ...) -> bool:
        """Wait until every batch submitted so far is durable — journaled (it survives the
        process being killed outright) or written — without forcing a write. False on timeout
        (s; default :data:`DURABLE_WAIT_S`; None: no limit), and False when any batch submitted so far was lost (dropped, or
        neither journaled nor written: see the module docstring). Without a journal this is
        :meth:`flush` plus the loss check."""
        if timeout is ...:
            timeout = DURABLE_WAIT_S
        if os.getpid() != self._pid or threading.current_thread() is self._thread:
            return True
        if self._journal is None:
            return self.flush(timeout) and self._lost == 0  # type: ignore[arg-type]
        with self._cv:
            target = self._submitted
            if self._settled < target:
                self._wake.set()
                if not self._cv.wait_for(lambda: self._settled >= target, timeout):  # type: ignore[arg-type]
                    return False
            return self._lost == 0

    def _lose(self, k: int = 1) -> None:
        with self._cv:
            self._lost += k

    def close(self) -> None:
        """Flush, stop the thread, remove the (empty) journal."""
        self.flush()
        with self._cv:
            if self._thread is not None:
                self._inbox.put(_STOP)
                self._wake.set()
                self._cv.wait_for(lambda: self._thread is None, 30.0)
            if self._journal is not None and self._finished == self._submitted:
                self._journal.close()  # removed when empty; kept (and replayed at the next open) otherwise

    # -- the writer thread ----------------------------------------------------------------

    def _run(self) -> None:
        journaled: list[tuple[int, Any]] = []  # prepared and journaled, not yet written: (spans, payload)
        n_spans = 0
        last = time.monotonic()
        urgent = stop = False
        while True:
            try:
                item = self._inbox.get_nowait()
            except queue.Empty:
                idle = time.monotonic() - last
                if journaled and (urgent or stop or idle >= IDLE_S):
                    self._commit(journaled)
                    journaled, n_spans = [], 0
                    continue
                if journaled or (idle < IDLE_S and not stop):
                    # busy: look again in a while (a submit to a queue nobody waits on wakes
                    # nothing); flush, wait_durable and close wake it at once
                    self._wake.wait(POLL_S if not journaled else min(POLL_S, max(0.0, IDLE_S - idle)))
                    self._wake.clear()
                    continue
                urgent = False
                if stop:
                    with self._cv:
                        if self._inbox.empty():  # a later submit starts a new thread
                            self._thread = None
                            self._cv.notify_all()
                            return
                    stop = False
                    continue
                item = self._inbox.get()  # idle: wait (the next submit wakes this thread)
            if item is _FLUSH:
                urgent = True
                continue
            if item is _STOP:
                stop = True
                continue
            last = time.monotonic()
            batch = self._journaled(*item)
            if batch is not None:
                journaled.append(batch)
                n_spans += batch[0]
                if n_spans >= MAX_MERGED_SPANS:
                    self._commit(journaled)
                    journaled, n_spans = [], 0

    def _journaled(self, spans: list[dict], traces: list[dict],
                   complete: Callable[[], None] | None) -> tuple[int, Any] | None:
        """The batch completed, prepared and appended to the journal; None when it was dropped
        or could not be journaled (then written here at once; either way counted as finished)."""
        try:
            if complete is not None:
                complete()
            if not spans and not traces:  # it only completes something, in order: nothing to write
                self._done(1)
                return None
            spans, traces = self._prepare(spans, traces)
        except Exception as exc:  # noqa: BLE001 - what cannot be prepared (redacted) is never written
            self._on_error(len(spans), exc)
            self._lose()
            self._done(1)
            return None
        kept: Any = (spans, traces)
        if self._journal is not None:
            try:
                kept = self._journal.append(spans, traces)  # its bytes stand for the batch from now on
            except (OSError, ValueError):
                try:  # not durable until written: write it now
                    self._write([(spans, traces)], journaled=False)
                finally:
                    self._done(1)  # the journal still holds earlier batches: not truncated
                return None
        with self._cv:
            self._settled += 1
            self._cv.notify_all()
        return len(spans), kept

    def _commit(self, items: list[tuple[int, Any]]) -> None:
        """Write every journaled batch (``(n_spans, batch or its journal payload)``, merged into
        transactions of at most :data:`MAX_MERGED_SPANS` spans), then empty the journal."""
        try:
            chunk: list[Batch] = []
            n = 0
            for k, kept in items:
                if chunk and n + k > MAX_MERGED_SPANS:
                    self._write(chunk)
                    chunk, n = [], 0
                try:
                    chunk.append(load_batch(kept) if isinstance(kept, bytes) else kept)
                except Exception as exc:  # noqa: BLE001 - what marshal wrote it reads; reported if not
                    self._on_error(k, exc)
                    self._lose()
                    continue
                n += k
            if chunk:
                self._write(chunk)
        finally:
            self._done(len(items), truncate=True, journaled=self._journal is not None)

    def _done(self, k: int, truncate: bool = False, journaled: bool = False) -> None:
        with self._cv:
            self._finished += k
            if not journaled:
                self._settled += k
            if truncate and self._journal is not None and not self._keep_journal:
                try:
                    self._journal.truncate()  # everything journaled is committed (or reported)
                except OSError:
                    pass
            self._cv.notify_all()

    def _write(self, items: list[Batch], journaled: bool = True) -> None:
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
                if isinstance(exc, IngestError) or not journaled:
                    self._lose()  # refused, or not in the journal either: not stored
                else:  # the database failed, not the batch: the journal keeps it for a replay
                    self._keep_journal = True
                self._on_error(len(spans), exc)


def _after_fork() -> None:
    """In a forked child: every writer starts afresh (the parent writes what it queued)."""
    for w in list(_LIVE):
        w._reset()


os.register_at_fork(after_in_child=_after_fork)


@atexit.register
def _flush_all() -> None:
    for w in list(_LIVE):
        try:
            w.flush(timeout=30.0)
        except Exception:  # noqa: BLE001 - best effort at exit
            pass
