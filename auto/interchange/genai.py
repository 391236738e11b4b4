"""What a foreign model-call span says, in the recorder's terms: request body and response.

Instrumentations describe a chat completion in one of these conventions (each is read; the first
that gives messages wins, in this order):

1. **GenAI semantic conventions, current** (OpenTelemetry semantic conventions ≥ 1.37, as
   ``opentelemetry-instrumentation-openai-v2`` with ``OTEL_SEMCONV_STABILITY_OPT_IN=
   gen_ai_latest_experimental`` and OpenLLMetry ≥ 0.4x write them): ``gen_ai.operation.name``
   (``chat``), ``gen_ai.request.*`` parameters, ``gen_ai.system_instructions``,
   ``gen_ai.input.messages`` and ``gen_ai.output.messages`` (JSON: ``[{"role", "parts": [{"type":
   "text", "content"} | {"type": "tool_call", "id", "name", "arguments"} | {"type":
   "tool_call_response", "id", "response"}], "finish_reason"}]``), ``gen_ai.tool.definitions``;
   on the span, or on its ``gen_ai.client.inference.operation.details`` event.
2. **GenAI semantic conventions, previous**: the message events (semantic conventions ≤ 1.36:
   ``gen_ai.system.message``, ``gen_ai.user.message``, ``gen_ai.assistant.message`` with
   ``tool_calls``, ``gen_ai.tool.message`` with ``id``, and ``gen_ai.choice`` with ``message``,
   ``finish_reason``) as span events; the flattened attributes older OpenLLMetry releases write
   (``gen_ai.prompt.<i>.role`` / ``.content`` / ``.tool_calls.<j>.{id,name,arguments}`` /
   ``.tool_call_id``, ``gen_ai.completion.<i>.*``, ``llm.request.functions.<i>.*``); and
   ``gen_ai.prompt`` / ``gen_ai.completion`` as one JSON or text attribute.
3. **OpenInference** (``openinference.span.kind`` = ``LLM``, as ``openinference-instrumentation-
   openai`` writes it): ``input.value`` holding the request body as JSON (used whole when it has
   ``messages``), else ``llm.input_messages.<i>.message.{role,content,tool_call_id,
   tool_calls.<j>.tool_call.{id,function.name,function.arguments}}`` with
   ``llm.invocation_parameters`` and ``llm.model_name``; the response from ``output.value`` (a
   chat completion) or ``llm.output_messages.<i>.message.*``.

The request comes out as the chat-completion body the recorder writes (``{"model", "messages":
[{"role", "content", "tool_calls"?, "tool_call_id"?}], <parameters>, "tools"?}``; tool-call
arguments as JSON text), the response as ``{"content", "finish_reason", "tool_calls", "refusal"}``
(``tool_calls``: ``[{"id", "type": "function", "function": {"name", "arguments"}}]`` or None).
Site discovery then reads the body in its canonical form (:mod:`auto.sites.request`), so a call
seen through any of these conventions is the same site as the same call recorded by the proxy,
as far as the instrumentation recorded the request (parameters it leaves out are not in the body).
"""

from __future__ import annotations

import json
import re
from typing import Any

LLM_OPERATIONS = ("chat", "text_completion", "generate_content")
"""``gen_ai.operation.name`` values that are model calls."""

CHAT_OPERATIONS = ("chat",)
"""Operations whose spans are chat completions (imported under the recorder's span name)."""

REQUEST_PARAMS = {
    "gen_ai.request.model": "model", "gen_ai.request.temperature": "temperature", "gen_ai.request.top_p": "top_p",
    "gen_ai.request.max_tokens": "max_tokens", "gen_ai.request.seed": "seed",
    "gen_ai.request.frequency_penalty": "frequency_penalty", "gen_ai.request.presence_penalty": "presence_penalty",
    "gen_ai.request.stop_sequences": "stop", "gen_ai.request.choice.count": "n",
}
"""GenAI request attributes -> the request body field (semantic conventions, "GenAI spans")."""


def loads_maybe(v: Any) -> Any:
    """JSON text parsed; anything else (or text that is not JSON) as it is."""
    if isinstance(v, str):
        try:
            return json.loads(v)
        except ValueError:
            return v
    return v


