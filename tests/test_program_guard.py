"""The guard of a program with a stated meaning: its evidence expression (auto.models.program.evidence),
its calibration (auto.guards.program), its runtime evaluation (auto_runtime.guard.program), the
few-shot program rung (auto.compile.program_fit), and the ratchet installing a program."""

from __future__ import annotations

import json
import random

import pytest

from auto.canonical import canonical_json
from auto.codegen.program_lower import compile_program
from auto.models.program import ast as A
from auto.models.program.evidence import (CONTESTED, NO_DEFAULT_EVIDENCE, SPLIT_PHRASE, SPLIT_STEM, SPLIT_WORD, SUPPORTED,
                                   build_evidence, event_table, events, specific_variants)
from auto.models.program.interp import run_program
from auto.guards.program import OutOfFold, calibrate_program_guard, decide
from auto_runtime.guard.entries import ProgramEvidenceEntry, guard_entry
from specialist_corpus import Artifact as Runner

T = A.Field("t")
LOW = A.Lower(T)
REFUND = A.Contains(LOW, "refund")
CANCEL = A.Contains(LOW, "cancel")
PROGRAM = A.If(((CANCEL, A.Const("cancel")), (REFUND, A.Const("refund"))), A.Const("other"))
OTHER_EVIDENCE = A.Contains(LOW, "invoice")


def _witnesses() -> list[tuple[dict, str]]:
    out = []
    for i in range(12):
        out.append(({"t": f"please refund order {i} now"}, "refund"))
        out.append(({"t": f"please cancel order {i} today"}, "cancel"))
        out.append(({"t": f"send an invoice for order {i}"}, "other"))
    return out


def _kind(ev, text):
    return events(ev, {"t": text})[""]


def test_evidence_kinds_of_a_decision_list():
    w = _witnesses()
    ev = build_evidence(PROGRAM, w, "t", {"": OTHER_EVIDENCE})
    assert _kind(ev, "please refund order 3 now") == (1, SUPPORTED)
    assert _kind(ev, "send an invoice for order 9") == (2, SUPPORTED)  # the default with its evidence
    assert _kind(ev, "hello there") == (2, NO_DEFAULT_EVIDENCE)  # elimination, no evidence
    # cancel decides, the refund rule fires too: never seen together on a witness
    assert _kind(ev, "please cancel order 2 today, or refund order 2 now") == (0, CONTESTED)
    # "refunded": "refund" inside a longer word; no witness shows whether that counts
    assert _kind(ev, "I was refunded") == (1, SPLIT_WORD)
    # "prefund": not even a word start
    assert _kind(ev, "prefund this") == (1, SPLIT_STEM)
    # "refund" outside the phrase every witness has it in ("please refund order")
    assert _kind(ev, "refund it") == (1, SPLIT_PHRASE)
    # every kind is what the artifact reports, byte for byte
    r = Runner(compile_program(PROGRAM, ev.expr))
    for text in ["please refund order 3 now", "hello there", "I was refunded", "prefund this", "refund it",
                 "please cancel order 2 today, or refund order 2 now", ""]:
        want = canonical_json(run_program(PROGRAM, {"t": text}, ev.expr)).encode()
        assert r.run(canonical_json({"t": text}).encode()) == want, text
    # on its own training witnesses a program's evidence is never contested or split
    table = event_table(ev, PROGRAM, w)
    assert table.n == len(w) and {k for (_r, k) in table.counts[""]} <= {SUPPORTED}


