"""Tool results as the model saw them, on a function-calling agent written apart from the one of
``test_region_tool_messages``: a stock checker whose tool returns a number or an object, sent back
as ``json.dumps(result)``; the model's reply quotes the tool message as it received it. The answer
must compile as a template over the tool's result (not a per-input memo), and the region must
answer requests never recorded at tier-1 with the agent's own answer."""

from __future__ import annotations

import json
import random
import re

import pytest

import auto
from auto.compile import compile_task
from auto.gate import Contract
from auto.store import Store
from auto_runtime import Artifact, TieredTask

from openai_mock import client as mock_client
from openai_mock import completion

SKUS = ("LAMP", "DESK", "SOFA", "RUG", "SHELF", "STOOL", "MIRROR")
RELAXED = dict(min_witnesses=20, program_min_agreement=0.8, program_min_agreement_ci95_low=0.6)
FRAMES = ("How many {} do you have?", "is the {} in stock", "Stock check: {}", "any {} left? thanks")


def stock_count(sku: str) -> int:
    return (sum(map(ord, sku)) * 7) % 23


def stock_record(sku: str) -> dict:
    n = stock_count(sku)
    return {"sku": sku, "count": n, "warehouse": ("north", "south")[n % 2]}


def _tools(name: str) -> list[dict]:
    return [{"type": "function", "function": {"name": name, "parameters": {
        "type": "object", "properties": {"sku": {"type": "string"}}, "required": ["sku"]}}}]


def make_agent(task: str, kind: str):
    name = "stock_count" if kind == "number" else "stock_record"
    fn = stock_count if kind == "number" else stock_record
    tool = auto.tool(name)(fn)

    def upstream(body: dict, _request: object) -> dict:
        msgs = body["messages"]
        t = [m for m in msgs if m.get("role") == "tool"]
        if t:
            return completion({"content": f"The inventory system says: {t[-1]['content']}"})
        m = re.search(r"[A-Z]{3,}", msgs[-1]["content"])
        return completion({"content": None, "tool_calls": [{"id": "call_7", "type": "function", "function": {
            "name": name, "arguments": json.dumps({"sku": m.group(0) if m else ""})}}]})

    client = mock_client(upstream)

    def run(q: str) -> str:
        msgs = [{"role": "system", "content": "You are the stock assistant of a furniture shop."},
                {"role": "user", "content": q}]
        r = client.chat.completions.create(model="gpt-4o-mini", messages=msgs, tools=_tools(name))
        tc = r.choices[0].message.tool_calls[0]
        result = tool(**json.loads(tc.function.arguments))
        msgs += [{"role": "assistant", "content": None, "tool_calls": [{"id": tc.id, "type": "function", "function": {
                     "name": tc.function.name, "arguments": tc.function.arguments}}]},
                 {"role": "tool", "tool_call_id": tc.id, "content": json.dumps(result)}]
        return client.chat.completions.create(model="gpt-4o-mini", messages=msgs).choices[0].message.content

    return auto.task(task)(run), run, fn


def _requests(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [f"(store {rng.randint(1, 999)}) " + rng.choice(FRAMES).format(rng.choice(SKUS)) for _ in range(n)]


@pytest.mark.parametrize("kind", ["number", "object"])
def test_a_held_back_agent_quoting_its_json_tool_message_compiles_as_a_template(tmp_path, kind):
    task = f"stock_{kind}"
    recorded, plain, fn = make_agent(task, kind)
    store = Store(tmp_path / "s.sqlite")
    with auto.recording(store):
        for _ in range(2):
            for q in _requests(40, 0):
                recorded(q)
    out = compile_task(store, task, contract=Contract(task=task, **RELAXED), out_path=tmp_path / "g.wasm")
    m = out.manifest
    assert m["compiled_as"] == "region", out.reason
    assert {v["label"]: v["how"] for v in m["model"]["values"]}["answer"] == "template"
    art = Artifact.load(out.wasm)
    tt = TieredTask(art, lambda inp: plain(inp["q"]), tools={fn.__name__: fn})
    fresh = _requests(37, 1)
    res = [tt({"q": q}) for q in fresh]
    assert sum(r.tier == "tier-1" for r in res) == len(fresh)
    assert [r.answer for r in res] == [plain(q) for q in fresh]
    store.close()
