"""Model-call spans: one ``llm`` span per HTTP attempt of an OpenAI SDK call.

A :class:`LogicalCall` is one SDK call (around the SDK's retry loop); each of its HTTP attempts
is an :class:`Attempt`, written as one ``llm`` span when it ends (the body read, the stream
exhausted or closed, or the request failed). The recording proxy (:mod:`auto.proxy`) records the
calls it forwards through the same two classes, so both write the same spans. Recorded per
attempt (``POST …/chat/completions``; ``POST …/responses`` alike, span name ``responses``):

* ``input``: the request body (JSON) — model, messages, temperature, tools, response_format…
* ``output``: see :mod:`auto.record.completion`; None on error. A complete response body that is
  not a completion (not JSON, or no ``choices``) is an error ``{"type": "malformed_body"}``.
* ``attributes``: ``gen_ai.*`` (OpenTelemetry GenAI semantic conventions), ``server.*``,
  ``url.full`` (without the query string), ``http.response.status_code``, ``auto.attempt`` (the
  SDK's ``x-stainless-retry-count`` header), ``auto.logical_call_id``, ``auto.stream``,
  ``auto.usage`` (``"reported"``/``"unknown"``: token counts are None, never 0, when the API did
  not report them), ``auto.cost_usd_micros`` (µ$, from reported usage only; None if unknown),
  ``auto.latency_ms`` + ``auto.latency_source`` (:mod:`auto.record.latency`),
  ``auto.template_digest`` and the span's ``site`` (:mod:`auto.record.template`),
  ``auto.env_reads`` (digests of ``OPENAI_BASE_URL``/``_ORG_ID``/``_PROJECT_ID``, never values),
  sanitized request/response headers.
* Secrets are removed when the span is written (:mod:`auto.record.redact`); the call's
  credentials are learned by the recorder's redactor, so they are redacted from every later
  span too (a task span that returns the key included).

What the agent's thread takes, and what it leaves to the writer: it draws the ids and clocks,
copies the request's and the response's header lists (one list copy each: their items are
immutable byte tuples), keeps the request and response body bytes and the raw values of
:data:`ENV_READS` (immutable), and hands the span over; the writer parses both bodies, decodes the
headers and the environment values, rounds the measured time, reads the response's reason phrase
(``httpx`` works it out from an enum on each read) and builds the attributes. The response object
itself is kept until then, for its status and reason: a caller that changed them on the response
in the few ms before the writer took the span would have its values recorded.

Inside a task/tool scope the attempts are children of that scope and report their cost and
latency to it; outside any scope a logical call gets its own trace. The tool calls a successful
attempt asks for are registered on its scope, and the tool results a request sends back are
linked to the tool spans that produced them (``auto.tool_results``; :mod:`auto.record.core`).
"""

from __future__ import annotations

import functools
import os
import threading
import time
import types
from typing import Any

from auto.canonical import digest, digest_bytes
from auto.record import pricing
from auto.record.body import ContentDecoder, SSEParser
from auto.record.completion import (
    assemble_completion,
    assemble_response,
    assemble_response_events,
    parse_json,
    stream_outcome,
)
from auto.record.core import Recorder, SpanScope, error_json
from auto.record.latency import call_latency
from auto.record.redact import sanitize_headers, snapshot_headers
from auto.record.tee import tee_stream
from auto.record.template import site, template_digest
from auto.store import new_span_id, new_trace_id

ENV_READS = ("OPENAI_BASE_URL", "OPENAI_ORG_ID", "OPENAI_PROJECT_ID")
"""Environment variables the SDK reads; their digests (never values) are recorded (three:
:func:`env_snapshot` reads them by position)."""

REQUEST_ATTRS = {
    "model": "gen_ai.request.model",
    "temperature": "gen_ai.request.temperature",
    "top_p": "gen_ai.request.top_p",
    "max_tokens": "gen_ai.request.max_tokens",
    "max_completion_tokens": "gen_ai.request.max_tokens",
    "seed": "gen_ai.request.seed",
    "frequency_penalty": "gen_ai.request.frequency_penalty",
    "presence_penalty": "gen_ai.request.presence_penalty",
    "n": "gen_ai.request.choice.count",
}
"""Request body field -> OpenTelemetry GenAI attribute."""


