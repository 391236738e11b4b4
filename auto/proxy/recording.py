"""What the proxy writes to the store: the in-process recorder's spans, written off the request path.

* Model calls (``POST …/chat/completions``, ``POST …/responses``) are recorded by the in-process
  recorder's own classes (:class:`auto.record.model_call.LogicalCall` and
  :class:`~auto.record.model_call.Attempt`), fed with the forwarded request and the upstream's
  response through the small adapters here, so a call recorded through the proxy is the same span
  a call recorded inside the agent is (one ``llm`` span per forwarded request, its own trace;
  credentials dropped from the headers and scrubbed from every string). The proxy adds
  ``auto.proxy = true``.
* Any other request (another endpoint, a body that is not JSON) is forwarded unchanged and
  recorded *opaque* (:func:`opaque_span`): kind ``llm``, name ``opaque``, site
  ``opaque/<METHOD> <path>``, attribute ``auto.opaque = true``; input and output are the method,
  path, status and the sha-256 and size of each body, never the bodies (they may hold anything).
* A tier-1 answer is recorded too (:func:`tier1_span`), so an exported store (OTLP, Parquet)
  shows the compiled path beside the forwarded one: kind ``llm``, name :data:`auto.store.TIER1_SPAN` (not
  ``chat.completions``: site discovery and the census never read it, so an artifact's answers
  are never its own witnesses), site = the census site id, attributes ``auto.tier = 1``,
  ``auto.generation``, ``auto.artifact_id``, ``auto.cost_usd_micros = 0``, ``gen_ai.*`` as a
  forwarded call's (``gen_ai.openai.response.system_fingerprint`` ``auto-gen<N>``, as the answer
  itself carries: a tier-1 answer is still known as one where a tool dropped the ``auto.*``
  attributes); input the request body, output the answer as a forwarded call's output.
  Built on the sender thread, off the request path.
* :class:`QueuedRecorder` queues finished spans; a sender thread gathers them into batches (one
  transaction per batch, at most :data:`BATCH_SPANS` spans), redacts them as the in-process
  recorder does (:class:`auto.record.redact.Redactor`: every forwarded call's credentials, and
  secret patterns), and a writer *process*
  (:mod:`auto.proxy.writer`, in its own session) ingests them,
  so no request waits for SQLite and the store's CPU work does not hold the serving process's
  interpreter lock (measured on a 2-core machine: ingesting costs 1.5 ms of CPU per span one at a
  time, 0.6 ms in a batch of 100). A batch the store rejects is retried span by span, so one bad
  span loses only itself. :meth:`QueuedRecorder.flush` waits until everything queued is in the
  store.
* Nothing answered is lost: the sender thread completes, redacts and appends each queued item to
  the store's journal (:mod:`auto.store.journal`, one ``write(2)``) as soon as it takes it, before
  batching it for the writer process; the proxy sends the end of an answer (the whole body, or
  a stream's last chunk) only once the sender has journaled the answer's span
  (:meth:`QueuedRecorder.durable`). A proxy killed outright leaves its journal behind, and the
  next open of the store (the next ``auto proxy`` start, or any other) replays it; the journal is
  emptied whenever everything journaled was acknowledged by the writer process. When the
  journal cannot be written (disk full) the answer is sent anyway, not durable, and counted
  (:attr:`QueuedRecorder.journal_errors`).
"""

from __future__ import annotations

import json
import logging
import os
import pickle
import queue
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from auto.canonical import digest_bytes
from auto.proxy.writer import HEADER, WRITER_STORE_ENV
from auto.interchange.receiver import RecentCalls
from auto.record.core import Recorder
from auto.record.redact import sanitize_headers
from auto.store import TIER1_SPAN, Store, local_path, new_span_id, new_trace_id
from auto.store.journal import Journal, journal_dir

log = logging.getLogger("auto.proxy")

BATCH_SPANS = 256
"""At most this many spans per store transaction."""

BATCH_WAIT_S = 0.02
"""The writer gathers what arrives within this long (s) into one transaction: a transaction costs
about 2 ms of which most is fixed (measured: 2.4 ms for one span, 0.6 ms per span in a batch of
100), so batching keeps the writer's share of the CPU small under load."""


def _forwarded(span: dict) -> bool:
    """A call this proxy forwarded and recorded (not a span received on ``/v1/traces``)."""
    attrs = span.get("attributes") or {}
    return attrs.get("auto.proxy") is True and attrs.get("auto.source") != "otlp"


