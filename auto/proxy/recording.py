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
* :class:`QueuedRecorder` queues finished spans and a writer thread ingests them in batches (one
  transaction per batch, at most :data:`BATCH_SPANS` spans), so no request waits for SQLite; a
  batch the store rejects is retried span by span, so one bad span loses only itself.
  :meth:`QueuedRecorder.flush` waits until everything queued is in the store; a killed proxy
  loses what was queued and not yet written (the last few milliseconds).
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from dataclasses import dataclass
from typing import Any, Mapping

from auto.canonical import digest_bytes
from auto.record.core import Recorder
from auto.record.redact import sanitize_headers
from auto.store import Store, new_span_id, new_trace_id

log = logging.getLogger("auto.proxy")

BATCH_SPANS = 256
"""At most this many spans per store transaction."""


class QueuedRecorder(Recorder):
    """A :class:`~auto.record.core.Recorder` whose writes are queued and ingested by one writer
    thread in batches (see the module docstring).

    Args:
        store: the store path (the recorder opens it and closes it in :meth:`close`).

    Attributes:
        written: spans in the store; write_errors: failed writes (messages); model_calls:
            model-call spans queued so far (the proxy rediscovers sites when it grows).
    """

    def __init__(self, store: str) -> None:
        super().__init__(Store(store), owns_store=True)
        self._queue: queue.Queue = queue.Queue()
        self.model_calls = 0
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="auto-proxy-writer", daemon=True)
        self._thread.start()

    def write(self, spans: list[dict], traces: list[dict] = ()) -> None:  # type: ignore[override]
        """Queue one batch (never blocks, never raises)."""
        if spans and any(s.get("kind") == "llm" and s.get("name") != "opaque" for s in spans):
            self.model_calls += 1
        self._queue.put((list(spans), list(traces)))

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                self._queue.task_done()
                return
            batch = [item]
            while len(batch) < BATCH_SPANS:
                try:
                    nxt = self._queue.get_nowait()
                except queue.Empty:
                    break
                if nxt is None:
                    self._queue.put(None)  # seen again after this batch
                    self._queue.task_done()
                    break
                batch.append(nxt)
            self._ingest(batch)
            for _ in batch:
                self._queue.task_done()

    def _ingest(self, batch: list[tuple[list, list]]) -> None:
        spans = [s for sp, _ in batch for s in sp]
        traces = [t for _, tr in batch for t in tr]
        try:
            self.store.ingest(spans, traces)
            with self._lock:
                self.written += len(spans)
            return
        except Exception:  # noqa: BLE001 - retried one by one below
            pass
        for sp, tr in batch:
            Recorder.write(self, sp, tr)

    def flush(self, timeout_s: float = 30.0) -> bool:
        """Wait until every queued span is in the store; True when it is."""
        deadline = time.monotonic() + timeout_s
        while self._queue.unfinished_tasks:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.002)
        return True

    def close(self) -> None:
        """Write what is queued, stop the writer thread, close the store."""
        if self._closed:
            return
        self._closed = True
        self._queue.put(None)
        self._thread.join(timeout=60)
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
