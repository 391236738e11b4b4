"""OpenAI client instrumentation at the request layer (``openai`` ≥ 1.40, tested with 3.x / httpx2).

What is patched (on the classes, so every client instance — created before or after — is seen):

* ``openai._base_client.SyncAPIClient.request`` / ``AsyncAPIClient.request`` — the **logical
  call** layer: one SDK call, around the SDK's retry loop. It opens a
  :class:`~auto.record.model_call.LogicalCall` (id ``auto.logical_call_id``) that every HTTP
  attempt of that call joins.
* ``_send_request`` on ``SyncAPIClient``/``AsyncAPIClient`` and on every ``openai`` subclass that
  overrides it (``OpenAI``, ``AsyncOpenAI``) — the **attempt** layer: one HTTP request/response.
  Only the outermost one records (the overrides call ``super()._send_request``). Each attempt is
  one ``llm`` span (:class:`~auto.record.model_call.Attempt`; what it holds is described in
  :mod:`auto.record.model_call`).

Because the hook sits below ``chat.completions.create``, it sees ``create`` (sync and async),
``stream=True`` (the response byte stream is teed, :mod:`auto.record.tee`: SSE chunks are
assembled into the message and tool calls, the span is written when the stream is exhausted or
closed), ``parse()`` (which does not go through ``create``), ``with_raw_response``, and SDK
retries.

* ``openai.Stream.__iter__`` / ``openai.AsyncStream.__aiter__`` — the **consumer** layer: when
  the caller stops iterating a response stream (``break`` out of the ``for`` loop), the attempt
  is written then (as an incomplete stream, unless it had reached its end), not when the
  response is garbage-collected or recording stops. The stream itself is left as the SDK leaves
  it. Errors (HTTP 4xx/5xx, connection errors) are recorded and then propagate unchanged.
Only ``POST …/chat/completions`` and ``POST …/responses`` (the Responses API) are recorded; other
endpoints pass through.

If ``openai`` is not imported yet, :func:`instrument` installs an import hook that patches it
right after it finishes importing (start-up stays lazy).
"""

from __future__ import annotations

import contextvars
import functools
import importlib.abc
import sys
import threading
from typing import Any, Callable, Iterator

from auto.record.core import active_recorder, log
from auto.record.model_call import Attempt, LogicalCall
from auto.record.tee import observer_of

RECORDED_ENDPOINTS = {"chat/completions": "chat.completions", "responses": "responses"}
"""URL path suffix -> span name of the endpoints that are recorded."""

_LOGICAL: contextvars.ContextVar["LogicalCall | None"] = contextvars.ContextVar("auto_logical_call", default=None)
_IN_SEND: contextvars.ContextVar[bool] = contextvars.ContextVar("auto_in_send", default=False)


@functools.lru_cache(maxsize=1024)
def endpoint_for(method: str, path: str) -> str | None:
    """The span name of a request to a recorded endpoint (``POST …/chat/completions`` →
    ``chat.completions``), else None (cached: a client asks for the same few paths)."""
    if method.upper() != "POST":
        return None
    path = path.rstrip("/")
    for suffix, name in RECORDED_ENDPOINTS.items():
        if path.endswith("/" + suffix) or path == suffix:
            return name
    return None


def endpoint_name(request: Any) -> str | None:
    """The span name for an ``httpx`` request to a recorded endpoint, else None."""
    return endpoint_for(request.method, request.url.path)


# ----------------------------------------------------------------------------- logical-call layer


def _begin_call() -> "tuple[LogicalCall, contextvars.Token] | None":
    """Before one SDK ``request()``: a new logical call that its attempts join, made current
    (None when not recording, or already inside one)."""
    rec = active_recorder()
    if rec is None or _LOGICAL.get() is not None:
        return None
    call = LogicalCall(rec, rec.current_scope())
    return call, _LOGICAL.set(call)


def _end_call(opened: "tuple[LogicalCall, contextvars.Token]", exc: BaseException | None) -> None:
    """After the ``request()`` of :func:`_begin_call` returned (``exc`` None) or raised."""
    call, token = opened
    _LOGICAL.reset(token)
    call.request_done(exc)