def test_thresholds_and_extractors_have_specific_forms():
    amount = A.ParseMoney(A.Search(T, r"\$(\d+(?:\.\d+)?)", 1))
    prog = A.If(((A.Compare("lt", amount, 500), A.Const("approve")),), A.Const("review"))
    inputs = [{"t": f"${v} for chairs"} for v in (10, 120, 450, 499, 700, 900, 5000)]
    variants = dict(specific_variants(prog, inputs, "t"))
    assert set(variants) >= {"stem-lo", "stem-hi"}
    w = [(inp, run_program(prog, inp)["answer"]) for inp in inputs]
    ev = build_evidence(prog, w, "t")
    assert events(ev, {"t": "$300 for desks"})[""] == (0, SUPPORTED)
    # inside the witnessed gap (499, 700): the witnesses do not decide the threshold
    assert events(ev, {"t": "$650 for desks"})[""][1] == SPLIT_STEM
    # "$2.5k" reads as 2.5 to the program, but the specific extractor finds no amount there
    assert events(ev, {"t": "$2.5k for desks"})[""] == (0, SPLIT_STEM)


def test_two_extractors_of_one_quantity_split_on_two_amounts():
    first = A.ParseMoney(A.Search(T, r"\$(\d+)", 1))
    last = A.ParseMoney(A.Search(T, r"(?:.|\n)*\$(\d+)", 1))
    prog = A.If(((A.Compare("ge", first, 1000), A.Const("review")), (A.Compare("ge", last, 1000), A.Const("review"))),
                A.Const("approve"))
    inputs = [{"t": f"${v} for item {i}"} for i, v in enumerate([5, 50, 400, 800, 1200, 3000, 9000, 20, 70, 2500])]
    w = [(inp, run_program(prog, inp)["answer"]) for inp in inputs]
    ev = build_evidence(prog, w, "t")
    assert events(ev, {"t": "$300 now and $4000 later"})[""][1] == SPLIT_STEM
    assert events(ev, {"t": "$300 for desks"})[""] == (2, NO_DEFAULT_EVIDENCE)  # approve by elimination, not split


def test_a_value_part_contested_by_its_presence_evidence():
    amount = A.ParseMoney(A.Search(T, r"\$(\d+)", 1))
    prog = A.Record((("amount", amount),))
    w = [({"t": f"I was charged ${i + 5}"}, {"amount": float(i + 5)}) for i in range(10)]
    w += [({"t": f"where is parcel {i}"}, {"amount": None}) for i in range(10)]
    ev = build_evidence(prog, w, "t", {"amount": A.Contains(LOW, "charged")})
    assert events(ev, {"t": "I was charged $12"})["amount"] == (0, SUPPORTED)
    assert events(ev, {"t": "where is parcel 99"})["amount"] == (1, SUPPORTED)
    assert events(ev, {"t": "I was charged forty dollars"})["amount"] == (1, CONTESTED)


def _entry(oof=None, **kw):
    w = _witnesses()
    ev = build_evidence(PROGRAM, w, "t", {"": OTHER_EVIDENCE})
    table = event_table(ev, PROGRAM, w)
    if oof is None:
        oof = [OutOfFold(False, True, {"": True}, {"": 0.6}, 0.9, {"": 0}) for _ in range(60)]
    return ev, calibrate_program_guard(oof, ev, table, alpha=0.05, epsilon=0.05, delta=0.1, folds=5, **kw)