def _json_text(v: Any) -> str:
    return v if isinstance(v, str) else json.dumps(v, ensure_ascii=False, separators=(",", ":"))


def unflatten(attrs: dict, prefix: str) -> Any:
    """The attributes under ``prefix.`` as one nested value: dotted segments become object keys,
    numeric ones list indices (``p.0.role``, ``p.1.content`` → ``[{"role"}, {"content"}]``);
    None when there are none."""
    root: dict = {}
    pre = prefix + "."
    for key, value in attrs.items():
        if not key.startswith(pre):
            continue
        node = root
        segs = key[len(pre):].split(".")
        for seg in segs[:-1]:
            nxt = node.get(seg)
            if not isinstance(nxt, dict):
                nxt = node[seg] = {}
            node = nxt
        node[segs[-1]] = value

    def listify(o: Any) -> Any:
        if not isinstance(o, dict):
            return o
        if o and all(k.isdigit() for k in o):
            return [listify(o[k]) for k in sorted(o, key=int)]
        return {k: listify(v) for k, v in o.items()}

    return listify(root) if root else None


# ----------------------------------------------------------------------------- current form


def _parts_message(m: dict) -> list[dict]:
    """One semantic-conventions message (``{"role", "parts"}``) as chat-completion messages (a
    message of tool-call responses becomes one ``tool`` message per response)."""
    role = m.get("role") or "user"
    if "parts" not in m:  # a plain {"role", "content"} message
        return [{k: v for k, v in m.items() if k in ("role", "content", "tool_calls", "tool_call_id", "name")}]
    raw_parts = m.get("parts")
    parts = [p for p in raw_parts if isinstance(p, dict)] if isinstance(raw_parts, list) else []
    texts = [p.get("content") for p in parts if p.get("type") == "text"]
    calls = [{"id": p.get("id"), "type": "function", "function": {"name": p.get("name"),
                                                                   "arguments": _json_text(p.get("arguments", {}))}}
             for p in parts if p.get("type") == "tool_call"]
    answers = [p for p in parts if p.get("type") == "tool_call_response"]
    if answers:
        return [{"role": "tool", "tool_call_id": p.get("id"), "content": _json_text(p.get("response"))}
                for p in answers]
    other = [p for p in parts if p.get("type") not in ("text", "tool_call")]
    msg: dict[str, Any] = {"role": role}
    if other:
        msg["content"] = [{"type": "text", "text": p.get("content")} if p.get("type") == "text" else p for p in parts
                          if p.get("type") != "tool_call"]
    else:
        msg["content"] = "".join(str(t) for t in texts) if texts else None
    if calls:
        msg["tool_calls"] = calls
    return [msg]


def _current_messages(attrs: dict) -> list[dict] | None:
    raw = loads_maybe(attrs.get("gen_ai.input.messages"))
    if not isinstance(raw, list):
        return None
    msgs: list[dict] = []
    instr = loads_maybe(attrs.get("gen_ai.system_instructions"))
    if instr:
        text = instr if isinstance(instr, str) else "".join(
            str(p.get("content")) for p in (instr if isinstance(instr, list) else [])
            if isinstance(p, dict) and p.get("type") == "text")
        msgs.append({"role": "system", "content": text})
    for m in raw:
        if isinstance(m, dict):
            msgs.extend(_parts_message(m))
    return msgs


def _current_output(attrs: dict) -> dict | None:
    raw = loads_maybe(attrs.get("gen_ai.output.messages"))
    if not (isinstance(raw, list) and raw and isinstance(raw[0], dict)):
        return None
    m = _parts_message(raw[0])[0]
    return _answer(m.get("content"), m.get("tool_calls"), raw[0].get("finish_reason") or _finish(attrs))


def _finish(attrs: dict) -> Any:
    f = attrs.get("gen_ai.response.finish_reasons")
    if isinstance(f, list):
        return f[0] if f else None
    return f if f is not None else attrs.get("llm.finish_reason")


def _answer(content: Any, tool_calls: Any, finish: Any) -> dict:
    return {"content": content, "finish_reason": finish, "refusal": None, "tool_calls": tool_calls or None}


