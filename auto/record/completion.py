"""Assembling a chat completion: the output and metadata a model-call span records.

From a non-streamed ``chat.completion`` body (:func:`assemble_completion`) or from the
``chat.completion.chunk`` objects of a stream (:func:`assemble_chunks`; content, refusal and
tool-call name/argument deltas concatenated per choice and per call, in arrival order; a delta
with a new ``id`` starts a new call even under a repeated or missing ``index``), the same two
dicts:

* ``output``: ``{"content", "tool_calls", "refusal", "finish_reason"}`` of choice 0 (plus
  ``"choices"``, every choice in index order, when there are several); a tool call is
  ``{"id", "type", "function": {"name", "arguments"}}``.
* ``meta``: ``{"id", "model", "system_fingerprint", "usage" (the reported usage dict or None),
  "finish_reasons"}``.

:func:`stream_outcome` adds the error a stream reported (an ``error`` event or object).

The Responses API (``POST /responses``) is assembled into the same two dicts
(:func:`assemble_response` for a ``response`` object, :func:`assemble_response_events` for its
event stream): ``content`` is the text of its ``output_text`` parts, ``tool_calls`` its
``function_call`` items (``id`` = the item's ``call_id``), ``refusal`` its refusal parts, and
``finish_reason`` the response's ``status`` (``completed``, ``incomplete``, ``failed``).

Every function here is total over JSON values: a provider's body of any shape gives an output
(fields of the wrong type are left out: text pieces must be strings, lists lists, objects
objects), never an exception, so a malformed answer is still recorded. Bodies are parsed with
:func:`parse_json` (strict JSON: ``NaN``/``Infinity`` are not JSON and could not be stored).
"""

from __future__ import annotations

import json
from typing import Any

from auto_runtime.jsonio import strict_loads


def parse_json(text: str | bytes) -> Any:
    """The runtime's strict JSON reader (:func:`auto_runtime.jsonio.strict_loads`) around
    surrounding whitespace: ``NaN``/``Infinity``, trailing bytes and too-deep nesting refused.

    Raises:
        ValueError: the text is not JSON.
    """
    raw = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else bytes(text)
    return strict_loads(raw.strip(b" \t\r\n"))


def _dict(v: Any) -> dict:
    return v if isinstance(v, dict) else {}


def _list(v: Any) -> list:
    return v if isinstance(v, list) else []


def _str(v: Any) -> str | None:
    return v if isinstance(v, str) else None


def _index(v: Any) -> int:
    return v if isinstance(v, int) and not isinstance(v, bool) else 0


def _tool_call(tc: Any) -> dict:
    tc = _dict(tc)
    fn = _dict(tc.get("function"))
    return {"id": _str(tc.get("id")), "type": _str(tc.get("type")) or "function",
            "function": {"name": _str(fn.get("name")), "arguments": _str(fn.get("arguments"))}}


def assemble_completion(body: Any) -> tuple[dict, dict]:
    """``(output, meta)`` from a non-streamed ``chat.completion`` body."""
    body = _dict(body)
    choices = []
    for ch in sorted((c for c in _list(body.get("choices")) if isinstance(c, dict)), key=lambda c: _index(c.get("index"))):
        msg = _dict(ch.get("message"))
        tcs = _list(msg.get("tool_calls"))
        choices.append({
            "content": _str(msg.get("content")),
            "tool_calls": [_tool_call(t) for t in tcs] if tcs else None,
            "refusal": _str(msg.get("refusal")),
            "finish_reason": _str(ch.get("finish_reason")),
        })
    return _output(choices), _meta(body, body.get("usage"), choices)


