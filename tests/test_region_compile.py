"""Compiling a task across its steps: recorded agents with tool calls become region artifacts.

Two recorded agents of the bench (on the simulator): inbox (three model calls and a read-only
tool; the summary is generative and stays a declared model call) and assistant (a function-calling
loop: the tool is chosen by the model, one tool is effectful). Small corpora and a relaxed
contract keep the test fast; the bench runs the full-size families.
"""

from __future__ import annotations

import json

import pytest

import auto
from auto.models import region as R
from auto.compile import compile_task
from auto.compile.rungs import region as region_rung
from auto.compile.steps.traces import read_task_traces
from auto.errors import GateRefused
from auto.store import Store
from auto.gate import Contract
from auto_runtime import Artifact, TieredTask
from auto_runtime.guard import AlwaysDeopt
from bench.run import reference_endpoint

RELAXED = dict(min_witnesses=20, program_min_agreement=0.8, program_min_agreement_ci95_low=0.6)


def _record(tmp, family: str, n: int):
    from bench.families import get_family

    fam = get_family(family)
    data = fam.default_corpus(0)
    texts = [fam.text_of(t) for t in data["train"][:n]]
    store = Store(tmp / f"{family}.sqlite")
    with auto.recording(store):
        for _ in range(2):
            for t in texts:
                fam.run_agent(t)
    return fam, data, store


@pytest.fixture(scope="module")
def sim():
    with reference_endpoint(0) as label:
        yield label