# ----------------------------------------------------------------------------- previous forms


def _calls(raw: Any) -> list[dict] | None:
    """Tool calls in any of the flattened or event forms as chat-completion tool calls."""
    if not isinstance(raw, list):
        return None
    out = []
    for c in raw:
        if not isinstance(c, dict):
            continue
        c = c.get("tool_call", c)  # OpenInference nests each call under "tool_call"
        fn = c.get("function") if isinstance(c.get("function"), dict) else c
        out.append({"id": c.get("id"), "type": "function",
                    "function": {"name": fn.get("name"), "arguments": _json_text(fn.get("arguments", {}))}})
    return out or None


def _flat_message(m: dict) -> dict:
    msg: dict[str, Any] = {"role": m.get("role") or "user", "content": m.get("content")}
    if isinstance(m.get("contents"), list):  # OpenInference content parts
        texts = [(c.get("message_content") or {}).get("text") for c in m["contents"] if isinstance(c, dict)]
        if msg["content"] is None and texts and all(isinstance(t, str) for t in texts):
            msg["content"] = "".join(texts)
    calls = _calls(m.get("tool_calls"))
    if calls:
        msg["tool_calls"] = calls
    if m.get("tool_call_id") is not None:
        msg["tool_call_id"] = m["tool_call_id"]
    return msg


def _flat_messages(attrs: dict) -> list[dict] | None:
    raw = unflatten(attrs, "gen_ai.prompt")
    if isinstance(raw, list):
        return [_flat_message(m) for m in raw if isinstance(m, dict)]
    raw = loads_maybe(attrs.get("gen_ai.prompt"))
    if isinstance(raw, str):
        return [{"role": "user", "content": raw}]
    if isinstance(raw, list):
        return [_flat_message(m) for m in raw if isinstance(m, dict)]
    return None


def _event_messages(events: list[dict]) -> list[dict] | None:
    msgs = []
    for e in events:
        name = e.get("name") or ""
        if not (name.startswith("gen_ai.") and name.endswith(".message")):
            continue
        a = e.get("attributes") or {}
        body = loads_maybe(a.get("content", a.get("body")))
        role = a.get("role") or name[len("gen_ai."):-len(".message")]
        msg: dict[str, Any] = {"role": role, "content": body.get("content") if isinstance(body, dict) else body}
        calls = _calls(loads_maybe(a.get("tool_calls")))
        if calls:
            msg["tool_calls"] = calls
        if role == "tool" and a.get("id") is not None:
            msg["tool_call_id"] = a["id"]
        msgs.append(msg)
    return msgs or None


def _previous_output(attrs: dict, events: list[dict]) -> dict | None:
    raw = unflatten(attrs, "gen_ai.completion")
    if isinstance(raw, list) and raw and isinstance(raw[0], dict):
        m = raw[0]
        return _answer(m.get("content"), _calls(m.get("tool_calls")), m.get("finish_reason") or _finish(attrs))
    comp = loads_maybe(attrs.get("gen_ai.completion"))
    if comp is not None:
        if isinstance(comp, list) and comp and isinstance(comp[0], dict):
            return _answer(comp[0].get("content"), _calls(comp[0].get("tool_calls")), _finish(attrs))
        return _answer(comp, None, _finish(attrs))
    for e in events:
        if e.get("name") == "gen_ai.choice":
            a = e.get("attributes") or {}
            body = loads_maybe(a.get("message", a.get("body")))
            if isinstance(body, dict):
                return _answer(body.get("content"), _calls(loads_maybe(body.get("tool_calls"))),
                               a.get("finish_reason", _finish(attrs)))
            return _answer(body, None, a.get("finish_reason", _finish(attrs)))
    return None


# ----------------------------------------------------------------------------- OpenInference


def is_openinference(attrs: dict) -> bool:
    """Whether the span is an OpenInference span (it names its kind)."""
    return isinstance(attrs.get("openinference.span.kind"), str)


