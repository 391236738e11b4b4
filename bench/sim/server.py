"""The embedded default reference model: a **simulated**, OpenAI-compatible chat endpoint on loopback.

``SimServer`` runs a stdlib ``ThreadingHTTPServer`` in a background thread::

    with SimServer(seed=7) as sim:
        client = openai.OpenAI(base_url=sim.base_url, api_key="sk-test-dummy")
        client.chat.completions.create(model="auto-sim-1", messages=[...])

Endpoints:

* ``POST /v1/chat/completions`` — JSON body as OpenAI's. ``stream: true`` answers with SSE
  (``data: {chunk}\\n\\n`` … ``data: [DONE]\\n\\n``, chunked transfer encoding); the usage chunk
  (``choices: []``) is sent only when ``stream_options.include_usage`` is true. ``tools`` may
  yield ``tool_calls`` (finish reason ``tool_calls``) when the family wants them;
  ``response_format`` ``json_schema``/``json_object`` yields JSON content; ``n`` choices;
  ``max_tokens``/``max_completion_tokens`` truncate (finish reason ``length``).
* ``GET /v1/models`` and ``GET /v1/models/auto-sim-1``.

Only the prompts it models are answered (a bench family's marker, or ``[auto-sim:tools]``, in a
system message: :mod:`bench.sim.responders`); any other chat request gets HTTP 400 with an
OpenAI-style error body (``type`` ``invalid_request_error``, ``code`` ``unsupported_prompt``)
whose message names the families it models and how to use a real endpoint instead.

Every response says it is simulated: header ``x-auto-reference-model: simulated``, response
``model`` ``auto-sim-1``, ``system_fingerprint`` ``auto-sim``. Header ``x-auto-sim-latency-ms``
carries a latency drawn from a lognormal (median ``latency_median_ms`` = 700 ms, σ = 0.5 in log
space); it is recorded by Auto, not slept, unless ``sleep=True``.

Usage: ``prompt_tokens`` = 3 + Σ over messages (4 + ⌈bytes(content)/4⌉ + ⌈bytes(name)/4⌉)
+ ⌈bytes(tools JSON)/4⌉ + ⌈bytes(response_format JSON)/4⌉; ``completion_tokens`` = ⌈bytes(content)/4⌉
+ Σ over tool calls (3 + ⌈bytes(name)/4⌉ + ⌈bytes(arguments)/4⌉), at least 1. A deterministic
estimate (UTF-8 bytes / 4), not a tokenizer.

Randomness (all seeded, see :meth:`SimModel.chat`): the answer of a request draws from
``Random(sha256(seed | body key | k))`` where *body key* is the digest of the request body
without ``stream``/``stream_options`` and *k* counts earlier answered requests with the same key
on this server. Identical calls can therefore differ at T>0, yet a run is reproducible given
the same seed and the same call order (per key, so even interleaving of different requests does
not matter). Simulated 5xx errors happen with probability ``error_rate`` (default 0.02), rolled
from ``(seed, key, k, attempt)`` with attempt = the SDK's ``x-stainless-retry-count`` header, so
a retry can succeed; error responses carry ``retry-after-ms`` (``retry_after_ms``, default 1)
so SDK retries are fast. ``fail_attempts=N`` (or request header ``x-auto-sim-fail-attempts: N``)
forces a 500 on attempts < N.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import re
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from auto.canonical import canonical_json, digest
from bench.chat import message_text
from bench.sim.responders import find_responder, synthesize_arguments, unmodeled_message

MODEL = "auto-sim-1"
FINGERPRINT = "auto-sim"
LATENCY_HEADER = "x-auto-latency-ms"
REFERENCE_HEADER = "x-auto-reference-model"
FAIL_HEADER = "x-auto-sim-fail-attempts"
DEFAULT_TEMPERATURE = 1.0  # OpenAI's default when a request gives none


def estimate_tokens(text: str | None) -> int:
    """⌈UTF-8 bytes / 4⌉ (0 for empty/None)."""
    if not text:
        return 0
    return math.ceil(len(text.encode("utf-8")) / 4)


def prompt_tokens(body: dict) -> int:
    """The simulator's deterministic prompt-token estimate for a request body."""
    n = 3
    for m in body.get("messages") or []:
        n += 4 + estimate_tokens(message_text(m.get("content"))) + estimate_tokens(m.get("name"))
        if m.get("tool_calls"):
            n += estimate_tokens(canonical_json(m["tool_calls"]))
    if body.get("tools"):
        n += estimate_tokens(canonical_json(body["tools"]))
    if body.get("response_format"):
        n += estimate_tokens(canonical_json(body["response_format"]))
    return n


