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


def _add_tool_call_delta(acc: dict, tc: dict) -> None:
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
    idx = tc.get("index") if isinstance(tc.get("index"), int) else None
    tid = tc["id"] if isinstance(tc.get("id"), str) and tc["id"] else None
    pos = by_index.get(idx) if idx is not None else (len(calls) - 1 if calls else None)
    if pos is None or (tid is not None and calls[pos]["id"] is not None and calls[pos]["id"] != tid):
        calls.append({"id": None, "type": "function", "name": [], "arguments": []})
        pos = len(calls) - 1
        if idx is not None:
            by_index[idx] = pos
    t = calls[pos]
    if tid is not None:
        t["id"] = tid
    if tc.get("type"):
        t["type"] = tc["type"]
    fn = tc.get("function") or {}
    if fn.get("name"):
        t["name"].append(fn["name"])
    if fn.get("arguments"):
        t["arguments"].append(fn["arguments"])


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
            if not isinstance(c, dict):
                continue
            idx = c["index"] if isinstance(c.get("index"), int) else 0
            a = acc.setdefault(idx, {"content": [], "refusal": [], "tool_calls": [], "by_index": {}, "finish_reason": None})
            d = c.get("delta") or {}
            if d.get("content") is not None:
                a["content"].append(d["content"])
            if d.get("refusal") is not None:
                a["refusal"].append(d["refusal"])
            for tc in d.get("tool_calls") or []:
                _add_tool_call_delta(a, tc)
            if c.get("finish_reason") is not None:
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