def _add_tool_call_delta(acc: dict, tc: Any) -> None:
    """Fold one streamed tool-call delta into a choice's calls (``acc["tool_calls"]``, in the
    order they started).

    A delta joins the call last started at its ``index``; without an ``index`` it joins the call
    last started. It starts a new call when there is none to join, or when it carries an ``id``
    other than that call's: two complete calls sent under one ``index``, or a provider that sends
    no ``index`` at all, stay separate calls, as in the non-streamed response.
    """
    if not isinstance(tc, dict):
        return
    calls, by_index = acc["tool_calls"], acc["by_index"]
    idx = tc.get("index") if isinstance(tc.get("index"), int) and not isinstance(tc.get("index"), bool) else None
    tid = _str(tc.get("id")) or None
    pos = by_index.get(idx) if idx is not None else (len(calls) - 1 if calls else None)
    if pos is None or (tid is not None and calls[pos]["id"] is not None and calls[pos]["id"] != tid):
        calls.append({"id": None, "type": "function", "name": [], "arguments": []})
        pos = len(calls) - 1
        if idx is not None:
            by_index[idx] = pos
    t = calls[pos]
    if tid is not None:
        t["id"] = tid
    if _str(tc.get("type")):
        t["type"] = tc["type"]
    fn = _dict(tc.get("function"))
    if _str(fn.get("name")):
        t["name"].append(fn["name"])
    if _str(fn.get("arguments")):
        t["arguments"].append(fn["arguments"])


def assemble_chunks(chunks: list[Any]) -> tuple[dict, dict]:
    """``(output, meta)`` from the ``chat.completion.chunk`` objects of a stream."""
    acc: dict[int, dict] = {}
    usage = None
    head: dict = {}
    for ch in chunks:
        if not isinstance(ch, dict):
            continue
        for k in ("id", "model", "system_fingerprint", "service_tier"):
            if ch.get(k) is not None:
                head[k] = ch[k]
        if isinstance(ch.get("usage"), dict) and ch["usage"]:
            usage = ch["usage"]
        for c in _list(ch.get("choices")):
            if not isinstance(c, dict):
                continue
            a = acc.setdefault(_index(c.get("index")),
                               {"content": [], "refusal": [], "tool_calls": [], "by_index": {}, "finish_reason": None})
            d = _dict(c.get("delta"))
            if _str(d.get("content")) is not None:
                a["content"].append(d["content"])
            if _str(d.get("refusal")) is not None:
                a["refusal"].append(d["refusal"])
            for tc in _list(d.get("tool_calls")):
                _add_tool_call_delta(a, tc)
            if _str(c.get("finish_reason")) is not None:
                a["finish_reason"] = c["finish_reason"]
    choices = []
    for idx in sorted(acc):
        a = acc[idx]
        tcs = [{"id": t["id"], "type": t["type"],
                "function": {"name": "".join(t["name"]) or None, "arguments": "".join(t["arguments"])}}
               for t in a["tool_calls"]]
        content = "".join(a["content"])
        choices.append({
            "content": content if (content or not tcs) and a["content"] else None,
            "tool_calls": tcs or None,
            "refusal": "".join(a["refusal"]) if a["refusal"] else None,
            "finish_reason": a["finish_reason"],
        })
    return _output(choices), _meta(head, usage, choices)


def stream_outcome(events: list[tuple[str | None, Any]]) -> tuple[dict, dict, dict | None]:
    """``(output, meta, error)`` of a stream's server-sent events (``(event name, parsed data)``
    pairs): the chunks assembled (:func:`assemble_chunks`) and the first error the stream
    reported (an ``error`` event, or an object with ``error`` and no ``choices``) as
    ``{"type": "stream_error", "message": str}``, or None."""
    errors = [e for ev, e in events if ev == "error" or (isinstance(e, dict) and "error" in e and "choices" not in e)]
    chunks = [e for _ev, e in events if isinstance(e, dict) and "choices" in e]
    output, meta = assemble_chunks(chunks)
    error = None
    if errors:
        err = errors[0].get("error", errors[0]) if isinstance(errors[0], dict) else errors[0]
        msg = err.get("message") if isinstance(err, dict) else err
        error = {"type": "stream_error", "message": msg if isinstance(msg, str) else json.dumps(msg, sort_keys=True)}
    return output, meta, error


def _output(choices: list[dict]) -> dict:
    first = choices[0] if choices else {"content": None, "tool_calls": None, "refusal": None, "finish_reason": None}
    out = dict(first)
    if len(choices) > 1:
        out["choices"] = choices
    return out


def _meta(head: dict, usage: Any, choices: list[dict]) -> dict:
    return {"id": head.get("id"), "model": _str(head.get("model")), "system_fingerprint": head.get("system_fingerprint"),
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