@functools.lru_cache(maxsize=64)
def _value_digest(value: str) -> str:
    """``digest(value)`` of an environment variable's value (the same few on every call)."""
    return digest(value)


def request_body(raw: bytes) -> dict:
    """A request body as recorded: its JSON object (another JSON value as ``{"_body": value}``;
    a body that is not JSON as ``{"_body_digest": "sha256:…"}``)."""
    try:
        body = parse_json(raw.decode("utf-8", "replace")) if raw else None
    except ValueError:
        body = {"_body_digest": digest_bytes(raw)}
    return body if isinstance(body, dict) else {"_body": body}


_CALLS_LOCK = threading.Lock()
_ATTEMPTS_LOCK = threading.Lock()


class LogicalCall:
    """One SDK call (``request()``), spanning its HTTP attempts (SDK retries).

    Inside a task/tool scope the attempts are children of that scope. Outside any scope the
    logical call gets its own trace; its trace row is written once the call is over (request
    returned or raised, and no attempt stream is still open).
    """

    _lock = _CALLS_LOCK  # (held for a few counter updates: one lock for every call)
    attempts = 0
    open_attempts = 0
    returned = False
    done = False
    name = "llm"

    _events: "list[Any] | tuple" = ()  # attempts as they ended, and "error" where the request raised (own trace)
    started_ns = ended_ns = 0  # (read by the trace row of a call with its own trace only)

    def __init__(self, rec: Recorder, scope: SpanScope | None) -> None:
        self.rec = rec
        self.scope = scope
        self.id = new_span_id()
        if scope is None:
            self.own_trace = True
            self.trace_id = new_trace_id()
            self.started_ns = self.ended_ns = time.time_ns()
            self._events = []
        else:  # inside a scope the call only lends its id and the scope's trace to its attempts
            self.own_trace = False
            self.trace_id = scope.trace_id

    @property
    def status(self) -> str:
        """``ok``/``error`` of a call with its own trace: that of the attempt that ended last, or
        ``error`` when the request raised after it (an attempt's status is settled when read:
        :attr:`Attempt.status`); ``ok`` inside a scope (its spans carry the statuses)."""
        status = "ok"
        for e in tuple(self._events):
            status = e if isinstance(e, str) else e.status
        return status

    def attempt_started(self) -> int:
        with self._lock:
            self.attempts += 1
            self.open_attempts += 1
            return self.attempts - 1

    def attempt_ended(self, attempt: "Attempt", name: str, ended_ns: int) -> None:
        if not self.own_trace:
            return  # inside a scope nothing reads how the call ended (its spans carry it)
        with self._lock:
            self.open_attempts -= 1
            if self.own_trace:  # (only its trace row reads the status)
                self._events.append(attempt)
            self.name, self.ended_ns = name, max(self.ended_ns, ended_ns)
        self._maybe_finalize()

    def request_done(self, exc: BaseException | None) -> None:
        if not self.own_trace:
            return  # (see attempt_ended)
        with self._lock:
            self.returned = True
            if exc is not None and self.own_trace:
                self._events.append("error")
        self._maybe_finalize()

    def _maybe_finalize(self) -> None:
        with self._lock:
            if self.done or not self.returned or self.open_attempts > 0 or self.attempts == 0:
                return
            self.done = True
        if self.own_trace:
            trace = {"trace_id": self.trace_id, "name": self.name, "started_ns": self.started_ns,
                     "ended_ns": self.ended_ns, "status": None,
                     "attributes": {"auto.root_kind": "llm", "auto.logical_call_id": self.id, "auto.attempts": self.attempts}}
            self.rec.write([], [trace], functools.partial(self._complete_trace, trace))

    def _complete_trace(self, trace: dict) -> None:
        trace["status"] = self.status
        self._events = [trace["status"]]  # decided: the attempts need not stay alive


