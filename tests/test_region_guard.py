"""The region's novelty guard: a compiled decision acts only on inputs like those it was compiled on.

The region below is the issue's function-calling agent in small: its tool choice was learned as
``contains("my") -> add_todo`` (an effect) ``elif contains("convert") -> fx_convert`` (read-only).
"convert 5 km to my miles" takes the to-do branch through the learned ``contains("my")``; with the
guard at the commit it deopts before the effect runs. Inputs like the training ones still answer at
tier-1, and a single default path deopts an input no witness resembles (an empty one included).
"""

from __future__ import annotations

import random

import pytest

from auto.codegen.region_lower import compile_region
from auto.compile.steps.build import mark_paths
from auto.emit import emit
from auto.guards.region import path_of, region_guard_entry
from auto.models import region as R
from auto.models.program import ast as A
from auto_runtime import Artifact, TieredTask
from auto_runtime.guard import AlwaysDeopt, RegionNovelty, build_guard
from auto_runtime.guard.region import PATH_KEY, tokens

OBJ = {"type": "object"}
ITEMS = ["milk", "eggs", "bread", "call mom", "pay rent", "buy stamps", "water plants", "book flights", "rice",
         "dentist", "renew passport", "gym", "apples", "fix bike", "email Sam", "laundry"]
LISTS = ["my list", "my to-do list", "my todos", "my shopping list"]
TODO = ["Add {i} to {l}.", "Put {i} on {l}", "Please add {i} to {l}", "Can you add {i} to {l}?", "{i} goes on {l}"]
CUR = ["USD", "EUR", "GBP", "JPY", "CHF"]
FX = ["Convert {a} {c} to {d}.", "Please convert {a} {c} into {d}", "convert {a} {c} to {d}, thanks"]


def _todo(rng: random.Random) -> str:
    return rng.choice(TODO).format(i=rng.choice(ITEMS), l=rng.choice(LISTS))


def _fx(rng: random.Random) -> str:
    c, d = rng.sample(CUR, 2)
    return rng.choice(FX).format(a=rng.choice([5, 12, 40, 100, 250]), c=c, d=d)


def _distinct(gen, n: int, seed: int, avoid: set[str] = frozenset()) -> list[str]:
    rng, out = random.Random(seed), []
    while len(out) < n:
        t = gen(rng)
        if t not in out and t not in avoid:
            out.append(t)
    return out


def agent_region() -> R.Region:
    low = A.Lower(A.Field("request"))
    tool = A.If(((A.Contains(low, "my"), A.Const("add_todo")), (A.Contains(low, "convert"), A.Const("fx_convert"))),
                A.Deopt())
    item = A.Record((("text", A.Field("request")),))
    return mark_paths(R.Region("request", (
        R.Bind("tool", "request", tool),
        R.Branch("tool", (
            ("add_todo", (R.Bind("args", "request", item), R.Commit(("args", "tool")),
                          R.Call("res", "add_todo", "args"), R.Output("res"))),
            ("fx_convert", (R.Bind("args", "request", item), R.Call("res", "fx_convert", "args"),
                            R.Commit(("args", "tool")), R.Output("res"))),
        )),
    )))


def default_region() -> R.Region:
    """One path: every input is added as a to-do (the single default branch; an effect)."""
    item = A.Record((("text", A.Field("request")),))
    return mark_paths(R.Region("request", (R.Bind("args", "request", item), R.Commit(("args",)),
                                           R.Call("res", "add_todo", "args"), R.Output("res"))))


def artifact(region: R.Region, guard: dict) -> Artifact:
    decl = {"add_todo": "effect", "fx_convert": "read"}
    tools = [{"name": n, "kind": "tool", "effects": decl[n], "arguments": OBJ, "result": OBJ} for n in region.tool_names()]
    manifest = {"format": "auto.artifact/1", "task": "agent", "generation": 1, "compiled_as": "region",
                "interface": {"input": {"type": "object", "properties": {"request": {"type": "string"}},
                                        "required": ["request"]}, "output": {}},
                "abi": {"exports": ["memory", "alloc", "run"], "encoding": "canonical-json"},
                "capabilities": [{"module": "auto", "name": n} for n in ("commit", "tool_call", "tool_result")],
                "tools": tools, "tool_budget": {"calls": 4, "wall_ms": 2000}, "guard": guard}
    return Artifact.load(emit(compile_region(region), manifest))


def tools(ran: list) -> dict:
    return {"add_todo": lambda text: ran.append(text) or {"added": text},
            "fx_convert": lambda text: {"converted": text}}


def calibrated(region: R.Region, texts: list[str], held: list[str] = ()) -> dict:
    """The guard entry from the commit records the artifact writes (as the region rung does)."""
    bare = artifact(region, {"method": "program"})
    ran: list = []
    bare.bind_tools({n: f for n, f in tools(ran).items() if n in region.tool_names()})

    def commits(ts):
        out = []
        for t in ts:
            s = bare.new_session()
            bare.call({"request": t}, session=s)
            if (pt := path_of(s.commit_record, "request")) is not None:
                out.append(pt)
        return out
    return region_guard_entry("request", len(region.paths()), commits(texts), 0.05, commits(held))