def test_calibration_entry_and_the_runtime_agree():
    from auto_runtime.guard import AlwaysDeopt, ProgramEvidence, build_guard

    ev, entry = _entry()
    assert entry["method"] == "program-evidence" and entry["certified"] and not entry["few_shot"]
    part = entry["parts"][0]
    assert part["n"] == part["witnesses"] == 36 and part["calibration_scores"] == sorted(part["calibration_scores"])
    assert "nothing is claimed for inputs that are not exchangeable" in entry["statement"]
    g = build_guard(json.loads(json.dumps(entry)))
    assert isinstance(g, ProgramEvidence)
    texts = ["please refund order 3 now", "hello there", "I was refunded", "please cancel order 2 today, or refund it",
             "send an invoice for order 9", "refund it"]
    for t in texts:
        out = run_program(PROGRAM, {"t": t}, ev.expr)
        assert g.decide_output(out)[0] == decide(entry, out), t
    d = g.evaluate_output(run_program(PROGRAM, {"t": "I was refunded"}, ev.expr))
    assert not d.passed and "split at whole words" in d.reason and "did not test" in d.reason
    assert g.evaluate_output(run_program(PROGRAM, {"t": "please refund order 3 now"}, ev.expr)).passed
    assert g.evaluate_output({"answer": None, "deopt": True}).reason == "program deopt"
    assert not g.decide_output({"answer": "x", "deopt": False})[0]  # no evidence: deopt
    assert not g.decide_output("garbage")[0]
    # broken entries make the guard always deopt, never raise
    for bad in ({**entry, "parts": []}, {**entry, "parts": [{"name": "", "alpha": 2}]},
                {**entry, "risk": {"threshold": "x"}}, {**entry, "deopt_kinds": ["a"]}):
        assert isinstance(build_guard(bad), AlwaysDeopt)
    typed = guard_entry(entry)
    assert isinstance(typed, ProgramEvidenceEntry) and typed.to_dict() == entry
    assert any("program-evidence" in line for line in typed.lines())


def test_few_calibration_points_give_no_threshold_and_say_so():
    oof = [OutOfFold(False, True, {"": True}, {"": 0.6}, 0.9, {"": 0}) for _ in range(30)]
    _ev, entry = _entry(oof)
    assert entry["few_shot"] and entry["risk"]["threshold"] is None
    assert "fewer than the 45" in entry["risk"]["reason"] and "no selective-risk certificate" in entry["statement"]


# ---- the program rung on a few dozen witnesses --------------------------------------------------

def _policy(text: str) -> str:
    import re

    amt = int(re.search(r"\$(\d+)", text).group(1))
    return "reject" if "blocked" in text else ("review" if amt >= 1000 else "approve")


