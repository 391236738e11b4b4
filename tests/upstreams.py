"""A scripted OpenAI-compatible upstream for the proxy's failure tests (stdlib HTTP server on loopback).

``ScriptedUpstream(mode)`` answers every request the way ``mode`` says:

* ``"garbage"`` — 200 with a body that is not JSON;
* ``"slow"`` — waits ``delay_s`` before answering (a chat completion);
* ``"drip"`` — a chat-completion SSE stream of ``chunks`` events, ``delay_s`` apart (and records
  whether the client connection was closed before the end: :attr:`closed_early`);
* ``"responses"`` — the Responses API: a ``response`` object, or its event stream when the body
  says ``stream: true``;
* ``"echo-headers"`` — a chat completion whose content is the JSON of the request headers it got;
* ``"tickets"`` — a chat completion labelling the last user message: ``billing`` when it names
  one of :data:`site_fixtures.BILLING`, else ``bug`` (SSE when asked to stream).

Every request's path, headers and body are kept in :attr:`requests`. With ``require_key``, a
request whose ``Authorization`` is not ``Bearer <require_key>`` answers ``401`` (as OpenAI does).
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def completion(content: str, model: str = "scripted-1") -> dict[str, Any]:
    return {"id": "chatcmpl-scripted", "object": "chat.completion", "created": 0, "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6}}


def response_object(text: str) -> dict[str, Any]:
    return {"id": "resp_scripted", "object": "response", "created_at": 0, "model": "scripted-1", "status": "completed",
            "output": [{"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
                        "content": [{"type": "output_text", "text": text, "annotations": []}]}],
            "usage": {"input_tokens": 7, "output_tokens": 2, "total_tokens": 9}}


class ScriptedUpstream:
    """See the module docstring. Use as a context manager; :attr:`base_url` ends in ``/v1``."""

    def __init__(self, mode: str, *, delay_s: float = 0.05, chunks: int = 20, require_key: str | None = None) -> None:
        self.mode, self.delay_s, self.chunks = mode, delay_s, chunks
        self.require_key = require_key
        self.requests: list[dict[str, Any]] = []
        self.closed_early = threading.Event()
        self.finished = threading.Event()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a: Any) -> None:
                return

            def _send(self, status: int, body: bytes, ctype: str = "application/json") -> None:
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:  # noqa: N802
                outer.requests.append({"method": "GET", "path": self.path, "headers": dict(self.headers), "body": b""})
                if self._refused():
                    return
                self._send(200, json.dumps({"object": "list", "data": [{"id": "scripted-1"}]}).encode())

            def do_POST(self) -> None:  # noqa: N802
                n = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(n) if n else b""
                outer.requests.append({"method": "POST", "path": self.path, "headers": dict(self.headers), "body": raw})
                if self._refused():
                    return
                try:
                    body = json.loads(raw)
                except ValueError:
                    body = {}
                mode = outer.mode
                if mode == "garbage":
                    self._send(200, b"<html>not json</html>", "text/html")
                elif mode == "slow":
                    time.sleep(outer.delay_s)
                    self._send(200, json.dumps(completion("late")).encode())
                elif mode == "tickets":
                    from site_fixtures import BILLING

                    text = str((body.get("messages") or [{}])[-1].get("content"))
                    label = "billing" if any(w in text for w in BILLING) else "bug"
                    if body.get("stream"):
                        base = {"id": "chatcmpl-t", "object": "chat.completion.chunk", "created": 0, "model": "m-1"}
                        self._stream([{**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": label},
                                                            "finish_reason": None}]},
                                      {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}], done=True)
                    else:
                        self._send(200, json.dumps(completion(label, "m-1")).encode())
                elif mode == "echo-headers":
                    self._send(200, json.dumps(completion(json.dumps(dict(self.headers)))).encode())
                elif mode == "responses":
                    if body.get("stream"):
                        self._stream([{"type": "response.created", "response": {"id": "resp_scripted", "model": "scripted-1"}},
                                      {"type": "response.output_text.delta", "delta": "hel"},
                                      {"type": "response.output_text.delta", "delta": "lo"},
                                      {"type": "response.completed", "response": response_object("hello")}], done=False)
                    else:
                        self._send(200, json.dumps(response_object("hello")).encode())
                elif mode == "drip":
                    base = {"id": "chatcmpl-drip", "object": "chat.completion.chunk", "created": 0, "model": "scripted-1"}
                    events = [{**base, "choices": [{"index": 0, "delta": {"content": f"w{i} "}, "finish_reason": None}]}
                              for i in range(outer.chunks)]
                    events.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
                    self._stream(events, done=True)
                else:
                    self._send(500, b'{"error": {"message": "unknown mode"}}')

            def _refused(self) -> bool:
                if outer.require_key is None or self.headers.get("Authorization") == f"Bearer {outer.require_key}":
                    return False
                self._send(401, json.dumps({"error": {"message": "Incorrect API key provided", "type": "invalid_request_error",
                                                      "code": "invalid_api_key"}}).encode())
                return True

            def _stream(self, events: list[dict], done: bool) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                try:
                    for ev in events:
                        data = b"data: " + json.dumps(ev).encode() + b"\n\n"
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                        self.wfile.flush()
                        if outer.mode == "drip":
                            time.sleep(outer.delay_s)
                    if done:
                        data = b"data: [DONE]\n\n"
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                    self.wfile.write(b"0\r\n\r\n")
                    self.wfile.flush()
                    outer.finished.set()
                except (BrokenPipeError, ConnectionResetError):
                    outer.closed_early.set()

        class Server(ThreadingHTTPServer):
            daemon_threads = True

            def handle_error(self, request: Any, client_address: Any) -> None:
                return

        self._httpd = Server(("127.0.0.1", 0), Handler)
        self.port = self._httpd.server_address[1]
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def __enter__(self) -> "ScriptedUpstream":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