def _openinference_request(attrs: dict) -> dict | None:
    if str(attrs.get("input.mime_type") or "application/json") == "application/json":
        body = loads_maybe(attrs.get("input.value"))
        if isinstance(body, dict) and isinstance(body.get("messages"), list):
            return body
    raw = unflatten(attrs, "llm.input_messages")
    if not isinstance(raw, list):
        return None
    body = {}
    params = loads_maybe(attrs.get("llm.invocation_parameters"))
    if isinstance(params, dict):
        body.update(params)
    if attrs.get("llm.model_name") and "model" not in body:
        body["model"] = attrs["llm.model_name"]
    body["messages"] = [_flat_message(m.get("message", m)) for m in raw if isinstance(m, dict)]
    return body


def _openinference_output(attrs: dict) -> dict | None:
    if str(attrs.get("output.mime_type") or "application/json") == "application/json":
        out = loads_maybe(attrs.get("output.value"))
        if isinstance(out, dict) and isinstance(out.get("choices"), list) and out["choices"]:
            ch = out["choices"][0] or {}
            m = ch.get("message") or {}
            return {"content": m.get("content"), "finish_reason": ch.get("finish_reason"),
                    "refusal": m.get("refusal"), "tool_calls": m.get("tool_calls") or None}
    raw = unflatten(attrs, "llm.output_messages")
    if isinstance(raw, list) and raw and isinstance(raw[0], dict):
        m = _flat_message(raw[0].get("message", raw[0]))
        return _answer(m.get("content"), m.get("tool_calls"), _finish(attrs))
    return None


# ----------------------------------------------------------------------------- the span


def span_kind(attrs: dict) -> str | None:
    """``llm``, ``tool`` or ``task`` for a span of one of the conventions, else None."""
    op = attrs.get("gen_ai.operation.name")
    if op in LLM_OPERATIONS:
        return "llm"
    if op == "execute_tool":
        return "tool"
    if op in ("invoke_agent", "create_agent"):
        return "task" if op == "invoke_agent" else None
    oi = attrs.get("openinference.span.kind")
    if oi == "LLM":
        return "llm"
    if oi == "TOOL":
        return "tool"
    if oi is None and (attrs.get("llm.request.type") == "chat" or unflatten(attrs, "gen_ai.prompt") is not None):
        return "llm"  # older OpenLLMetry: no operation name, flattened prompt attributes
    return None


def is_chat(attrs: dict) -> bool:
    """Whether a model-call span is a chat completion (the recorder's ``chat.completions``)."""
    op = attrs.get("gen_ai.operation.name")
    if op is not None:
        return op in CHAT_OPERATIONS
    return attrs.get("openinference.span.kind") == "LLM" or attrs.get("llm.request.type") in (None, "chat")


DETAILS_EVENT = "gen_ai.client.inference.operation.details"
"""The event that carries the current form's message attributes when they are not on the span
(semantic conventions ≥ 1.37, "GenAI events")."""


def with_details(attrs: dict, events: list[dict]) -> dict:
    """``attrs`` with the attributes of a :data:`DETAILS_EVENT` under them (the span's win)."""
    for e in events:
        if e.get("name") == DETAILS_EVENT and isinstance(e.get("attributes"), dict):
            return {**e["attributes"], **attrs}
    return attrs


def request_body(attrs: dict, events: list[dict]) -> dict:
    """The chat-completion request body of a model-call span (see the module docstring; messages
    ``[]`` when the span recorded none)."""
    attrs = with_details(attrs, events)
    if is_openinference(attrs):
        body = _openinference_request(attrs)
        if body is not None:
            return body
    msgs = _current_messages(attrs)
    if msgs is None:
        msgs = _flat_messages(attrs)
    if msgs is None:
        msgs = _event_messages(events)
    body: dict[str, Any] = {"messages": msgs or []}
    for attr, field in REQUEST_PARAMS.items():
        if attrs.get(attr) is not None:
            body[field] = attrs[attr]
    tools = loads_maybe(attrs.get("gen_ai.tool.definitions"))
    if not isinstance(tools, list):
        fns = unflatten(attrs, "llm.request.functions")
        tools = [{"type": "function", "function": {k: loads_maybe(v) if k == "parameters" else v
                                                    for k, v in f.items()}}
                 for f in fns if isinstance(f, dict)] if isinstance(fns, list) else None
    if tools:
        body["tools"] = [_tool_def(t) for t in tools if isinstance(t, dict)]
    return body


