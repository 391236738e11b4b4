"""The program rung end to end: synthesis → witnessed-domain guard → WebAssembly → gate → manifest,
the ladder's fallbacks and `auto inspect` of a program."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from auto.models.program import ast as A
from auto.models.program.domain import extractors, guard_domain
from auto.models.program.interp import run_program

AMOUNT = A.ParseMoney(A.Search(A.Field("request"), r"\$(\d+(?:,\d{3})*)", 1))
POLICY = A.If(((A.Compare("ge", AMOUNT, 1000), A.Const("review")),), A.Const("approve"))


def test_domain_guard_wraps_only_always_defined_extractors():
    inputs = [{"request": f"${n} for chairs"} for n in (5, 50, 1200, 3000)]
    guarded, always = guard_domain(POLICY, inputs)
    assert always == [AMOUNT] and extractors(POLICY) == [AMOUNT]
    assert run_program(guarded, {"request": "$2,000 for desks"}) == {"answer": "review", "deopt": False}
    # "3k" is outside the witnessed domain: the unguarded policy answers "approve", the guarded one deopts
    assert run_program(POLICY, {"request": "3k for desks"}) == {"answer": "approve", "deopt": False}
    assert run_program(guarded, {"request": "3k for desks"}) == {"answer": None, "deopt": True}
    # an extractor that was null on a witness is part of the witnessed behaviour: no guard
    same, none = guard_domain(POLICY, inputs + [{"request": "no amount here"}])
    assert same is POLICY and none == []
    assert guard_domain(POLICY, []) == (POLICY, [])


def _record(store_path, texts, fn):
    import auto
    from auto.store import Store

    st = Store(store_path)

    @auto.task("route")
    def route(request: str) -> str:
        return fn(request)

    with auto.recording(st):
        for t in texts:
            route(t)
    return st


def _requests(n, seed=0):
    import random

    rng = random.Random(seed)
    out = []
    while len(out) < n:
        amt = rng.choice([rng.randint(5, 999), rng.randint(1000, 9000)])
        t = f"{rng.choice(['Ops', 'IT', 'HR', 'Legal'])} needs ${amt:,} for {rng.choice(['chairs', 'laptops', 'cables', 'snacks'])} #{len(out)}"
        out.append(t)
    return out


def _policy(text):
    import re

    amt = int(re.search(r"\$(\d+(?:,\d{3})*)", text).group(1).replace(",", ""))
    return "review" if amt >= 1000 else "approve"


def test_compile_task_emits_a_program_and_inspect_prints_it(tmp_path):
    from auto.cli import main
    from auto.compile import compile_task

    st = _record(tmp_path / "s.sqlite", _requests(200), _policy)
    out = compile_task(st, "route", out_path=tmp_path / "route.wasm")
    m = out.manifest
    assert m["compiled_as"] == "program" and m["guard"]["method"] == "program-evidence"
    held = m["parity"]["heldout"]
    assert held["method"] == "5-fold out-of-fold" and held["n"] == 200 and held["rate"] >= 0.95 and m["model"]["domain_guard"]
    assert "parse_money" in m["model"]["text"] and m["model"]["evidence"]["format"] == "auto.program/1"
    assert m["guard"]["risk"]["threshold"] is not None and m["guard"]["calibration"]["tier1"] > 0
    res = CliRunner().invoke(main, ["inspect", str(tmp_path / "route.wasm")])
    assert res.exit_code == 0 and "program over field 'request'" in res.output and "parse_money" in res.output
    assert "program-evidence" in res.output and "statement" in res.output
    run = CliRunner().invoke(main, ["run", str(tmp_path / "route.wasm"), "--input", json.dumps({"request": "IT needs $4,500 for laptops"})])
    assert run.exit_code == 0 and "review" in run.output
    st.close()


def test_ladder_names_every_refused_rung(tmp_path):
    import random

    from auto.errors import GateRefused
    from auto.compile import compile_task

    rng = random.Random(1)
    st = _record(tmp_path / "r.sqlite", _requests(120, seed=3), lambda t: rng.choice(["approve", "review", "reject"]))
    with pytest.raises(GateRefused) as e:
        compile_task(st, "route", out_path=tmp_path / "x.wasm", memo=False)
    assert e.value.reason.startswith("program rung") and "specialist" not in e.value.reason.split(";")[0]
    assert ";" in e.value.reason  # the specialist rung's refusal follows the program rung's
    st.close()
