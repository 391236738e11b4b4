"""An OTLP/HTTP trace receiver: ``POST /v1/traces`` into a store (``auto receive``).

A service already instrumented with OpenTelemetry (OpenLLMetry, ``opentelemetry-instrumentation-
openai-v2``, OpenInference, …) feeds Auto with one environment variable:
``OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318`` (the exporter posts to ``/v1/traces``).

**Protocol** (OpenTelemetry protocol specification, "OTLP/HTTP"): the body is an
``ExportTraceServiceRequest``, binary protobuf (``Content-Type: application/x-protobuf``, decoded
with the ``opentelemetry-proto`` package) or JSON (``application/json``: hex ids, or the base64
ids protobuf's ``json_format`` writes), optionally ``Content-Encoding: gzip``. The answer is an
``ExportTraceServiceResponse`` in the request's encoding, 200 once the spans are durable; 400 for a
body that cannot be decoded (the exporter does not retry it), 415 for another content type.

**What is kept**: every span of the GenAI semantic conventions, OpenInference or Auto's own export,
mapped as ``auto store import --otlp`` maps them (:func:`auto.interchange.otlp.prepare`: redacted,
checked); other spans (HTTP, database) are counted and dropped. A model call's task is found from
its ``invoke_agent`` ancestor only when both arrive in one request (exporters batch by time:
``gen_ai.agent.name`` on the call itself always works).

**A call already recorded is not written twice**: behind ``auto proxy`` (``/v1/traces`` of the
proxy the service also calls through), the instrumentation's span of a call the proxy forwarded is
a second view of the proxy's own span of that call. Kept, it would make one upstream answer two
witnesses (an input asked once would read as witnessed twice, deterministic). Such a span (same
``gen_ai.response.id`` and response model as a call the proxy recorded, :class:`RecentCalls`) is
counted (``already_recorded``) and not written.

**Nothing acknowledged is lost**: a request's spans are appended to the store's journal
(:mod:`auto.store.journal`, one ``write(2)``, the recorder's format) before the 200 is sent; a
writer thread commits what was journaled every :data:`COMMIT_S` and truncates the journal once
everything appended is committed. A receiver killed after answering has its journal replayed by
the next open of the store. A trace row is written once, from the first request that names the
trace (trace rows are immutable; later spans of the trace only add spans).
"""

from __future__ import annotations

import gzip
import json
import logging
import sys
import threading
from typing import Any, Awaitable, Callable, Iterable

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from auto.jsonlimits import json_depth_ok
from auto.errors import IngestError
from auto.interchange.otlp import OTLP_MAX_DEPTH, doc_spans, prepare, without_messages_line
from auto.interchange.parquet import InterchangeError
from auto.store.journal import Journal, journal_dir

log = logging.getLogger("auto.receive")

COMMIT_S = 0.2
"""The writer commits what was journaled at most this long after it was acknowledged (s)."""

MAX_BODY_BYTES = 64 * 1024 * 1024
"""A request body (after gzip) larger than this is refused with 413 (bytes)."""

PROTOBUF = "application/x-protobuf"

RECENT_CALLS = 65_536
"""How many recorded calls :class:`RecentCalls` remembers (the oldest are forgotten first). An
exporter's batch arrives seconds after its calls (the SDK's batch span processor exports every
5,000 ms by default: ``OTEL_BSP_SCHEDULE_DELAY``, OpenTelemetry SDK environment variable
specification), so a span is matched while fewer than this many calls were recorded since its
own; a proxy forwarding more than about 13,000 calls/s would write some views twice."""


def call_key(span: dict) -> tuple[str, str] | None:
    """``(gen_ai.response.id, response model)`` of a model-call span; None without a response id.
    Response ids are the upstream's, unique per call (the OpenAI API's ``chatcmpl-…``); the model
    is part of the key so that two upstreams' counters cannot collide on one model's calls."""
    attrs = span.get("attributes") or {}
    rid = attrs.get("gen_ai.response.id")
    if span.get("kind") != "llm" or not isinstance(rid, str) or not rid:
        return None
    model = attrs.get("gen_ai.response.model") or attrs.get("gen_ai.request.model")
    return rid, model if isinstance(model, str) else ""


