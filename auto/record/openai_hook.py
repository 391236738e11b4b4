"""OpenAI client instrumentation at the request layer (``openai`` ≥ 1.40, tested with 3.x / httpx2).

What is patched (on the classes, so every client instance — created before or after — is seen):

* ``openai._base_client.SyncAPIClient.request`` / ``AsyncAPIClient.request`` — the **logical
  call** layer: one SDK call, around the SDK's retry loop. It opens a :class:`LogicalCall`
  (id ``auto.logical_call_id``) that every HTTP attempt of that call joins.
* ``_send_request`` on ``SyncAPIClient``/``AsyncAPIClient`` and on every ``openai`` subclass that
  overrides it (``OpenAI``, ``AsyncOpenAI``) — the **attempt** layer: one HTTP request/response.
  Only the outermost one records (the overrides call ``super()._send_request``). Each attempt is
  one ``llm`` span with ``auto.attempt`` = the SDK's ``x-stainless-retry-count`` header.

Because the hook sits below ``chat.completions.create``, it sees ``create`` (sync and async),
``stream=True`` (the response byte stream is wrapped: SSE chunks are assembled into the message
and tool calls, the span is written when the stream is exhausted or closed), ``parse()`` (which
does not go through ``create``), ``with_raw_response``, and SDK retries. Errors (HTTP 4xx/5xx,
connection errors) are recorded and then propagate unchanged.

Recorded per attempt (POST ``…/chat/completions`` only; other endpoints are not recorded):

* ``input``: the request body (JSON) — model, messages, temperature, tools, response_format…
* ``output``: ``{"content", "tool_calls", "refusal", "finish_reason"}`` of choice 0 (plus
  ``"choices"`` when ``n > 1``); None on error.
* ``attributes``: ``gen_ai.*`` (OpenTelemetry GenAI semantic conventions), ``server.*``,
  ``http.response.status_code``, ``auto.attempt``, ``auto.logical_call_id``, ``auto.stream``,
  ``auto.usage`` (``"reported"``/``"unknown"``: token counts are None, never 0, when the API did
  not report them), ``auto.cost_usd_micros`` (µ$, from reported usage only; None if unknown),
  ``auto.latency_ms`` + ``auto.latency_source`` (the simulator's ``x-auto-sim-latency-ms`` header
  when present, with ``auto.reference_model.simulated = true``; else measured wall time),
  ``auto.template_digest``, ``auto.env_reads`` (digests of ``OPENAI_BASE_URL``/``_ORG_ID``/
  ``_PROJECT_ID``, never values), sanitized request/response headers.
* ``site`` = ``f"{task}/{span name}/{template digest}"`` where the template digest is the digest
  of the messages with the enclosing task's string input values replaced by ``{param}``
  placeholders (and tool-call ids by ``{tool_call_N}``); ``task`` is ``""`` outside any task.

Secrets: headers whose name contains ``authorization``, ``api-key`` or ``cookie`` are dropped;
the bearer token / api key value is additionally redacted wherever it would appear in the span;
the URL is recorded without its query string.
"""

from __future__ import annotations

import contextvars
import importlib.abc
import json
import os
import re
import sys
import threading
import time
import zlib
from typing import Any

from auto.canonical import digest, digest_bytes
from auto.record import pricing
from auto.record.core import Recorder, SpanScope, active_recorder, error_json, log
from auto.store import new_span_id, new_trace_id