def _wrap_request_sync(orig: Any) -> Any:
    def request(self: Any, *args: Any, **kwargs: Any) -> Any:
        opened = _begin_call()
        if opened is None:
            return orig(self, *args, **kwargs)
        try:
            out = orig(self, *args, **kwargs)
        except BaseException as exc:
            _end_call(opened, exc)
            raise
        _end_call(opened, None)
        return out

    request.__auto_wrapped__ = orig  # type: ignore[attr-defined]
    return request


def _wrap_request_async(orig: Any) -> Any:
    async def request(self: Any, *args: Any, **kwargs: Any) -> Any:
        opened = _begin_call()
        if opened is None:
            return await orig(self, *args, **kwargs)
        try:
            out = await orig(self, *args, **kwargs)
        except BaseException as exc:
            _end_call(opened, exc)
            raise
        _end_call(opened, None)
        return out

    request.__auto_wrapped__ = orig  # type: ignore[attr-defined]
    return request


# ----------------------------------------------------------------------------- attempt layer


def _unrecorded(response: Any) -> Any:
    return response


class _attempt:
    """Around one ``_send_request`` (``with _attempt(client, request) as answered``): gives
    ``answered(response) -> response``, to be called with the HTTP response (it records the
    attempt now, or tees the response stream to record it at its end). An exception leaving the
    block is recorded on the attempt and propagates. Nothing is recorded when not recording,
    inside an inner ``_send_request``, for another endpoint, or when recording fails to start
    (logged)."""

    __slots__ = ("attempt", "adhoc", "token")

    def __init__(self, client: Any, request: Any) -> None:
        self.attempt: Attempt | None = None
        self.adhoc: LogicalCall | None = None
        self.token: contextvars.Token | None = None
        rec = active_recorder()
        name = endpoint_name(request) if rec is not None and not _IN_SEND.get() else None
        if name is None:
            return
        call = _LOGICAL.get()
        if call is None or call.rec is not rec:  # _send_request used outside request(): its own logical call
            call = self.adhoc = LogicalCall(rec, rec.current_scope())
        try:
            self.attempt = Attempt(call, client, request, name)
        except Exception:  # never break the agent because recording failed
            log.exception("auto: could not start recording a model call")
            self.adhoc = None
            return
        self.token = _IN_SEND.set(True)

    def __enter__(self) -> Callable[[Any], Any]:
        return _unrecorded if self.attempt is None else self.answered

    def answered(self, response: Any) -> Any:
        _IN_SEND.reset(self.token)  # type: ignore[arg-type]
        self.token = None
        try:
            response = self.attempt.got_response(response)  # type: ignore[union-attr]
        except Exception:
            log.exception("auto: could not record a model call")
        if self.adhoc is not None:
            self.adhoc.request_done(None)
        return response

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> bool:
        if exc is not None and self.attempt is not None:
            if self.token is not None:
                _IN_SEND.reset(self.token)
                self.token = None
            self.attempt.fail(exc)
            if self.adhoc is not None:
                self.adhoc.request_done(exc)
        return False


def _wrap_send_sync(orig: Any) -> Any:
    def _send_request(self: Any, request: Any, *args: Any, **kwargs: Any) -> Any:
        with _attempt(self, request) as answered:
            return answered(orig(self, request, *args, **kwargs))

    _send_request.__auto_wrapped__ = orig  # type: ignore[attr-defined]
    return _send_request


def _wrap_send_async(orig: Any) -> Any:
    async def _send_request(self: Any, request: Any, *args: Any, **kwargs: Any) -> Any:
        with _attempt(self, request) as answered:
            return answered(await orig(self, request, *args, **kwargs))

    _send_request.__auto_wrapped__ = orig  # type: ignore[attr-defined]
    return _send_request


# ----------------------------------------------------------------------------- consumer layer


def _consumer_stopped(stream: Any) -> None:
    """The caller stopped iterating ``stream`` (an ``openai.Stream``/``AsyncStream``): tell its
    attempt, if the response is teed."""
    observer = observer_of(getattr(getattr(stream, "response", None), "stream", None))
    if isinstance(observer, Attempt):
        try:
            observer.consumer_stopped()
        except Exception:  # never break the agent because recording failed
            log.exception("auto: could not record a model call")