class RecentCalls:
    """The last :data:`RECENT_CALLS` model calls a recorder wrote, by :func:`call_key`
    (thread-safe; memory bounded by that count)."""

    def __init__(self, limit: int = RECENT_CALLS) -> None:
        self._keys: dict[tuple[str, str], None] = {}
        self._limit = limit
        self._lock = threading.Lock()

    def add(self, spans: Iterable[dict]) -> None:
        """Remember the model calls among ``spans``."""
        keys = [k for k in map(call_key, spans) if k is not None]
        if not keys:
            return
        with self._lock:
            for k in keys:
                self._keys.pop(k, None)
                self._keys[k] = None
            while len(self._keys) > self._limit:
                del self._keys[next(iter(self._keys))]

    def __contains__(self, span: object) -> bool:
        key = call_key(span) if isinstance(span, dict) else None
        if key is None:
            return False
        with self._lock:
            return key in self._keys


def decode(body: bytes, content_type: str, encoding: str) -> dict:
    """An OTLP/HTTP request body as the OTLP/JSON ``ExportTraceServiceRequest`` object.

    Raises:
        InterchangeError: gzip, protobuf or JSON that does not decode; an unknown content type.
    """
    if encoding.strip().lower() == "gzip":
        try:
            body = gzip.decompress(body)
        except (OSError, EOFError) as e:
            raise InterchangeError(f"the body is not gzip: {e}") from None
    if len(body) > MAX_BODY_BYTES:
        raise InterchangeError(f"the body is over {MAX_BODY_BYTES} bytes")
    ctype = content_type.split(";", 1)[0].strip().lower()
    if ctype == PROTOBUF:
        from google.protobuf import json_format
        from google.protobuf.message import DecodeError
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

        msg = ExportTraceServiceRequest()
        try:
            msg.ParseFromString(body)
        except DecodeError as e:
            raise InterchangeError(f"the body is not an ExportTraceServiceRequest: {e}") from None
        doc = json_format.MessageToDict(msg)
        doc.setdefault("resourceSpans", [])
        return doc
    if ctype == "application/json":
        if not json_depth_ok(body, OTLP_MAX_DEPTH):
            raise InterchangeError(f"the body nests arrays/objects deeper than {OTLP_MAX_DEPTH} levels")
        try:
            doc = json.loads(body)
        except ValueError as e:
            raise InterchangeError(f"the body is not JSON: {e}") from None
        if isinstance(doc, dict):
            doc.setdefault("resourceSpans", [])
        return doc
    raise InterchangeError(f"unsupported content type {ctype!r} (OTLP/HTTP is {PROTOBUF} or application/json)")


class Intake:
    """What one OTLP request contributes to a store: its spans mapped, redacted and checked
    (:func:`auto.interchange.otlp.prepare`), the trace rows of traces not seen before (a trace
    row is written once: trace rows are immutable), and the counters. Shared by ``auto receive``
    (:class:`Receiver`) and ``auto proxy``'s ``/v1/traces`` route, which differ only in where an
    accepted request is made durable (``sink``).

    Args:
        known_traces: a callable returning the trace ids the store already holds (called once,
            at the first request, off the event loop).
        recorded: the calls the store already holds from another recorder (``auto proxy``'s
            :class:`RecentCalls`); a model-call span among them is counted, not written.

    Attributes:
        counters: ``requests``, ``spans`` (accepted), ``skipped`` (of no convention), ``refused``
            (requests answered 4xx), ``without_messages`` (model calls that recorded no
            messages: not kept, no witnesses; the first is reported on stderr with what to set), ``already_recorded``
            (model calls ``recorded`` holds, not written again).
    """

    def __init__(self, known_traces: Callable[[], Iterable[str]], name: str = "auto receive",
                 recorded: RecentCalls | None = None) -> None:
        self.counters = {"requests": 0, "spans": 0, "skipped": 0, "refused": 0, "without_messages": 0,
                         "already_recorded": 0}
        self.name = name
        self._known = known_traces
        self._recorded = recorded
        self._traces: set[str] | None = None
        self.lock = threading.Lock()

    def take(self, doc: dict, where: str, sink: Callable[[list[dict], list[dict]], None]) -> int:
        """Map and check one request's spans and hand them with their new trace rows to
        ``sink(spans, traces)`` (called under :attr:`lock`, so sinks see requests in one order;
        not called when there is nothing to write). Durable on return when ``sink`` is.

        Returns:
            the number of spans accepted.

        Raises:
            InterchangeError, IngestError: a malformed request (nothing of it is kept).
        """
        batch = prepare(list(doc_spans(doc, where)), where, allow_empty=True)
        spans, seen = batch.spans, 0
        if self._recorded is not None:
            spans = [s for s in batch.spans if s not in self._recorded]
            seen = len(batch.spans) - len(spans)
        kept = {s["trace_id"] for s in spans}
        with self.lock:
            if self._traces is None:
                self._traces = set(self._known())
            traces = [t for t in batch.traces if t["trace_id"] not in self._traces and t["trace_id"] in kept]
            if spans or traces:
                sink(spans, traces)
                self._traces.update(t["trace_id"] for t in traces)
            self.counters["requests"] += 1
            self.counters["spans"] += len(spans)
            self.counters["already_recorded"] += seen
            self.counters["skipped"] += batch.skipped
            first_bare = batch.without_messages and not self.counters["without_messages"]
            self.counters["without_messages"] += batch.without_messages
        if first_bare:  # once: the service's instrumentation is not capturing content
            sys.stderr.write(f"{self.name}: {without_messages_line(batch.without_messages)} (said once)\n")
        return len(spans)

    def refused(self) -> None:
        with self.lock:
            self.counters["refused"] += 1


