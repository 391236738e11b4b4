"""The proxy's HTTP server: an ASGI app (Starlette) served by uvicorn.

Every request is handled by :meth:`Proxy.handle`:

* ``GET /auto/health`` — ``{"ok": true, "upstream", "store"}``; ``GET /auto/status`` — the
  sites, the proxy's counters per site and each ratchet's status (JSON);
* ``POST …/chat/completions`` with a JSON object body — a model call: when the request belongs
  to a site whose installed generation's guard admits its input, answered at tier-1
  (:mod:`auto.proxy.answer`, nothing sent upstream; recorded as a tier-1 span,
  :func:`auto.proxy.recording.tier1_span`, which is never a witness); otherwise forwarded, its answer passed back as it arrives (SSE chunk
  by chunk), recorded as one ``llm`` span (:mod:`auto.proxy.recording`) and, for a site,
  captured by the site's ratchet (marked ``x-auto-tier: 0`` and ``x-auto-site``);
* ``POST …/responses`` — forwarded and recorded (the Responses API; not answered);
* ``POST /v1/traces`` — an OTLP/HTTP trace export (protobuf or JSON), received into the store as
  ``auto receive`` receives it (:mod:`auto.interchange.receiver`: the same mapping, redaction and
  checks), journaled before the answer; a model-call span of a call this proxy forwarded and
  recorded (same ``gen_ai.response.id``) is counted, not written: one upstream answer is one witness; never forwarded (span data may hold prompts), so a
  service may point ``OTEL_EXPORTER_OTLP_ENDPOINT`` at the proxy; any other method on that path
  answers ``405``, and any other path ending in ``/traces`` (an exporter pointed at ``…/v1``)
  ``404``, never forwarded;
* anything else, and a model call whose body is not a JSON object — forwarded unchanged and
  recorded opaque.

Failures, each as the client would see them without the proxy as far as HTTP allows: an error
status or a malformed body from the upstream is passed through unchanged (recorded as a failed
call); an upstream that cannot be reached answers ``502`` and one that is too slow ``504``, with
an OpenAI-style error body (``type`` ``upstream_unreachable`` / ``upstream_timeout``; the call is
recorded as failed); a client that goes away mid-stream leaves one span with the partial output
(``stream_incomplete``) and the upstream connection is closed; a body over ``max_body_bytes``
answers ``413``; a model call nested deeper than :data:`auto.jsonlimits.MAX_JSON_DEPTH` answers
``400`` (not forwarded); a path that would leave the upstream's base path (``/v1/../admin``, also
percent-encoded) answers ``400`` and is not forwarded (:func:`auto.proxy.upstream.safe_rest`).

Who may get a tier-1 answer (:mod:`auto.proxy.keys`): a request whose key is one of the
operator's ``client_keys`` or was accepted by the upstream within ``key_ttl_s``; any other request
to a compiled site is forwarded (``auto.deopt.reason`` says the key is not verified) and the
upstream decides. Shadow audits carry only the operator's ``audit_key`` (never a caller's
credentials); without one they are sent with no credentials.

Durability: a forwarded call's answer (its whole body, or a stream's last chunk) is sent only once
its span is journaled (:meth:`auto.proxy.recording.QueuedRecorder.durable`, waited for off the
event loop, at most :data:`DURABLE_WAIT_S`), so a proxy killed outright loses no answered call:
the next start replays the journal.

SDK retries: a request with ``x-stainless-retry-count`` ≥ 1 whose body equals a call that failed
in the last :data:`RETRY_WINDOW_S` seconds joins that call's ``auto.logical_call_id``, so the
census counts the retried call once, as the in-process recorder does.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import math
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import aiohttp
from auto_runtime.overlay import ORIGIN as OVERLAY_ORIGIN
from auto_runtime.tiered import OVERLAY_REASON
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from auto.interchange.receiver import WHERE as OTLP_WHERE
from auto.interchange.receiver import Intake
from auto.interchange.receiver import answer as otlp_answer
from auto.jsonlimits import MAX_JSON_DEPTH, json_depth_ok
from auto.proxy.keys import DEFAULT_KEY_TTL_S, KeyGate, request_key
from auto.proxy.answer import completion_body, completion_events, tier1_headers
from auto.proxy.recording import (
    ForwardedRequest,
    QueuedRecorder,
    ReadResponse,
    UpstreamResponse,
    Url,
    opaque_span,
    opaque_trace,
    tier1_span,
)
from auto.proxy.sites import SiteService
from auto.proxy.upstream import DEFAULT_TIMEOUT_S, HOP_BY_HOP, PathRefused, Upstream
from auto.ratchet import DEFAULT_AUDIT_RATE
from auto.record.model_call import Attempt, LogicalCall
from auto.record.openai_hook import endpoint_for
from auto.sites.request import request_shape
from auto.sites import site_answer
from auto.store.postgres import location_label

log = logging.getLogger("auto.proxy")

DEFAULT_PORT = 8788
MAX_BODY_BYTES = 64 * 1024 * 1024
"""Largest request body the proxy reads, in bytes (images travel base64-encoded in the body)."""

RETRY_WINDOW_S = 120.0
"""How long a failed call waits for its SDK retry to join it (s)."""

TIER1 = "tier-1"

ALL_METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]

DURABLE_WAIT_S = 10.0
"""Longest an answer waits for its span's journal write (s); past it the answer is sent anyway and
counted (``not_durable`` in ``/auto/status``): serving never stops for the recording."""


@dataclass
class ProxyConfig:
    """What ``auto proxy`` is given.

    Attributes:
        upstream: the upstream base URL; store: the store's location, an SQLite path or a
            ``postgresql://`` URI (``/auto/health`` shows it without the password).
        host, port: where to listen (loopback by default).
        answer: answer compiled sites at tier-1 (False: record only).
        trust, registry, sign_key: see :class:`auto.proxy.sites.SiteService`.
        audit_rate: the ratchets' shadow-audit rate.
        rediscover_s: how often sites are found again while calls are recorded (s).
        timeout_s: limit of one forwarded request (s).
        max_body_bytes: largest request body read (bytes).
        ratchet_options: more :class:`auto.ratchet.Ratchet` arguments.
        contract_path: a contract TOML for every site's ratchet (None: the default contract).
        client_keys: keys always admitted to tier-1 answers (:class:`auto.proxy.keys.KeyGate`).
        key_ttl_s: how long a key the upstream accepted stays admitted (s; 0: only ``client_keys``).
        audit_key: the key shadow audits send upstream (``Authorization: Bearer``), or None (sent
            with no credentials).
        record_tier1: record every tier-1 answer as a span (:func:`auto.proxy.recording.tier1_span`,
            exported for observability; never a witness). Measured on a loaded 2-core machine
            (load average 12), side by side in one run of 1,400 tier-1 calls each: p50 1.19 ms
            recorded, 1.07 ms not (the span's redaction and journaling share the process).
    """

    upstream: str
    store: str
    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    answer: bool = True
    trust: Any = None
    registry: Any = None
    sign_key: Any = None
    audit_rate: float = DEFAULT_AUDIT_RATE
    rediscover_s: float = 5.0
    timeout_s: float = DEFAULT_TIMEOUT_S
    max_body_bytes: int = MAX_BODY_BYTES
    ratchet_options: dict[str, Any] = field(default_factory=dict)
    contract_path: str | None = None
    client_keys: tuple[str, ...] = ()
    key_ttl_s: float = DEFAULT_KEY_TTL_S
    audit_key: str | None = None
    record_tier1: bool = True

    def __repr__(self) -> str:  # never show the keys
        return (f"ProxyConfig(upstream={Upstream(self.upstream).label!r}, store={location_label(self.store)!r}, "
                f"host={self.host!r}, port={self.port}, answer={self.answer}, client_keys=<{len(self.client_keys)}>, "
                f"audit_key={'<set>' if self.audit_key else None})")


def _raw(headers: Any) -> list[tuple[bytes, bytes]]:
    return [(k.lower(), v) for k, v in headers if k.decode("latin-1").lower() not in HOP_BY_HOP]


def _h(extra: dict[str, str]) -> list[tuple[bytes, bytes]]:
    return [(k.encode("latin-1"), str(v).encode("latin-1")) for k, v in extra.items()]


class RawResponse:
    """An ASGI response of exact header bytes and one body; ``after()`` runs once it was sent."""

    def __init__(self, status: int, headers: list[tuple[bytes, bytes]], body: bytes,
                 after: Callable[[], None] | None = None) -> None:
        self.status, self.headers, self.body, self.after = status, headers, body, after

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": self.status,
                    "headers": [*self.headers, (b"content-length", str(len(self.body)).encode())]})
        await send({"type": "http.response.body", "body": self.body})
        if self.after is not None:
            try:
                self.after()
            except Exception:  # noqa: BLE001 - recording must never break serving; logged
                log.exception("auto proxy: recording a call failed")


def _finite_float(text: str) -> float:
    """A JSON number as a float; raises ``ValueError`` for one out of range (``1e999`` reads as
    infinity, which canonical JSON cannot write: RFC 8259 has no infinite numbers)."""
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"number out of range: {text[:40]}")
    return value


def _no_constant(name: str) -> Any:
    """``NaN``, ``Infinity`` and ``-Infinity`` are not JSON (RFC 8259): raises ``ValueError``."""
    raise ValueError(f"not a JSON number: {name}")


def _error_body(status: int, etype: str, message: str) -> bytes:
    return json.dumps({"error": {"message": message, "type": etype, "param": None, "code": None}}).encode("utf-8")


class PassThrough:
    """An ASGI response streaming the upstream's body to the client chunk by chunk as it arrives.

    ``on_chunk(bytes)`` sees every chunk; ``on_end(state)`` runs once with ``"eof"`` (the body
    ended), ``"client-gone"`` (the client disconnected: the upstream connection is closed) or an
    exception (reading the upstream failed)."""

    def __init__(self, up: aiohttp.ClientResponse, headers: list[tuple[bytes, bytes]],
                 on_chunk: Callable[[bytes], None], on_end: Callable[[Any], None],
                 durable: Callable[[], Any] | None = None) -> None:
        self.up, self.headers, self.on_chunk, self.on_end = up, headers, on_chunk, on_end
        self.durable = durable
        self._ended = False

    def _end(self, state: Any) -> None:
        if self._ended:
            return
        self._ended = True
        try:
            self.on_end(state)
        except Exception:  # noqa: BLE001 - recording must never break serving; logged
            log.exception("auto proxy: recording a stream failed")

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        up = self.up

        async def pump() -> None:
            await send({"type": "http.response.start", "status": up.status, "headers": self.headers})
            async for chunk in up.content.iter_any():
                self.on_chunk(chunk)
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            if self.durable is not None:  # the stream's end is sent once its span is journaled
                self._end("eof")
                await self.durable()
            await send({"type": "http.response.body", "body": b"", "more_body": False})

        async def gone() -> None:
            while True:
                msg = await receive()
                if msg["type"] == "http.disconnect":
                    return

        pump_t = asyncio.ensure_future(pump())
        gone_t = asyncio.ensure_future(gone())
        state: Any = "eof"
        try:
            await asyncio.wait({pump_t, gone_t}, return_when=asyncio.FIRST_COMPLETED)
            if pump_t.done():
                exc = pump_t.exception()
                state = "eof" if exc is None else exc
            else:
                pump_t.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await pump_t
                state = "client-gone"
        finally:
            gone_t.cancel()
            if state == "eof":
                up.release()
            else:
                up.close()
            self._end(state)


class Proxy:
    """The proxy: its upstream, recorder and sites, and the ASGI app (:attr:`app`)."""

    def __init__(self, config: ProxyConfig) -> None:
        self.config = config
        self.upstream = Upstream(config.upstream, timeout_s=config.timeout_s)
        self.keys = KeyGate(config.client_keys, config.key_ttl_s)
        self.recorder = QueuedRecorder(config.store)
        if self.upstream.base.password:
            self.recorder.redactor.learn([self.upstream.base.password])
        self.recorder.redactor.learn([*config.client_keys, *([config.audit_key] if config.audit_key else [])])
        self.sites: SiteService | None = None
        if config.answer:
            self.sites = SiteService(config.store, self.upstream, self.recorder, trust=config.trust,
                                     registry=config.registry, sign_key=config.sign_key,
                                     audit_rate=config.audit_rate, rediscover_s=config.rediscover_s,
                                     ratchet_options=config.ratchet_options, contract_path=config.contract_path,
                                     audit_key=config.audit_key)
        self.not_durable = 0
        self._failed: dict[str, tuple[str, float]] = {}
        self._failed_lock = threading.Lock()
        self.otlp = Intake(self._known_traces, "auto proxy", self.recorder.recent_calls)
        self.app = Starlette(routes=[
            Route("/auto/health", self.health, methods=["GET"]),
            Route("/auto/status", self.status, methods=["GET"]),
            Route("/v1/traces", self.traces, methods=ALL_METHODS),
            Route("/{prefix:path}/traces", self.misplaced_traces, methods=ALL_METHODS),
            Route("/{path:path}", self.handle, methods=ALL_METHODS),
        ], lifespan=self._lifespan)

    @contextlib.asynccontextmanager
    async def _lifespan(self, app: Any) -> Any:
        await self.upstream.start()
        if self.sites is not None:
            await asyncio.get_running_loop().run_in_executor(None, self.sites.start)
        try:
            yield
        finally:
            await self.upstream.close()
            self.close()

    def close(self) -> None:
        """Stop the sites' threads and ratchets, write what is queued, close the store."""
        if self.sites is not None:
            self.sites.close()
            self.sites = None
        self.recorder.close()

    # ------------------------------------------------------------------ endpoints

    async def health(self, request: Request) -> JSONResponse:
        return JSONResponse({"ok": True, "upstream": self.upstream.label, "store": location_label(self.config.store),
                             "answering": self.sites is not None})

    async def status(self, request: Request) -> JSONResponse:
        sites = self.sites.status() if self.sites is not None else {}
        return JSONResponse({"recorded": self.recorder.written, "write_errors": len(self.recorder.write_errors),
                             "journal_errors": self.recorder.journal_errors, "not_durable": self.not_durable,
                             "otlp": dict(self.otlp.counters), "sites": sites})

    def _known_traces(self) -> list[str]:
        """The trace ids the store holds (read once, at the first ``/v1/traces`` request, from a
        connection of its own)."""
        from auto.store import Store

        with Store(self.config.store, create=False) as st:
            return [t["trace_id"] for batch in st.iter_traces() for t in batch]

    async def traces(self, request: Request) -> Any:
        """``/v1/traces``: an OTLP/HTTP export into the store, never forwarded (see the module docstring)."""
        if request.method != "POST":
            return RawResponse(405, [(b"content-type", b"application/json"), (b"allow", b"POST"),
                                     (b"x-auto-proxy-error", b"1")],
                               _error_body(405, "method_not_allowed", "auto proxy: /v1/traces takes OTLP/HTTP exports "
                                           "(POST); it is received here, never forwarded"))

        async def accept(doc: dict) -> None:
            await run_in_threadpool(self.otlp.take, doc, OTLP_WHERE, self.recorder.write)
            await self._durable()  # journaled before the exporter is answered

        return await otlp_answer(request, self.otlp, accept)

    async def misplaced_traces(self, request: Request) -> Any:
        """Any other path ending in ``/traces`` (``OTEL_EXPORTER_OTLP_ENDPOINT`` set to the model
        API's base URL, ``…/v1``, makes the exporter post to ``/v1/v1/traces``): ``404`` naming the
        right endpoint, never forwarded, because the body is span data that may hold prompts."""
        return RawResponse(404, [(b"content-type", b"application/json"), (b"x-auto-proxy-error", b"1")],
                           _error_body(404, "not_found", f"auto proxy: {request.url.path} is not forwarded (span data "
                                       "may hold prompts); OTLP exports go to /v1/traces: set "
                                       "OTEL_EXPORTER_OTLP_ENDPOINT to the proxy's address without /v1"))

    async def _durable(self) -> None:
        """Wait (off the event loop) until what was recorded so far is journaled (see the module
        docstring); past :data:`DURABLE_WAIT_S`, go on and count it."""
        loop = asyncio.get_running_loop()
        fut = loop.create_future()

        def fire() -> None:
            loop.call_soon_threadsafe(lambda: fut.done() or fut.set_result(None))

        self.recorder.durable(fire)
        try:
            await asyncio.wait_for(fut, DURABLE_WAIT_S)
        except asyncio.TimeoutError:
            self.not_durable += 1
            log.error("auto proxy: an answer was sent before its span was journaled (waited %g s)", DURABLE_WAIT_S)

    async def _body(self, request: Request) -> bytes | None:
        limit = self.config.max_body_bytes
        try:
            declared = int(request.headers.get("content-length", "0") or 0)
        except ValueError:
            declared = 0
        if declared > limit:
            return None
        chunks, size = [], 0
        async for c in request.stream():
            size += len(c)
            if size > limit:
                return None
            chunks.append(c)
        return b"".join(chunks)

    async def handle(self, request: Request) -> Any:
        started_ns = time.time_ns()
        try:
            self.upstream.url_for(request.url.path)
        except PathRefused as e:
            return RawResponse(400, [(b"content-type", b"application/json"), (b"x-auto-proxy-error", b"1")],
                               _error_body(400, "invalid_path", str(e)))
        try:
            raw = await self._body(request)
        except ClientDisconnect:
            return RawResponse(400, [], b"")
        if raw is None:
            return RawResponse(413, [(b"content-type", b"application/json")],
                               _error_body(413, "request_too_large", f"auto proxy: the request body is over "
                                           f"{self.config.max_body_bytes} bytes"))
        name = endpoint_for(request.method, request.url.path)
        body = None
        if name is not None:
            if not json_depth_ok(raw):
                return RawResponse(400, [(b"content-type", b"application/json"), (b"x-auto-proxy-error", b"1")],
                                   _error_body(400, "invalid_request_error", f"auto proxy: the request body nests "
                                               f"arrays/objects deeper than {MAX_JSON_DEPTH} levels"))
            try:
                body = json.loads(raw, parse_float=_finite_float, parse_constant=_no_constant)
            except (ValueError, RecursionError):  # incl. 1e999 / NaN / Infinity: no canonical form, so opaque
                body = None
        if not isinstance(body, dict):
            return await self._forward_opaque(request, raw)
        extra: dict[str, Any] = {}
        done: Callable[[Attempt], None] | None = None
        marks: dict[str, str] = {}
        sites = self.sites
        key = request_key(request.headers)
        if sites is not None and name == "chat.completions":
            route = sites.route(*request_shape(body))  # the canonical form: one site however the client wrote it
            if route is not None and route.input is not None and not self.keys.admits(key):
                sites.counters[route.site_id]["unverified_key"] += 1
                marks = {"x-auto-tier": "0", "x-auto-site": route.site_id}
                extra = {"auto.site": route.site_id,
                         "auto.deopt.reason": "the caller's key is not verified (not a client key, not accepted "
                                              "by the upstream recently)"}
            elif route is not None and route.input is not None:
                res = route.ratchet.decide(route.input)
                if res.tier == TIER1:
                    sites.counters[route.site_id]["tier1"] += 1
                    return self._tier1(body, res, route.site_id, started_ns)
                sites.counters[route.site_id]["deopt"] += 1
                extra = {"auto.site": route.site_id, "auto.deopt.reason": res.reason,
                         "auto.deopt.generation": res.generation}
                marks = {"x-auto-tier": "0", "x-auto-site": route.site_id}
                inp, ratchet = route.input, route.ratchet

                def done(attempt: Attempt) -> None:
                    rec = attempt.recorded
                    if rec is not None and rec.get("status") == "ok":
                        ratchet.complete(inp, site_answer(rec.get("output")), res)
            elif route is not None:
                marks = {"x-auto-tier": "0", "x-auto-site": route.site_id}
                extra = {"auto.site": route.site_id, "auto.deopt.reason": "outside the installed generation's template"}
            else:  # a site not compiled yet (or a request no site covers): tier-0 too, and marked so
                marks = {"x-auto-tier": "0"}
        return await self._forward_call(request, raw, name, extra, done, marks, key)

    def _tier1(self, body: dict, res: Any, site_id: str, started_ns: int) -> RawResponse:
        origin = OVERLAY_ORIGIN if res.reason == OVERLAY_REASON else None
        if self.config.record_tier1:
            span, trace, complete = tier1_span(body, res.answer, site_id, res.generation, res.artifact_id, started_ns,
                                               origin)
            self.recorder.write([span], [trace], complete)  # queued; built and written off the request path
        headers = _h(tier1_headers(site_id, res.generation, res.artifact_id, origin))
        if body.get("stream"):
            return RawResponse(200, [(b"content-type", b"text/event-stream; charset=utf-8"),
                                     (b"cache-control", b"no-cache"), *headers],
                               completion_events(body, res.answer, res.generation))
        data = json.dumps(completion_body(body, res.answer, res.generation), ensure_ascii=False).encode("utf-8")
        return RawResponse(200, [(b"content-type", b"application/json"), *headers], data)

    # ------------------------------------------------------------------ forwarding

    def _url(self, request: Request) -> Url:  # (no user info: never the upstream's password)
        u = self.upstream.url_for(request.url.path)
        return Url(u.scheme, u.host or "", u.port, u.path)

    def _join_retry(self, call: LogicalCall, request: Request, raw: bytes) -> str:
        key = hashlib.sha256(raw).hexdigest()
        try:
            retry = int(request.headers.get("x-stainless-retry-count", "0"))
        except ValueError:
            retry = 0
        if retry >= 1:
            now = time.monotonic()
            with self._failed_lock:
                prev = self._failed.pop(key, None)
                for k in [k for k, (_, t) in self._failed.items() if now - t > RETRY_WINDOW_S]:
                    del self._failed[k]
            if prev is not None and now - prev[1] <= RETRY_WINDOW_S:
                call.id = prev[0]
        return key

    def _failed_call(self, key: str, call: LogicalCall) -> None:
        with self._failed_lock:
            self._failed[key] = (call.id, time.monotonic())

    async def _forward_call(self, request: Request, raw: bytes, name: str, extra: dict[str, Any],
                            done: Callable[[Attempt], None] | None, marks: dict[str, str], client_key: str | None = None) -> Any:
        call = LogicalCall(self.recorder, None)
        key = self._join_retry(call, request, raw)
        attempt = Attempt(call, None, ForwardedRequest(request.method, self._url(request), request.headers, raw), name)
        attempt.extra_attributes = {"auto.proxy": True, **extra}

        def finished() -> None:
            call.request_done(None)
            rec = attempt.recorded
            if rec is not None and rec.get("status") != "ok":
                self._failed_call(key, call)
            if done is not None:
                done(attempt)

        try:
            up = await self.upstream.send(request.method, request.url.path, request.url.query, request.headers.items(), raw)
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as e:
            out = self._unreachable(e, attempt, call, key)
            await self._durable()
            return out
        if name == "chat.completions":
            self.keys.saw(client_key, up.status)
        head = UpstreamResponse(up.status, up.reason or "", up.headers)
        headers = [*_raw(up.raw_headers), *_h(marks)]
        if "text/event-stream" in up.headers.get("content-type", ""):
            attempt.begin_stream(head)

            def on_end(state: Any) -> None:
                if state == "eof":
                    attempt.stream_eof()
                elif state == "client-gone":
                    attempt.finish_incomplete("the client went away before the stream ended")
                else:
                    attempt.finish_incomplete(f"reading the upstream failed: {type(state).__name__}: {state}")
                finished()

            return PassThrough(up, headers, attempt.feed, on_end, durable=self._durable)
        try:
            data = await up.read()
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as e:
            up.close()
            out = self._unreachable(e, attempt, call, key)
            await self._durable()
            return out
        up.release()
        try:
            attempt.got_response(ReadResponse(up.status, up.reason or "", up.headers, _content=data))
            finished()
        except Exception:  # noqa: BLE001 - recording must never break serving; logged
            log.exception("auto proxy: recording a call failed")
        await self._durable()
        return RawResponse(up.status, headers, data)

    def _unreachable(self, e: BaseException, attempt: Attempt, call: LogicalCall, key: str) -> RawResponse:
        slow = isinstance(e, asyncio.TimeoutError)
        attempt.fail(e)
        call.request_done(e)
        self._failed_call(key, call)
        status, etype = (504, "upstream_timeout") if slow else (502, "upstream_unreachable")
        what = f"did not answer within {self.upstream.timeout_s:g} s" if slow else f"cannot be reached ({type(e).__name__}: {e})"
        return RawResponse(status, [(b"content-type", b"application/json"), (b"x-auto-proxy-error", b"1")],
                           _error_body(status, etype, self.upstream.scrub(f"auto proxy: the upstream {self.upstream.label} {what}")))

    async def _forward_opaque(self, request: Request, raw: bytes) -> Any:
        started = time.time_ns()
        path, method = request.url.path, request.method
        url = self.upstream.label_for(path)

        def write(status: int | None, rh: Any, body: bytes | None, error: dict | None, complete: bool = True) -> None:
            span = opaque_span(method, path, url, request.headers, raw, status, rh, body, started, error, complete)
            self.recorder.write([span], [opaque_trace(span)])

        try:
            up = await self.upstream.send(method, path, request.url.query, request.headers.items(), raw)
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as e:
            write(None, None, None, {"type": type(e).__name__, "message": str(e)})
            await self._durable()
            slow = isinstance(e, asyncio.TimeoutError)
            status, etype = (504, "upstream_timeout") if slow else (502, "upstream_unreachable")
            return RawResponse(status, [(b"content-type", b"application/json"), (b"x-auto-proxy-error", b"1")],
                               _error_body(status, etype, self.upstream.scrub(f"auto proxy: the upstream {self.upstream.label} failed: {e}")))
        headers = _raw(up.raw_headers)
        if "text/event-stream" in up.headers.get("content-type", ""):
            parts: list[bytes] = []

            def on_end(state: Any) -> None:
                write(up.status, up.headers, b"".join(parts), None if state in ("eof", "client-gone") else
                      {"type": type(state).__name__, "message": str(state)}, complete=state == "eof")

            return PassThrough(up, headers, parts.append, on_end, durable=self._durable)
        try:
            data = await up.read()
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as e:
            up.close()
            write(up.status, up.headers, None, {"type": type(e).__name__, "message": str(e)})
            await self._durable()
            return RawResponse(502, [(b"content-type", b"application/json")],
                               _error_body(502, "upstream_unreachable", self.upstream.scrub(f"auto proxy: reading the upstream failed: {e}")))
        up.release()
        write(up.status, up.headers, data, None)
        await self._durable()
        return RawResponse(up.status, headers, data)
