"""Response families of the simulated reference model: plugins keyed by a system-prompt marker.

A family is selected when its ``marker`` (e.g. ``"[auto-bench:triage]"``) appears in a system
(or developer) message of the request. Its responder is called as
``respond(messages, temperature, rng, request=body)`` and returns either

* a ``str`` — the assistant message content, or
* a list of tool calls ``[{"name": str, "arguments": str (JSON text)}, ...]``.

Register new families with :func:`register_family`. Requests matching no marker get
:func:`default_respond`. Built in:

* ``[auto-bench:triage]`` — :mod:`auto.sim.triage` (support-ticket labels, calibrated noise);
* ``[auto-bench:extraction]`` — :mod:`auto.sim.extraction` (customer email → JSON record);
* ``[auto-bench:routing]`` — :mod:`auto.sim.routing` (purchase request → approve/review/reject);
* ``[auto-sim:tools]`` — calls every tool of the request once, arguments synthesized from each
  tool's JSON schema (exercises several tool calls in one message).
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from typing import Any, Callable

from auto.sim import extraction, routing, triage

Responder = Callable[..., Any]


@dataclass(frozen=True)
class Family:
    """A response family: ``name``, the system-prompt ``marker`` that selects it, ``respond``."""

    name: str
    marker: str
    respond: Responder


FAMILIES: dict[str, Family] = {}
"""Registered families by marker."""


def register_family(name: str, marker: str, respond: Responder) -> Family:
    """Register (or replace) the family selected by ``marker``; returns it."""
    fam = Family(name, marker, respond)
    FAMILIES[marker] = fam
    return fam


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(p.get("text", "") for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    return ""


def find_family(messages: list[dict]) -> Family | None:
    """The family whose marker appears in a system/developer message (first registered wins)."""
    system = " ".join(_text(m.get("content")) for m in messages if isinstance(m, dict) and m.get("role") in ("system", "developer"))
    for marker, fam in FAMILIES.items():
        if marker in system:
            return fam
    return None


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


def _last_user(messages: list[dict]) -> str:
    users = [_text(m.get("content")) for m in messages if isinstance(m, dict) and m.get("role") == "user"]
    return users[-1] if users else ""


def tools_respond(messages: list[dict], temperature: float, rng: random.Random, request: dict | None = None) -> Any:
    """Call every function tool of the request once (in order), or reply in text if none."""
    calls = []
    for t in (request or {}).get("tools") or []:
        fn = t.get("function") if isinstance(t, dict) else None
        if fn and fn.get("name"):
            args = synthesize_arguments(fn.get("parameters"), _last_user(messages))
            calls.append({"name": fn["name"], "arguments": json.dumps(args, sort_keys=True)})
    return calls or "no tools to call (simulated)"


def default_respond(messages: list[dict], temperature: float, rng: random.Random, request: dict | None = None) -> Any:
    """Fallback: a fixed simulated reply quoting the start of the last user message; a call of
    the forced tool when ``tool_choice`` names one or is ``"required"``."""
    choice = (request or {}).get("tool_choice")
    tools = (request or {}).get("tools") or []
    if tools and (choice == "required" or isinstance(choice, dict)):
        name = (choice.get("function") or {}).get("name") if isinstance(choice, dict) else None
        for t in tools:
            fn = t.get("function") or {}
            if name is None or fn.get("name") == name:
                args = synthesize_arguments(fn.get("parameters"), _last_user(messages))
                return [{"name": fn.get("name"), "arguments": json.dumps(args, sort_keys=True)}]
    quote = " ".join(_last_user(messages).split())[:200]
    return f"Simulated reply (auto-sim-1) to: {quote}"


register_family("triage", triage.MARKER, triage.respond)
register_family("extraction", extraction.MARKER, extraction.respond)
register_family("routing", routing.MARKER, routing.respond)
register_family("tools", "[auto-sim:tools]", tools_respond)
