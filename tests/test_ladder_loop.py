"""One refusal loop for every ladder: the task's rungs and a region's values climb the same way.

The region rung is a plain rung of the ladder: it reads the task's traces once per compile, steps
aside by itself for a single-call task (a refusal that does not apply: neither tried nor cited),
compiles its values through the ladder's loop (a value rung's bug costs that rung only, as it does
on the task's ladder), and measures latency as every rung does, each call replaying its tools.
"""

from __future__ import annotations

import importlib

import pytest

import auto
from auto.compile import compile_task
from auto.compile.measure import call_latency_us
from auto.compile.rungs import program as program_rung
from auto.compile.rungs import region as region_rung
from auto.errors import GateRefused, RungRefused
from auto.gate import Contract
from auto.store import Store

from test_region_tool_messages import RELAXED, _requests, make_agent


def _recorded(tmp_path, task: str) -> Store:
    recorded, _plain = make_agent(task, True)
    store = Store(tmp_path / "s.sqlite")
    with auto.recording(store):
        for _ in range(2):
            for q in _requests(40, 0):
                recorded(q)
    return store


def test_a_region_compile_reads_the_tasks_traces_once(tmp_path, monkeypatch):
    store = _recorded(tmp_path, "status")
    reads = []
    real = region_rung.read_task_traces

    def counted(st, task):
        reads.append(task)
        return real(st, task)

    monkeypatch.setattr(region_rung, "read_task_traces", counted)
    out = compile_task(store, "status", contract=Contract(task="status", **RELAXED), out_path=tmp_path / "g.wasm")
    assert out.typed_manifest.compiled_as == "region"
    assert reads == ["status"]
    assert [r["rung"] for r in out.rungs] == ["region"]
    assert out.latency_us["n"] >= 1  # the ladder's measurement, each call replaying its tools
    store.close()


def test_a_value_rung_that_raises_costs_that_rung_only(tmp_path, monkeypatch):
    store = _recorded(tmp_path, "status")
    real = program_rung.compile_rung

    def broken_on_values(ws, contract, ctx):
        if "." in ctx.task:  # a region's value is a task of its own, <task>.<label>
            raise ValueError("a bug in the program rung")
        return real(ws, contract, ctx)

    monkeypatch.setattr(program_rung, "compile_rung", broken_on_values)
    said: list[str] = []
    try:
        out = compile_task(store, "status", contract=Contract(task="status", **RELAXED), out_path=tmp_path / "g.wasm",
                           progress=said.append)
        rungs, reason = out.rungs, out.reason
    except GateRefused as e:
        rungs, reason = e.rungs, e.reason
    # the value climbed on to the memo rung; the region rung itself did not fail, and its refusal
    # (if any) is final for a task that calls tools, as without the bug
    assert any("program rung failed: ValueError: a bug in the program rung" in line for line in said), said
    assert any("trying the memo rung (2 of 2)" in line for line in said)
    assert "region rung failed" not in reason
    assert [r["rung"] for r in rungs] == ["region"]
    store.close()


def test_a_rung_that_steps_aside_is_neither_tried_nor_cited(tmp_path, monkeypatch):
    ladder = importlib.import_module("auto.compile.ladder")  # the package exports a function of that name

    def not_mine(ws, contract, ctx):
        raise RungRefused("specialist", "specialist rung not attempted: not its kind of task", applies=False)

    monkeypatch.setitem(ladder.RUNGS, "specialist", not_mine)
    said: list[str] = []
    with Store(tmp_path / "s.sqlite") as st:
        for i in range(30):
            for _ in range(2):
                st.add_witness(task="t", input={"q": f"question {i}"}, output=f"a{i % 3}")
        out = compile_task(st, "t", contract=Contract(task="t"), out_path=tmp_path / "g.wasm", programs=False,
                           progress=said.append)
    names = [r["rung"] for r in out.rungs]
    assert "specialist" not in names and "region" not in names and names[-1] in ("neardup", "memo")
    assert "not its kind" not in out.reason
    assert "  specialist rung not attempted: not its kind of task" in said
    # a single-call task: the region rung steps aside the same way
    assert "  region rung not attempted: no run of the task calls a tool or several models" in said


class _Timed:
    def __init__(self) -> None:
        self.calls: list[tuple[dict, object]] = []

    def call(self, inp, session=None):
        self.calls.append((inp, session))
        return {"answer": 1}


def test_call_latency_runs_each_call_in_the_session_it_is_given():
    art = _Timed()
    lat = call_latency_us(art, [{"q": "a"}, {"q": "b"}], sessions=lambda inp: f"replay of {inp['q']}")
    assert len(lat) == 2 and all(x >= 0 for x in lat)
    assert art.calls == [({"q": "a"}, "replay of a"), ({"q": "b"}, "replay of b")]
    art = _Timed()
    call_latency_us(art, [{"q": "a"}])
    assert art.calls == [({"q": "a"}, None)]


@pytest.mark.parametrize("applies", [True, False])
def test_a_refusal_says_whether_its_rung_applies(applies):
    r = RungRefused("region", "why", applies=applies)
    assert r.applies is applies and r.citation == "why" and not r.final