def _wrap_stream_iter(orig: Any) -> Any:
    def __iter__(self: Any) -> Iterator[Any]:
        try:
            yield from orig(self)
        except GeneratorExit:
            _consumer_stopped(self)
            raise

    __iter__.__auto_wrapped__ = orig  # type: ignore[attr-defined]
    return __iter__


def _wrap_stream_aiter(orig: Any) -> Any:
    async def __aiter__(self: Any) -> Any:
        try:
            async for item in orig(self):
                yield item
        except GeneratorExit:
            _consumer_stopped(self)
            raise

    __aiter__.__auto_wrapped__ = orig  # type: ignore[attr-defined]
    return __aiter__


# ----------------------------------------------------------------------------- patching


_PATCHED: list[tuple[type, str, Any]] = []
_PATCH_LOCK = threading.RLock()
_HOOK: "_OpenAIImportHook | None" = None


def _subclasses(cls: type) -> list[type]:
    out, todo = [], [cls]
    while todo:
        c = todo.pop()
        out.append(c)
        todo.extend(c.__subclasses__())
    return out


def _patch() -> None:
    with _PATCH_LOCK:
        if _PATCHED:
            return
        import openai  # noqa: F401  (loads _client, which defines the OpenAI subclasses)
        from openai import _base_client as bc
        from openai import _streaming as streaming

        def put(cls: type, name: str, wrapper: Any) -> None:
            orig = cls.__dict__[name]
            setattr(cls, name, wrapper(orig))
            _PATCHED.append((cls, name, orig))

        put(bc.SyncAPIClient, "request", _wrap_request_sync)
        put(bc.AsyncAPIClient, "request", _wrap_request_async)
        for base, wrap in ((bc.SyncAPIClient, _wrap_send_sync), (bc.AsyncAPIClient, _wrap_send_async)):
            for cls in _subclasses(base):
                if "_send_request" in cls.__dict__ and cls.__module__.startswith("openai"):
                    put(cls, "_send_request", wrap)
        put(streaming.Stream, "__iter__", _wrap_stream_iter)
        put(streaming.AsyncStream, "__aiter__", _wrap_stream_aiter)


def _remove_hook() -> None:
    """Take the import hook off ``sys.meta_path`` (caller holds ``_PATCH_LOCK``)."""
    global _HOOK
    if _HOOK is not None:
        try:
            sys.meta_path.remove(_HOOK)
        except ValueError:
            pass
        _HOOK = None


def instrument() -> None:
    """Patch the ``openai`` client classes (now, or when ``openai`` is first imported)."""
    global _HOOK
    with _PATCH_LOCK:
        if "openai._base_client" in sys.modules and "openai" in sys.modules:
            _patch()
        elif _HOOK is None:
            _HOOK = _OpenAIImportHook()
            sys.meta_path.insert(0, _HOOK)


def uninstrument() -> None:
    """Restore the original ``openai`` methods and remove the import hook."""
    with _PATCH_LOCK:
        while _PATCHED:
            cls, name, orig = _PATCHED.pop()
            setattr(cls, name, orig)
        _remove_hook()


def is_instrumented() -> bool:
    """Whether the ``openai`` classes are patched now."""
    return bool(_PATCHED)


class _OpenAIImportHook(importlib.abc.MetaPathFinder):
    """Patches ``openai`` right after the package finishes importing (keeps start-up lazy)."""

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname != "openai":
            return None
        spec = None
        for finder in list(sys.meta_path):
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                break
        if spec is None or spec.loader is None:
            return None
        spec.loader = _PatchingLoader(spec.loader)
        return spec


class _PatchingLoader(importlib.abc.Loader):
    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def create_module(self, spec: Any) -> Any:
        return self._inner.create_module(spec)

    def exec_module(self, module: Any) -> None:
        self._inner.exec_module(module)
        with _PATCH_LOCK:
            if _HOOK is not None:
                _remove_hook()
                _patch()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)
