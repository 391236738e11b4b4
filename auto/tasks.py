"""``auto.task``: the task decorator of recording (:func:`auto.record.task`), and with ``ratchet=``
a task served by a ratchet.

Recording is the lower layer and the ratchet the higher one (the ratchet records its reference's
runs); this module, above both, is where a decorator that creates a ratchet belongs, so that
recording never imports the ratchet. The ratchet is imported on the first call of a ratcheted
function only, so recording an agent does not load the runtime.
"""

from __future__ import annotations

import functools
import inspect
import os
import threading
from typing import Any, Callable

from auto.errors import RecordError
from auto.record.core import TaskSpec
from auto.record.core import task as record_task


def task(name: str | Callable | None = None, *, input: dict | None = None,
         ratchet: bool | str | os.PathLike | None = None) -> Any:
    """Declare a task: ``@auto.task("triage")``, ``@auto.task``, or ``with auto.task("t", input=...)``.

    See :class:`auto.record.TaskSpec`. The name defaults to the function's ``__name__``.

    With ``ratchet`` (a store path, or ``True`` for the ``AUTO_STORE`` environment variable,
    default ``auto.sqlite`` in the working folder) the decorated function is served by a
    :class:`auto.ratchet.Ratchet` on that store, created on the first call: it answers from the
    installed generation when the guard admits the call, else runs the function and keeps its
    answer as a witness for the next generation. The wrapper keeps the function's signature; its
    ``ratchet()`` returns the Ratchet (for ``status()`` and ``close()``).

    Raises:
        RecordError: ``ratchet`` on an ``async`` function (a ratchet serves synchronous calls),
            or on a context-manager use.
    """
    if callable(name):
        return TaskSpec(None)(name)
    if not ratchet:
        return record_task(name, input=input)
    if input is not None:
        raise RecordError("auto.task(..., ratchet=...) decorates a function; it is not a context manager")
    if ratchet is not True and (isinstance(ratchet, bool) or not isinstance(ratchet, (str, os.PathLike))):
        raise RecordError(f"auto.task(..., ratchet=...) takes True or the store's path, got {ratchet!r}")
    store = os.environ.get("AUTO_STORE", "auto.sqlite") if ratchet is True else ratchet
    return functools.partial(_ratcheted, name=name, store=store)


def _ratcheted(fn: Callable, *, name: str | None, store: str | os.PathLike) -> Callable:
    """``fn`` served by a ratchet on ``store`` (see :func:`task`)."""
    if inspect.iscoroutinefunction(fn) or inspect.isasyncgenfunction(fn) or inspect.isgeneratorfunction(fn):
        raise RecordError(f"auto.task({name or fn.__name__!r}, ratchet=...) needs a synchronous function")
    task_name = name or getattr(fn, "__name__", "task")
    lock = threading.Lock()
    box: list[Any] = []

    def get() -> Any:
        if not box:
            with lock:
                if not box:
                    from auto.ratchet.core import ratchet as make

                    box.append(make(fn, store=store, task=task_name))
        return box[0]

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return get()(*args, **kwargs)

    wrapper.__auto_task__ = task_name  # type: ignore[attr-defined]
    wrapper.ratchet = get  # type: ignore[attr-defined]
    return wrapper


__all__ = ["task"]