class Attempt:
    """One HTTP attempt of a model call; written as one ``llm`` span (id :attr:`span_id`, chosen
    when the attempt starts) when it ends."""

    # what an attempt starts with, unless its __init__ sets it (fewer stores on the calling thread)
    _body: dict | None = None
    response: Any = None
    _sse: SSEParser | None = None
    _decoder: ContentDecoder | None = None
    _span: dict[str, Any] | None = None
    _outcome: Any = None  # (status, output, error, extra, meta), or what computes it
    _settled = False
    _status_code: int | None = None
    _done = False
    _ended: tuple | None = None  # (ended_ns, measured ns, response headers, env snapshot) once ended
    _raw: list[bytes] | None = None  # the body of a stream that is not SSE, as it arrives
    _lock = _ATTEMPTS_LOCK  # (held for a flag or a field or two: one lock for every attempt)
    extra_attributes: Any = types.MappingProxyType({})
    """Attributes added to the span (a host's own, e.g. the proxy's ``auto.proxy``; assign a dict)."""

    def __init__(self, call: LogicalCall, client: Any, request: Any, name: str) -> None:
        self.call = call
        self.name = name
        self.span_id = new_span_id()
        self._t0 = time.perf_counter_ns()
        self.started_ns = time.time_ns()
        self.index = call.attempt_started()
        self._request_headers = snapshot_headers(request.headers)  # as sent (httpx may add some later)
        # its credentials are redacted from every span handed to the recorder from now on (this
        # one included): whichever thread redacts next learns them first
        key = getattr(client, "__dict__", {}).get("api_key")
        call.rec.redactor.learn_later(self._request_headers, key if isinstance(key, str) else None)
        try:
            self._raw_body: bytes = request.content or b""
        except Exception:  # a streaming request body that was not read
            self._raw_body = b""
        self._url = request.url

    @property
    def recorded(self) -> dict[str, Any] | None:
        """The span handed to the recorder once the attempt ended (None before): its status,
        output and error (reading them settles the outcome, :meth:`_settle`); its ``input``,
        ``site`` and ``attributes`` once the recorder's writer completed it (off the agent's
        call path)."""
        if self._ended is None:
            return None
        self._settle()
        return self._span_dict()

    @property
    def status(self) -> str | None:
        """``ok``/``error`` once the attempt ended (settled on first read), else None."""
        return self._settle()[0] if self._ended is not None else None

    @property
    def body(self) -> dict:
        """The request body (:func:`request_body`), parsed on first use."""
        if self._body is None:
            self._body = request_body(self._raw_body)
        return self._body

    def _may_send_tool_results(self) -> bool:
        """Whether the request body may hold a ``tool`` message (the text ``"tool"``, or an
        escape that could spell it): else it sends no tool results back, unparsed."""
        return b'"tool"' in self._raw_body or b"\\u" in self._raw_body

    # -- response arrival ----------------------------------------------------------------

    def got_response(self, response: Any) -> Any:
        """Record now (body already read) or wrap the response stream to record at its end."""
        self.response = response
        if hasattr(response, "_content"):
            self._finish_body(response.content, complete=True)
            return response
        self.begin_stream(response)
        response.stream = tee_stream(response.stream, self)
        return response

    def begin_stream(self, response: Any) -> None:
        """The response head arrived and its body will be fed chunk by chunk (:meth:`feed`, then
        :meth:`stream_eof` or :meth:`stream_closed`); ``response`` needs ``status_code``,
        ``reason_phrase`` and lower-case-readable ``headers``."""
        self.response = response
        self._decoder = ContentDecoder(response.headers.get("content-encoding", ""))
        if "text/event-stream" in response.headers.get("content-type", ""):
            self._sse = SSEParser()
        else:
            self._raw = []
        self.call.rec.open_streams.add(self)

    def feed(self, chunk: bytes) -> None:
        data = self._decoder.decode(chunk) if self._decoder else chunk
        if self._sse is not None:
            self._sse.feed(data)
        else:
            self._raw.append(data)  # type: ignore[union-attr]

    def stream_eof(self) -> None:
        self._finish_stream(complete=True)

    def stream_closed(self) -> None:
        self._finish_stream(complete=False)

    def finish_incomplete(self, why: str) -> None:
        self._finish_stream(complete=False, why=why)

    def consumer_stopped(self) -> None:
        """The caller stopped iterating the SDK's stream (``break``): the attempt ends now."""
        self._finish_stream(complete=False, why="the caller stopped iterating before the end of the stream")

    @property
    def scope(self) -> SpanScope | None:
        """The task/tool scope the attempt reports to (None outside any)."""
        return self.call.scope

    # -- finishing -----------------------------------------------------------------------

    def _claim(self) -> bool:
        with self._lock:
            if self._done:
                return False
            self._done = True
        self.call.rec.open_streams.discard(self)
        return True

    def fail(self, exc: BaseException) -> None:
        if self._claim():
            self._end(("error", None, error_json(exc), {}, None))

    def _finish_stream(self, complete: bool, why: str = "stream closed before completion") -> None:
        if not self._claim():
            return
        if self._decoder is not None and not self._decoder.ok:
            self._end((self._status_of(), None, self._http_error(None) if self._is_http_error() else None,
                       {"auto.body": "undecodable"}, None))
            return
        if self._sse is not None:
            self._sse.close()
            if self.name == "responses":
                events = [e for _ev, e in self._sse.events if isinstance(e, dict)]
                failed = [e for e in events if e.get("type") in ("error", "response.failed")]
                output, meta, done = assemble_response_events(events)
                complete = complete or done
                stream_error = None
                if failed:
                    err = failed[0].get("error") or (failed[0].get("response") or {}).get("error") or failed[0]
                    msg = err.get("message") if isinstance(err, dict) else err
                    stream_error = {"type": "stream_error", "message": msg if isinstance(msg, str) else str(msg)}
            else:
                output, meta, stream_error = stream_outcome(self._sse.events)
                # the SDK stops reading at "data: [DONE]" and closes: that is a complete stream
                complete = complete or self._sse.done
            extra = {"auto.stream": True, "auto.stream.complete": complete}
            if self._is_http_error():
                self._end(("error", None, self._http_error(None), extra, meta))
            elif stream_error is not None:
                self._end(("error", output, stream_error, extra, meta))
            elif not complete:
                self._end(("error", output, {"type": "stream_incomplete", "message": why}, extra, meta))
            else:
                self._end(("ok", output, None, extra, meta))
            return
        self._finish_body(b"".join(self._raw or ()), complete=complete, streamed=True)

    def _finish_body(self, content: bytes, complete: bool, streamed: bool = False) -> None:
        if not streamed and not self._claim():
            return
        # the body is parsed when the outcome is settled: by the writer, off the agent's call path
        # (so is the reason phrase, which ``httpx`` works out from an enum on each read)
        self._end(functools.partial(_body_outcome_of, self.name, content, complete, streamed, self.response))

    def _is_http_error(self) -> bool:
        return self.response is not None and self.response.status_code >= 400

    def _status_of(self) -> str:
        return "error" if self._is_http_error() else "ok"

    def _http_error(self, body: Any) -> dict:
        return http_error(self.response.status_code, self.response.reason_phrase, body)

    def _end(self, outcome: Any) -> None:
        """End the attempt with ``outcome`` — ``(status, output, error, extra, meta)`` or what
        computes it (:func:`body_outcome`) — and hand it to the recorder: the calling thread
        takes the end time, the response's status and header list and the environment's values
        (one tuple); the writer makes the span (:meth:`_span_dict`), settles the outcome and
        completes it (:func:`_complete`). What the span's scope learns from it (cost, latency,
        tool calls) reaches the scope there too, in the order the spans ended."""
        measured_ns = time.perf_counter_ns() - self._t0  # (ms worked out on the writer)
        call = self.call
        response = self.response
        resp_headers = None
        if response is not None:
            self._status_code = response.status_code
            resp_headers = snapshot_headers(response.headers)
            self.response = None  # not kept alive by the attempt (a body outcome keeps it until settled)
        self._outcome = outcome
        ended = self.started_ns + measured_ns
        self._ended = (ended, measured_ns, resp_headers, env_snapshot())
        spans: list[dict] = []
        complete: Any = functools.partial(_complete, self, spans)
        scope = call.scope
        if scope is not None and scope.recorder is not call.rec:
            complete()  # another recorder writes the scope: what it reads is settled now
            complete = None
        call.rec.write(spans, (), complete)
        if call.own_trace:
            call.attempt_ended(self, self.name, ended)

    def _span_dict(self) -> dict[str, Any]:
        """The span of an ended attempt (made once, by whichever thread asks first: the writer,
        or a host reading :attr:`recorded`); its status, output and error are filled in when the
        outcome is settled, the rest by :func:`_complete`."""
        with self._lock:
            span = self._span
            if span is None:
                call, scope = self.call, self.call.scope
                span = self._span = {
                    "trace_id": call.trace_id, "span_id": self.span_id,
                    "parent_span_id": scope.span_id if scope is not None else None,
                    "name": self.name, "kind": "llm", "task": scope.task if scope is not None else None, "site": None,
                    "started_ns": self.started_ns, "ended_ns": self._ended[0],  # type: ignore[index]
                    "status": None, "input": None, "output": None, "error": None, "attributes": None,
                }
                if self._settled:
                    span["status"], span["output"], span["error"] = self._outcome[:3]
            return span

    def _settle(self) -> tuple:
        """The outcome ``(status, output, error, extra, meta)``, computed once (the response body
        parsed here when that was left to this point, outside the lock: computing it has no side
        effects); fills in the span's status, output and error once the span is made."""
        if self._settled:  # (set after the outcome it settles)
            return self._outcome
        outcome = self._outcome
        value = outcome() if callable(outcome) else outcome
        with self._lock:
            if not self._settled:
                self._outcome, self._settled = value, True
                span = self._span
                if span is not None:
                    span["status"], span["output"], span["error"] = value[0], value[1], value[2]
            return self._outcome


