"""The region IR: its interpreter and its WebAssembly lowering agree byte for byte, tools cross the
boundary as canonical JSON, and the commit comes before every effect."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from auto.models import region as R
from auto.canonical import canonical_json
from auto.codegen.region_lower import compile_region
from auto.emit import emit
from auto.errors import CompileError
from auto.models.program import ast as A
from auto_runtime import Artifact, TieredTask
from auto_runtime.tools import Replay

TICKET = "ticket"
CATEGORY = A.If(((A.Contains(A.Lower(A.Field(TICKET)), "refund"), A.Const("billing")),
                 (A.Contains(A.Lower(A.Field(TICKET)), "password"), A.Const("account"))), A.Deopt())
PRIORITY = A.If(((A.Contains(A.Lower(A.Field(TICKET)), "urgent"), A.Const("P1")),), A.Const("P3"))
OBJ = {"type": "object"}


def inbox_region() -> R.Region:
    return R.Region(TICKET, (
        R.Bind("category", TICKET, CATEGORY),
        R.Call("r_team", "lookup_team", (("category", "category"),)),
        R.Get("team", "r_team", "team"),
        R.Get("size", "r_team", "size"),
        R.Bind("priority", TICKET, PRIORITY),
        R.Commit(("category", "priority", "team")),
        R.Call("r_sum", "model:summary", (("ticket", TICKET),)),
        R.Get("summary", "r_sum", "content"),
        R.Bind("summary_s", "summary", A.Strip(A.Field("summary"))),
        R.Const("n", 2.5),
        R.Concat("line", (("text", "Team "), ("var", "team"), ("text", " ("), ("var", "size"), ("text", "): "),
                          ("var", "summary_s"))),
        R.Output((("category", "category"), ("line", "line"), ("priority", "priority"), ("team", "team"),
                  ("n", "n"))),
    ))


def assistant_region() -> R.Region:
    tool = A.If(((A.Contains(A.Lower(A.Field("request")), "weather"), A.Const("get_weather")),
                 (A.Contains(A.Lower(A.Field("request")), "cancel"), A.Const("cancel_order"))), A.Deopt())
    city = A.Record((("city", A.Search(A.Field("request"), r"in ([A-Z][a-z]+)", 1)),))
    oid = A.Search(A.Field("request"), r"[A-Z]-\d+", 0)
    order = A.If(((A.IsNull(oid), A.Deopt()),), A.Record((("order_id", oid),)))
    return R.Region("request", (
        R.Bind("tool", "request", tool),
        R.Branch("tool", (
            ("get_weather", (R.Bind("args", "request", city), R.Call("res", "get_weather", "args"),
                             R.Commit(("args", "tool")),
                             R.Get("temp", "res", "temp_c"), R.Get("sky", "res", "sky"),
                             R.Concat("answer", (("text", "It is "), ("var", "temp"), ("text", "°C and "),
                                                 ("var", "sky"), ("text", "."))),
                             R.Output("answer"))),
            ("cancel_order", (R.Bind("args", "request", order), R.Commit(("args", "tool")),
                              R.Call("res", "cancel_order", "args"), R.Get("ok", "res", "cancelled"),
                              R.Output((("cancelled", "ok"), ("order", "args"))))),
        )),
    ))


DECLS = {
    "lookup_team": {"effects": "read"}, "model:summary": {"effects": "read", "kind": "model"},
    "get_weather": {"effects": "read"}, "cancel_order": {"effects": "effect"},
}


def artifact(region: R.Region, task: str = "inbox") -> Artifact:
    tools = [{"name": n, "kind": DECLS[n].get("kind", "tool"), "effects": DECLS[n]["effects"], "arguments": OBJ,
              "result": OBJ} for n in region.tool_names()]
    manifest = {"format": "auto.artifact/1", "task": task, "generation": 1, "compiled_as": "region",
                "interface": {"input": {"type": "object", "properties": {region.field: {"type": "string"}},
                                        "required": [region.field]}, "output": {}},
                "abi": {"exports": ["memory", "alloc", "run"], "encoding": "canonical-json"},
                "capabilities": [{"module": "auto", "name": n} for n in ("commit", "tool_call", "tool_result")],
                "tools": tools, "tool_budget": {"calls": 4, "wall_ms": 2000}, "guard": {"method": "program"}}
    return Artifact.load(emit(compile_region(region), manifest))


def lookup_team(category):
    return {"team": {"billing": "Payments \"Ops\"", "account": "Identité\n"}[category], "size": 4}


def summary(ticket):
    return {"content": "  " + ticket[:20].upper() + "\t\u0001 "}


def get_weather(city):
    return {"city": city, "temp_c": 21.5 if city != "Oslo" else -3, "sky": "sunny"}


def cancel_order(order_id):
    return {"order_id": order_id, "cancelled": True}


LIVE = {"lookup_team": lookup_team, "model:summary": summary, "get_weather": get_weather, "cancel_order": cancel_order}


def interp(region: R.Region, inp: dict) -> dict:
    return R.run_region(region, inp, lambda t, a: json.loads(canonical_json(LIVE[t](**a))))


@pytest.mark.parametrize("ticket", [
    "I need a refund please", "URGENT: reset my password", "hello there", "refund — café ☕ urgent",
    "", "password \"quoted\" \\ back", "refund\nnew line",
])
def test_inbox_region_artifact_equals_interpreter(ticket):
    region = inbox_region()
    art = artifact(region)
    art.bind_tools({n: LIVE[n] for n in region.tool_names()})
    got = art.call({TICKET: ticket})
    want = interp(region, {TICKET: ticket})
    assert canonical_json(got) == canonical_json(want)


@pytest.mark.parametrize("request_text", [
    "What is the weather in Paris today?", "weather in Oslo", "please cancel order B-1234", "cancel it",
    "weather please", "tell me a joke",
])
def test_branching_region_artifact_equals_interpreter(request_text):
    region = assistant_region()
    art = artifact(region, "assistant")
    art.bind_tools({n: LIVE[n] for n in region.tool_names()})
    assert canonical_json(art.call({"request": request_text})) == canonical_json(interp(region, {"request": request_text}))


@settings(max_examples=40, deadline=None)
@given(st.text(max_size=40))
def test_region_agrees_on_generated_tickets(text):
    region = inbox_region()
    art = artifact(region)
    art.bind_tools({n: LIVE[n] for n in region.tool_names()})
    ticket = "refund " + text
    assert canonical_json(art.call({TICKET: ticket})) == canonical_json(interp(region, {TICKET: ticket}))


def test_effect_runs_only_after_the_commit_and_not_on_a_declined_call():
    region = assistant_region()
    art = artifact(region, "assistant")
    ran: list = []
    tools = {**LIVE, "cancel_order": lambda order_id: ran.append(order_id) or {"order_id": order_id, "cancelled": True}}
    task = TieredTask(art, lambda i: "REF", tools={n: tools[n] for n in region.tool_names()})
    ok = task({"request": "cancel order A-7"})
    assert ok.tier == "tier-1" and ok.answer == {"cancelled": True, "order": {"order_id": "A-7"}} and ran == ["A-7"]
    # a program deopt (no order id) happens before the commit: no effect
    res = task({"request": "cancel my thing"})
    assert res.tier == "tier-0" and ran == ["A-7"]
    # tightened: the artifact does not even run
    task.tighten("test")
    assert task({"request": "cancel order A-8"}).tier == "tier-0" and ran == ["A-7"]


def test_replay_drives_the_region_hermetically():
    region = inbox_region()
    art = artifact(region)
    rec = [{"tool": "lookup_team", "arguments": {"category": "billing"}, "result": {"team": "T", "size": 1}},
           {"tool": "model:summary", "arguments": {"ticket": "refund now"}, "result": {"content": "S"}}]
    out = art.call({TICKET: "refund now"}, session=art.new_session(replay=Replay(rec)))
    assert out["answer"]["line"] == "Team T (1): S"
    from auto_runtime.errors import ToolCallError
    with pytest.raises(ToolCallError, match="replay: no recording of tool model:summary"):
        art.call({TICKET: "refund later"}, session=art.new_session(replay=Replay(rec)))


def test_forms_round_trip_and_render():
    for region in (inbox_region(), assistant_region()):
        assert R.from_json(json.loads(canonical_json(R.to_json(region)))) == region
        text = R.render(region)
        assert "commit(" in text and "return" in text
    assert assistant_region().max_calls() == 1 and inbox_region().max_calls() == 2
    with pytest.raises(CompileError):
        R.from_json({"format": "x"})
