"""A tier-1 answer as an OpenAI chat completion: the JSON body, or the server-sent events when the
request asked for ``stream: true``.

The body is shaped like the upstream's (``object: "chat.completion"``; each choice's ``message``
with ``role``, ``content``, ``refusal`` and, for tool calls, ``tool_calls`` with fresh
``call_auto_…`` ids; ``finish_reason`` ``stop``/``tool_calls`` or the recorded one; ``logprobs``
null), with ``model`` = the requested model, ``id`` = ``chatcmpl-auto-<24 hex>`` and
``system_fingerprint`` = ``auto-gen<N>`` (:func:`system_fingerprint`; ``auto-overlay`` for an
answer of the table overlay before any generation is installed, which has no generation).

``usage`` counts model tokens processed to produce the answer. A tier-1 answer is computed by
the compiled artifact, so no model token was read or written: ``prompt_tokens``,
``completion_tokens`` and ``total_tokens`` are 0 (with ``prompt_tokens_details.cached_tokens``
and ``completion_tokens_details.reasoning_tokens`` 0), and a client that prices calls from usage
prices this one at zero. A stream carries the usage chunk (``choices: []``) only when
``stream_options.include_usage`` is true, as the OpenAI API does.

Response headers (:func:`tier1_headers`): ``x-auto-tier: 1``, ``x-auto-generation: <N>``,
``x-auto-artifact-id: sha256:…`` (both left out when no generation answered), ``x-auto-site:
site:…``, ``x-auto-cost-usd-micros: 0`` and, for an answer of the table overlay
(:mod:`auto_runtime.overlay`), ``x-auto-origin: overlay``.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

from auto.sites import answer_choices

ZERO_USAGE = {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0,
              "prompt_tokens_details": {"cached_tokens": 0}, "completion_tokens_details": {"reasoning_tokens": 0}}
"""The ``usage`` of a tier-1 answer (see the module docstring)."""


OVERLAY_FINGERPRINT = "auto-overlay"
"""The ``system_fingerprint`` of a tier-1 answer no generation gave (the table overlay's, before
any generation is installed)."""


def system_fingerprint(generation: int | None) -> str:
    """``auto-gen<N>`` for generation N, :data:`OVERLAY_FINGERPRINT` when there is none."""
    return OVERLAY_FINGERPRINT if generation is None else f"auto-gen{generation}"


def tier1_headers(site: str, generation: int | None, artifact_id: str | None,
                  origin: str | None = None) -> dict[str, str]:
    """The headers that mark a tier-1 answer (see the module docstring); ``origin``: what answered
    when it was not the generation's artifact (``"overlay"``)."""
    h = {"x-auto-tier": "1", "x-auto-site": site, "x-auto-cost-usd-micros": "0"}
    if generation is not None:
        h["x-auto-generation"] = str(generation)
    if artifact_id is not None:
        h["x-auto-artifact-id"] = artifact_id
    if origin is not None:
        h["x-auto-origin"] = origin
    return h


def _head(request: dict, generation: int | None, obj: str) -> dict[str, Any]:
    return {"id": "chatcmpl-auto-" + os.urandom(12).hex(), "object": obj, "created": int(time.time()),
            "model": request.get("model"), "system_fingerprint": system_fingerprint(generation)}


def completion_body(request: dict, answer: Any, generation: int | None) -> dict[str, Any]:
    """The ``chat.completion`` body of a site answer."""
    choices = [{"index": i, "message": msg, "finish_reason": finish, "logprobs": None}
               for i, (msg, finish) in enumerate(answer_choices(answer))]
    return {**_head(request, generation, "chat.completion"), "choices": choices, "usage": dict(ZERO_USAGE)}


def completion_events(request: dict, answer: Any, generation: int | None) -> bytes:
    """The server-sent events of a streamed answer: per choice a role chunk, the content (or one
    chunk per tool call, name and arguments whole), a finish chunk; the usage chunk when asked
    for; ``data: [DONE]``."""
    head = _head(request, generation, "chat.completion.chunk")
    include_usage = bool((request.get("stream_options") or {}).get("include_usage"))
    if include_usage:
        head["usage"] = None
    out: list[bytes] = []

    def event(obj: dict) -> None:
        out.append(b"data: " + json.dumps(obj, ensure_ascii=False).encode("utf-8") + b"\n\n")

    def chunk(index: int, delta: dict, finish: str | None = None) -> None:
        event({**head, "choices": [{"index": index, "delta": delta, "finish_reason": finish, "logprobs": None}]})

    for i, (msg, finish) in enumerate(answer_choices(answer)):
        chunk(i, {"role": "assistant", "content": "" if msg.get("content") is not None else None, "refusal": None})
        if msg.get("content"):
            chunk(i, {"content": msg["content"]})
        if msg.get("refusal"):
            chunk(i, {"refusal": msg["refusal"]})
        for j, tc in enumerate(msg.get("tool_calls") or []):
            chunk(i, {"tool_calls": [{"index": j, "id": tc["id"], "type": "function",
                                      "function": {"name": tc["function"]["name"], "arguments": tc["function"]["arguments"]}}]})
        chunk(i, {}, finish)
    if include_usage:
        event({**head, "choices": [], "usage": dict(ZERO_USAGE)})
    out.append(b"data: [DONE]\n\n")
    return b"".join(out)
