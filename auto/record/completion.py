"""Assembling a chat completion: the output and metadata a model-call span records.

From a non-streamed ``chat.completion`` body (:func:`assemble_completion`) or from the
``chat.completion.chunk`` objects of a stream (:func:`assemble_chunks`; content, refusal and
tool-call name/argument deltas concatenated per choice and per tool-call index, in arrival
order), the same two dicts:

* ``output``: ``{"content", "tool_calls", "refusal", "finish_reason"}`` of choice 0 (plus
  ``"choices"``, every choice in index order, when there are several); a tool call is
  ``{"id", "type", "function": {"name", "arguments"}}``.
* ``meta``: ``{"id", "model", "system_fingerprint", "usage" (the reported usage dict or None),
  "finish_reasons"}``.

The Responses API (``POST /responses``) is assembled into the same two dicts
(:func:`assemble_response` for a ``response`` object, :func:`assemble_response_events` for its
event stream): ``content`` is the text of its ``output_text`` parts, ``tool_calls`` its
``function_call`` items (``id`` = the item's ``call_id``), ``refusal`` its refusal parts, and
``finish_reason`` the response's ``status`` (``completed``, ``incomplete``, ``failed``).
"""

from __future__ import annotations

from typing import Any

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


def assemble_response(body: dict) -> tuple[dict, dict]:
    """``(output, meta)`` from a Responses API ``response`` object."""
    texts: list[str] = []
    refusals: list[str] = []
    calls: list[dict] = []
    for item in body.get("output") or []:
        if not isinstance(item, dict):
            continue
        if item.get("type") == "message":
            for part in item.get("content") or []:
                if isinstance(part, dict) and part.get("type") == "output_text" and isinstance(part.get("text"), str):
                    texts.append(part["text"])
                elif isinstance(part, dict) and part.get("type") == "refusal" and isinstance(part.get("refusal"), str):
                    refusals.append(part["refusal"])
        elif item.get("type") == "function_call":
            calls.append({"id": item.get("call_id") or item.get("id"), "type": "function",
                          "function": {"name": item.get("name"), "arguments": item.get("arguments")}})
    status = body.get("status")
    out = {"content": "".join(texts) if texts or not calls else None, "tool_calls": calls or None,
           "refusal": "".join(refusals) if refusals else None, "finish_reason": status}
    meta = {"id": body.get("id"), "model": body.get("model"), "system_fingerprint": None,
            "usage": body.get("usage") if isinstance(body.get("usage"), dict) else None,
            "finish_reasons": [status] if status else []}
    return out, meta


RESPONSE_TERMINAL_EVENTS = ("response.completed", "response.incomplete", "response.failed")
"""Responses API stream events that carry the final ``response`` object."""


def assemble_response_events(events: list[dict]) -> tuple[dict, dict, bool]:
    """``(output, meta, complete)`` from the events of a Responses API stream: the final
    ``response`` of a terminal event when one arrived (``complete`` True), else the
    ``response.output_text.delta`` texts received so far."""
    for ev in reversed(events):
        if ev.get("type") in RESPONSE_TERMINAL_EVENTS and isinstance(ev.get("response"), dict):
            out, meta = assemble_response(ev["response"])
            return out, meta, True
    text = "".join(str(ev.get("delta") or "") for ev in events if ev.get("type") == "response.output_text.delta")
    head: dict = {}
    for ev in events:
        if isinstance(ev.get("response"), dict):
            head = ev["response"]
    out = {"content": text or None, "tool_calls": None, "refusal": None, "finish_reason": None}
    return out, {"id": head.get("id"), "model": head.get("model"), "system_fingerprint": None, "usage": None,
                 "finish_reasons": []}, False