def _tool_def(t: dict) -> dict:
    """A tool definition in the chat-completion form: the semantic conventions' flat
    ``{"type", "name", "description", "parameters"}`` gets its ``function`` object."""
    if "function" in t or "name" not in t:
        return t
    return {"type": t.get("type") or "function", "function": {k: loads_maybe(v) if k == "parameters" else v
                                                              for k, v in t.items() if k != "type"}}


def response(attrs: dict, events: list[dict]) -> dict | None:
    """The response of a model-call span as the recorder writes it, or None when not recorded."""
    attrs = with_details(attrs, events)
    if is_openinference(attrs):
        out = _openinference_output(attrs)
        if out is not None:
            return out
    out = _current_output(attrs)
    return out if out is not None else _previous_output(attrs, events)


def tool_call(attrs: dict, name: str) -> tuple[dict, Any]:
    """``(input {"name", "arguments"}, output)`` of a tool span (``execute_tool``:
    ``gen_ai.tool.name``, ``gen_ai.tool.call.arguments`` / ``.result``; OpenInference ``TOOL``:
    ``tool.name``, ``input.value`` / ``output.value``)."""
    if is_openinference(attrs):
        return ({"name": attrs.get("tool.name") or name, "arguments": loads_maybe(attrs.get("input.value"))},
                loads_maybe(attrs.get("output.value")))
    return ({"name": attrs.get("gen_ai.tool.name") or name, "arguments": loads_maybe(attrs.get("gen_ai.tool.call.arguments"))},
            loads_maybe(attrs.get("gen_ai.tool.call.result")))


def task_messages(attrs: dict, events: list[dict]) -> list[dict]:
    """The messages an ``invoke_agent`` span recorded (its input), ``[]`` when none."""
    msgs = _current_messages(attrs)
    if msgs is None:
        msgs = _flat_messages(attrs)
    if msgs is None:
        msgs = _event_messages(events)
    return msgs or []


TIER1_FINGERPRINT = re.compile(r"auto-gen(\d+|None)|auto-overlay")
"""The ``system_fingerprint`` of a tier-1 answer Auto gave (``auto-gen<N>``, N the generation, or
``auto-overlay``: :mod:`auto.proxy.answer`; ``auto-genNone`` is what earlier versions wrote for
an overlay answer)."""

FINGERPRINT_ATTRS = ("openai.response.system_fingerprint", "gen_ai.openai.response.system_fingerprint")
"""Where the conventions put a response's system fingerprint (current and previous names)."""


TIER1_RESPONSE_ID = re.compile(r"chatcmpl-auto-[0-9a-f]{24}")
"""The ``id`` of every tier-1 answer ``auto proxy`` gives, streamed or not (:mod:`auto.proxy.answer`):
a streamed answer's instrumentation span often carries the id but no system fingerprint."""

RESPONSE_ID_ATTRS = ("gen_ai.response.id",)
"""Where the GenAI conventions put a response's id."""


def is_tier1(attrs: dict) -> bool:
    """Whether a model-call span is a tier-1 answer Auto gave: marked ``auto.tier = 1``, its
    system fingerprint is ``auto-gen<N>`` or ``auto-overlay``, or its response id is
    ``chatcmpl-auto-<24 hex>`` (what survives a tool that drops ``auto.*`` attributes, and what a
    streamed answer's span keeps)."""
    if attrs.get("auto.tier") == 1:
        return True
    if any(isinstance(attrs.get(k), str) and TIER1_RESPONSE_ID.fullmatch(attrs[k]) for k in RESPONSE_ID_ATTRS):
        return True
    return any(isinstance(attrs.get(k), str) and TIER1_FINGERPRINT.fullmatch(attrs[k]) for k in FINGERPRINT_ATTRS)


__all__ = ["LLM_OPERATIONS", "REQUEST_PARAMS", "is_chat", "is_tier1", "loads_maybe", "request_body", "response", "span_kind",
           "task_messages", "tool_call", "unflatten"]
