"""Tool results as the model saw them: an answer that quotes the tool message is a template over the
tool's result, whether the agent sent the result JSON-encoded (``json.dumps(result)``: the model saw
``"processing"`` with its quotes) or as it is.

A function-calling agent written with the official client (a scripted upstream, no simulator):
the model asks for ``order_status`` with the order number of the request, the tool returns a
text, the agent sends it back as the tool message, and the model's reply quotes that message.
Before template parts over a tool's result existed, the answer compiled only as a per-input memo
and the region was refused on held-out inputs (0 of 8 here).
"""

from __future__ import annotations

import json
import random
import re

import pytest

import auto
from auto.compile import compile_task
from auto.errors import CompileError
from auto.gate import Contract
from auto.models import region as R
from auto.store import Store
from auto_runtime import Artifact, TieredTask

from openai_mock import client as mock_client
from openai_mock import completion

# a quote, a backslash and a tab: the JSON encoding escapes them, and the artifact must write the
# same bytes as the interpreter (the region gate checks every witness)
STATUSES = ("processing", "shipped", "in transit", 'held: "address check"', "returned \\ refunded\tcredit")
TOOLS = [{"type": "function", "function": {"name": "order_status", "parameters": {
    "type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]}}}]
FRAMES = ("Where is my order {}?", "Status of order {} please", "hi, any news on {}?", "Can you check {} for me")
RELAXED = dict(min_witnesses=20, program_min_agreement=0.8, program_min_agreement_ci95_low=0.6)


def status_of(order_id: str) -> str:
    return STATUSES[int(order_id) % len(STATUSES)]


@auto.tool("order_status")
def order_status(order_id: str) -> str:
    return status_of(order_id)


def _upstream(body: dict, _request: object) -> dict:
    msgs = body["messages"]
    tool = [m for m in msgs if m.get("role") == "tool"]
    if tool:  # the reply quotes the tool message as the model received it
        return completion({"content": f"Here is what I found: {tool[-1]['content']}"})
    m = re.search(r"\d{5}", msgs[-1]["content"])
    return completion({"content": None, "tool_calls": [{"id": "call_1", "type": "function", "function": {
        "name": "order_status", "arguments": json.dumps({"order_id": m.group(0) if m else ""})}}]})


def make_agent(task: str, encode: bool):
    client = mock_client(_upstream)

    def run(q: str) -> str:
        msgs = [{"role": "system", "content": "You answer questions about orders."}, {"role": "user", "content": q}]
        r = client.chat.completions.create(model="gpt-4o-2024-08-06", messages=msgs, tools=TOOLS)
        tc = r.choices[0].message.tool_calls[0]
        result = order_status(**json.loads(tc.function.arguments))
        msgs += [{"role": "assistant", "content": None, "tool_calls": [{"id": tc.id, "type": "function", "function": {
                     "name": tc.function.name, "arguments": tc.function.arguments}}]},
                 {"role": "tool", "tool_call_id": tc.id, "content": json.dumps(result) if encode else result}]
        r2 = client.chat.completions.create(model="gpt-4o-2024-08-06", messages=msgs)
        return r2.choices[0].message.content

    return auto.task(task)(run), run


def _requests(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [rng.choice(FRAMES).format(rng.randint(10000, 99999)) for _ in range(n)]


@pytest.mark.parametrize("encode", [True, False], ids=["json-encoded", "as-is"])
def test_the_answer_is_a_template_over_the_tool_message_as_sent(tmp_path, encode):
    task = "status_json" if encode else "status_raw"
    recorded, plain = make_agent(task, encode)
    store = Store(tmp_path / "s.sqlite")
    with auto.recording(store):
        for _ in range(2):
            for q in _requests(40, 0):
                recorded(q)
    out = compile_task(store, task, contract=Contract(task=task, **RELAXED), out_path=tmp_path / "g.wasm")
    m = out.manifest
    assert m["compiled_as"] == "region"
    assert {v["label"]: v["how"] for v in m["model"]["values"]}["answer"] == "template"
    concat = next(s for s in R.from_json(m["model"]["region"]).steps if isinstance(s, R.Concat))
    assert concat.parts[0] == ("text", "Here is what I found: ")
    assert [k for k, _p in concat.parts] == ["text", "json" if encode else "var"]
    assert m["parity"]["fields"]["answer"]["rate"] == 1.0  # held-out runs: the template follows the tool

    # served on requests never recorded, with the live tool: tier-1 and the agent's own answer
    art = Artifact.load(out.wasm)
    tt = TieredTask(art, lambda inp: plain(inp["q"]), tools={"order_status": status_of})
    fresh = _requests(20, 1)
    res = [tt({"q": q}) for q in fresh]
    assert [r.tier for r in res] == ["tier-1"] * len(fresh)
    assert [r.answer for r in res] == [plain(q) for q in fresh]
    store.close()


def test_template_parts_render_as_the_interpreter_and_survive_the_json_form():
    region = R.Region("q", (R.Call("r", "t", (("x", "q"),)), R.Concat("a", (("text", "<"), ("json", "r"), ("var", "r"))),
                            R.Output("a")))
    got = R.run_region(region, {"q": "x"}, lambda _tool, _args: 'say "hi"\n')
    assert got == {"answer": '<"say \\"hi\\"\\n"say "hi"\n', "deopt": False}
    assert R.from_json(json.loads(json.dumps(R.to_json(region)))) == region
    with pytest.raises(CompileError, match="unknown template part kind 'html'"):
        R.from_json({**R.to_json(region), "steps": [{"op": "concat", "name": "a", "parts": [["html", "r"]]}]})
