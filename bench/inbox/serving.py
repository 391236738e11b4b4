"""What the region bench needs to serve and judge the inbox family: host tools, step values, sites.

* :func:`host_tools` — the host's implementations of the tools a compiled inbox declares: the
  routing table's ``lookup_team`` and the summary step kept as a model call
  (``model:inbox.summary``: the agent's own summary prompt, through the same client);
* :func:`step_values` — the value of each step in one answer: ``classify`` (category), ``lookup``
  (team and queue), ``priority``, ``summary``;
* :func:`site_step` — which step a recorded span belongs to (the census per step);
* :data:`PUBLISHED` — the published reference system's census per step and cost per run.
"""

from __future__ import annotations

from typing import Any, Callable

from bench.inbox import agent, oracle, tools

STEPS = ("classify", "lookup", "priority", "summary")
GENERATIVE = ("summary",)
PUBLISHED = {"census": {"classify": 1.0, "priority": 0.925, "lookup": 1.0, "summary": 0.175},
             "cost_usd_micros_per_run": 188.0, "paid_calls_per_run": 3}
"""The published reference system's inbox figures (arXiv 2607.04542): witnessed-deterministic share
per step, and µ$ per run with three paid calls."""


def host_tools(declared: list[dict[str, Any]]) -> dict[str, Callable[..., Any]]:
    """The host tools for the declared ``tools`` of a compiled inbox.

    Raises:
        KeyError: a declared tool this family does not provide.
    """
    out: dict[str, Callable[..., Any]] = {}
    for d in declared:
        name = d["name"]
        if name == "lookup_team":
            out[name] = tools.lookup_team
        elif d.get("kind") == "model" and name.endswith(".summary"):
            out[name] = lambda ticket: {"content": agent.summary_content(ticket)}
        else:
            raise KeyError(f"the inbox family provides no tool {name!r}")
    return out


def step_values(answer: Any, calls: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The value of each step (:data:`STEPS`) in an answer of the inbox task."""
    a = answer if isinstance(answer, dict) else {}
    return {"classify": a.get("category"), "lookup": [a.get("team"), a.get("queue")], "priority": a.get("priority"),
            "summary": a.get("summary")}


def site_step(span: dict[str, Any]) -> str | None:
    """The step of a recorded span: a model call by the step named in its system prompt, the
    ``lookup_team`` tool span, else None."""
    if span.get("kind") == "tool":
        return "lookup" if span.get("name") == "lookup_team" else None
    if span.get("kind") == "llm":
        return oracle.step_of((span.get("input") or {}).get("messages") or [])
    return None


def reference(text: str) -> tuple[Any, list[dict[str, Any]]]:
    """One unrecorded run of the reference agent: ``(answer, tool calls)``."""
    return agent.inbox.__wrapped__(text), []  # type: ignore[attr-defined]