@pytest.fixture(scope="module")
def inbox(sim, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("inbox")
    # 800 tickets, as the bench: the cross-fitted program rung needs several hundred witnesses for
    # the category's keyword rules (out of fold below 0.60 at 160, 0.98 at 640 measured)
    fam, data, store = _record(tmp, "inbox", 800)
    out = compile_task(store, "inbox", contract=Contract(task="inbox", **RELAXED), out_path=tmp / "inbox.gen1.wasm")
    yield fam, data, store, out
    store.close()


@pytest.fixture(scope="module")
def assistant(sim, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("assistant")
    fam, data, store = _record(tmp, "assistant", 1200)  # the bench's size (each tool's arguments need ~175)
    out = compile_task(store, "assistant", contract=Contract(task="assistant", **RELAXED),
                       out_path=tmp / "assistant.gen1.wasm")
    yield fam, data, store, out
    store.close()


def test_runs_are_read_as_linked_steps(inbox):
    _fam, _data, store, _out = inbox
    traces, skipped = read_task_traces(store, "inbox")
    assert len(traces) == 1600 and not skipped  # 800 tickets, each run twice
    kinds = [type(s).__name__ for s in traces[0].steps]
    assert kinds == ["ModelStep", "ToolStep", "ModelStep", "ModelStep"]
    assert traces[0].tools[0].name == "lookup_team" and traces[0].tools[0].effects == "read"


def test_inbox_compiles_as_a_region_with_a_kept_model_call(inbox):
    _fam, _data, _store, out = inbox
    m = out.manifest
    assert m["compiled_as"] == "region" and m["guard"]["method"] == "region-novelty"
    assert m["guard"]["heldout"]["n"] > 0 and m["guard"]["n"] == len(m["guard"]["calibration_scores"])
    assert [c["name"] for c in m["capabilities"]] == ["commit", "tool_call", "tool_result"]
    tools = {t["name"]: t for t in m["tools"]}
    assert set(tools) == {"lookup_team", "model:inbox.summary"}
    assert tools["lookup_team"]["effects"] == "read" and tools["lookup_team"]["arguments"]["properties"]["category"]["enum"]
    assert tools["model:inbox.summary"]["kind"] == "model" and "{ticket}" in json.dumps(tools["model:inbox.summary"]["request"])
    assert m["tool_budget"]["calls"] == 2
    how = {v["label"]: v["how"] for v in m["model"]["values"]}
    assert how["summary"] == "model" and how["lookup_team.category"] == "program" and how["team"] == "get"
    assert how["priority"] == "program" and how["category"] == "reuse"
    region = R.from_json(m["model"]["region"])
    (path,) = region.paths()
    kinds = [type(s).__name__ for s in path]
    assert kinds.index("Commit") < next(i for i, s in enumerate(path) if isinstance(s, R.Call) and s.tool.startswith("model:"))
    assert m["parity"]["fields"]["category"]["rate"] >= RELAXED["program_min_agreement"]
    assert m["cost_usd_micros_per_call"] > 0  # the kept summary call is paid


def test_inbox_region_serves_with_its_tools(inbox):
    fam, data, _store, out = inbox
    from bench.inbox import serving
    art = Artifact.load(out.wasm)
    tt = TieredTask(art, lambda inp: fam.run_agent(inp["ticket"]), tools=serving.host_tools(art.manifest["tools"]))
    res = [tt({"ticket": t.ticket}) for t in data["heldout"][:20]]
    t1 = [r for r in res if r.tier == "tier-1"]
    assert len(t1) >= 15
    for r in t1:
        assert set(r.answer) == {"category", "team", "queue", "priority", "summary"} and r.answer["summary"]
        assert [c["tool"] for c in r.tool_calls] == ["lookup_team", "model:inbox.summary"]
    from bench.inbox.tools import route
    for r in t1:  # the team and queue are what the real tool answered for the compiled category
        assert route(r.answer["category"])["team"] == r.answer["team"]
        assert route(r.answer["category"])["queue"] == r.answer["queue"]
    right = sum(r.answer["category"] == t.label["category"] for r, t in zip(res, data["heldout"]) if r.tier == "tier-1")
    assert right >= 0.5 * len(t1)  # a small corpus and a relaxed contract: the full bench measures accuracy


def test_assistant_branches_on_the_chosen_tool(assistant):
    _fam, _data, _store, out = assistant
    m = out.manifest
    region = R.from_json(m["model"]["region"])
    branch = next(s for s in region.steps if isinstance(s, R.Branch))
    assert {v for v, _ in branch.cases} >= {"get_weather", "lookup_order", "cancel_order", "convert_currency"}
    effects = {t["name"]: t["effects"] for t in m["tools"]}
    assert effects["cancel_order"] == "effect" and effects["get_weather"] == "read"
    declared = next(t for t in m["tools"] if t["name"] == "convert_currency")
    assert declared["arguments_source"] == "declared to the model"
    for path in region.paths():
        calls = [i for i, s in enumerate(path) if isinstance(s, R.Call) and s.tool == "cancel_order"]
        commit = next(i for i, s in enumerate(path) if isinstance(s, R.Commit))
        assert all(i > commit for i in calls)
    assert any(v["how"] == "template" for v in m["model"]["values"])


def test_assistant_effects_never_run_on_inputs_that_deopt(assistant):
    fam, data, _store, out = assistant
    from bench.assistant import serving, tools

    cancels = [t.request for t in data["heldout"] if t.label["tool"] == "cancel_order"][:4]
    assert cancels
    art = Artifact.load(out.wasm)
    before = len(tools.LEDGER)
    ref_runs: list = []
    tt = TieredTask(art, lambda inp: ref_runs.append(inp) or "REF", tools=serving.host_tools(art.manifest["tools"]))
    ok = [tt({"request": r}) for r in cancels]
    tier1 = sum(r.tier == "tier-1" for r in ok)
    assert tier1 >= 1 and len(tools.LEDGER) - before == tier1  # one effect per admitted call
    art.guard = AlwaysDeopt("test declines")
    tt2 = TieredTask(art, lambda inp: "REF", tools=serving.host_tools(art.manifest["tools"]))
    mid = len(tools.LEDGER)
    declined = [tt2({"request": r}) for r in cancels]
    assert all(r.tier == "tier-0" for r in declined) and len(tools.LEDGER) == mid
    assert all(c["tool"] != "cancel_order" for r in declined for c in (r.tool_calls or []))


def test_assistant_guard_deopts_out_of_distribution_probes(assistant, capsys):
    fam, data, _store, out = assistant
    from auto_runtime.guard import ProgramGuard
    from bench.assistant import serving

    probes = [t.request for t in data["ood"]]

    def admitted(guard=None):
        art = Artifact.load(out.wasm)
        if guard is not None:
            art.guard = guard
        tt = TieredTask(art, lambda inp: "REF", tools=serving.host_tools(art.manifest["tools"]))
        return [p for p in probes if tt({"request": p}).tier == "tier-1"]

    with_novelty, without = admitted(), admitted(ProgramGuard())
    with capsys.disabled():
        print(f"\nassistant OOD probes admitted: {len(with_novelty)}/{len(probes)} with the region guard, "
              f"{len(without)}/{len(probes)} with the deopt flag alone; held-out deopted by novelty "
              f"{out.manifest['guard']['heldout']}")
    assert set(with_novelty) <= set(without) and len(with_novelty) < len(without)
    assert out.manifest["guard"]["heldout"]["rate"] <= 0.15


def test_single_call_tasks_are_not_regions(sim, tmp_path):
    from bench.routing import agent
    store = Store(tmp_path / "r.sqlite")
    with auto.recording(store):
        agent.route("Marketing requests $45 for desk plants from a preferred vendor.")
    assert not region_rung.applies(store, "routing")
    store.close()


def test_a_value_nothing_reproduces_refuses_the_region_by_name(sim, tmp_path):
    import random

    rng = random.Random(3)

    @auto.tool("roll", effects="effect")
    def roll(seed: str) -> dict:
        return {"value": seed}

    @auto.task("noisy")
    def noisy(text: str) -> str:
        return roll(seed=str(rng.random()))["value"]

    store = Store(tmp_path / "n.sqlite")
    with auto.recording(store):
        for _ in range(2):
            for i in range(60):
                noisy(f"input number {i}")
    with pytest.raises(GateRefused, match=r"argument 'seed' of tool roll \(position 1\) could not be compiled"):
        compile_task(store, "noisy", contract=Contract(task="noisy", **RELAXED), out_path=tmp_path / "n.wasm")
    store.close()


def test_hostile_cases_end_as_refusals_or_clean_deopts(assistant):
    from bench.assistant import serving
    from bench.capability_cases import run_cases

    fam, data, store, out = assistant
    traces, _ = read_task_traces(store, "assistant")
    rows = run_cases("assistant", out.wasm, store, traces, serving, [t.request for t in data["heldout"][:60]])
    cases = {r["case"]: r for r in rows}
    assert len(rows) == 12, sorted(cases)
    assert all(r["contained"] and r["tool_runs_outside_declaration"] == 0 for r in rows), rows
    assert cases["undeclared import (auto.commit)"]["outcome"] == "refused at load"
    assert "before the guard admitted" in cases["artifact calls cancel_order before its commit"]["reason"]
    assert cases["replay mismatch in the gate (altered recordings)"]["outcome"] == "gate refuse"


def test_the_ratchet_serves_a_region_with_tools_and_records_its_deopts(inbox, tmp_path):
    from auto.compile.steps.traces import read_task_traces as runs_of
    from bench.inbox import agent, serving

    fam, data, store, out = inbox
    path = tmp_path / "ratchet.sqlite"
    tools = serving.host_tools(Artifact.load(out.wasm).manifest["tools"])
    r = auto.ratchet(agent.inbox, store=path, tools=tools, worker="thread", audit_rate=0.0,
                     contract=Contract(task="inbox", **RELAXED))
    try:
        r.adopt(out.wasm)
        tickets = [t.ticket for t in data["heldout"][:6]]
        served = [r.call_result({"ticket": t}) for t in tickets[:3]]
        assert all(s.tier == "tier-1" and s.tool_calls for s in served)
        r.tiered.tighten("test")  # every call deopts: the reference runs, recorded with its steps
        deopted = r.call_result({"ticket": tickets[3]})
        assert deopted.tier == "tier-0" and deopted.tool_calls is None
        with Store(path) as st:
            runs, _ = runs_of(st, "inbox")
        assert len(runs) == 1 and [type(s).__name__ for s in runs[0].steps] == \
            ["ModelStep", "ToolStep", "ModelStep", "ModelStep"]
        assert runs[0].input == {"ticket": tickets[3]}
    finally:
        r.close()
