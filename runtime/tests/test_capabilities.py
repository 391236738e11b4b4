"""Tool capabilities: declared and enforced imports, the per-call session, decide-then-act, replay.

Each hostile case of the capability contract is one test here (undeclared import, a host missing
a declared tool, a host tool the manifest does not declare, the budget, schema-violating
arguments, a tool that raises, hangs or returns a wrong type, an effect before the commit, a
replay mismatch); each ends as a refusal at load or a clean deopt with its reason, and no tool
runs outside its declaration.
"""

from __future__ import annotations

import json
import time

import pytest

from auto_runtime import Artifact, Limits, TieredTask
from auto_runtime.errors import CapabilityError, ManifestError, ToolCallError
from auto_runtime.guard import AlwaysDeopt
from auto_runtime.tools import Replay, ToolBudget, effect_journal, journaled_result

from .wasm_fixtures import TOOL_IMPORTS, build, echo_wat, tool_decl, tool_manifest, tool_wat


def req(tool: str, **arguments) -> bytes:
    return json.dumps({"arguments": arguments, "tool": tool}, sort_keys=True, separators=(",", ":")).encode()


class Tools:
    """Host tools that count their calls."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict]] = []

    def lookup(self, q: str) -> dict:
        self.calls.append(("lookup", {"q": q}))
        return {"team": f"team-{q}"}

    def act(self, q: str) -> dict:
        self.calls.append(("act", {"q": q}))
        return {"done": q}

    def mapping(self, **extra) -> dict:
        return {"lookup": self.lookup, "act": self.act, **extra}


DECLS = [tool_decl("lookup"), tool_decl("act", "effect")]


def load(steps, decls=DECLS, tools=None, limits=None, **manifest_overrides) -> Artifact:
    wasm = build(tool_wat(steps), tool_manifest(decls, **manifest_overrides))
    return Artifact.load(wasm, tools=tools, limits=limits)


def tiered(art: Artifact, tools: Tools, ref_calls: list, **kw) -> TieredTask:
    def reference(inp):
        ref_calls.append(inp)
        return "REF"
    return TieredTask(art, reference, tools=tools.mapping(), **kw)


# ----------------------------------------------------------------------------- load-time refusals


def test_read_tool_answers_at_tier_1():
    t = Tools()
    art = load([req("lookup", q="billing")], tools=t.mapping())
    assert art.call({"ticket": "x"}) == {"answer": {"team": "team-billing"}, "deopt": False}
    assert t.calls == [("lookup", {"q": "billing"})]
    res = tiered(art, t, [])({"ticket": "x"})
    assert res.tier == "tier-1" and res.answer == {"team": "team-billing"}
    assert [c["tool"] for c in res.tool_calls] == ["lookup"] and res.tool_calls[0]["error"] is None
    d = art.describe()
    assert d["imports"] == ["auto.tool_call", "auto.tool_result", "auto.commit"]
    assert {x["name"] for x in d["tools"]} == {"lookup", "act"}


def test_undeclared_import_is_refused():
    wat = tool_wat([req("lookup", q="a")], imports=TOOL_IMPORTS + '(import "env" "net" (func (param i32)))')
    with pytest.raises(CapabilityError, match="env.net"):
        Artifact.load(build(wat, tool_manifest(DECLS)), tools=Tools().mapping())


def test_tool_imports_without_a_tools_declaration_are_refused():
    with pytest.raises(CapabilityError, match="no tools"):
        Artifact.load(build(tool_wat([req("lookup", q="a")]), tool_manifest([])))


def test_tool_import_with_a_wrong_signature_is_refused():
    imports = TOOL_IMPORTS.replace('(func $commit (param i32 i32) (result i32))', '(func $commit (param i32) (result i32))')
    wat = tool_wat([req("lookup", q="a")], imports=imports).replace("(call $commit (i32.const 2048) (i32.const 29))",
                                                                   "(call $commit (i32.const 2048))")
    with pytest.raises(CapabilityError, match="auto.commit must be a function"):
        Artifact.load(build(wat, tool_manifest(DECLS)))


def test_host_missing_a_declared_tool_is_refused():
    t = Tools()
    with pytest.raises(CapabilityError, match="declares tool\\(s\\) act, which the host does not provide"):
        load([req("lookup", q="a")], tools={"lookup": t.lookup})
    art = load([req("lookup", q="a")])
    with pytest.raises(CapabilityError, match="act"):
        TieredTask(art, lambda i: "REF", tools={"lookup": t.lookup})
    assert t.calls == []


def test_host_tool_the_manifest_does_not_declare_is_refused():
    t = Tools()
    with pytest.raises(CapabilityError, match="provides tool\\(s\\) shell, which the manifest does not declare"):
        load([req("lookup", q="a")], tools=t.mapping(shell=lambda cmd: None))


def test_malformed_tool_declaration_is_a_manifest_error():
    bad = [dict(tool_decl("lookup"), effects="maybe")]
    with pytest.raises(ManifestError, match="effects"):
        load([req("lookup", q="a")], decls=bad)
    with pytest.raises(ManifestError, match="tool_budget"):
        load([req("lookup", q="a")], tool_budget={"calls": 0})


def test_unbound_capability_artifact_deopts():
    art = load([req("lookup", q="a")])
    with pytest.raises(CapabilityError, match="none are bound"):
        art.call({"ticket": "x"})


# ----------------------------------------------------------------------------- per-call refusals


def _deopt_reason(art, t, **kw):
    ref_calls: list = []
    res = tiered(art, t, ref_calls, **kw)({"ticket": "x"})
    assert res.tier == "tier-0" and ref_calls == [{"ticket": "x"}]
    return res


def test_exceeding_the_tool_call_budget_deopts():
    t = Tools()
    art = load([req("lookup", q="a")], loop_calls=0, tool_budget={"calls": 3, "wall_ms": 1000})
    art = Artifact.load(build(tool_wat([req("lookup", q="a")], loop_calls=5),
                              tool_manifest(DECLS, tool_budget={"calls": 3, "wall_ms": 1000})))
    res = _deopt_reason(art, t)
    assert res.reason == "tool: tool budget exceeded: more than 3 tool call(s) in one call"
    assert len(t.calls) == 3
    # the host can tighten the manifest's budget
    t2 = Tools()
    art2 = Artifact.load(build(tool_wat([req("lookup", q="a")], loop_calls=2), tool_manifest(DECLS)))
    res = _deopt_reason(art2, t2, tool_budget=ToolBudget(calls=1, wall_ms=1000))
    assert "more than 1 tool call" in res.reason and len(t2.calls) == 1


def test_schema_violating_arguments_never_reach_the_tool():
    t = Tools()
    art = load([req("lookup", q=5)])
    res = _deopt_reason(art, t)
    assert res.reason.startswith("tool: tool lookup: arguments violate its schema: $.q")
    assert t.calls == []
    assert res.tool_calls[0]["error"].startswith("arguments violate")


def test_undeclared_tool_name_is_refused():
    t = Tools()
    res = _deopt_reason(load([req("rm", q="a")]), t)
    assert res.reason == "tool: tool 'rm' is not declared in the manifest" and t.calls == []


def test_non_canonical_request_is_refused():
    t = Tools()
    res = _deopt_reason(load([b'{"tool":"lookup","arguments":{"q":"a"}}']), t)
    assert res.reason == "tool: tool request is not canonical JSON" and t.calls == []


def test_a_tool_that_raises_deopts():
    def boom(q):
        raise RuntimeError("database down")
    t = Tools()
    art = load([req("lookup", q="a")])
    ref: list = []
    res = TieredTask(art, lambda i: ref.append(i) or "REF", tools={"lookup": boom, "act": t.act})({"ticket": "x"})
    assert res.tier == "tier-0" and res.reason == "tool: tool lookup raised RuntimeError: database down"


def test_a_tool_that_hangs_is_cut_off_by_the_wall_budget():
    def hang(q):
        time.sleep(3.0)
        return {"team": "late"}
    art = Artifact.load(build(tool_wat([req("lookup", q="a")]),
                              tool_manifest(DECLS, tool_budget={"calls": 4, "wall_ms": 150})))
    t0 = time.perf_counter()
    res = TieredTask(art, lambda i: "REF", tools={"lookup": hang, "act": Tools().act})({"ticket": "x"})
    assert time.perf_counter() - t0 < 2.0
    assert res.tier == "tier-0" and res.reason.startswith("tool: tool lookup ran past the tool wall budget")


@pytest.mark.parametrize("value, why", [
    ({1, 2}, "not JSON"),
    ({"x": float("nan")}, "not JSON"),
    (["a list"], "result violates its schema: $: expected object"),
])
def test_a_tool_that_returns_a_wrong_type_deopts(value, why):
    art = load([req("lookup", q="a")])
    res = TieredTask(art, lambda i: "REF", tools={"lookup": lambda q: value, "act": Tools().act})({"ticket": "x"})
    assert res.tier == "tier-0" and why in res.reason


def test_result_checked_against_its_schema():
    decls = [tool_decl("lookup", result={"type": "object", "properties": {"team": {"type": "string"}},
                                          "required": ["team"]}), tool_decl("act", "effect")]
    art = load([req("lookup", q="a")], decls=decls)
    res = TieredTask(art, lambda i: "REF", tools={"lookup": lambda q: {"team": 7}, "act": Tools().act})({"ticket": "x"})
    assert res.tier == "tier-0" and "result violates its schema: $.team" in res.reason


def test_compute_deadline_excludes_time_spent_in_tools():
    def slow(q):
        time.sleep(0.25)
        return {"team": "slow"}
    art = Artifact.load(build(tool_wat([req("lookup", q="a")]), tool_manifest(DECLS)),
                        limits=Limits(timeout_ms=50))
    res = TieredTask(art, lambda i: "REF", tools={"lookup": slow, "act": Tools().act})({"ticket": "x"})
    assert res.tier == "tier-1" and res.answer == {"team": "slow"}


# ----------------------------------------------------------------------------- decide first, then act


def test_effect_before_the_commit_is_refused_and_never_runs():
    t = Tools()
    res = _deopt_reason(load([req("act", q="refund")]), t)
    assert res.reason == "tool: effectful tool act called before the guard admitted the call"
    assert t.calls == []


def test_model_capability_waits_for_the_commit_too():
    t = Tools()
    decls = DECLS + [tool_decl("summarize", kind="model")]
    art = load([req("summarize", q="x")], decls=decls)
    res = TieredTask(art, lambda i: "REF", tools=t.mapping(summarize=lambda q: {"content": "paid"}))({"ticket": "x"})
    assert res.tier == "tier-0" and "model-call tool summarize called before" in res.reason


def test_effect_after_an_admitted_commit_runs_once():
    t = Tools()
    art = load([req("lookup", q="a"), "commit", req("act", q="refund")])
    res = tiered(art, t, [])({"ticket": "x"})
    assert res.tier == "tier-1" and res.answer == {"done": "refund"}
    assert t.calls == [("lookup", {"q": "a"}), ("act", {"q": "refund"})]


def test_declined_commit_means_no_effect():
    t = Tools()
    art = load([req("lookup", q="a"), "commit", req("act", q="refund")])
    art.guard = AlwaysDeopt("declined by test")
    res = _deopt_reason(art, t)
    assert res.reason == "commit declined: guard-unusable: declined by test"
    assert t.calls == [("lookup", {"q": "a"})]  # the read ran, the effect did not


def test_tightened_task_runs_no_tool_at_all():
    t = Tools()
    art = load([req("lookup", q="a"), "commit", req("act", q="refund")])
    task = tiered(art, t, [])
    task.tighten("test alarm")
    res = task({"ticket": "x"})
    assert res.tier == "tier-0" and res.reason == "shift alarm: test alarm" and t.calls == []


def test_failure_after_an_effect_runs_the_reference_with_the_journal():
    t = Tools()
    decls = DECLS + [tool_decl("after", "effect")]

    def after(q):
        raise RuntimeError("second step failed")

    art = load([req("lookup", q="a"), "commit", req("act", q="refund"), req("after", q="x")], decls=decls)
    seen = {}

    def reference(inp):
        seen["journal"] = journaled_result("act", {"q": "refund"})
        seen["again"] = journaled_result("act", {"q": "refund"})
        return "REF"

    task = TieredTask(art, reference, tools={**t.mapping(), "after": after})
    res = task({"ticket": "x"})
    assert res.tier == "tier-0" and "second step failed" in res.reason
    assert task.post_commit_deopts == 1
    assert seen["journal"] == (True, {"done": "refund"}) and seen["again"] == (False, None)
    assert journaled_result("act", {"q": "refund"}) == (False, None)  # only inside the reference call


def test_effect_journal_matches_canonical_arguments():
    with effect_journal([{"tool": "act", "arguments": {"b": 1, "a": 2}, "result": 3}]):
        assert journaled_result("act", {"a": 2, "b": 1}) == (True, 3)


# ----------------------------------------------------------------------------- replay (the hermetic gate)


def test_replay_answers_by_name_and_arguments_and_refuses_the_rest():
    art = load([req("lookup", q="a"), "commit", req("act", q="refund")])
    replay = Replay([{"tool": "act", "arguments": {"q": "refund"}, "result": {"done": "replayed"}},
                     {"tool": "lookup", "arguments": {"q": "a"}, "result": {"team": "recorded"}}])
    sess = art.new_session(replay=replay)
    assert art.call({"ticket": "x"}, session=sess) == {"answer": {"done": "replayed"}, "deopt": False}
    assert [c["live"] for c in sess.summary()] == [False, False] and sess.effects == []
    miss = art.new_session(replay=Replay([{"tool": "lookup", "arguments": {"q": "b"}, "result": {}}]))
    with pytest.raises(ToolCallError, match=r"replay: no recording of tool lookup with arguments \{\"q\":\"a\"\}"):
        art.call({"ticket": "x"}, session=miss)


def test_fuel_per_call_of_a_capability_artifact_uses_the_session():
    art = load([req("lookup", q="a")])
    replay = Replay([{"tool": "lookup", "arguments": {"q": "a"}, "result": {"team": "t"}}])
    used = art.fuel_per_call([{"ticket": "x"}], sessions=lambda _x: art.new_session(replay=replay))
    assert used[0] > 0


def test_pure_artifact_ignores_tools():
    from .wasm_fixtures import manifest
    art = Artifact.load(build(echo_wat("0.050000000"), manifest()))
    assert art.tools == {} and art.tool_budget is None
    res = TieredTask(art, lambda i: "REF", tools={"lookup": Tools().lookup})({"ticket": "x"})
    assert res.tier == "tier-1" and res.tool_calls is None


# ----------------------------------------------------------------------------- what a user gets wrong


def test_a_typo_in_a_host_tool_name_is_named_with_the_declared_name():
    t = Tools()
    tools = {"lokup": t.lookup, "act": t.act}
    with pytest.raises(CapabilityError, match=r"declares tool\(s\) lookup, which the host does not provide "
                                              r"\(it provides 'lokup' for 'lookup': a typo\?\)"):
        load([req("lookup", q="a")], tools=tools)
    art = load([req("lookup", q="a")])
    with pytest.raises(CapabilityError, match=r"\(it provides 'lokup' for 'lookup': a typo\?\)"):
        TieredTask(art, lambda i: "REF", tools=tools)
    with pytest.raises(CapabilityError, match=r"\(no tools were given\)"):
        TieredTask(art, lambda i: "REF")
    assert t.calls == []


def test_decide_after_an_effect_answers_with_the_journal_instead_of_deferring():
    t = Tools()
    decls = DECLS + [tool_decl("after", "effect")]

    def after(q):
        raise RuntimeError("second step failed")

    steps = [req("lookup", q="a"), "commit", req("act", q="refund"), req("after", q="x")]
    seen = []

    def reference(inp):
        seen.append(journaled_result("act", {"q": "refund"}))
        return "REF"

    res = TieredTask(load(steps, decls=decls), reference, tools={**t.mapping(), "after": after}).decide({"ticket": "x"})
    # a deferring host would run its reference without the journal and act twice: answered here
    assert res.tier == "tier-0" and res.answer == "REF" and seen == [(True, {"done": "refund"})]
    res = TieredTask(load(steps, decls=decls), None, tools={**t.mapping(), "after": after}).decide({"ticket": "x"})
    assert res.tier == "declined" and res.reason.endswith("(after 1 effect(s) ran: act)")
    # without an effect, decide still defers: the host answers
    art = load([req("lookup", q="a"), "commit", req("act", q="refund")])
    art.guard = AlwaysDeopt("declined by test")
    res = TieredTask(art, reference, tools=t.mapping()).decide({"ticket": "x"})
    assert res.tier == "declined" and len(seen) == 1


def test_an_effect_cut_off_by_the_wall_budget_still_acts_only_once():
    import threading

    acted: list[str] = []
    release = threading.Event()

    def slow_act(q):
        release.wait(5)
        acted.append(q)
        return {"done": q}

    art = load([req("lookup", q="a"), "commit", req("act", q="refund")])
    seen = []

    def reference(inp):  # the agent re-running the call, through a journal-aware tool wrapper
        threading.Timer(0.05, release.set).start()
        found, result = journaled_result("act", {"q": "refund"})
        seen.append((found, result))
        if not found:
            acted.append("again")
        return "REF"

    task = TieredTask(art, reference, tools={"lookup": Tools().lookup, "act": slow_act},
                      tool_budget=ToolBudget(calls=4, wall_ms=50))
    res = task({"ticket": "x"})
    assert res.tier == "tier-0" and "ran past the tool wall budget" in res.reason
    assert task.post_commit_deopts == 1
    assert seen == [(True, {"done": "refund"})] and acted == ["refund"]