_ENV_KEYS: tuple[tuple[str, Any], ...] | None = None


def env_snapshot() -> Any:
    """The values of :data:`ENV_READS` now, as cheaply as the calling thread can take them: the
    raw values (``bytes`` or None, in the order of :data:`ENV_READS`) of ``os.environ``'s own
    mapping on POSIX (decoded by :func:`env_values` on the writer), else a ``{name: value}``
    dict."""
    global _ENV_KEYS
    data = getattr(os.environ, "_data", None)
    if type(data) is dict and _POSIX:
        k = _ENV_KEYS
        if k is None:
            k = _ENV_KEYS = tuple(os.environ.encodekey(n) for n in ENV_READS)  # type: ignore[attr-defined]
        return data.get(k[0]), data.get(k[1]), data.get(k[2])
    return {n: v for n in ENV_READS if (v := os.environ.get(n)) is not None}


_POSIX = os.name == "posix"  # (where ``os.environ._data`` maps encoded names to encoded values)


def env_values(snapshot: Any) -> dict[str, str]:
    """``{name: value}`` of an :func:`env_snapshot` (decoded as ``os.environ`` decodes)."""
    if isinstance(snapshot, dict):
        return snapshot
    return {n: os.environ.decodevalue(v) for n, v in zip(ENV_READS, snapshot) if v is not None}  # type: ignore[attr-defined]