async def answer(request: Request, intake: Intake, accept: Callable[[dict], Awaitable[Any]]) -> Response:
    """The OTLP/HTTP answer to ``POST /v1/traces`` (see the module docstring): the body decoded
    (:func:`decode`) and passed to ``accept(doc)``, which makes it durable; 200 with an
    ``ExportTraceServiceResponse`` in the request's encoding, 400/415 with a ``google.rpc.Status``."""
    ctype = request.headers.get("content-type", "")
    proto = ctype.split(";", 1)[0].strip().lower() == PROTOBUF
    body = await request.body()
    try:
        doc = decode(body, ctype, request.headers.get("content-encoding", ""))
        await accept(doc)
    except (InterchangeError, IngestError) as e:
        intake.refused()
        code = 415 if "content type" in str(e) else 400
        return _status(code, str(e), proto)
    if proto:
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

        return Response(ExportTraceServiceResponse().SerializeToString(), media_type=PROTOBUF)
    return JSONResponse({})


WHERE = "POST /v1/traces"


class Receiver:
    """The receiver's state: the store, its journal, the writer thread (see the module docstring).

    Args:
        store: an open :class:`auto.store.Store` (the receiver closes it in :meth:`close`).

    Attributes:
        counters: those of :class:`Intake`, and ``committed`` (spans written).
    """

    def __init__(self, store: Any) -> None:
        from auto.store import local_path

        self.store = store
        self.journal = Journal(journal_dir(local_path(store.location)))
        self.intake = Intake(lambda: [t["trace_id"] for t in store.traces()])
        self.counters = self.intake.counters
        self.counters["committed"] = 0
        self._lock = self.intake.lock  # journal order = pending order
        self._pending: list[tuple[list[dict], list[dict]]] = []
        self._appended = 0
        self._committed = 0
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="auto-receive-writer", daemon=True)
        self._thread.start()

    def _journal(self, spans: list[dict], traces: list[dict]) -> None:  # (under the intake's lock)
        self.journal.append(spans, traces)
        self._appended += 1
        self._pending.append((spans, traces))

    def accept(self, doc: dict, where: str) -> int:
        """Map, check and journal one request's spans (durable on return).

        Returns:
            the number of spans accepted.

        Raises:
            InterchangeError, IngestError: a malformed request (nothing of it is kept).
        """
        n = self.intake.take(doc, where, self._journal)
        self._wake.set()
        return n

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(COMMIT_S)
            self._wake.clear()
            self._stop.wait(COMMIT_S)  # gather what arrives meanwhile into one transaction
            self.commit()

    def commit(self) -> None:
        """Write everything journaled so far (one transaction; one per request when that fails)."""
        with self._lock:
            items, self._pending = self._pending, []
        if not items:
            return
        try:
            self.store.ingest([s for sp, _ in items for s in sp], [t for _, tr in items for t in tr])
            done = len(items)
        except IngestError:
            done = 0
            for sp, tr in items:
                try:
                    self.store.ingest(sp, tr)
                except IngestError as e:
                    log.error("auto receive: a request of %d span(s) was refused by the store: %s", len(sp), e)
                done += 1
        except Exception:  # noqa: BLE001 - the database is down: the batches stay journaled, replayed at open
            log.exception("auto receive: writing failed; the spans stay in the journal")
            return
        with self._lock:
            self._committed += done
            self.counters["committed"] += sum(len(sp) for sp, _ in items)
            if self._committed == self._appended and not self._pending:
                self.journal.truncate()

    def close(self) -> None:
        """Stop the writer, write what is journaled, close the journal and the store."""
        self._stop.set()
        self._wake.set()
        self._thread.join(timeout=60)
        self.commit()
        self.journal.close()
        self.store.close()

    # -------------------------------------------------------------------------- HTTP

    async def traces(self, request: Request) -> Response:
        return await answer(request, self.intake, lambda doc: run_in_threadpool(self.accept, doc, WHERE))

    async def health(self, request: Request) -> Response:
        with self._lock:
            return JSONResponse({"ok": True, **self.counters})

    @property
    def app(self) -> Starlette:
        """The ASGI app: ``POST /v1/traces``, ``GET /auto/health`` (the counters)."""
        return Starlette(routes=[Route("/v1/traces", self.traces, methods=["POST"]),
                                 Route("/auto/health", self.health, methods=["GET"])])


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b, n = n & 0x7F, n >> 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def status_bytes(code: int, message: str) -> bytes:
    """A ``google.rpc.Status`` (``int32 code = 1; string message = 2``) in the protobuf binary
    encoding (protobuf "Encoding": tag ``field << 3 | wire type``, varint 0, length-delimited 2),
    written by hand: the message type is not in ``opentelemetry-proto``."""
    text = message.encode("utf-8")
    return b"\x08" + _varint(code) + b"\x12" + _varint(len(text)) + text


