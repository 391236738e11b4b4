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
* :class:`QueuedRecorder` queues finished spans; a sender thread gathers them into batches (one
  transaction per batch, at most :data:`BATCH_SPANS` spans), redacts them as the in-process
  recorder does (:class:`auto.record.redact.Redactor`: every forwarded call's credentials, and
  secret patterns), and a writer *process*
  (:mod:`auto.proxy.writer`, in its own session) ingests them,
  so no request waits for SQLite and the store's CPU work does not hold the serving process's
  interpreter lock (measured on a 2-core machine: ingesting costs 1.5 ms of CPU per span one at a
  time, 0.6 ms in a batch of 100). A batch the store rejects is retried span by span, so one bad
  span loses only itself. :meth:`QueuedRecorder.flush` waits until everything queued is in the
  store; a killed proxy loses what was queued and not yet sent to the writer (the last
  :data:`BATCH_WAIT_S`); the writer writes what it received and exits.
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
from auto.record.core import Recorder
from auto.record.redact import sanitize_headers
from auto.store import Store, new_span_id, new_trace_id

log = logging.getLogger("auto.proxy")

BATCH_SPANS = 256
"""At most this many spans per store transaction."""

BATCH_WAIT_S = 0.02
"""The writer gathers what arrives within this long (s) into one transaction: a transaction costs
about 2 ms of which most is fixed (measured: 2.4 ms for one span, 0.6 ms per span in a batch of
100), so batching keeps the writer's share of the CPU small under load."""


class QueuedRecorder(Recorder):
    """A :class:`~auto.record.core.Recorder` whose writes are queued and ingested by a writer
    *process* (see the module docstring): the store's work (canonical JSON, digests, SQLite)
    never competes with the event loop for the interpreter lock.

    Args:
        store: the store's location, an SQLite path or a ``postgresql://`` URI (opened here
            too, so a bad store fails at once; the writer process opens it again).

    Attributes:
        written: spans in the store; write_errors: failed writes (messages).
    """

    def __init__(self, store: str) -> None:
        super().__init__(Store(store), owns_store=True)
        self._queue: queue.Queue = queue.Queue()
        self._closed = False
        self._sent = 0
        self._acked = 0
        self._cond = threading.Condition()
        # the location as given (a URI with its password: Store.location has it removed), in the
        # environment rather than on the command line, where every user of the host could read it
        self._proc = subprocess.Popen([sys.executable, "-m", "auto.proxy.writer"],
                                      env={**os.environ, WRITER_STORE_ENV: os.fspath(store)},
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE, start_new_session=True)
        self._sender = threading.Thread(target=self._send_loop, name="auto-proxy-sender", daemon=True)
        self._acks = threading.Thread(target=self._ack_loop, name="auto-proxy-acks", daemon=True)
        self._sender.start()
        self._acks.start()

    def write(self, spans: list[dict], traces: list[dict] = (),  # type: ignore[override]
              complete: Callable[[], None] | None = None) -> None:
        """Queue one batch (never blocks, never raises); ``complete`` fills in what the spans
        still lack, on the sender thread (a batch with nothing to write only runs it, here)."""
        if not spans and not traces:
            if complete is not None:
                try:
                    complete()
                except Exception:  # noqa: BLE001 - recording must not break the proxy
                    log.exception("auto proxy: could not record a call")
            return
        with self._cond:
            self._sent += 1
        self._queue.put((list(spans), list(traces), complete))

    def _send_loop(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                break
            batch = [item]
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
                batch.append(nxt)
            batch = self._redact(batch)
            if not batch:
                if stop:
                    break
                continue
            try:
                data = pickle.dumps(batch, protocol=pickle.HIGHEST_PROTOCOL)
                self._proc.stdin.write(HEADER.pack(len(data)) + data)  # type: ignore[union-attr]
                self._proc.stdin.flush()  # type: ignore[union-attr]
            except (OSError, ValueError) as e:  # the writer is gone: count the loss, keep serving
                self._lost(batch, f"the store writer is gone ({e})")
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
                out.append(([self.redactor.redact_span(s) for s in spans], [self.redactor.redact_span(t) for t in traces]))
            except Exception as e:  # noqa: BLE001 - never write what could not be completed or redacted
                self._lost([(spans, traces)], f"{type(e).__name__}: {e}")
        return out

    def _lost(self, batch: list, why: str) -> None:
        n = sum(len(s) for s, _ in batch)
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
                self.written += n - len(errors)
                self.write_errors.extend(errors)
                self._cond.notify_all()

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
        self.store.close()


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