SIM_LATENCY_HEADER = "x-auto-sim-latency-ms"
SIM_MODEL_HEADER = "x-auto-reference-model"
_SECRET_HEADER = re.compile(r"authorization|api-key|api_key|cookie", re.I)
_ENV_READS = ("OPENAI_BASE_URL", "OPENAI_ORG_ID", "OPENAI_PROJECT_ID")
_RECORDED_ENDPOINTS = {"chat/completions": "chat.completions"}
_REQUEST_ATTRS = {
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

_LOGICAL: contextvars.ContextVar["LogicalCall | None"] = contextvars.ContextVar("auto_logical_call", default=None)
_IN_SEND: contextvars.ContextVar[bool] = contextvars.ContextVar("auto_in_send", default=False)


# ----------------------------------------------------------------------------- helpers


def sanitize_headers(headers: Any) -> dict[str, str]:
    """Headers as a lower-cased dict without any whose name contains authorization/api-key/cookie."""
    out: dict[str, str] = {}
    items = headers.items() if hasattr(headers, "items") else headers
    for k, v in items:
        k = str(k).lower()
        if _SECRET_HEADER.search(k):
            continue
        out[k] = str(v)
    return out


def _secrets_of(request: Any, client: Any) -> list[str]:
    found: list[str] = []
    for k, v in request.headers.items():
        if _SECRET_HEADER.search(k) and v:
            v = str(v)
            found.append(v)
            if " " in v:
                found.append(v.split(" ", 1)[1].strip())
    key = getattr(client, "__dict__", {}).get("api_key")
    if isinstance(key, str) and key:
        found.append(key)
    return sorted({s for s in found if len(s) >= 6}, key=len, reverse=True)


def _scrub(obj: Any, secrets: list[str]) -> Any:
    if not secrets:
        return obj
    if isinstance(obj, str):
        for s in secrets:
            if s in obj:
                obj = obj.replace(s, "[REDACTED]")
        return obj
    if isinstance(obj, list):
        return [_scrub(v, secrets) for v in obj]
    if isinstance(obj, dict):
        return {_scrub(k, secrets): _scrub(v, secrets) for k, v in obj.items()}
    return obj


def _flatten_strings(obj: Any, prefix: str = "") -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    if isinstance(obj, str):
        out.append((prefix, obj))
    elif isinstance(obj, dict):
        for k, v in obj.items():
            out.extend(_flatten_strings(v, f"{prefix}.{k}" if prefix else str(k)))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            out.extend(_flatten_strings(v, f"{prefix}.{i}" if prefix else str(i)))
    return out


def template_messages(messages: Any, task_input: dict) -> Any:
    """``messages`` with the task's string input values replaced by ``{param}`` placeholders.

    A string equal to a value becomes its placeholder; values of ≥ 4 characters are also
    replaced inside longer strings where they are not glued to surrounding word characters.
    Tool-call ids (``tool_calls[].id``, ``tool_call_id``) become ``{tool_call_N}`` by first
    appearance, since they are random per run.
    """
    subs = [(v, "{" + k + "}") for k, v in _flatten_strings(task_input) if v]
    subs.sort(key=lambda kv: len(kv[0]), reverse=True)
    patterns = []
    for v, ph in subs:
        if len(v) >= 4:
            pre = r"(?<!\w)" if re.match(r"\w", v[0]) else ""
            post = r"(?!\w)" if re.match(r"\w", v[-1]) else ""
            patterns.append((re.compile(pre + re.escape(v) + post), ph))
    ids: dict[str, str] = {}

    def tc_id(v: Any) -> Any:
        if not isinstance(v, str):
            return v
        return ids.setdefault(v, "{tool_call_%d}" % len(ids))

    def sub(s: str) -> str:
        for v, ph in subs:
            if s == v:
                return ph
        for pat, ph in patterns:
            s = pat.sub(lambda _m, ph=ph: ph, s)
        return s

    def walk(obj: Any, key: str | None = None) -> Any:
        if isinstance(obj, str):
            return sub(obj)
        if isinstance(obj, list):
            return [walk(v) for v in obj]
        if isinstance(obj, dict):
            out = {}
            for k, v in obj.items():
                if k == "tool_call_id" or (k == "id" and "function" in obj):
                    out[k] = tc_id(v)
                elif k in ("role", "type"):
                    out[k] = v
                else:
                    out[k] = walk(v, k)
            return out
        return obj

    return walk(messages)


def _endpoint(request: Any) -> str | None:
    if request.method.upper() != "POST":
        return None
    path = request.url.path.rstrip("/")
    for suffix, name in _RECORDED_ENDPOINTS.items():
        if path.endswith("/" + suffix) or path == suffix:
            return name
    return None


def _tool_call(tc: dict) -> dict:
    fn = tc.get("function") or {}
    return {"id": tc.get("id"), "type": tc.get("type") or "function",
            "function": {"name": fn.get("name"), "arguments": fn.get("arguments")}}


def assemble_completion(body: dict) -> tuple[dict, dict]:
    """``(output, meta)`` from a non-streamed ``chat.completion`` body."""
    choices = []
    for ch in sorted(body.get("choices") or [], key=lambda c: c.get("index", 0)):
        msg = ch.get("message") or {}
        tcs = msg.get("tool_calls")
        choices.append({
            "content": msg.get("content"),
            "tool_calls": [_tool_call(t) for t in tcs] if tcs else None,
            "refusal": msg.get("refusal"),
            "finish_reason": ch.get("finish_reason"),
        })
    return _output(choices), _meta(body, body.get("usage"), choices)


def assemble_chunks(chunks: list[dict]) -> tuple[dict, dict]:
    """``(output, meta)`` from the ``chat.completion.chunk`` objects of a stream."""
    acc: dict[int, dict] = {}
    usage = None
    head: dict = {}
    for ch in chunks:
        for k in ("id", "model", "system_fingerprint", "service_tier"):
            if ch.get(k) is not None:
                head[k] = ch[k]
        if ch.get("usage"):
            usage = ch["usage"]
        for c in ch.get("choices") or []:
            a = acc.setdefault(c.get("index", 0), {"content": [], "refusal": [], "tool_calls": {}, "finish_reason": None})
            d = c.get("delta") or {}
            if d.get("content") is not None:
                a["content"].append(d["content"])
            if d.get("refusal") is not None:
                a["refusal"].append(d["refusal"])
            for tc in d.get("tool_calls") or []:
                t = a["tool_calls"].setdefault(tc.get("index", 0), {"id": None, "type": "function", "name": [], "arguments": []})
                if tc.get("id"):
                    t["id"] = tc["id"]
                if tc.get("type"):
                    t["type"] = tc["type"]
                fn = tc.get("function") or {}
                if fn.get("name"):
                    t["name"].append(fn["name"])
                if fn.get("arguments"):
                    t["arguments"].append(fn["arguments"])
            if c.get("finish_reason") is not None:
                a["finish_reason"] = c["finish_reason"]
    choices = []
    for idx in sorted(acc):
        a = acc[idx]
        tcs = [{"id": t["id"], "type": t["type"],
                "function": {"name": "".join(t["name"]) or None, "arguments": "".join(t["arguments"])}}
               for _, t in sorted(a["tool_calls"].items())]
        content = "".join(a["content"])
        choices.append({
            "content": content if (content or not tcs) and a["content"] else None,
            "tool_calls": tcs or None,
            "refusal": "".join(a["refusal"]) if a["refusal"] else None,
            "finish_reason": a["finish_reason"],
        })
    return _output(choices), _meta(head, usage, choices)


def _output(choices: list[dict]) -> dict:
    first = choices[0] if choices else {"content": None, "tool_calls": None, "refusal": None, "finish_reason": None}
    out = dict(first)
    if len(choices) > 1:
        out["choices"] = choices
    return out


def _meta(head: dict, usage: Any, choices: list[dict]) -> dict:
    return {"id": head.get("id"), "model": head.get("model"), "system_fingerprint": head.get("system_fingerprint"),
            "usage": usage if isinstance(usage, dict) else None,
            "finish_reasons": [c["finish_reason"] for c in choices if c.get("finish_reason") is not None]}


class _SSEParser:
    """Incremental server-sent-events parser: ``feed(bytes)``, then ``close()``; ``events`` holds
    ``(event name or None, parsed JSON)`` for each ``data:`` payload other than ``[DONE]``."""

    def __init__(self) -> None:
        self.buf = b""
        self.data: list[bytes] = []
        self.event: str | None = None
        self.events: list[tuple[str | None, Any]] = []
        self.done = False

    def feed(self, chunk: bytes) -> None:
        self.buf += chunk
        while True:
            i = self.buf.find(b"\n")
            if i < 0:
                return
            line, self.buf = self.buf[:i].rstrip(b"\r"), self.buf[i + 1 :]
            self._line(line)

    def _line(self, line: bytes) -> None:
        if not line:
            self._dispatch()
        elif line.startswith(b":"):
            return
        else:
            name, _, value = line.partition(b":")
            if value.startswith(b" "):
                value = value[1:]
            if name == b"data":
                self.data.append(value)
            elif name == b"event":
                self.event = value.decode("utf-8", "replace")

    def _dispatch(self) -> None:
        if self.data:
            text = b"\n".join(self.data).decode("utf-8", "replace")
            if text.strip() == "[DONE]":
                self.done = True
            else:
                try:
                    self.events.append((self.event, json.loads(text)))
                except ValueError:
                    self.events.append((self.event, {"_unparsed": text[:1000]}))
        self.data, self.event = [], None

    def close(self) -> None:
        if self.buf:
            self._line(self.buf.rstrip(b"\r"))
            self.buf = b""
        self._dispatch()


class _Decoder:
    """Content-Encoding decoder for the raw bytes we tee (gzip/deflate; others: undecodable)."""

    def __init__(self, encoding: str) -> None:
        enc = [e.strip().lower() for e in encoding.split(",") if e.strip() and e.strip().lower() != "identity"]
        self.ok = True
        self._z = None
        if not enc:
            return
        if enc == ["gzip"] or enc == ["x-gzip"]:
            self._z = zlib.decompressobj(16 + zlib.MAX_WBITS)
        elif enc == ["deflate"]:
            self._z = zlib.decompressobj()
        else:
            self.ok = False

    def decode(self, data: bytes) -> bytes:
        if not self.ok:
            return b""
        if self._z is None:
            return data
        try:
            return self._z.decompress(data)
        except zlib.error:
            self.ok = False
            return b""


# ----------------------------------------------------------------------------- logical call


class LogicalCall:
    """One SDK call (``request()``), spanning its HTTP attempts (SDK retries).

    Inside a task/tool scope the attempts are children of that scope. Outside any scope the
    logical call gets its own trace; its trace row is written once the call is over (request
    returned or raised, and no attempt stream is still open).
    """

    def __init__(self, rec: Recorder, scope: SpanScope | None) -> None:
        self.rec = rec
        self.scope = scope
        self.id = new_span_id()
        self.started_ns = time.time_ns()
        self.own_trace = scope is None
        self.trace_id = new_trace_id() if scope is None else scope.trace_id
        self._lock = threading.Lock()
        self.attempts = 0
        self.open_attempts = 0
        self.returned = False
        self.done = False
        self.status = "ok"
        self.name = "llm"
        self.ended_ns = self.started_ns

    def attempt_started(self) -> int:
        with self._lock:
            self.attempts += 1
            self.open_attempts += 1
            return self.attempts - 1

    def attempt_ended(self, status: str, name: str, ended_ns: int) -> None:
        with self._lock:
            self.open_attempts -= 1
            self.status, self.name, self.ended_ns = status, name, max(self.ended_ns, ended_ns)
        self._maybe_finalize()

    def request_done(self, exc: BaseException | None) -> None:
        with self._lock:
            self.returned = True
            if exc is not None:
                self.status = "error"
        self._maybe_finalize()

    def _maybe_finalize(self) -> None:
        with self._lock:
            if self.done or not self.returned or self.open_attempts > 0 or self.attempts == 0:
                return
            self.done = True
        if self.own_trace:
            self.rec.write([], [{
                "trace_id": self.trace_id, "name": self.name, "started_ns": self.started_ns,
                "ended_ns": self.ended_ns, "status": self.status,
                "attributes": {"auto.root_kind": "llm", "auto.logical_call_id": self.id, "auto.attempts": self.attempts},
            }])


# ----------------------------------------------------------------------------- attempt


class Attempt:
    """One HTTP attempt of a model call; written as one ``llm`` span when it ends."""

    def __init__(self, call: LogicalCall, client: Any, request: Any, name: str) -> None:
        self.call = call
        self.name = name
        self.started_ns = time.time_ns()
        self._t0 = time.perf_counter()
        self.index = call.attempt_started()
        self._lock = threading.Lock()
        self._done = False
        self.secrets = _secrets_of(request, client)
        try:
            raw = request.content
        except Exception:  # a streaming request body that was not read
            raw = b""
        text = raw.decode("utf-8", "replace") if raw else ""
        for s in self.secrets:
            text = text.replace(s, "[REDACTED]")
        try:
            body = json.loads(text) if text else None
        except ValueError:
            body = {"_body_digest": digest_bytes(raw)}
        self.body = body if isinstance(body, dict) else {"_body": body}
        hdr = request.headers
        try:
            self.attempt_no = int(hdr.get("x-stainless-retry-count", self.index))
        except ValueError:
            self.attempt_no = self.index
        url = request.url
        self.server = {"server.address": url.host, "server.port": url.port or (443 if url.scheme == "https" else 80)}
        self.url = f"{url.scheme}://{url.host}{':' + str(url.port) if url.port else ''}{url.path}"
        self.request_headers = sanitize_headers(hdr)
        self.response: Any = None
        self._sse: _SSEParser | None = None
        self._raw: list[bytes] = []
        self._decoder: _Decoder | None = None

    # -- response arrival ----------------------------------------------------------------

    def got_response(self, response: Any) -> Any:
        """Record now (body already read) or wrap the response stream to record at its end."""
        self.response = response
        if hasattr(response, "_content"):
            self._finish_body(response.content, complete=True)
            return response
        self._decoder = _Decoder(response.headers.get("content-encoding", ""))
        if "text/event-stream" in response.headers.get("content-type", ""):
            self._sse = _SSEParser()
        stream = response.stream
        if hasattr(stream, "__aiter__") and not hasattr(stream, "__iter__"):
            response.stream = _make_async_tee(stream, self)
        else:
            response.stream = _make_sync_tee(stream, self)
        self.call.rec.open_streams.add(self)
        return response

    def feed(self, chunk: bytes) -> None:
        data = self._decoder.decode(chunk) if self._decoder else chunk
        if self._sse is not None:
            self._sse.feed(data)
        else:
            self._raw.append(data)

    def stream_eof(self) -> None:
        self._finish_stream(complete=True)

    def stream_closed(self) -> None:
        self._finish_stream(complete=False)

    def finish_incomplete(self, why: str) -> None:
        self._finish_stream(complete=False, why=why)

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
            self._write("error", None, error_json(exc), {}, None)

    def _finish_stream(self, complete: bool, why: str = "stream closed before completion") -> None:
        if not self._claim():
            return
        if self._decoder is not None and not self._decoder.ok:
            self._write(self._status_of(), None, self._http_error(None) if self._is_http_error() else None,
                        {"auto.body": "undecodable"}, None)
            return
        if self._sse is not None:
            self._sse.close()
            errors = [e for ev, e in self._sse.events if ev == "error" or (isinstance(e, dict) and "error" in e and "choices" not in e)]
            chunks = [e for ev, e in self._sse.events if isinstance(e, dict) and "choices" in e]
            output, meta = assemble_chunks(chunks)
            # the SDK stops reading at "data: [DONE]" and closes: that is a complete stream
            complete = complete or self._sse.done
            extra = {"auto.stream": True, "auto.stream.complete": complete}
            if self._is_http_error():
                self._write("error", None, self._http_error(None), extra, meta)
            elif errors:
                err = errors[0].get("error", errors[0]) if isinstance(errors[0], dict) else errors[0]
                self._write("error", output, {"type": "stream_error", "message": str(err.get("message") if isinstance(err, dict) else err)}, extra, meta)
            elif not complete:
                self._write("error", output, {"type": "stream_incomplete", "message": why}, extra, meta)
            else:
                self._write("ok", output, None, extra, meta)
            return
        self._finish_body(b"".join(self._raw), complete=complete, streamed=True)

    def _finish_body(self, content: bytes, complete: bool, streamed: bool = False) -> None:
        if not streamed and not self._claim():
            return
        extra = {"auto.stream": False} if not streamed else {"auto.stream": True, "auto.stream.complete": complete}
        try:
            body = json.loads(content) if content else None
        except ValueError:
            body = None
        if self._is_http_error():
            self._write("error", None, self._http_error(body), extra, None)
            return
        if not isinstance(body, dict) or "choices" not in body:
            self._write("error" if not complete else "ok", None,
                        None if complete else {"type": "stream_incomplete", "message": "body not fully read"},
                        {**extra, "auto.body": "unrecognized"}, None)
            return
        output, meta = assemble_completion(body)
        self._write("ok", output, None, extra, meta)

    def _is_http_error(self) -> bool:
        return self.response is not None and self.response.status_code >= 400

    def _status_of(self) -> str:
        return "error" if self._is_http_error() else "ok"

    def _http_error(self, body: Any) -> dict:
        err = body.get("error") if isinstance(body, dict) else None
        out = {"type": "http_status", "status_code": self.response.status_code,
               "message": (err.get("message") if isinstance(err, dict) else None) or self.response.reason_phrase}
        if isinstance(err, dict):
            out["error_type"] = err.get("type")
            out["code"] = err.get("code")
        return out

    def _write(self, status: str, output: Any, error: dict | None, extra: dict, meta: dict | None) -> None:
        ended = time.time_ns()
        measured_ms = round((time.perf_counter() - self._t0) * 1000.0, 3)
        call = self.call
        scope = call.scope
        body = self.body
        attrs: dict[str, Any] = {"gen_ai.system": "openai", "gen_ai.operation.name": "chat"}
        for k, a in _REQUEST_ATTRS.items():
            if body.get(k) is not None:
                attrs[a] = body[k]
        if body.get("stop") is not None:
            attrs["gen_ai.request.stop_sequences"] = body["stop"] if isinstance(body["stop"], list) else [body["stop"]]
        attrs.update(self.server)
        attrs["url.full"] = self.url
        attrs["auto.attempt"] = self.attempt_no
        attrs["auto.logical_call_id"] = call.id
        attrs["auto.request.headers"] = self.request_headers
        resp_headers: dict[str, str] = {}
        if self.response is not None:
            attrs["http.response.status_code"] = self.response.status_code
            resp_headers = sanitize_headers(self.response.headers)
            attrs["auto.response.headers"] = resp_headers
        meta = meta or {}
        usage = meta.get("usage")
        in_tok, out_tok, cached = pricing.usage_tokens(usage)
        resp_model = meta.get("model")
        attrs["gen_ai.response.model"] = resp_model
        attrs["gen_ai.response.id"] = meta.get("id")
        attrs["gen_ai.response.finish_reasons"] = meta.get("finish_reasons") or []
        if meta.get("system_fingerprint") is not None:
            attrs["gen_ai.openai.response.system_fingerprint"] = meta["system_fingerprint"]
        attrs["gen_ai.usage.input_tokens"] = in_tok
        attrs["gen_ai.usage.output_tokens"] = out_tok
        if cached is not None:
            attrs["gen_ai.usage.cached_input_tokens"] = cached
        attrs["auto.usage"] = "reported" if (in_tok is not None and out_tok is not None) else "unknown"
        cost = pricing.cost_usd_micros(resp_model or body.get("model"), in_tok, out_tok, cached or 0) if status == "ok" or usage else None
        attrs["auto.cost_usd_micros"] = cost
        sim_ms = None
        if SIM_LATENCY_HEADER in resp_headers:
            try:
                sim_ms = float(resp_headers[SIM_LATENCY_HEADER])
            except ValueError:
                sim_ms = None
        simulated = sim_ms is not None or resp_headers.get(SIM_MODEL_HEADER) == "simulated"
        if sim_ms is not None:
            attrs["auto.latency_ms"] = sim_ms
            attrs["auto.latency_source"] = "simulated"
            attrs["auto.latency_measured_ms"] = measured_ms
        else:
            attrs["auto.latency_ms"] = measured_ms
            attrs["auto.latency_source"] = "measured"
        if simulated:
            attrs["auto.reference_model.simulated"] = True
        env = {n: digest(os.environ[n]) for n in _ENV_READS if n in os.environ}
        if env:
            attrs["auto.env_reads"] = env
        attrs.update(extra)
        task = scope.task if scope is not None else None
        task_input = scope.task_input if scope is not None else {}
        tdigest = digest(template_messages(body.get("messages"), task_input))
        attrs["auto.template_digest"] = tdigest
        span = {
            "trace_id": call.trace_id, "span_id": new_span_id(),
            "parent_span_id": scope.span_id if scope is not None else None,
            "name": self.name, "kind": "llm", "task": task, "site": f"{task or ''}/{self.name}/{tdigest}",
            "started_ns": self.started_ns, "ended_ns": ended, "status": status,
            "input": body, "output": output, "error": error, "attributes": attrs,
        }
        span = _scrub(span, self.secrets)
        call.rec.write([span])
        if scope is not None:
            adjust = (sim_ms - measured_ms) if sim_ms is not None else 0.0
            scope.add_llm_attempt(call.id, status == "ok", cost, simulated, adjust)
        call.attempt_ended(status, self.name, ended)


# ----------------------------------------------------------------------------- stream tees


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
            def __init__(self, inner: Any, attempt: Attempt) -> None:
                self._inner, self._attempt = inner, attempt

            def __iter__(self):  # type: ignore[override]
                try:
                    for chunk in self._inner:
                        self._attempt.feed(chunk)
                        yield chunk
                except GeneratorExit:
                    raise
                except BaseException as exc:
                    self._attempt.fail(exc)
                    raise
                self._attempt.stream_eof()

            def close(self) -> None:
                try:
                    self._inner.close()
                finally:
                    self._attempt.stream_closed()

        cls: type = SyncTee
    else:

        class AsyncTee(*bases):  # type: ignore[misc]
            def __init__(self, inner: Any, attempt: Attempt) -> None:
                self._inner, self._attempt = inner, attempt

            async def __aiter__(self):  # type: ignore[override]
                try:
                    async for chunk in self._inner:
                        self._attempt.feed(chunk)
                        yield chunk
                except GeneratorExit:
                    raise
                except BaseException as exc:
                    self._attempt.fail(exc)
                    raise
                self._attempt.stream_eof()

            async def aclose(self) -> None:
                try:
                    await self._inner.aclose()
                finally:
                    self._attempt.stream_closed()

        cls = AsyncTee
    _TEE_CLASSES[key] = cls
    return cls


def _make_sync_tee(inner: Any, attempt: Attempt) -> Any:
    return _tee_class("SyncByteStream")(inner, attempt)


def _make_async_tee(inner: Any, attempt: Attempt) -> Any:
    return _tee_class("AsyncByteStream")(inner, attempt)


# ----------------------------------------------------------------------------- patches


def _wrap_request_sync(orig: Any) -> Any:
    def request(self: Any, *args: Any, **kwargs: Any) -> Any:
        rec = active_recorder()
        if rec is None or _LOGICAL.get() is not None:
            return orig(self, *args, **kwargs)
        call = LogicalCall(rec, rec.current_scope())
        token = _LOGICAL.set(call)
        try:
            result = orig(self, *args, **kwargs)
        except BaseException as exc:
            call.request_done(exc)
            raise
        finally:
            _LOGICAL.reset(token)
        call.request_done(None)
        return result

    request.__auto_wrapped__ = orig  # type: ignore[attr-defined]
    return request


def _wrap_request_async(orig: Any) -> Any:
    async def request(self: Any, *args: Any, **kwargs: Any) -> Any:
        rec = active_recorder()
        if rec is None or _LOGICAL.get() is not None:
            return await orig(self, *args, **kwargs)
        call = LogicalCall(rec, rec.current_scope())
        token = _LOGICAL.set(call)
        try:
            result = await orig(self, *args, **kwargs)
        except BaseException as exc:
            call.request_done(exc)
            raise
        finally:
            _LOGICAL.reset(token)
        call.request_done(None)
        return result

    request.__auto_wrapped__ = orig  # type: ignore[attr-defined]
    return request


def _begin_attempt(client: Any, request: Any) -> tuple[Attempt | None, LogicalCall | None]:
    rec = active_recorder()
    if rec is None or _IN_SEND.get():
        return None, None
    name = _endpoint(request)
    if name is None:
        return None, None
    call = _LOGICAL.get()
    adhoc = None
    if call is None or call.rec is not rec:  # _send_request used outside request(): its own logical call
        call = adhoc = LogicalCall(rec, rec.current_scope())
    try:
        return Attempt(call, client, request, name), adhoc
    except Exception:  # never break the agent because recording failed
        log.exception("auto: could not start recording a model call")
        return None, None


def _wrap_send_sync(orig: Any) -> Any:
    def _send_request(self: Any, request: Any, *args: Any, **kwargs: Any) -> Any:
        attempt, adhoc = _begin_attempt(self, request)
        if attempt is None:
            return orig(self, request, *args, **kwargs)
        token = _IN_SEND.set(True)
        try:
            response = orig(self, request, *args, **kwargs)
        except BaseException as exc:
            attempt.fail(exc)
            if adhoc is not None:
                adhoc.request_done(exc)
            raise
        finally:
            _IN_SEND.reset(token)
        try:
            response = attempt.got_response(response)
        except Exception:
            log.exception("auto: could not record a model call")
        if adhoc is not None:
            adhoc.request_done(None)
        return response

    _send_request.__auto_wrapped__ = orig  # type: ignore[attr-defined]
    return _send_request


def _wrap_send_async(orig: Any) -> Any:
    async def _send_request(self: Any, request: Any, *args: Any, **kwargs: Any) -> Any:
        attempt, adhoc = _begin_attempt(self, request)
        if attempt is None:
            return await orig(self, request, *args, **kwargs)
        token = _IN_SEND.set(True)
        try:
            response = await orig(self, request, *args, **kwargs)
        except BaseException as exc:
            attempt.fail(exc)
            if adhoc is not None:
                adhoc.request_done(exc)
            raise
        finally:
            _IN_SEND.reset(token)
        try:
            response = attempt.got_response(response)
        except Exception:
            log.exception("auto: could not record a model call")
        if adhoc is not None:
            adhoc.request_done(None)
        return response

    _send_request.__auto_wrapped__ = orig  # type: ignore[attr-defined]
    return _send_request


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
    global _HOOK
    with _PATCH_LOCK:
        while _PATCHED:
            cls, name, orig = _PATCHED.pop()
            setattr(cls, name, orig)
        if _HOOK is not None:
            try:
                sys.meta_path.remove(_HOOK)
            except ValueError:
                pass
            _HOOK = None


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
        global _HOOK
        with _PATCH_LOCK:
            if _HOOK is not None:
                try:
                    sys.meta_path.remove(_HOOK)
                except ValueError:
                    pass
                _HOOK = None
                _patch()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)