def _body_outcome_of(name: str, content: bytes, complete: bool, streamed: bool, response: Any) -> tuple:
    """:func:`body_outcome` of an attempt's ``response`` (its status and reason read here)."""
    return body_outcome(name, content, complete, streamed, response.status_code, response.reason_phrase)


def http_error(status_code: int, reason: str, body: Any) -> dict:
    """The span error of an HTTP error response (``body``: its parsed JSON, or None)."""
    err = body.get("error") if isinstance(body, dict) else None
    out = {"type": "http_status", "status_code": status_code,
           "message": (err.get("message") if isinstance(err, dict) else None) or reason}
    if isinstance(err, dict):
        out["error_type"] = err.get("type")
        out["code"] = err.get("code")
    return out


def body_outcome(name: str, content: bytes, complete: bool, streamed: bool, status_code: int,
                 reason: str) -> tuple:
    """``(status, output, error, extra, meta)`` of an attempt whose response body (not an SSE
    stream) is ``content``: a completion (or, for ``responses``, a response object), an HTTP
    error, a body that is not what the endpoint answers (``malformed_body``), or one cut short
    (``stream_incomplete``)."""
    extra = {"auto.stream": False} if not streamed else {"auto.stream": True, "auto.stream.complete": complete}
    try:
        body = parse_json(content) if content else None
    except ValueError:
        body = None
    if status_code >= 400:
        return "error", None, http_error(status_code, reason, body), extra, None
    responses = name == "responses"
    if not isinstance(body, dict) or ("output" if responses else "choices") not in body:
        what = "a response object" if responses else "a chat completion"
        return ("error", None,
                {"type": "malformed_body", "message": f"the response body is not {what}"} if complete
                else {"type": "stream_incomplete", "message": "body not fully read"},
                {**extra, "auto.body": "unrecognized"}, None)
    output, meta = assemble_response(body) if responses else assemble_completion(body)
    return "ok", output, None, extra, meta


