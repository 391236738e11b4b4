"""The assistant reference agent (tier-0): one function-calling loop per request.

As its author would write it with the official client: the request goes to the model with the
four tools declared (:data:`bench.assistant.tools.TOOL_SCHEMAS`, temperature 0.2); if the model
calls a tool, the agent runs it (:data:`bench.assistant.tools.TOOL_FUNCTIONS`, recorded as tool
spans, ``cancel_order`` effectful), sends the result back and returns the model's phrasing;
otherwise it returns the model's reply. Auto only wraps it with ``@auto.task("assistant")``.
"""

from __future__ import annotations

import json

import auto
from bench.assistant.tools import TOOL_FUNCTIONS, TOOL_SCHEMAS
from bench.triage.agent import client, model_name

SYSTEM_PROMPT = (
    "[auto-bench:assistant] You are the assistant of an online shop. Use the tools: get_weather for weather "
    "questions, convert_currency for currency conversions, lookup_order for the status of an order, "
    "cancel_order to cancel an order. Answer in one sentence."
)
TEMPERATURE = 0.2


def run(request: str) -> str:
    """The loop, without the task span."""
    msgs: list[dict] = [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": request}]
    r = client().chat.completions.create(model=model_name(), temperature=TEMPERATURE, messages=msgs, tools=TOOL_SCHEMAS)
    msg = r.choices[0].message
    if not msg.tool_calls:
        return (msg.content or "").strip()
    tc = msg.tool_calls[0]
    result = TOOL_FUNCTIONS[tc.function.name](**json.loads(tc.function.arguments))
    msgs += [{"role": "assistant", "content": None, "tool_calls": [
                 {"id": tc.id, "type": "function", "function": {"name": tc.function.name,
                                                               "arguments": tc.function.arguments}}]},
             {"role": "tool", "tool_call_id": tc.id, "content": json.dumps(result)}]
    r2 = client().chat.completions.create(model=model_name(), temperature=TEMPERATURE, messages=msgs, tools=TOOL_SCHEMAS)
    return (r2.choices[0].message.content or "").strip()


def ask(request: str) -> tuple[str, None, dict[str, str]]:
    """The whole loop, unrecorded: ``(answer, None, {})`` (the family registry's ``ask``)."""
    return run(request), None, {}


@auto.task("assistant")
def assistant(request: str) -> str:
    """The recorded task: a user's request → the assistant's one-sentence answer."""
    return run(request)
