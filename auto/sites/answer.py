"""A model-call site's answer: what of a recorded completion a compiled site must reproduce.

From the recorded output of a model-call span (:mod:`auto.record.completion`:
``{"content", "tool_calls", "refusal", "finish_reason"}``, plus ``"choices"`` when ``n > 1``),
:func:`site_answer` keeps what the caller reads and drops what is random per call:

* a plain reply (no tool calls, no refusal, finish reason ``stop``) is its ``content`` string
  (``None`` when the content was null);
* anything else is ``{"content", "tool_calls", "refusal", "finish_reason"}`` with each tool call
  as ``{"name", "arguments"}`` (the call ids are random per run and left out);
* several choices are the list of each choice's answer, in index order.

:func:`answer_choices` is the inverse a server needs: the assistant message and finish reason of
each choice of an answer, with fresh tool-call ids.
"""

from __future__ import annotations

import os
from typing import Any

PLAIN_FINISH = "stop"


def _one(choice: dict) -> Any:
    tcs = choice.get("tool_calls")
    if not tcs and choice.get("refusal") is None and choice.get("finish_reason") in (PLAIN_FINISH, None):
        return choice.get("content")
    calls = None
    if tcs:
        calls = [{"name": (t.get("function") or {}).get("name"), "arguments": (t.get("function") or {}).get("arguments")}
                 for t in tcs if isinstance(t, dict)]
    return {"content": choice.get("content"), "tool_calls": calls, "refusal": choice.get("refusal"),
            "finish_reason": choice.get("finish_reason")}


def site_answer(output: Any) -> Any:
    """The site's answer of one recorded model-call output (see the module docstring); None for
    a span without output."""
    if not isinstance(output, dict):
        return None
    choices = output.get("choices")
    if isinstance(choices, list) and len(choices) > 1:
        return [_one(c) if isinstance(c, dict) else None for c in choices]
    return _one(output)


def _message(answer: Any) -> tuple[dict, str]:
    if isinstance(answer, dict):
        msg: dict[str, Any] = {"role": "assistant", "content": answer.get("content"), "refusal": answer.get("refusal")}
        calls = answer.get("tool_calls")
        if calls:
            msg["tool_calls"] = [{"id": "call_auto_" + os.urandom(9).hex(), "type": "function",
                                  "function": {"name": c.get("name"), "arguments": c.get("arguments") or ""}}
                                 for c in calls if isinstance(c, dict)]
        finish = answer.get("finish_reason") or ("tool_calls" if calls else PLAIN_FINISH)
        return msg, finish
    return {"role": "assistant", "content": answer if isinstance(answer, str) else None, "refusal": None}, PLAIN_FINISH


def answer_choices(answer: Any) -> list[tuple[dict, str]]:
    """``[(assistant message, finish reason)]`` per choice of a site answer (one unless the
    answer is a list of choices); tool calls get fresh ids ``call_auto_<18 hex>``."""
    if isinstance(answer, list):
        return [_message(a) for a in answer]
    return [_message(answer)]
