"""A chat-completion request's canonical form: one request, however a client writes it.

Clients write the same request differently: LangChain's ``ChatOpenAI`` sends ``"temperature":
0.0`` where the ``openai`` client sends ``0``, some send an explicit default (``"n": 1``,
``"response_format": {"type": "text"}``), ``null`` for a parameter not given, keys in another
order, a text message as one text part. Site discovery, the census and the proxy's tier-1 routing
read every request through :func:`canonical_request` (:func:`auto.sites.discover.read_request`,
:meth:`auto.sites.site.Site.extract`, :func:`request_shape`), so these renderings are one request:
one shape, one site, the same slot values.

The canonical form of a request body (a JSON object; anything else is returned unchanged):

1. **Numbers by value**: a float with an integral value becomes an int (``0.0`` → ``0``, ``1.0``
   → ``1``), everywhere outside message text (JSON has one number type; RFC 8259 §6). Booleans
   stay booleans.
2. **Parameters not given**: a top-level parameter whose value is ``null`` is dropped (the API
   reference types every optional parameter "or null", meaning not given), and so is one whose
   value is the API's documented default (:data:`DOCUMENTED_DEFAULTS`, from the OpenAI API
   reference, "Create chat completion" request body): ``frequency_penalty`` 0, ``presence_penalty``
   0, ``logprobs`` false, ``n`` 1, ``temperature`` 1, ``top_p`` 1, ``stream`` false, ``store``
   false, ``parallel_tool_calls`` true, ``response_format`` ``{"type": "text"}``, ``modalities``
   ``["text"]``; ``tool_choice`` ``"none"`` when the request has no tools and ``"auto"`` when it
   has (the reference: "none is
   the default when no tools are present. auto is the default if tools are present"); empty
   ``tools``, ``stop`` and ``logit_bias``. ``max_tokens`` becomes ``max_completion_tokens`` (the
   reference: ``max_tokens`` is "deprecated in favor of max_completion_tokens"; LangChain sends
   the latter for the former; a site's rendered request, which the proxy's shadow audits send
   upstream, therefore names ``max_completion_tokens``), and a ``stop`` string the one-element
   list it means (the reference: "string / array / null", up to 4 sequences).
3. **Messages**: the role is stripped of surrounding whitespace and lower-cased (roles are an
   enum of lower-case names); a message's ``null`` fields and an empty ``tool_calls`` list are
   dropped; content given as exactly one text part (``[{"type": "text", "text": t}]``) becomes
   the string ``t`` (the reference: content is "string or array" of parts, the text part's text
   being the message's text); an assistant message with tool calls has ``"content": null`` whether
   its content was null, ``""`` or absent (the reference: content is optional beside
   ``tool_calls``; LangChain sends ``null`` where another client may pass ``""`` through); a
   tool call's ``arguments`` that parse as JSON are re-written compactly (``","`` and ``":"``,
   key order kept), so ``{"a": 1}`` and ``{"a":1}`` are one argument text.
4. **Tools**: a function's ``strict: false`` (the documented default) and ``null`` fields are
   dropped; in the ``parameters`` JSON schema every ``required`` list is sorted and an empty one
   dropped (JSON Schema's ``required`` is a set: draft 2020-12 §6.5.3), numbers by value as above.
5. **Key order**: every object's keys are sorted (the text of a key order never matters in JSON),
   so the leaves of a request (:func:`auto.record.template.request_leaves`) come in one order.

What is *not* merged: values that differ from the documented default (``temperature`` 0 and 1 are
different requests), message text (not even whitespace: it is what the model reads), and any
parameter this module does not name.
"""

from __future__ import annotations

import json
from typing import Any

from auto.canonical import digest
from auto.record.template import request_skeleton

DOCUMENTED_DEFAULTS: dict[str, Any] = {
    "frequency_penalty": 0, "presence_penalty": 0, "logprobs": False, "n": 1, "temperature": 1, "top_p": 1,
    "stream": False, "store": False, "parallel_tool_calls": True, "response_format": {"type": "text"},
    "modalities": ["text"],
}
"""Chat-completion parameters dropped when given explicitly at their documented default (OpenAI
API reference, "Create chat completion", request body: "Defaults to …" of each parameter)."""

EMPTY_MEANS_ABSENT = ("tools", "stop", "logit_bias", "tool_calls")
"""Keys whose empty value (``[]``, ``{}``, ``""``) is the same request as leaving them out."""


def by_value(obj: Any) -> Any:
    """``obj`` with every integral float replaced by its int (lists and objects walked; keys
    sorted). Strings are never touched."""
    if isinstance(obj, bool) or obj is None or isinstance(obj, (str, int)):
        return obj
    if isinstance(obj, float):
        return int(obj) if obj.is_integer() and abs(obj) < 2 ** 63 else obj
    if isinstance(obj, list):
        return [by_value(v) for v in obj]
    if isinstance(obj, dict):
        return {k: by_value(obj[k]) for k in sorted(obj)}
    return obj


