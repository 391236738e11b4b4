"""Sites: which prompt template a model call used, so calls made from one place group together.

A model call's *site* is ``f"{task}/{span name}/{template digest}"`` (:func:`site`), where the
template digest is :func:`auto.canonical.digest` of the request's messages with the enclosing
task's string input values replaced by ``{param}`` placeholders, tool-call ids by
``{tool_call_N}``, the arguments of earlier tool calls by ``{tool_arguments_N}`` and the tool
results sent back by ``{tool_result_N}`` (:func:`template_messages`); ``task`` is ``""`` outside
any task. Two calls of one task that differ only in the task's inputs, or in what the tools
answered, therefore share a site.

A request's *shape* (:func:`request_skeleton`, :func:`shape_digest`) is what stays when every text
leaf of its messages is cut out (:func:`request_leaves`) and the parameters that do not change the
answer are dropped (:data:`NEUTRAL_PARAMS`): the model, every output-affecting parameter, the
roles and the message structure. :mod:`auto.sites` aligns the leaves of the recorded requests of
one shape to find a model-call site's fixed text and its slots.
"""

from __future__ import annotations

import re
from typing import Any

from auto.canonical import digest


def _flatten_strings(obj: Any, prefix: str = "") -> list[tuple[str, str]]:
    """``(dotted path, value)`` of every string in a JSON value."""
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


def _is_word(c: str) -> bool:
    """Whether ``c`` is a word character (what ``\\w`` matches in a ``str`` regex)."""
    return c.isalnum() or c == "_"


def replace_value(s: str, v: str, ph: str) -> str:
    """``s`` with each occurrence of ``v`` (leftmost first, not overlapping) replaced by ``ph``
    where it is not glued to word characters: when ``v`` starts with a word character the
    character before it is not one, and likewise at its end (what ``re.sub`` with
    ``(?<!\\w)v(?!\\w)`` does, without compiling a regex per value)."""
    check_pre, check_post = _is_word(v[0]), _is_word(v[-1])
    out, start, i, n = [], 0, s.find(v), len(v)
    while i >= 0:
        if (not check_pre or i == 0 or not _is_word(s[i - 1])) and (
                not check_post or i + n == len(s) or not _is_word(s[i + n])):
            out.append(s[start:i])
            out.append(ph)
            start = i + n
            i = s.find(v, start)
        else:
            i = s.find(v, i + 1)
    if not out:
        return s
    out.append(s[start:])
    return "".join(out)


def template_messages(messages: Any, task_input: dict) -> Any:
    """``messages`` with the task's string input values replaced by ``{param}`` placeholders.

    A string equal to a value becomes its placeholder; values of ≥ 4 characters are also
    replaced inside longer strings where they are not glued to surrounding word characters.
    Tool-call ids (``tool_calls[].id``, ``tool_call_id``) become ``{tool_call_N}`` by first
    appearance, since they are random per run. The ``arguments`` of a tool call in the history
    become ``{tool_arguments_N}`` and the content of a ``tool`` message ``{tool_result_N}`` (in
    order of appearance), unless a task input placeholder already covers the whole string: they
    are slots (what the tools were asked and answered), not part of the prompt. ``role`` and
    ``type`` values are kept as they are.
    """
    subs = [(v, "{" + k + "}") for k, v in _flatten_strings(task_input) if v]
    subs.sort(key=lambda kv: len(kv[0]), reverse=True)
    inner = [(v, ph) for v, ph in subs if len(v) >= 4]
    ids: dict[str, str] = {}
    counters = {"tool_arguments": 0, "tool_result": 0}

    def slot(v: Any, kind: str) -> Any:
        w = walk(v)
        if isinstance(w, str) and w.startswith("{") and w.endswith("}") and w != v and w.count("{") == 1:
            return w  # the whole string is a task input
        ph = "{%s_%d}" % (kind, counters[kind])
        counters[kind] += 1
        return ph

    def tc_id(v: Any) -> Any:
        if not isinstance(v, str):
            return v
        return ids.setdefault(v, "{tool_call_%d}" % len(ids))

    def sub(s: str) -> str:
        for v, ph in subs:
            if s == v:
                return ph
        for v, ph in inner:
            if v in s:
                s = replace_value(s, v, ph)
        return s

    def walk(obj: Any) -> Any:
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
                elif k == "content" and obj.get("role") == "tool" and v is not None:
                    out[k] = slot(v, "tool_result")
                elif k == "arguments" and "name" in obj and isinstance(v, str):
                    out[k] = slot(v, "tool_arguments")
                else:
                    out[k] = walk(v)
            return out
        return obj

    return walk(messages)