def _complete(attempt: Attempt, spans: list[dict]) -> None:
    """Make an ended attempt's span, settle its outcome and complete the span, appended to
    ``spans`` (run by the recorder's writer, in the order spans ended): status, output, error,
    the request body as ``input``, the attributes, the template digest and ``site``; then report
    cost, latency and the tool calls asked for to the attempt's scope, and link the tool results
    the request sent back."""
    _ended_ns, measured_ns, resp_headers, env = attempt._ended  # type: ignore[misc]
    measured_ms = round(measured_ns / 1e6, 3)
    span = attempt._span_dict()
    spans.append(span)
    status, output, error, extra, meta = attempt._settle()
    call, scope = attempt.call, attempt.call.scope
    body = attempt.body
    meta = meta or {}
    in_tok, out_tok, cached = pricing.usage_tokens(meta.get("usage"))
    status_code = attempt._status_code
    # billed: the provider answered 2xx, so tokens were generated even if the stream was cut
    # short; its cost is known only from reported usage (None otherwise, never 0)
    billed = status_code is not None and status_code < 400
    cost = pricing.cost_usd_micros(meta.get("model") or body.get("model"), in_tok, out_tok,
                                   cached or 0) if billed else None
    headers = sanitize_headers(resp_headers) if resp_headers is not None else {}
    latency = call_latency(headers, measured_ms)
    attrs: dict[str, Any] = {"gen_ai.system": "openai", "gen_ai.operation.name": "chat"}
    for k, a in REQUEST_ATTRS.items():
        if body.get(k) is not None:
            attrs[a] = body[k]
    if body.get("stop") is not None:
        attrs["gen_ai.request.stop_sequences"] = body["stop"] if isinstance(body["stop"], list) else [body["stop"]]
    url = attempt._url
    attrs["server.address"] = url.host
    attrs["server.port"] = url.port or (443 if url.scheme == "https" else 80)
    attrs["url.full"] = f"{url.scheme}://{url.host}{':' + str(url.port) if url.port else ''}{url.path}"
    request_headers = sanitize_headers(attempt._request_headers)
    try:
        attrs["auto.attempt"] = int(request_headers.get("x-stainless-retry-count", attempt.index))
    except ValueError:
        attrs["auto.attempt"] = attempt.index
    attrs["auto.logical_call_id"] = call.id
    attrs["auto.request.headers"] = request_headers
    if status_code is not None:
        attrs["http.response.status_code"] = status_code
        attrs["auto.response.headers"] = headers
    attrs["gen_ai.response.model"] = meta.get("model")
    attrs["gen_ai.response.id"] = meta.get("id")
    attrs["gen_ai.response.finish_reasons"] = meta.get("finish_reasons") or []
    if meta.get("system_fingerprint") is not None:
        attrs["gen_ai.openai.response.system_fingerprint"] = meta["system_fingerprint"]
    attrs["gen_ai.usage.input_tokens"] = in_tok
    attrs["gen_ai.usage.output_tokens"] = out_tok
    if cached is not None:
        attrs["gen_ai.usage.cached_input_tokens"] = cached
    attrs["auto.usage"] = "reported" if (in_tok is not None and out_tok is not None) else "unknown"
    attrs["auto.cost_usd_micros"] = cost
    attrs.update(latency.attributes())
    if env:
        attrs["auto.env_reads"] = {n: _value_digest(v) for n, v in env_values(env).items()}
    attrs.update(extra)
    attrs.update(attempt.extra_attributes)
    tdigest = template_digest(body.get("messages", body.get("input")), scope.task_input if scope is not None else {})
    attrs["auto.template_digest"] = tdigest
    if scope is not None:
        sent = scope.tool_results(body.get("messages")) if attempt._may_send_tool_results() else None
        if sent:
            attrs["auto.tool_results"] = sent
        if status == "ok" and isinstance(output, dict) and output.get("tool_calls"):
            scope.request_tools(attempt.span_id, output["tool_calls"])
    span["input"] = body
    span["site"] = site(span["task"], span["name"], tdigest)
    span["attributes"] = attrs
    if scope is not None:
        scope.add_llm_attempt(call.id, status == "ok", cost, latency, billed=billed)
