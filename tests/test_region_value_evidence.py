"""A value program inside a region deopts where the program's own guard would: a tool choice that
answers an input through its default branch by elimination, with the default label's evidence
false, or through a contested rule, must not act on it (it did: the region ran the program
without its guard, and the tool ran)."""

from __future__ import annotations

import pytest

from auto.compile import compile_task
from auto.compile.steps.build import mark_paths
from auto.compile.steps.value_guard import evidence_guarded
from auto.gate import Contract
from auto.models import region as R
from auto.models.program import ast as A
from auto.models.program.interp import run_program
from auto.store import Store

from test_region_guard import _distinct, _fx, _todo, artifact, tools

NOVEL = ["hello there", "good morning to you", "convert 5 km to my miles"]


def _label(t: str) -> str:
    return "fx_convert" if "convert" in t.lower() else "add_todo"


@pytest.fixture(scope="module")
def tool_choice(tmp_path_factory):
    """The program rung on the tool choice alone (as the region rung runs it on a value)."""
    tmp = tmp_path_factory.mktemp("value")
    texts = _distinct(_todo, 60, 1) + _distinct(_fx, 60, 2)
    with Store(tmp / "s.sqlite") as st:
        for t in texts:
            st.add_witness("tool", {"request": t}, _label(t))
        out = compile_task(st, "tool", contract=Contract(task="tool", min_witnesses=20), out_path=tmp / "tool.wasm",
                           rungs=["program"])
    assert out.manifest["compiled_as"] == "program"
    return texts, out


def _region(choice: A.Node) -> R.Region:
    item = A.Record((("text", A.Field("request")),))
    return mark_paths(R.Region("request", (
        R.Bind("tool", "request", choice),
        R.Branch("tool", tuple((name, (R.Bind("args", "request", item), R.Commit(("args", "tool")),
                                       R.Call("res", name, "args"), R.Output("res")))
                               for name in ("add_todo", "fx_convert"))),
    )))


def _acts(region: R.Region, text: str) -> bool:
    art = artifact(region, {"method": "program"})
    ran: list = []
    art.bind_tools({"add_todo": lambda text: ran.append(text) or {"added": text},
                    "fx_convert": lambda text: ran.append(text) or {"converted": text}})
    out = art.call({"request": text}, session=art.new_session())
    return bool(ran) and not out.get("deopt")


def test_the_program_alone_answers_novel_inputs_through_its_default(tool_choice):
    """What the region ran before: the rung's program, without its evidence."""
    _texts, out = tool_choice
    assert any(_acts(_region(out.model), t) for t in NOVEL)


def test_a_region_value_deopts_where_its_evidence_is_not_supported(tool_choice):
    texts, out = tool_choice
    guarded = evidence_guarded(out.model, out.manifest["model"]["evidence"], out.manifest["guard"])
    region = _region(guarded)
    assert not any(_acts(region, t) for t in NOVEL)  # deopted before the commit: no tool ran
    answered = [t for t in texts if not run_program(guarded, {"request": t})["deopt"]]
    assert len(answered) >= 0.9 * len(texts)  # the witnesses themselves are supported
    assert all(run_program(guarded, {"request": t})["answer"] == run_program(out.model, {"request": t})["answer"]
               for t in answered)
    assert all(_acts(region, t) for t in answered[:: max(1, len(answered) // 10)])


def test_the_guarded_value_deopts_exactly_where_the_programs_guard_declines(tool_choice):
    from auto_runtime import Artifact

    texts, out = tool_choice
    guarded = evidence_guarded(out.model, out.manifest["model"]["evidence"], out.manifest["guard"])
    art = Artifact.load(out.wasm)
    probes = texts + NOVEL + ["", "my", "convert", "Convert my list", "add convert to my list", "zzz 12 USD"]
    for t in probes:
        passed, _p = art.guard.decide_output(art.call({"request": t}))
        assert (not run_program(guarded, {"request": t})["deopt"]) == passed, t


def test_a_value_that_is_not_an_evidence_record_is_refused(tool_choice):
    _texts, out = tool_choice
    with pytest.raises(ValueError):
        evidence_guarded(A.Const("x"), A.Const(0), out.manifest["guard"])
    assert evidence_guarded(A.Const("x"), A.Const(0), {"method": "program"}) == A.Const("x")
    assert evidence_guarded(A.Const("x"), A.Const(0), {"method": "program-evidence"}) == A.Deopt()  # unusable