def strip_call_ids(obj: Any) -> Any:
    """``obj`` with its tool-call ids (``tool_call_id`` values, and the ``id`` of an object with a
    ``function``) replaced by ``{tool_call_N}`` in order of first appearance: the ids are random
    per run, so two runs that asked and answered the same tools compare equal."""
    ids: dict[str, str] = {}

    def walk(o: Any) -> Any:
        if isinstance(o, list):
            return [walk(v) for v in o]
        if isinstance(o, dict):
            out = {}
            for k, v in o.items():
                if isinstance(v, str) and (k == "tool_call_id" or (k == "id" and "function" in o)):
                    out[k] = ids.setdefault(v, "{tool_call_%d}" % len(ids))
                else:
                    out[k] = walk(v)
            return out
        return o

    return walk(obj)


def template_digest(messages: Any, task_input: dict) -> str:
    """``digest(template_messages(messages, task_input))`` (``"sha256:<hex>"``)."""
    return digest(template_messages(messages, task_input))


def site(task: str | None, name: str, tdigest: str) -> str:
    """The site of a model call: ``f"{task or ''}/{name}/{tdigest}"``."""
    return f"{task or ''}/{name}/{tdigest}"


# ----------------------------------------------------------------------------- request shapes

NEUTRAL_PARAMS = frozenset({
    "messages", "stream", "stream_options", "user", "metadata", "store", "service_tier",
    "prompt_cache_key", "safety_identifier",
})
"""Request-body keys that do not change what a model call answers: transport (``stream``,
``stream_options``), bookkeeping (``user``, ``metadata``, ``store``, ``service_tier``,
``prompt_cache_key``, ``safety_identifier``), and ``messages`` (described by the leaves). Every
other key (``model``, ``temperature``, ``top_p``, ``tools``, ``tool_choice``, ``response_format``,
``n``, ``seed``, ``stop``, ``max_tokens``, ``logit_bias``, ``reasoning_effort``, and any key not
named here) is part of a request's shape, so requests that differ in one are different sites."""

STRUCTURAL_KEYS = frozenset({"role", "type", "name", "tool_call_id", "id"})
"""Message keys whose values are structure, not text: kept in the skeleton, never slots."""

LEAF = "\x00leaf"
"""What a text leaf becomes in a request skeleton."""


def _is_tool_call_id(key: str, parent: dict) -> bool:
    return key == "tool_call_id" or (key == "id" and "function" in parent)


def request_leaves(messages: Any) -> list[tuple[str, str]]:
    """``(path, text)`` of every text leaf of a request's ``messages``, in document order.

    A leaf is a string that is not under a structural key (:data:`STRUCTURAL_KEYS`): message
    contents, content-part texts, tool-call arguments in the history, refusals. Paths are dotted
    (``"1.content"``, ``"0.content.2.text"``, ``"3.tool_calls.0.function.arguments"``).
    """
    out: list[tuple[str, str]] = []

    def walk(obj: Any, path: str) -> None:
        if isinstance(obj, str):
            out.append((path, obj))
        elif isinstance(obj, list):
            for i, v in enumerate(obj):
                walk(v, f"{path}.{i}" if path else str(i))
        elif isinstance(obj, dict):
            for k, v in obj.items():
                if k in STRUCTURAL_KEYS:
                    continue
                walk(v, f"{path}.{k}" if path else str(k))

    if isinstance(messages, list):
        walk(messages, "")
    return out


def request_skeleton(body: dict) -> dict:
    """The shape of a request: ``body`` without :data:`NEUTRAL_PARAMS`, plus ``messages`` with
    every text leaf replaced by :data:`LEAF` and tool-call ids by ``{tool_call_N}`` (by first
    appearance; they are random per run). Requests with equal skeletons differ only in text."""
    ids: dict[str, str] = {}

    def walk(obj: Any) -> Any:
        if isinstance(obj, str):
            return LEAF
        if isinstance(obj, list):
            return [walk(v) for v in obj]
        if isinstance(obj, dict):
            out = {}
            for k, v in obj.items():
                if _is_tool_call_id(k, obj) and isinstance(v, str):
                    out[k] = ids.setdefault(v, "{tool_call_%d}" % len(ids))
                elif k in STRUCTURAL_KEYS:
                    out[k] = v
                else:
                    out[k] = walk(v)
            return out
        return obj

    shape = {k: v for k, v in body.items() if k not in NEUTRAL_PARAMS}
    shape["messages"] = walk(body.get("messages"))
    return shape


def shape_digest(body: dict) -> str:
    """``digest(request_skeleton(body))`` (``"sha256:<hex>"``)."""
    return digest(request_skeleton(body))
