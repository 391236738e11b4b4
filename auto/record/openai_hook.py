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

from auto.record.core import _ACTIVE, CURRENT, log
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
    rec = _ACTIVE[-1] if _ACTIVE else None
    if rec is None or _LOGICAL.get() is not None:
        return None
    call = LogicalCall(rec, CURRENT.get() or rec.process_scope)
    return call, _LOGICAL.set(call)


def _wrap_request_sync(orig: Any) -> Any:
    def request(self: Any, *args: Any, **kwargs: Any) -> Any:
        opened = _begin_call()
        if opened is None:
            return orig(self, *args, **kwargs)
        call, token = opened
        try:
            out = orig(self, *args, **kwargs)
        except BaseException as exc:
            _LOGICAL.reset(token)
            call.request_done(exc)
            raise
        _LOGICAL.reset(token)
        if call.own_trace:  # (inside a scope nothing reads how the request ended)
            call.request_done(None)
        return out

    request.__auto_wrapped__ = orig  # type: ignore[attr-defined]
    return request


def _wrap_request_async(orig: Any) -> Any:
    async def request(self: Any, *args: Any, **kwargs: Any) -> Any:
        opened = _begin_call()
        if opened is None:
            return await orig(self, *args, **kwargs)
        call, token = opened
        try:
            out = await orig(self, *args, **kwargs)
        except BaseException as exc:
            _LOGICAL.reset(token)
            call.request_done(exc)
            raise
        _LOGICAL.reset(token)
        call.request_done(None)
        return out

    request.__auto_wrapped__ = orig  # type: ignore[attr-defined]
    return request


# ----------------------------------------------------------------------------- attempt layer


def _start_attempt(client: Any, request: Any) -> "tuple[Attempt, LogicalCall | None] | None":
    """Before the outermost ``_send_request`` while recording: ``(attempt, adhoc)`` — the
    attempt recording it, and the logical call made for it when it was sent outside an SDK
    ``request()`` (else None) — or None when it is not recorded (another endpoint, or recording
    failed to start: logged)."""
    rec = _ACTIVE[-1] if _ACTIVE else None
    name = endpoint_name(request) if rec is not None else None
    if name is None:
        return None
    call = _LOGICAL.get()
    adhoc = None
    if call is None or call.rec is not rec:  # _send_request used outside request(): its own logical call
        call = adhoc = LogicalCall(rec, rec.current_scope())
    try:
        return Attempt(call, client, request, name), adhoc
    except Exception:  # never break the agent because recording failed
        log.exception("auto: could not start recording a model call")
        return None


def _answered(attempt: Attempt, adhoc: "LogicalCall | None", response: Any) -> Any:
    """After the recorded ``_send_request`` returned ``response``: record it now, or tee its
    stream to record it at its end (what the SDK gets back)."""
    try:
        response = attempt.got_response(response)
    except Exception:  # never break the agent because recording failed
        log.exception("auto: could not record a model call")
    if adhoc is not None:
        adhoc.request_done(None)
    return response


def _failed(attempt: Attempt, adhoc: "LogicalCall | None", exc: BaseException) -> None:
    """The recorded ``_send_request`` raised ``exc``: recorded on the attempt (it propagates)."""
    attempt.fail(exc)
    if adhoc is not None:
        adhoc.request_done(exc)


def _wrap_send_sync(orig: Any) -> Any:
    """The attempt layer around ``_send_request``: nothing recorded when not recording, inside an
    inner ``_send_request`` (an override calling ``super()``), or for another endpoint; an
    exception is recorded on the attempt and propagates."""

    def _send_request(self: Any, request: Any, *args: Any, **kwargs: Any) -> Any:
        if not _ACTIVE or _IN_SEND.get():
            return orig(self, request, *args, **kwargs)
        started = _start_attempt(self, request)
        if started is None:
            return orig(self, request, *args, **kwargs)
        token = _IN_SEND.set(True)
        try:
            response = orig(self, request, *args, **kwargs)
        except BaseException as exc:
            _IN_SEND.reset(token)
            _failed(*started, exc)
            raise
        _IN_SEND.reset(token)
        return _answered(*started, response)

    _send_request.__auto_wrapped__ = orig  # type: ignore[attr-defined]
    return _send_request


def _wrap_send_async(orig: Any) -> Any:
    """As :func:`_wrap_send_sync`, for ``AsyncAPIClient``."""

    async def _send_request(self: Any, request: Any, *args: Any, **kwargs: Any) -> Any:
        if not _ACTIVE or _IN_SEND.get():
            return await orig(self, request, *args, **kwargs)
        started = _start_attempt(self, request)
        if started is None:
            return await orig(self, request, *args, **kwargs)
        token = _IN_SEND.set(True)
        try:
            response = await orig(self, request, *args, **kwargs)
        except BaseException as exc:
            _IN_SEND.reset(token)
            _failed(*started, exc)
            raise
        _IN_SEND.reset(token)
        return _answered(*started, response)

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