def _seed_int(*parts: Any) -> int:
    h = hashlib.sha256("|".join(str(p) for p in parts).encode("utf-8")).digest()
    return int.from_bytes(h[:8], "big")


def fit_response_format(text: str, response_format: Any) -> str:
    """Shape a text answer for ``response_format``: JSON matching a ``json_schema`` (the answer
    goes to property ``label`` or the first string property; enum values are matched
    case-insensitively without a trailing period), or ``{"answer": text}`` for ``json_object``."""
    if not isinstance(response_format, dict):
        return text
    kind = response_format.get("type")
    if kind == "json_schema":
        schema = (response_format.get("json_schema") or {}).get("schema") or {}
        props = schema.get("properties") or {}
        obj = synthesize_arguments(schema, text)
        key = "label" if "label" in props else next(
            (k for k, v in props.items() if isinstance(v, dict) and (v.get("type") == "string" or v.get("enum"))), None)
        if key is not None:
            prop = _resolve(props[key], schema)
            enum = prop.get("enum") if isinstance(prop, dict) else None
            if enum:
                want = text.strip().rstrip(".").lower()
                obj[key] = next((e for e in enum if str(e).lower() == want), enum[0])
            else:
                obj[key] = text
        return json.dumps(obj)
    if kind == "json_object":
        try:
            json.loads(text)
            return text
        except ValueError:
            return json.dumps({"answer": text})
    return text


def _resolve(prop: Any, schema: dict) -> Any:
    """Follow a local ``$ref`` (``#/$defs/X``) as pydantic emits for enums."""
    if isinstance(prop, dict) and isinstance(prop.get("$ref"), str) and prop["$ref"].startswith("#/"):
        node: Any = schema
        for part in prop["$ref"][2:].split("/"):
            node = node.get(part, {}) if isinstance(node, dict) else {}
        return node
    if isinstance(prop, dict) and prop.get("anyOf"):
        for p in prop["anyOf"]:
            r = _resolve(p, schema)
            if isinstance(r, dict) and r.get("enum"):
                return r
    return prop


@dataclass
class SimResponse:
    """One simulated HTTP response: status, headers, and a JSON body or SSE events."""

    status: int
    headers: dict[str, str]
    body: dict | None = None
    events: list[dict] | None = None
    latency_ms: float = 0.0


def _error(status: int, message: str, etype: str, code: str | None = None, param: str | None = None) -> dict:
    return {"error": {"message": message, "type": etype, "param": param, "code": code}}


