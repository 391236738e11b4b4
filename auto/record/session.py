"""Recording sessions: start and stop recording into a store, and instrument ``openai`` meanwhile.

``start_recording`` makes a new :class:`~auto.record.core.Recorder` the innermost active one and
patches the ``openai`` client (:mod:`auto.record.openai_hook`); ``stop_recording`` ends what it
left open and restores the client once no recorder is active. ``recording`` is the context
manager form.
"""

from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from typing import Iterator

from auto.errors import RecordError
from auto.record import openai_hook
from auto.record.core import ACTIVE_LOCK, Recorder, activate, active_recorder, deactivate, is_active
from auto.store import Store


def start_recording(store: Store | str | os.PathLike, *, task: str | None = None, instrument: bool = True) -> Recorder:
    """Activate recording into ``store`` (a path or a :class:`Store`) and instrument ``openai``.

    Args:
        store: where spans go; a path is opened (and created) and closed again at stop.
        task: if given, model calls made outside any ``@auto.task`` are grouped under one task
            span named ``task`` for this process (input ``{"argv": sys.argv}``); otherwise they
            are recorded as top-level ``llm`` spans, each logical call its own trace.
        instrument: patch the ``openai`` client (see :mod:`auto.record.openai_hook`).

    Returns:
        the :class:`Recorder`; pass it to :func:`stop_recording`.

    Raises:
        NotAStore, SchemaTooNew, StoreError: ``store`` cannot be opened as a store.
    """
    rec = Recorder(store, task=task)
    activate(rec)
    if instrument:
        openai_hook.instrument()
    return rec


def stop_recording(rec: Recorder | None = None, *, error: BaseException | None = None, at_exit: bool = False) -> None:
    """Deactivate ``rec`` (default: the innermost recorder): close open streams as incomplete,
    end the process scope, close a store it opened, and un-instrument when none is left.

    Args:
        error: the exception that ended the run, recorded on the process scope (if any).
        at_exit: called from ``atexit``: an uncaught exception (``sys.last_value``) is recorded.

    Raises:
        RecordError: some spans could not be written (after everything else was done).
    """
    with ACTIVE_LOCK:
        if rec is None:
            rec = active_recorder()
            if rec is None:
                return
        if not is_active(rec):
            return
        rec.finish(error if error is not None else (getattr(sys, "last_value", None) if at_exit else None))
        if deactivate(rec) == 0:
            openai_hook.uninstrument()
    if rec.owns_store:
        rec.store.close()
    if rec.write_errors:
        raise RecordError(f"{len(rec.write_errors)} span write(s) failed; first: {rec.write_errors[0]}")


@contextmanager
def recording(store: Store | str | os.PathLike, *, task: str | None = None) -> Iterator[Recorder]:
    """Context manager form of :func:`start_recording` / :func:`stop_recording`.

    Example::

        with auto.recording("traces/triage.db"):
            for t in tickets:
                triage(t)
    """
    rec = start_recording(store, task=task)
    try:
        yield rec
    except BaseException as exc:
        try:
            stop_recording(rec, error=exc if rec.process_scope is not None else None)
        except RecordError:
            pass  # the original exception matters more
        raise
    else:
        stop_recording(rec)
