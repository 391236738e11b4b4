"""A scripted OpenAI-compatible upstream for recorder tests: an ``openai`` client whose transport
answers from Python (no socket), non-streamed bodies as JSON and streams as server-sent events
read chunk by chunk (so the recorder sees a real response stream)."""

from __future__ import annotations

import json
from typing import Any, Callable, Iterable

import httpx2
import openai

API_KEY = "sk-test-3f9a1c77e2b04d5a9c1e0b8d6f2a4c6e"


def completion(message: dict[str, Any], *, usage: dict | None = None, model: str = "gpt-4o-2024-08-06") -> dict:
    """A ``chat.completion`` body with one choice holding ``message``."""
    finish = "tool_calls" if message.get("tool_calls") else "stop"
    body = {"id": "chatcmpl-mock", "object": "chat.completion", "created": 0, "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", **message}, "finish_reason": finish}]}
    if usage is not None:
        body["usage"] = usage
    return body


def chunk(delta: dict[str, Any] | None = None, finish: str | None = None, *, usage: dict | None = None,
          model: str = "gpt-4o-2024-08-06") -> dict:
    """One ``chat.completion.chunk`` (``delta`` None: the usage-only chunk with no choices)."""
    out: dict[str, Any] = {"id": "chatcmpl-mock", "object": "chat.completion.chunk", "created": 0, "model": model}
    out["choices"] = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]
    if usage is not None:
        out["usage"] = usage
    return out


def sse(chunks: Iterable[dict], done: bool = True) -> Iterable[bytes]:
    """The server-sent-event lines of ``chunks`` (one network chunk each), then ``[DONE]``."""
    for c in chunks:
        yield b"data: " + json.dumps(c).encode("utf-8") + b"\n\n"
    if done:
        yield b"data: [DONE]\n\n"


def client(answer: Callable[[dict, httpx2.Request], Any], *, api_key: str = API_KEY, async_: bool = False,
           **kw: Any) -> Any:
    """An ``openai`` client whose every request is answered by ``answer(body, request)``: a dict
    (JSON body), a list of chunk dicts (an SSE stream), or an ``httpx2.Response``."""

    def respond(request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.content or b"{}")
        got = answer(body, request)
        if isinstance(got, httpx2.Response):
            return got
        if isinstance(got, list):
            return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=sse(got))
        return httpx2.Response(200, json=got)

    if async_:
        async def arespond(request: httpx2.Request) -> httpx2.Response:
            body = json.loads(request.content or b"{}")
            got = answer(body, request)
            if isinstance(got, httpx2.Response):
                return got
            if isinstance(got, list):
                async def agen():
                    for b in sse(got):
                        yield b
                return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=agen())
            return httpx2.Response(200, json=got)

        return openai.AsyncOpenAI(base_url="http://mock.invalid/v1", api_key=api_key, max_retries=0,
                                  http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(arespond)), **kw)
    return openai.OpenAI(base_url="http://mock.invalid/v1", api_key=api_key, max_retries=0,
                         http_client=httpx2.Client(transport=httpx2.MockTransport(respond)), **kw)