TRAIN = _distinct(_todo, 60, 1) + _distinct(_fx, 40, 2)
NOVEL = ["convert 5 km to my miles", "Cancel my subscription", "What's my horoscope today?",
         "Delete all my files now", "send my password to bob"]


def test_commit_records_name_the_path_and_the_input():
    region = agent_region()
    art = artifact(region, {"method": "program"})
    art.bind_tools(tools([]))
    s = art.new_session()
    art.call({"request": "Add milk to my list."}, session=s)
    assert s.commit_record["answer"][PATH_KEY] == 0 and s.commit_record["answer"]["request"] == "Add milk to my list."
    s = art.new_session()
    art.call({"request": "Convert 5 USD to EUR."}, session=s)
    assert s.commit_record["answer"][PATH_KEY] == 1


def test_without_the_guard_an_effect_runs_on_a_novel_input():
    # what the region rung emitted before: the program guard admits every commit
    ran: list = []
    task = TieredTask(artifact(agent_region(), {"method": "program"}), lambda i: "REF", tools=tools(ran))
    assert task({"request": "convert 5 km to my miles"}).tier == "tier-1" and ran == ["convert 5 km to my miles"]


def test_novel_inputs_deopt_before_the_effect_and_witnessed_ones_act():
    region = agent_region()
    entry = calibrated(region, TRAIN)
    assert entry["method"] == "region-novelty" and [len(p) for p in entry["paths"]] == [60, 40]
    ran: list = []
    task = TieredTask(artifact(region, entry), lambda i: "REF", tools=tools(ran))
    for text in NOVEL:
        res = task({"request": text})
        assert res.tier == "tier-0" and res.answer == "REF", (text, res.reason)
        assert "commit declined: novel input for path" in res.reason
    assert ran == []
    fresh = _distinct(_todo, 40, 7, avoid=set(TRAIN)) + _distinct(_fx, 20, 8, avoid=set(TRAIN))
    tier1 = [t for t in fresh if task({"request": t}).tier == "tier-1"]
    assert len(tier1) >= 0.85 * len(fresh)
    assert ran == [t for t in tier1 if "my" in t.lower()]


def test_heldout_deopt_share_is_stated_and_near_alpha():
    region = agent_region()
    held = _distinct(_todo, 150, 11, avoid=set(TRAIN)) + _distinct(_fx, 100, 12, avoid=set(TRAIN))
    entry = calibrated(region, TRAIN, held)
    h = entry["heldout"]
    assert h["n"] == 250 and h["rate"] == round(h["deopted"] / 250, 4)
    assert h["rate"] <= 0.12  # conformal level 0.05 on exchangeable inputs, plus sampling slack


def test_a_single_default_path_deopts_an_input_no_witness_resembles():
    region = default_region()
    entry = calibrated(region, TRAIN[:60])  # only to-do requests were ever seen
    ran: list = []
    task = TieredTask(artifact(region, entry), lambda i: "REF", tools={"add_todo": tools(ran)["add_todo"]})
    assert task({"request": "Add eggs to my shopping list."}).tier == "tier-1"
    for text in ("", "zzz qqq", "Wie ist das Wetter in Berlin?", "Convert 5 USD to EUR."):
        res = task({"request": text})
        assert res.tier == "tier-0", (text, res.reason)
    assert ran == ["Add eggs to my shopping list."]


def test_the_guard_decides_only_on_a_witnessed_path_with_its_text():
    g = RegionNovelty("request", 0.05, [[tokens("add milk to my list")] * 1, []], [0.0, 0.5, 1.0])
    assert g.decide_output({"answer": {PATH_KEY: 0, "request": "add milk to my list"}, "deopt": False})[0]
    for rec in ({"answer": {PATH_KEY: 1, "request": "x"}, "deopt": False},  # a path no input took
                {"answer": {PATH_KEY: 2, "request": "x"}, "deopt": False},  # not a path
                {"answer": {PATH_KEY: True, "request": "x"}, "deopt": False},
                {"answer": {"request": "add milk"}, "deopt": False},
                {"answer": {PATH_KEY: 0}, "deopt": False},
                {"answer": {PATH_KEY: 0, "request": "add milk to my list"}, "deopt": True}, None, "x"):
        assert g.decide_output(rec) == (False, None)
        assert g.evaluate_output(rec).reason


@pytest.mark.parametrize("bad", [
    {"alpha": 0.05, "paths": [["a"]], "calibration_scores": [0.1]},
    {"field": "request", "alpha": 1.5, "paths": [["a"]], "calibration_scores": [0.1]},
    {"field": "request", "alpha": 0.05, "paths": [], "calibration_scores": [0.1]},
    {"field": "request", "alpha": 0.05, "paths": [[1]], "calibration_scores": [0.1]},
    {"field": "request", "alpha": 0.05, "paths": [["a"]], "calibration_scores": []},
    {"field": "request", "alpha": 0.05, "paths": [["a"]], "calibration_scores": [float("nan")]},
])
def test_an_unusable_entry_always_deopts(bad):
    assert isinstance(build_guard({"method": "region-novelty", **bad}), AlwaysDeopt)
