"""How the simulated reference model picks the answer to a request: the family responders, then
its own built-in ones.

A bench family (:data:`bench.families.FAMILIES`) is selected when its ``marker`` (e.g.
``"[auto-bench:triage]"``) appears in a system (or developer) message of the request; its
responder is called as ``respond(messages, temperature, rng, request=body)`` and returns either

* a ``str`` — the assistant message content, or
* a list of tool calls ``[{"name": str, "arguments": str (JSON text)}, ...]``.

The families are tried in registration order (triage, extraction, routing; add one with
:func:`bench.families.register_family`). Built into the simulator, after them:

* ``[auto-sim:tools]`` (:data:`TOOLS_MARKER`) — :func:`tools_respond`: calls every tool of the
  request once, arguments synthesized from each tool's JSON schema (exercises several tool
  calls in one message).

Any other request is not modeled: :func:`find_responder` returns None and the server refuses it
(HTTP 400, code ``unsupported_prompt``, the message of :func:`unmodeled_message`). A simulator that
answered it anyway (say, by echoing the prompt) would look perfectly deterministic to the census
and be memorized by a compile.
"""

from __future__ import annotations

import json
import random
from typing import Any

from bench.chat import last_user_text, system_text
from bench.families import FAMILIES, Responder, find_family

TOOLS_MARKER = "[auto-sim:tools]"


def find_responder(messages: list[dict]) -> Responder | None:
    """The responder for a request's ``messages``: the family whose marker is in a system message,
    else :func:`tools_respond` when :data:`TOOLS_MARKER` is, else None (not modeled)."""
    fam = find_family(messages)
    if fam is not None:
        return fam.respond
    if TOOLS_MARKER in system_text(messages):
        return tools_respond
    return None


def unmodeled_message(model: str) -> str:
    """The refusal of a request the simulator does not model: which prompts it models (the
    markers of the registered families and :data:`TOOLS_MARKER`) and how to use a real endpoint."""
    families = ", ".join(f"{name} ({fam.marker})" for name, fam in FAMILIES.items())
    return (f"{model} is a simulated reference model: it answers only the AUTO-BENCH prompts it models, "
            f"chosen by a marker in a system message: {families}, and {TOOLS_MARKER} (calls every tool of the "
            f"request); this request has none of them. To run your own agent, point it at a real "
            f"OpenAI-compatible endpoint: set OPENAI_BASE_URL (e.g. https://api.openai.com/v1 or a local "
            f"server) and OPENAI_API_KEY.")


def synthesize_arguments(schema: dict | None, text: str) -> dict:
    """Arguments satisfying a JSON schema's ``properties`` (strings get ``text``, enums their first value)."""

    def value(s: dict) -> Any:
        if not isinstance(s, dict):
            return None
        if s.get("enum"):
            return s["enum"][0]
        t = s.get("type")
        if isinstance(t, list):
            t = next((x for x in t if x != "null"), "string")
        if t == "string":
            return text
        if t == "integer":
            return 1
        if t == "number":
            return 1.0
        if t == "boolean":
            return True
        if t == "array":
            return []
        if t == "object":
            return synthesize_arguments(s, text)
        return text

    props = (schema or {}).get("properties") or {}
    return {k: value(v) for k, v in props.items()}


def tools_respond(messages: list[dict], temperature: float, rng: random.Random, request: dict | None = None) -> Any:
    """Call every function tool of the request once (in order), or reply in text if none."""
    calls = []
    for t in (request or {}).get("tools") or []:
        fn = t.get("function") if isinstance(t, dict) else None
        if fn and fn.get("name"):
            args = synthesize_arguments(fn.get("parameters"), last_user_text(messages))
            calls.append({"name": fn["name"], "arguments": json.dumps(args, sort_keys=True)})
    return calls or "no tools to call (simulated)"
