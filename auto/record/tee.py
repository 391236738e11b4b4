"""Stream tees: a response byte stream that shows every chunk to an observer on its way to the SDK.

The ``openai`` SDK reads a response through ``response.stream``, an ``httpx`` (or ``httpx2``)
``SyncByteStream``/``AsyncByteStream``. :func:`tee_stream` returns a stream of the same kind that
yields the inner stream's chunks unchanged and tells the observer (a :class:`StreamObserver`):
each chunk (``feed``), the end of the stream (``stream_eof``), a close before the end
(``stream_closed``) and an error while reading (``fail``; the error still propagates). An observer
that raises is logged and never breaks the reader. The tee subclasses the byte-stream classes of
whichever of ``httpx2``/``httpx`` is loaded, so ``isinstance`` checks in the SDK and in ``httpx``
keep passing; :func:`observer_of` finds the observer of a tee again.
"""

from __future__ import annotations

import logging
import sys
from contextlib import contextmanager
from typing import Any, Iterator, Protocol


log = logging.getLogger("auto.record")


class StreamObserver(Protocol):
    """What a tee reports to."""

    def feed(self, chunk: bytes) -> None: ...

    def stream_eof(self) -> None: ...

    def stream_closed(self) -> None: ...

    def fail(self, exc: BaseException) -> None: ...


def _tell(observer: StreamObserver, event: str, *args: Any) -> None:
    """Call ``observer.<event>(*args)``; a failure of the observer is logged, never raised."""
    try:
        getattr(observer, event)(*args)
    except Exception:  # recording must not break the agent
        log.exception("auto: could not record a stream event (%s)", event)


@contextmanager
def _observed(observer: StreamObserver) -> Iterator[None]:
    """Around reading a stream: the end of the stream is reported as ``stream_eof``, an error as
    ``fail`` (and propagates); the reader stopping early (``GeneratorExit``) reports nothing (the
    stream's ``close`` does)."""
    try:
        yield
    except GeneratorExit:
        raise
    except BaseException as exc:
        _tell(observer, "fail", exc)
        raise
    _tell(observer, "stream_eof")


def _byte_stream_bases(kind: str) -> tuple[type, ...]:
    bases: list[type] = []
    for modname in ("httpx2", "httpx"):
        mod = sys.modules.get(modname)
        cls = getattr(mod, kind, None) if mod is not None else None
        if isinstance(cls, type) and cls not in bases:
            bases.append(cls)
    return tuple(bases) or (object,)


_TEE_CLASSES: dict[tuple[str, tuple[type, ...]], type] = {}


def _tee_class(kind: str) -> type:
    bases = _byte_stream_bases(kind)
    key = (kind, bases)
    if key in _TEE_CLASSES:
        return _TEE_CLASSES[key]
    if kind == "SyncByteStream":

        class SyncTee(*bases):  # type: ignore[misc]
            def __init__(self, inner: Any, observer: StreamObserver) -> None:
                self._inner, self._observer = inner, observer

            def __iter__(self):  # type: ignore[override]
                with _observed(self._observer):
                    for chunk in self._inner:
                        _tell(self._observer, "feed", chunk)
                        yield chunk

            def close(self) -> None:
                try:
                    self._inner.close()
                finally:
                    _tell(self._observer, "stream_closed")

        cls: type = SyncTee
    else:

        class AsyncTee(*bases):  # type: ignore[misc]
            def __init__(self, inner: Any, observer: StreamObserver) -> None:
                self._inner, self._observer = inner, observer

            async def __aiter__(self):  # type: ignore[override]
                with _observed(self._observer):
                    async for chunk in self._inner:
                        _tell(self._observer, "feed", chunk)
                        yield chunk

            async def aclose(self) -> None:
                try:
                    await self._inner.aclose()
                finally:
                    _tell(self._observer, "stream_closed")

        cls = AsyncTee
    _TEE_CLASSES[key] = cls
    return cls


def tee_stream(stream: Any, observer: StreamObserver) -> Any:
    """A byte stream that yields ``stream``'s chunks and reports them to ``observer``: an async
    tee for a stream that is only async-iterable, else a sync one."""
    if hasattr(stream, "__aiter__") and not hasattr(stream, "__iter__"):
        return _tee_class("AsyncByteStream")(stream, observer)
    return _tee_class("SyncByteStream")(stream, observer)


def observer_of(stream: Any) -> StreamObserver | None:
    """The observer of a tee made by :func:`tee_stream` (None for any other stream)."""
    if type(stream) in _TEE_CLASSES.values():
        return stream._observer
    return None