@dataclass
class SimModel:
    """The simulator's logic without HTTP (see the module docstring for every rule).

    Attributes:
        seed: run seed; error_rate: probability of a simulated 500 per attempt;
        latency_median_ms, latency_sigma: lognormal latency parameters (ms, log-space σ);
        fail_attempts: force a 500 on attempts < N; retry_after_ms: ``retry-after-ms`` on errors.
    """

    seed: int = 0
    error_rate: float = 0.02
    latency_median_ms: float = 700.0
    latency_sigma: float = 0.5
    fail_attempts: int = 0
    retry_after_ms: int = 1
    counts: dict[str, int] = field(default_factory=dict)
    stats: dict[str, int] = field(default_factory=lambda: {"requests": 0, "answered": 0, "errors": 0})
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def _headers(self, latency_ms: float, request_id: str) -> dict[str, str]:
        return {REFERENCE_HEADER: "simulated", LATENCY_HEADER: f"{latency_ms:.3f}", "x-request-id": request_id,
                "openai-model": MODEL}

    def chat(self, body: Any, headers: dict[str, str] | None = None) -> SimResponse:
        """Answer one ``POST /v1/chat/completions`` (``headers`` lower-cased)."""
        headers = {k.lower(): v for k, v in (headers or {}).items()}
        with self._lock:
            self.stats["requests"] += 1
        if not isinstance(body, dict):
            return self._client_error("request body must be a JSON object", None)
        if not body.get("model"):
            return self._client_error("you must provide a model parameter", "model")
        msgs = body.get("messages")
        if not isinstance(msgs, list) or not msgs or not all(isinstance(m, dict) and m.get("role") for m in msgs):
            return self._client_error("'messages' must be a non-empty array of messages with a role", "messages")
        respond = find_responder(msgs)
        if respond is None:
            return self._client_error(unmodeled_message(MODEL), "messages", code="unsupported_prompt")
        key = digest({k: v for k, v in body.items() if k not in ("stream", "stream_options")})
        try:
            attempt = int(headers.get("x-stainless-retry-count", "0"))
        except ValueError:
            attempt = 0
        try:
            force = int(headers.get(FAIL_HEADER, self.fail_attempts))
        except ValueError:
            force = self.fail_attempts
        with self._lock:
            k = self.counts.get(key, 0)
        lat_rng = random.Random(_seed_int(self.seed, key, k, attempt, "latency"))
        latency = round(self.latency_median_ms * math.exp(self.latency_sigma * lat_rng.gauss(0.0, 1.0)), 3)
        request_id = "req_sim_%016x" % _seed_int(self.seed, key, k, attempt, "id")
        err_roll = random.Random(_seed_int(self.seed, key, k, attempt, "error")).random()
        if attempt < force or err_roll < self.error_rate:
            with self._lock:
                self.stats["errors"] += 1
            h = self._headers(latency, request_id)
            h["retry-after-ms"] = str(self.retry_after_ms)
            return SimResponse(500, h, _error(500, "The server had an error while processing your request (simulated).",
                                               "server_error"), latency_ms=latency)
        with self._lock:
            k = self.counts.get(key, 0)
            self.counts[key] = k + 1
            self.stats["answered"] += 1
        rng = random.Random(_seed_int(self.seed, key, k))
        temperature = body.get("temperature")
        temperature = DEFAULT_TEMPERATURE if temperature is None else float(temperature)
        n = max(1, int(body.get("n") or 1))
        limit = body.get("max_completion_tokens") or body.get("max_tokens")
        choices, completion = [], 0
        for i in range(n):
            reply = respond(msgs, temperature, rng, request=body)
            choice, toks = self._choice(i, reply, body, rng, limit)
            choices.append(choice)
            completion += toks
        ptoks = prompt_tokens(body)
        usage = {"prompt_tokens": ptoks, "completion_tokens": completion, "total_tokens": ptoks + completion,
                 "prompt_tokens_details": {"cached_tokens": 0}}
        cid = "chatcmpl-sim-%016x" % _seed_int(self.seed, key, k, "cid")
        created = int(time.time())
        h = self._headers(latency, request_id)
        if body.get("stream"):
            include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
            return SimResponse(200, h, events=self._chunks(cid, created, choices, usage if include_usage else None),
                               latency_ms=latency)
        return SimResponse(200, h, {
            "id": cid, "object": "chat.completion", "created": created, "model": MODEL,
            "system_fingerprint": FINGERPRINT, "choices": choices, "usage": usage, "service_tier": "default",
        }, latency_ms=latency)

    def _client_error(self, message: str, param: str | None, code: str | None = None) -> SimResponse:
        with self._lock:
            self.stats["errors"] += 1
        return SimResponse(400, {REFERENCE_HEADER: "simulated"},
                           _error(400, message, "invalid_request_error", code, param))

    def _choice(self, index: int, reply: Any, body: dict, rng: random.Random, limit: Any) -> tuple[dict, int]:
        if isinstance(reply, list) and reply:
            calls = [{"id": "call_sim_%012x" % rng.getrandbits(48), "type": "function",
                      "function": {"name": c["name"], "arguments": c["arguments"]}} for c in reply]
            toks = sum(3 + estimate_tokens(c["name"]) + estimate_tokens(c["arguments"]) for c in reply)
            msg = {"role": "assistant", "content": None, "tool_calls": calls, "refusal": None}
            return {"index": index, "message": msg, "finish_reason": "tool_calls", "logprobs": None}, max(1, toks)
        text = fit_response_format(str(reply), body.get("response_format"))
        finish = "stop"
        toks = max(1, estimate_tokens(text))
        if isinstance(limit, int) and limit > 0 and toks > limit:
            text = text.encode("utf-8")[: 4 * limit].decode("utf-8", "ignore")
            toks, finish = limit, "length"
        msg = {"role": "assistant", "content": text, "refusal": None}
        return {"index": index, "message": msg, "finish_reason": finish, "logprobs": None}, toks

    @staticmethod
    def _chunks(cid: str, created: int, choices: list[dict], usage: dict | None) -> list[dict]:
        base = {"id": cid, "object": "chat.completion.chunk", "created": created, "model": MODEL,
                "system_fingerprint": FINGERPRINT}
        if usage is not None:
            base["usage"] = None
        out = []

        def chunk(index: int, delta: dict, finish: str | None = None) -> dict:
            return {**base, "choices": [{"index": index, "delta": delta, "finish_reason": finish, "logprobs": None}]}

        for ch in choices:
            i, msg = ch["index"], ch["message"]
            if msg.get("tool_calls"):
                out.append(chunk(i, {"role": "assistant", "content": None}))
                for j, tc in enumerate(msg["tool_calls"]):
                    out.append(chunk(i, {"tool_calls": [{"index": j, "id": tc["id"], "type": "function",
                                                         "function": {"name": tc["function"]["name"], "arguments": ""}}]}))
                    args = tc["function"]["arguments"]
                    for p in range(0, len(args), 8):
                        out.append(chunk(i, {"tool_calls": [{"index": j, "function": {"arguments": args[p:p + 8]}}]}))
            else:
                out.append(chunk(i, {"role": "assistant", "content": ""}))
                for piece in re.findall(r"\S+\s*|\s+", msg.get("content") or ""):
                    out.append(chunk(i, {"content": piece}))
            out.append(chunk(i, {}, ch["finish_reason"]))
        if usage is not None:
            out.append({**base, "choices": [], "usage": usage})
        return out