def _requests(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    out: list[str] = []
    while len(out) < n:
        t = (f"{rng.choice(['Ops', 'IT', 'HR', 'Legal'])} needs ${rng.choice([rng.randint(5, 900), rng.randint(1000, 9000)])} "
             f"for {rng.choice(['chairs', 'laptops', 'cables'])} from a {rng.choice(['standard', 'new', 'blocked'])} vendor")
        if t not in out:
            out.append(t)
    return out


def _store(path, texts):
    import auto
    from auto.store import Store

    st = Store(path)

    @auto.task("route")
    def route(request: str) -> str:
        return _policy(request)

    with auto.recording(st):
        for t in texts:
            route(t)
    return st


def test_forty_witnesses_compile_a_program_chosen_by_cross_validation(tmp_path):
    from auto.compile import compile_task

    st = _store(tmp_path / "s.sqlite", _requests(40, 1))
    out = compile_task(st, "route", out_path=tmp_path / "r.wasm", memo=False)
    m = out.manifest
    assert m["compiled_as"] == "program"
    held = m["parity"]["heldout"]
    assert held["method"] == "5-fold out-of-fold" and held["n"] == 40 and held["compared"] == 4
    assert held["rate"] >= 0.95 and held["confidence"] == pytest.approx(1 - 0.05 / 4)
    g = m["guard"]
    assert g["method"] == "program-evidence" and g["few_shot"] and g["risk"]["threshold"] is None
    ev = st.get_eval_run(out.eval_run_id)
    assert ev["verdict"] == "pass" and {c["name"] for c in ev["checks"]} >= {"out-of-fold-agreement", "guard-answers"}
    # the artifact answers a new request at tier-1, and deopts an empty one
    from auto_runtime import Artifact, TieredTask

    tt = TieredTask(Artifact.load(out.wasm), reference=None)
    assert tt({"request": "IT needs $4200 for desks from a new vendor"}).answer == "review"
    assert tt({"request": ""}).tier != "tier-1"
    st.close()


def test_the_gate_refuses_a_program_whose_guard_answers_nothing():
    from auto.gate import Contract, run_program_gate

    c = Contract(task="t")
    guard = {"calibration": {"n": 40, "tier1": 0, "tier1_wrong": 0}, "risk": {"threshold": None}, "few_shot": True}
    rec = run_program_gate(contract=c, run_batch=lambda xs: [{"answer": "a", "deopt": False} for _ in xs],
                           reference_run=lambda inp: {"answer": "a", "deopt": False}, witnessed=[({"t": "x"}, "a")],
                           oof={"n": 40, "agree": 40, "compared": 1, "method": "5-fold out-of-fold"}, guard=guard,
                           candidate={}, generation=1)
    assert rec["verdict"] == "refuse" and "would deopt every input" in rec["reason"]
    rec = run_program_gate(contract=c, run_batch=lambda xs: [{"answer": "a", "deopt": False} for _ in xs],
                           reference_run=lambda inp: {"answer": "a", "deopt": False}, witnessed=[({"t": "x"}, "a")],
                           oof={"n": 40, "agree": 30, "compared": 3, "method": "5-fold out-of-fold",
                                "parts": {"intent": {"n": 40, "agree": 30}, "order_id": {"n": 40, "agree": 40}}},
                           guard={**guard, "calibration": {"n": 40, "tier1": 30, "tier1_wrong": 0}},
                           candidate={}, generation=1)
    assert rec["verdict"] == "refuse" and "per field intent: 30/40, order_id: 40/40" in rec["reason"]


# ---- the ratchet installs a program like any generation -----------------------------------------

def test_the_ratchet_serves_a_program_generation(tmp_path):
    from auto.ratchet import CompilePolicy, Ratchet
    from auto_runtime.manifest import Manifest

    r = Ratchet(lambda inp: _policy(inp["request"]), tmp_path / "r.sqlite", "route", worker="thread", audit_rate=0.0,
                policy=CompilePolicy(first_at=40, min_new=1000, growth=10.0))
    texts = _requests(120, 2)
    res = []
    for t in texts:
        res.append(r.call_result({"request": t}))
        r.wait_idle(300)
    assert r.generation is not None
    from auto.store import Store

    with Store(tmp_path / "r.sqlite") as st:
        m = st.latest_artifact("route").manifest
    assert m["compiled_as"] == "program" and Manifest.of(m).answers_new_inputs
    late = res[60:]
    assert sum(x.tier == "tier-1" for x in late) >= 40
    assert all(x.answer == _policy(t) for x, t in zip(res, texts) if x.tier == "tier-1")
    r.close()


def test_holm_learn_then_test_controls_risk_when_confidence_is_not_monotone():
    """A program's confidence takes a few values that need not rank the risk: here the most confident
    events are the riskiest. Bonferroni-Holm certifies a threshold whose true selective risk exceeds
    epsilon in at most delta of the calibration draws (checked against the exact risks)."""
    import numpy as np
    from scipy.stats import binom

    from auto.guards.risk import calibrate_selective_risk

    levels = np.array([0.5, 0.7, 0.9, 0.99])
    share = np.array([0.1, 0.3, 0.4, 0.2])
    p_wrong = np.array([0.1, 0.01, 0.005, 0.06])  # the top level alone (0.06) violates epsilon

    def true_risk(t: float) -> float:
        m = levels >= t
        return float((share[m] * p_wrong[m]).sum() / share[m].sum())

    rng = np.random.default_rng(3)
    splits, certified, violated = 200, 0, 0
    for _ in range(splits):
        k = rng.choice(4, size=400, p=share)
        conf, ok = levels[k], rng.uniform(size=400) >= p_wrong[k]
        e = calibrate_selective_risk(conf.tolist(), ok.tolist(), epsilon=0.05, delta=0.1, allow_constant=True, holm=True)
        if e["threshold"] is not None:
            certified += 1
            violated += true_risk(e["threshold"]) > 0.05
    assert certified >= 0.8 * splits  # admitting everything (risk 0.027) is certifiable: the test has power
    assert violated <= int(binom.ppf(0.999, splits, 0.1))