def _status(code: int, message: str, proto: bool) -> Response:
    """An OTLP error answer: a ``google.rpc.Status`` with the message (OTLP/HTTP, "Failures")."""
    if proto:
        return Response(status_bytes(3, message), status_code=code, media_type=PROTOBUF)
    return JSONResponse({"code": 3, "message": message}, status_code=code)


def serve(store_path: str, host: str, port: int, announce: Any = None) -> dict:
    """Receive in the foreground until interrupted (SIGINT/SIGTERM), then write what is
    journaled. The address is bound before the store is opened, so a taken port creates
    nothing; ``announce(port)`` is called just before serving (``port``: the one bound, the
    system's pick for ``port`` 0).

    Returns:
        the receiver's counters.

    Raises:
        ListenError: the address cannot be listened on.
    """
    import uvicorn

    from auto.asgi import listen_socket, uvicorn_config
    from auto.store import Store

    sock = listen_socket(host, port)
    try:
        rec = Receiver(Store(store_path))
        if announce is not None:
            announce(sock.getsockname()[1])
        try:
            uvicorn.Server(uvicorn_config(rec.app, host, port)).run(sockets=[sock])
        finally:
            rec.close()
    finally:
        sock.close()
    return dict(rec.counters)


class ReceiverServer:
    """The receiver on a background thread (context manager; tests and benchmarks).

    Attributes:
        receiver: the :class:`Receiver`; endpoint: ``http://host:port`` (what
            ``OTEL_EXPORTER_OTLP_ENDPOINT`` is set to).
    """

    def __init__(self, store: Any, host: str = "127.0.0.1", port: int = 0) -> None:
        import uvicorn

        from auto.asgi import uvicorn_config

        self.receiver = Receiver(store)
        self.host = host
        self._server = uvicorn.Server(uvicorn_config(self.receiver.app, host, port))
        self._thread: threading.Thread | None = None
        self.port = port

    @property
    def endpoint(self) -> str:
        return f"http://{self.host}:{self.port}"

    def __enter__(self) -> "ReceiverServer":
        import time

        self._thread = threading.Thread(target=self._server.run, name="auto-receive", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 30
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise InterchangeError(f"the receiver did not start on {self.host}:{self.port}")
            time.sleep(0.01)
        self.port = self._server.servers[0].sockets[0].getsockname()[1]
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=30)
        self.receiver.close()


__all__ = ["COMMIT_S", "Intake", "RECENT_CALLS", "Receiver", "RecentCalls", "WHERE", "answer", "ReceiverServer", "call_key",
           "decode", "serve", "status_bytes"]
