"""Recording tool use: linked spans (which model call asked for which tool, with which arguments,
which result went back), declared effects, the effect journal, tool slots in templates."""

from __future__ import annotations

import json

import openai
import pytest

import auto
from auto.errors import ArgumentError
from auto.store import Store
from auto_runtime.tools import effect_journal
from bench.sim import SimServer

TOOLS = [
    {"type": "function", "function": {"name": "lookup_order", "parameters": {
        "type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]}}},
]
SYSTEM = "[auto-sim:tools] Use the tools."


@pytest.fixture(scope="module")
def sim():
    with SimServer(seed=5, error_rate=0.0) as s:
        yield s


RAN: list = []


@auto.tool("lookup_order")
def lookup_order(order_id: str) -> dict:
    RAN.append(order_id)
    return {"order_id": order_id, "status": "shipped"}


@auto.tool("cancel_order", effects="effect")
def cancel_order(order_id: str) -> dict:
    RAN.append(("cancel", order_id))
    return {"order_id": order_id, "cancelled": True}


def agent(client, q: str) -> str:
    with auto.task("assist", input={"q": q}) as t:
        msgs = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": q}]
        r = client.chat.completions.create(model="auto-sim-1", messages=msgs, tools=TOOLS)
        tc = r.choices[0].message.tool_calls[0]
        result = lookup_order(**json.loads(tc.function.arguments))
        msgs += [{"role": "assistant", "content": None, "tool_calls": [
                     {"id": tc.id, "type": "function", "function": {"name": tc.function.name,
                                                                   "arguments": tc.function.arguments}}]},
                 {"role": "tool", "tool_call_id": tc.id, "content": json.dumps(result)}]
        r2 = client.chat.completions.create(model="auto-sim-1", messages=msgs)
        t.output = r2.choices[0].message.content
    return t.output


def test_tool_spans_are_linked_to_the_model_calls(sim, tmp_path):
    client = openai.OpenAI(base_url=sim.base_url, api_key="sk-test-key", max_retries=0)
    with auto.recording(tmp_path / "s.db"):
        agent(client, "where is order A-17?")
        agent(client, "where is order B-22?")
    st = Store(tmp_path / "s.db")
    tools = st.spans(kind="tool")
    llms = sorted(st.spans(kind="llm"), key=lambda s: s["started_ns"])
    assert len(tools) == 2 and len(llms) == 4
    for tool in tools:
        a = tool["attributes"]
        asked = next(s for s in llms if s["span_id"] == a["auto.tool.requested_by"])
        call = asked["output"]["tool_calls"][0]
        assert a["gen_ai.tool.call.id"] == call["id"] and a["gen_ai.tool.name"] == "lookup_order"
        assert a["gen_ai.operation.name"] == "execute_tool" and a["auto.tool.effects"] == "read"
        assert a["auto.tool.arguments_match"] is True
        assert tool["input"] == json.loads(call["function"]["arguments"])
        answered = next(s for s in llms if s["started_ns"] > tool["started_ns"] and s["trace_id"] == tool["trace_id"])
        assert answered["attributes"]["auto.tool_results"] == [
            {"tool_call_id": call["id"], "tool_span_id": tool["span_id"], "matches_result": True}]
    # the second model call's site does not depend on what the tool answered or was asked
    second = [s for s in llms if "auto.tool_results" in s["attributes"]]
    assert len({s["site"] for s in second}) == 1
    st.close()


def test_effects_are_declared_and_validated():
    assert cancel_order.__auto_tool__ == {"name": "cancel_order", "effects": "effect"}
    assert lookup_order.__auto_tool__["effects"] == "read"
    with pytest.raises(ArgumentError, match="effects"):
        auto.tool("x", effects="maybe")


def test_a_journaled_effect_is_not_repeated(tmp_path):
    RAN.clear()
    with effect_journal([{"tool": "cancel_order", "arguments": {"order_id": "A-1"}, "result": {"from": "journal"}}]):
        assert cancel_order("A-1") == {"from": "journal"}
        assert cancel_order("A-1") == {"order_id": "A-1", "cancelled": True}  # the journal answers once
        assert cancel_order(order_id="B-2") == {"order_id": "B-2", "cancelled": True}
    assert RAN == [("cancel", "A-1"), ("cancel", "B-2")]
