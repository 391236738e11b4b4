"""What the region bench needs to serve and judge the assistant family: host tools, step values, sites.

* :func:`host_tools` — the four tools (``cancel_order`` effectful), and a kept phrasing step when a
  compile keeps one (the agent's second model call rebuilt from the request and the tool result);
* :func:`step_values` — ``tool`` (which tool, or none), ``arguments`` (the call's arguments) and
  ``answer`` (the phrasing) of one run;
* :func:`site_step` — the step of a recorded span (the census per step).
"""

from __future__ import annotations

import json
from typing import Any, Callable

from bench.assistant import agent, tools

STEPS = ("tool", "arguments", "answer")
GENERATIVE: tuple[str, ...] = ()


def _phrase_call(request: str, **kw: Any) -> dict[str, Any]:
    """A kept phrasing step: the second model call of the loop for this request and tool result."""
    name = next((v for k, v in sorted(kw.items()) if k.startswith("tool_")), None)
    result = next((v for k, v in sorted(kw.items()) if k.startswith("result_")), None)
    msgs = [{"role": "system", "content": agent.SYSTEM_PROMPT}, {"role": "user", "content": request},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "call_host_0", "type": "function", "function": {"name": name, "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "call_host_0", "content": json.dumps(result)}]
    r = agent.client().chat.completions.create(model=agent.model_name(), temperature=agent.TEMPERATURE, messages=msgs,
                                               tools=tools.TOOL_SCHEMAS)
    return {"content": r.choices[0].message.content or ""}


def host_tools(declared: list[dict[str, Any]]) -> dict[str, Callable[..., Any]]:
    """The host tools for the declared ``tools`` of a compiled assistant.

    Raises:
        KeyError: a declared tool this family does not provide.
    """
    out: dict[str, Callable[..., Any]] = {}
    for d in declared:
        name = d["name"]
        if name in tools.TOOL_FUNCTIONS:
            out[name] = tools.TOOL_FUNCTIONS[name]
        elif d.get("kind") == "model":
            out[name] = _phrase_call
        else:
            raise KeyError(f"the assistant family provides no tool {name!r}")
    return out


def step_values(answer: Any, calls: list[dict[str, Any]] | None) -> dict[str, Any]:
    """The value of each step (:data:`STEPS`) of one run: its first tool call and its answer."""
    first = (calls or [None])[0]
    return {"tool": first["tool"] if first else None, "arguments": first["arguments"] if first else None,
            "answer": answer}


def site_step(span: dict[str, Any]) -> str | None:
    """The step of a recorded span: ``tool choice`` (the first model call), ``phrasing`` (a model
    call that sends a tool result back), ``tool:<name>`` (a tool span)."""
    if span.get("kind") == "tool":
        return f"tool:{span.get('name')}"
    if span.get("kind") == "llm":
        msgs = (span.get("input") or {}).get("messages") or []
        return "phrasing" if any(isinstance(m, dict) and m.get("role") == "tool" for m in msgs) else "tool choice"
    return None


def reference(text: str) -> tuple[Any, list[dict[str, Any]]]:
    """One unrecorded run of the reference agent: ``(answer, its tool calls)``."""
    with tools.capture_calls() as calls:
        answer = agent.run(text)
    return answer, list(calls)
