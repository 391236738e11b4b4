"""A task's recorded runs as sequences of steps: the model calls and tool calls under each task span.

:func:`read_task_traces` reads every successful task span of a task with its direct children: the
model-call attempts (grouped into one logical call by ``auto.logical_call_id``, the last attempt
kept) and the tool spans, in start order. A run whose step failed (a tool span with status
``error``, or a logical model call whose last attempt failed) is left out and counted; so is a
witness without steps (e.g. one captured by ``Store.add_witness``), which shows no step structure.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any, Union

from auto.record.template import template_messages


@dataclass(frozen=True)
class ModelStep:
    """One logical model call of a run.

    Attributes:
        span_id: the last attempt's span; site: its site; request: the request body;
        content: the assistant message text (None when it only called tools);
        tool_calls: ``[{"id", "name", "arguments" (text)}]``; cost_usd_micros: its recorded cost (µ$,
        None when unknown); template: the request's messages with the task input's values as
        ``{param}`` placeholders (:func:`auto.record.template.template_messages`).
    """

    span_id: str
    site: str
    request: dict[str, Any]
    content: str | None
    tool_calls: tuple[dict[str, Any], ...]
    cost_usd_micros: float | None
    template: Any


@dataclass(frozen=True)
class ToolStep:
    """One tool call of a run: ``name``, ``arguments`` (the tool span's input), ``result`` (its
    output), ``effects`` (``read`` / ``effect``), the model call that asked for it (or None)."""

    span_id: str
    name: str
    arguments: dict[str, Any]
    result: Any
    effects: str
    requested_by: str | None


Step = Union[ModelStep, ToolStep]


@dataclass
class TaskTrace:
    """One successful run of the task: its input, output and steps in start order."""

    trace_id: str
    span_id: str
    input: dict[str, Any]
    output: Any
    steps: list[Step] = field(default_factory=list)

    @property
    def tools(self) -> list[ToolStep]:
        return [s for s in self.steps if isinstance(s, ToolStep)]

    @property
    def models(self) -> list[ModelStep]:
        return [s for s in self.steps if isinstance(s, ModelStep)]

    def model_by_span(self, span_id: str | None) -> ModelStep | None:
        return next((s for s in self.models if s.span_id == span_id), None)


def read_task_traces(store: Any, task: str) -> tuple[list[TaskTrace], Counter]:
    """The task's successful runs with their steps, and ``Counter`` of why runs were left out.

    Reasons counted: ``"no steps"`` (a witness without child spans), ``"failed step"``,
    ``"redacted"`` (a secret was replaced in the input or output of the run or of one of its steps:
    the placeholder is never learned as a value, :func:`auto.compile.witnesses.is_redacted`).
    """
    spans = store.spans(task=task)
    children: dict[str, list[dict[str, Any]]] = defaultdict(list)
    roots = []
    for s in spans:
        if s["kind"] == "task" and s["name"] == task:
            roots.append(s)
        elif s.get("parent_span_id"):
            children[s["parent_span_id"]].append(s)
    out: list[TaskTrace] = []
    skipped: Counter = Counter()
    for root in roots:
        if root["status"] != "ok" or not isinstance(root["input"], dict):
            continue
        kids = sorted(children.get(root["span_id"], []), key=lambda s: (s["started_ns"], s["span_id"]))
        if not kids:
            skipped["no steps"] += 1
            continue
        if any(_redacted(s) for s in (root, *kids)):
            skipped["redacted"] += 1
            continue
        steps: list[Step] = []
        ok = True
        calls: dict[str, list[dict[str, Any]]] = defaultdict(list)
        order: list[tuple[int, str, Any]] = []
        for s in kids:
            if s["kind"] == "llm":
                lid = (s.get("attributes") or {}).get("auto.logical_call_id") or s["span_id"]
                if lid not in calls:
                    order.append((s["started_ns"], "llm", lid))
                calls[lid].append(s)
            elif s["kind"] == "tool":
                order.append((s["started_ns"], "tool", s))
        for _t, kind, item in order:
            if kind == "llm":
                last = sorted(calls[item], key=lambda s: (s["started_ns"], s["span_id"]))[-1]
                if last["status"] != "ok" or not isinstance(last.get("output"), dict):
                    ok = False
                    break
                o, attrs, body = last["output"], last.get("attributes") or {}, last.get("input") or {}
                tcs = tuple({"id": tc.get("id"), "name": (tc.get("function") or {}).get("name"),
                             "arguments": (tc.get("function") or {}).get("arguments")}
                            for tc in (o.get("tool_calls") or []))
                steps.append(ModelStep(last["span_id"], last.get("site") or "", body, o.get("content"), tcs,
                                       attrs.get("auto.cost_usd_micros"),
                                       template_messages(body.get("messages"), root["input"])))
            else:
                s = item
                if s["status"] != "ok" or not isinstance(s.get("input"), dict):
                    ok = False
                    break
                attrs = s.get("attributes") or {}
                steps.append(ToolStep(s["span_id"], s["name"], s["input"], s.get("output"),
                                      attrs.get("auto.tool.effects", "read"), attrs.get("auto.tool.requested_by")))
        if not ok:
            skipped["failed step"] += 1
            continue
        out.append(TaskTrace(root["trace_id"], root["span_id"], root["input"], root["output"], steps))
    return out, skipped


def _redacted(span: dict[str, Any]) -> bool:
    """Whether the recorder replaced a secret in the span's input or output (``auto.redacted``)."""
    fields = (span.get("attributes") or {}).get("auto.redacted") or ()
    return "input" in fields or "output" in fields


__all__ = ["ModelStep", "TaskTrace", "ToolStep", "read_task_traces"]