class QueuedRecorder(Recorder):
    """A :class:`~auto.record.core.Recorder` whose writes are queued and ingested by a writer
    *process* (see the module docstring): the store's work (canonical JSON, digests, SQLite)
    never competes with the event loop for the interpreter lock.

    Args:
        store: the store's location, an SQLite path or a ``postgresql://`` URI (opened here
            too, so a bad store fails at once; the writer process opens it again).

    Attributes:
        written: spans in the store; write_errors: failed writes (messages).
        journal_errors: queued items that could not be journaled (not durable until written).
        recent_calls: the model calls this proxy forwarded and recorded last
            (:class:`auto.interchange.receiver.RecentCalls`), each added once its span is completed, before it is journaled, hence before the
            caller is answered: ``/v1/traces`` leaves out the instrumentation's span of such a call.
    """

    def __init__(self, store: str) -> None:
        super().__init__(Store(store), owns_store=True)  # (opening it replays a killed proxy's journal)
        self._journal = Journal(journal_dir(local_path(self.store.location)))
        self.recent_calls = RecentCalls()
        self._jlock = threading.Lock()
        self._journaled = 0  # items journaled (under _jlock)
        self._acked_journaled = 0  # of those, acknowledged by the writer process (under _cond)
        self._keep_journal = False  # the writer process went away: what is journaled waits for a replay
        self.journal_errors = 0
        self._queue: queue.Queue = queue.Queue()
        self._closed = False
        self._sent = 0
        self._acked = 0
        self._cond = threading.Condition()
        # the location as given (a URI with its password: Store.location has it removed), in the
        # environment rather than on the command line, where every user of the host could read it
        self._proc = subprocess.Popen([sys.executable, "-P", "-m", "auto.proxy.writer"],
                                      env={**os.environ, WRITER_STORE_ENV: os.fspath(store)},
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE, start_new_session=True)
        self._sender = threading.Thread(target=self._send_loop, name="auto-proxy-sender", daemon=True)
        self._acks = threading.Thread(target=self._ack_loop, name="auto-proxy-acks", daemon=True)
        self._sender.start()
        self._acks.start()

    def write(self, spans: list[dict], traces: list[dict] = (),  # type: ignore[override]
              complete: Callable[[], None] | None = None) -> None:
        """Queue one batch (never blocks, never raises); ``complete`` fills in what the spans
        still lack, on the sender thread — the lists themselves too (a model-call attempt hands
        over an empty list that its ``complete`` fills: :meth:`auto.record.model_call.Attempt._end`);
        the lists are queued as they are (the caller does not change them afterwards)."""
        if not spans and not traces and complete is None:
            return
        with self._cond:
            self._sent += 1
        self._queue.put((spans if type(spans) is list else list(spans),
                         traces if type(traces) is list else list(traces), complete))

    def durable(self, callback: Callable[[], None]) -> None:
        """Call ``callback()`` (on the sender thread) once every item queued before this call is
        journaled (or failed and counted): from then on a kill of the proxy loses none of them."""
        self._queue.put(_Durable(callback))

    def _take(self, item: Any, batch: list) -> None:
        """One queued item: a durability marker fires; a batch is completed, redacted (never
        written unredacted), journaled, and kept for the writer process."""
        if isinstance(item, _Durable):
            try:
                item.callback()
            except Exception:  # noqa: BLE001 - a caller gone away (its loop closed) must not stop the sender
                log.debug("auto proxy: a durability callback failed", exc_info=True)
            return
        done = self._redact([item])
        if not done:
            return
        spans, traces = done[0]
        try:
            with self._jlock:
                self._journal.append(spans, traces)
                self._journaled += 1
        except (OSError, ValueError) as e:
            self.journal_errors += 1
            log.error("auto proxy: %d span(s) not journaled (written when the writer takes them): %s", len(spans), e)
            with self._jlock:
                self._journaled += 1  # (counted as acknowledged like the others: nothing to truncate for it)
        batch.append((spans, traces))

    def _send_loop(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                break
            batch: list = []
            self._take(item, batch)
            deadline = time.monotonic() + BATCH_WAIT_S
            stop = False
            while len(batch) < BATCH_SPANS:
                left = deadline - time.monotonic()
                try:
                    nxt = self._queue.get(timeout=left) if left > 0 else self._queue.get_nowait()
                except queue.Empty:
                    break
                if nxt is None:
                    stop = True
                    break
                self._take(nxt, batch)
            if not batch:
                if stop:
                    break
                continue
            try:
                data = pickle.dumps(batch, protocol=pickle.HIGHEST_PROTOCOL)
                self._proc.stdin.write(HEADER.pack(len(data)) + data)  # type: ignore[union-attr]
                self._proc.stdin.flush()  # type: ignore[union-attr]
            except (OSError, ValueError) as e:  # the writer is gone: count the loss, keep serving
                self._lost(batch, f"the store writer is gone ({e}); journaled, replayed at the next start", journaled=True)
            if stop:
                break
        try:
            self._proc.stdin.close()  # type: ignore[union-attr]
        except OSError:
            pass

    def _redact(self, batch: list) -> list:
        """The batch with secrets redacted (:attr:`redactor`: the credentials of every forwarded
        call and the recorder's patterns), on the sender thread, off the event loop; an item
        that cannot be redacted is not written (counted as a write error)."""
        out = []
        for spans, traces, complete in batch:
            try:
                if complete is not None:
                    complete()
                self.recent_calls.add(s for s in spans if _forwarded(s))
                out.append(([self.redactor.redact_span(s) for s in spans], [self.redactor.redact_span(t) for t in traces]))
            except Exception as e:  # noqa: BLE001 - never write what could not be completed or redacted
                self._lost([(spans, traces)], f"{type(e).__name__}: {e}")
        return out

    def _lost(self, batch: list, why: str, journaled: bool = False) -> None:
        n = sum(len(s) for s, _ in batch)
        if journaled:
            self._keep_journal = True  # replayed by the next open of the store
        with self._cond:
            self.write_errors.append(why)
            self._acked += len(batch)
            self._cond.notify_all()
        log.error("auto proxy: %d span(s) not recorded: %s", n, why)

    def _ack_loop(self) -> None:
        for line in self._proc.stdout:  # type: ignore[union-attr]
            try:
                items, n, errors = json.loads(line)
            except ValueError:
                continue
            with self._cond:
                self._acked += items
                self._acked_journaled += items  # (every item piped to the writer was journaled first)
                self.written += n - len(errors)
                self.write_errors.extend(errors)
                self._cond.notify_all()
            self._truncate_if_acked()

    def _truncate_if_acked(self) -> None:
        """Empty the journal when everything journaled is in the store (acknowledged)."""
        with self._jlock:
            with self._cond:
                all_acked = self._acked_journaled >= self._journaled
            if all_acked and not self._keep_journal:
                try:
                    self._journal.truncate()
                except OSError:
                    pass

    def flush(self, timeout_s: float = 30.0) -> bool:
        """Wait until every queued span is in the store; True when it is."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while self._acked < self._sent:
                left = deadline - time.monotonic()
                if left <= 0 or self._proc.poll() is not None:
                    return self._acked >= self._sent
                self._cond.wait(min(left, 0.1))
        return True

    def close(self) -> None:
        """Write what is queued, stop the writer process, close the store."""
        if self._closed:
            return
        self._closed = True
        self.flush(60)
        self._queue.put(None)
        self._sender.join(timeout=60)
        try:
            self._proc.wait(timeout=60)
        except subprocess.TimeoutExpired:  # pragma: no cover - a hung writer
            self._proc.kill()
            self._proc.wait()
        self._acks.join(timeout=10)
        with self._cond:
            everything = self._acked_journaled >= self._journaled
        if everything and not self._keep_journal:
            self._journal.close()  # removed when empty; kept (and replayed at the next open) otherwise
        self.store.close()


class _Durable:
    """A queue marker: the sender calls ``callback`` once it reaches it (:meth:`QueuedRecorder.durable`)."""

    __slots__ = ("callback",)

    def __init__(self, callback: Callable[[], None]) -> None:
        self.callback = callback


# ----------------------------------------------------------------------------- adapters


@dataclass
class Url:
    """The parts of a URL the recorder reads."""

    scheme: str
    host: str
    port: int | None
    path: str


@dataclass
class ForwardedRequest:
    """A forwarded request as :class:`~auto.record.model_call.Attempt` reads one (the attributes
    of an ``httpx`` request it uses)."""

    method: str
    url: Url
    headers: Mapping[str, str]
    content: bytes


@dataclass
class UpstreamResponse:
    """The upstream's response head as the recorder reads it (status, reason, headers)."""

    status_code: int
    reason_phrase: str
    headers: Mapping[str, str]


@dataclass
class ReadResponse(UpstreamResponse):
    """A response whose body was read whole (the recorder records it at once)."""

    _content: bytes = b""

    @property
    def content(self) -> bytes:
        return self._content


def opaque_span(method: str, path: str, url: str, request_headers: Mapping[str, str], request_body: bytes,
                status: int | None, response_headers: Mapping[str, str] | None, response_body: bytes | None,
                started_ns: int, error: dict | None = None, complete: bool = True) -> dict[str, Any]:
    """The span of a request the proxy forwarded without understanding it (see the module
    docstring); ``status`` None: no response (``error`` says why)."""
    ok = error is None and status is not None and status < 400 and complete
    attrs: dict[str, Any] = {"auto.opaque": True, "auto.proxy": True, "http.request.method": method, "url.full": url,
                             "auto.request.headers": sanitize_headers(request_headers)}
    if status is not None:
        attrs["http.response.status_code"] = status
        attrs["auto.response.headers"] = sanitize_headers(response_headers or {})
    if not complete:
        attrs["auto.stream.complete"] = False
    out = None
    if response_body is not None:
        out = {"status_code": status, "body_digest": digest_bytes(response_body), "body_bytes": len(response_body)}
    if error is None and not ok:
        error = ({"type": "http_status", "status_code": status} if status is not None and status >= 400
                 else {"type": "stream_incomplete", "message": "the client went away before the body ended"})
    return {"trace_id": new_trace_id(), "span_id": new_span_id(), "parent_span_id": None, "name": "opaque",
            "kind": "llm", "task": None, "site": f"opaque/{method} {path}", "started_ns": started_ns,
            "ended_ns": time.time_ns(), "status": "ok" if ok else "error",
            "input": {"method": method, "path": path, "body_digest": digest_bytes(request_body),
                      "body_bytes": len(request_body)},
            "output": out, "error": error, "attributes": attrs}


def opaque_trace(span: dict[str, Any]) -> dict[str, Any]:
    """The trace row of an opaque span (its own trace)."""
    return {"trace_id": span["trace_id"], "name": "opaque", "started_ns": span["started_ns"],
            "ended_ns": span["ended_ns"], "status": span["status"], "attributes": {"auto.root_kind": "llm", "auto.opaque": True}}



def tier1_span(body: dict, answer: Any, site_id: str, generation: int | None, artifact_id: str | None,
               started_ns: int, origin: str | None = None) -> tuple[dict[str, Any], dict[str, Any], Callable[[], None]]:
    """``(span, trace, complete)`` of one tier-1 answer (see the module docstring): pass them to
    :meth:`QueuedRecorder.write`; ``complete()`` fills in the input, the output and the
    ``gen_ai.*`` attributes on the sender thread. ``started_ns``: when the request arrived (ns
    since the epoch); the span ends when it is built (the answer is computed by then). ``origin``
    (``"overlay"``: the table overlay answered, not the generation's artifact) becomes
    ``auto.origin``."""
    ended = time.time_ns()
    span: dict[str, Any] = {
        "trace_id": new_trace_id(), "span_id": new_span_id(), "parent_span_id": None, "name": TIER1_SPAN,
        "kind": "llm", "task": None, "site": site_id, "started_ns": started_ns, "ended_ns": ended, "status": "ok",
        "input": None, "output": None, "error": None, "attributes": None}
    trace = {"trace_id": span["trace_id"], "name": TIER1_SPAN, "started_ns": started_ns, "ended_ns": ended,
             "status": "ok", "attributes": {"auto.root_kind": "llm", "auto.tier": 1}}

    def complete() -> None:
        from auto.proxy.answer import completion_body, system_fingerprint
        from auto.record.completion import assemble_completion
        from auto.record.model_call import REQUEST_ATTRS

        output, meta = assemble_completion(completion_body(body, answer, generation))
        attrs: dict[str, Any] = {"gen_ai.provider.name": "openai", "gen_ai.operation.name": "chat"}
        for k, a in REQUEST_ATTRS.items():
            if body.get(k) is not None:
                attrs[a] = body[k]
        attrs.update({"gen_ai.response.finish_reasons": meta.get("finish_reasons") or [],
                      "gen_ai.openai.response.system_fingerprint": system_fingerprint(generation),
                      "gen_ai.usage.input_tokens": 0, "gen_ai.usage.output_tokens": 0,
                      "auto.proxy": True, "auto.tier": 1, "auto.site": site_id, "auto.generation": generation,
                      "auto.artifact_id": artifact_id, "auto.cost_usd_micros": 0})
        if origin is not None:
            attrs["auto.origin"] = origin
        span.update({"input": body, "output": output, "attributes": attrs})

    return span, trace, complete