def _schema(obj: Any) -> Any:
    """A JSON schema with every ``required`` list sorted (an empty one dropped), by value."""
    if isinstance(obj, list):
        return [_schema(v) for v in obj]
    if not isinstance(obj, dict):
        return by_value(obj)
    out = {}
    for k in sorted(obj):
        v = obj[k]
        if k == "required" and isinstance(v, list) and all(isinstance(x, str) for x in v):
            if v:
                out[k] = sorted(set(v))
            continue
        out[k] = _schema(v)
    return out


def _tool(tool: Any) -> Any:
    if not isinstance(tool, dict):
        return by_value(tool)
    out = {}
    for k in sorted(tool):
        v = tool[k]
        if v is None:
            continue
        if k == "function" and isinstance(v, dict):
            fn = {}
            for fk in sorted(v):
                fv = v[fk]
                if fv is None or (fk == "strict" and fv is False):
                    continue
                fn[fk] = _schema(fv) if fk == "parameters" else by_value(fv)
            out[k] = fn
        else:
            out[k] = by_value(v)
    return out


def _arguments(text: str) -> str:
    try:
        parsed = json.loads(text)
    except ValueError:
        return text
    if not isinstance(parsed, (dict, list)):
        return text
    return json.dumps(parsed, ensure_ascii=False, separators=(",", ":"))


def _tool_call(call: Any) -> Any:
    if not isinstance(call, dict):
        return call
    out = {}
    for k in sorted(call):
        v = call[k]
        if v is None:
            continue
        if k == "function" and isinstance(v, dict):
            out[k] = {fk: (_arguments(fv) if fk == "arguments" and isinstance(fv, str) else by_value(fv))
                      for fk, fv in sorted(v.items()) if fv is not None}
        else:
            out[k] = by_value(v)
    return out


def _content(content: Any) -> Any:
    if isinstance(content, list):
        if len(content) == 1 and isinstance(content[0], dict) and content[0].get("type") == "text" \
                and isinstance(content[0].get("text"), str) and set(content[0]) <= {"type", "text"}:
            return content[0]["text"]
        return [by_value(p) for p in content]
    return content


def canonical_message(msg: Any) -> Any:
    """One message in canonical form (item 3 of the module docstring); a non-object as it is.
    (A message's ``content: null`` is kept: it is how the ``openai`` client writes an assistant
    tool-call message, so such requests keep the shape they had before the canonical form.)"""
    if not isinstance(msg, dict):
        return msg
    out: dict[str, Any] = {}
    for k in sorted(msg):
        v = msg[k]
        if (v is None and k != "content") or (k in EMPTY_MEANS_ABSENT and v in ([], {}, "")):
            continue
        if k == "role" and isinstance(v, str):
            v = v.strip().lower()
        elif k == "content":
            v = _content(v)
        elif k == "tool_calls" and isinstance(v, list):
            v = [_tool_call(c) for c in v]
        elif not isinstance(v, str):
            v = by_value(v)
        out[k] = v
    if out.get("tool_calls") and out.get("content") in ("", None):
        out["content"] = None  # absent, "" and null: no text beside the tool calls
    return out


def canonical_request(body: Any) -> Any:
    """The canonical form of a chat-completion request body (see the module docstring); a value
    that is not a JSON object is returned as it is. Idempotent:
    ``canonical_request(canonical_request(b)) == canonical_request(b)``."""
    if not isinstance(body, dict):
        return body
    params = {k: v for k, v in body.items() if k != "messages"}
    if "max_tokens" in params and params.get("max_completion_tokens") is None:
        params["max_completion_tokens"] = params.pop("max_tokens")
    if isinstance(params.get("stop"), str) and params["stop"]:
        params["stop"] = [params["stop"]]
    out: dict[str, Any] = {}
    for k in sorted(params):
        v = params[k]
        if v is None or (k in EMPTY_MEANS_ABSENT and v in ([], {}, "")):
            continue
        if k == "tools" and isinstance(v, list):
            v = [_tool(t) for t in v]
        else:
            v = by_value(v)
        if k in DOCUMENTED_DEFAULTS and v == DOCUMENTED_DEFAULTS[k] and type(v) is type(DOCUMENTED_DEFAULTS[k]):
            continue
        out[k] = v
    default_choice = "auto" if out.get("tools") else "none"
    if out.get("tool_choice") == default_choice:
        del out["tool_choice"]
    if "messages" in body:
        msgs = body["messages"]
        out["messages"] = [canonical_message(m) for m in msgs] if isinstance(msgs, list) else msgs
    return out


def request_shape(body: Any) -> tuple[Any, str]:
    """``(canonical body, its shape digest)``: the digest of
    :func:`auto.record.template.request_skeleton` of :func:`canonical_request` (``"sha256:<hex>"``;
    the digest of ``None`` when the body is not an object)."""
    canon = canonical_request(body)
    return canon, digest(request_skeleton(canon) if isinstance(canon, dict) else None)


__all__ = ["DOCUMENTED_DEFAULTS", "by_value", "canonical_message", "canonical_request", "request_shape"]