MODELS_BODY = {"object": "list", "data": [{"id": MODEL, "object": "model", "created": 0, "owned_by": "auto-sim"}]}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # small responses: without TCP_NODELAY each waits ~40 ms for a delayed ACK
    server_version = "auto-sim/1"
    sim: "SimServer"

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        return

    def _path(self) -> str:
        path = self.path.split("?", 1)[0].rstrip("/")
        return path[3:] if path.startswith("/v1/") or path == "/v1" else path

    def _send_json(self, status: int, body: dict, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(body).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:  # noqa: N802
        p = self._path()
        h = {REFERENCE_HEADER: "simulated"}
        if p == "/models":
            self._send_json(200, MODELS_BODY, h)
        elif p == f"/models/{MODEL}":
            self._send_json(200, MODELS_BODY["data"][0], h)
        elif p in ("/health", ""):
            self._send_json(200, {"ok": True, "model": MODEL, "simulated": True}, h)
        else:
            self._send_json(404, _error(404, f"unknown path {self.path}", "invalid_request_error"), h)

    def do_POST(self) -> None:  # noqa: N802
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if self._path() != "/chat/completions":
            self._send_json(404, _error(404, f"unknown path {self.path}", "invalid_request_error"),
                            {REFERENCE_HEADER: "simulated"})
            return
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            self._send_json(400, _error(400, "could not parse the JSON body", "invalid_request_error"),
                            {REFERENCE_HEADER: "simulated"})
            return
        resp = self.sim.model.chat(body, {k.lower(): v for k, v in self.headers.items()})
        if self.sim.sleep and resp.latency_ms:
            time.sleep(resp.latency_ms / 1000.0)
        if resp.events is None:
            self._send_json(resp.status, resp.body or {}, resp.headers)
            return
        self.send_response(resp.status)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        for k, v in resp.headers.items():
            self.send_header(k, v)
        self.end_headers()
        for ev in resp.events:
            self._chunk(b"data: " + json.dumps(ev).encode("utf-8") + b"\n\n")
        self._chunk(b"data: [DONE]\n\n")
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 1024  # listen backlog (socketserver's default 5 refuses a burst of concurrent clients)

    def handle_error(self, request: Any, client_address: Any) -> None:  # client went away: ignore
        return


class SimServer:
    """The simulated reference model on ``http://host:port/v1`` (context manager).

    Args:
        port: TCP port (0 = any free port); host: bind address (loopback by default).
        seed: run seed (see the module docstring); error_rate: simulated 5xx probability.
        sleep: actually wait the drawn latency before answering (default False: only report it).
        latency_median_ms, latency_sigma, fail_attempts, retry_after_ms: see :class:`SimModel`.

    Attributes:
        base_url: ``http://127.0.0.1:PORT/v1`` (for ``openai.OpenAI(base_url=...)``).
        model: the :class:`SimModel` (``model.stats`` counts requests, answers, errors).
    """

    def __init__(self, port: int = 0, seed: int = 0, error_rate: float = 0.02, sleep: bool = False,
                 host: str = "127.0.0.1", latency_median_ms: float = 700.0, latency_sigma: float = 0.5,
                 fail_attempts: int = 0, retry_after_ms: int = 1):
        self.host, self.port = host, port
        self.sleep = sleep
        self.model = SimModel(seed=seed, error_rate=error_rate, latency_median_ms=latency_median_ms,
                              latency_sigma=latency_sigma, fail_attempts=fail_attempts, retry_after_ms=retry_after_ms)
        self._httpd: _Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """``http://host:port`` (without ``/v1``)."""
        return f"http://{self.host}:{self.port}"

    @property
    def base_url(self) -> str:
        """``http://host:port/v1``."""
        return self.url + "/v1"

    @property
    def stats(self) -> dict[str, int]:
        return dict(self.model.stats)

    def start(self) -> "SimServer":
        """Bind and serve in a daemon thread; returns self."""
        if self._httpd is not None:
            return self
        handler = type("SimHandler", (_Handler,), {"sim": self})
        self._httpd = _Server((self.host, self.port), handler)
        self.port = self._httpd.server_address[1]
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        name=f"auto-sim:{self.port}", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the socket (idempotent)."""
        if self._httpd is None:
            return
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._httpd, self._thread = None, None

    def serve_forever(self) -> None:
        """Serve in the calling thread until interrupted (used by ``python -m bench.sim``)."""
        handler = type("SimHandler", (_Handler,), {"sim": self})
        self._httpd = _Server((self.host, self.port), handler)
        self.port = self._httpd.server_address[1]
        try:
            self._httpd.serve_forever(poll_interval=0.2)
        finally:
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> "SimServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"SimServer({self.base_url!r}, seed={self.model.seed})"
