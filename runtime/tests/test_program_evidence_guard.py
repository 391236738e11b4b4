"""The ``program-evidence`` guard with only the runtime installed: a hand-written manifest entry,
hand-written artifact outputs."""

from __future__ import annotations

import math

import numpy as np

from auto_runtime.guard import AlwaysDeopt, ProgramEvidence, build_guard

ENTRY = {
    "method": "program-evidence",
    "alpha": 0.05,
    "deopt_kinds": [1, 3, 4, 5],
    "kinds": ["supported", "contested", "default without evidence", "split", "split at whole words", "split at phrases"],
    "parts": [
        {"name": "intent", "alpha": 0.025, "witnesses": 100,
         # 60 witnesses decided by rule 0, 38 by rule 1, 2 by the default without evidence
         "calibration_scores": sorted([round(1 - 59 / 99, 9)] * 60 + [round(1 - 37 / 99, 9)] * 38 + [round(1 - 1 / 99, 9)] * 2),
         "events": [{"rule": 0, "kind": 0, "support": 60, "precision": 0.98},
                    {"rule": 1, "kind": 0, "support": 38, "precision": 0.9},
                    {"rule": 2, "kind": 2, "support": 2, "precision": 0.5}],
         "rules": ["refund", "cancel", "other"]},
        {"name": "order_id", "alpha": 0.025, "witnesses": 100,
         "calibration_scores": [0.0] * 100, "events": [{"rule": 0, "kind": 0, "support": 100, "precision": 0.99}],
         "rules": ["value", "null"]},
    ],
    "risk": {"threshold": 0.95, "epsilon": 0.05, "delta": 0.1},
    "statement": "test",
}


def out(intent=(0, 0), order=(0, 0), deopt=False):
    return {"answer": {"intent": "refund", "order_id": "ORD-1"}, "deopt": deopt,
            "evidence": {"intent": {"rule": intent[0], "kind": intent[1]},
                         "order_id": {"rule": order[0], "kind": order[1]}}}


def test_decisions_and_reasons():
    g = build_guard(ENTRY)
    assert isinstance(g, ProgramEvidence) and g.describe()["deopt_kinds"] == [1, 3, 4, 5]
    d = g.evaluate_output(out())
    assert d.passed and 0 < d.p_value <= 1
    # a supported rule below the confidence threshold (precision 0.9 < 0.95)
    d = g.evaluate_output(out(intent=(1, 0)))
    assert not d.passed and d.reason.startswith("confidence 0.9 < threshold 0.95")
    # unwitnessed kinds always deopt, naming the part, the rule and the kind
    d = g.evaluate_output(out(intent=(0, 1)))
    assert not d.passed and d.reason == "field 'intent': rule 0 ('refund') contested: a generalization the witnesses did not test"
    assert "split at phrases" in g.evaluate_output(out(intent=(1, 5))).reason
    # a rare event fails the novelty test: 2 of 100 witnesses, p = 3/101 > 0.025 passes the test but not the
    # risk threshold; an event never seen (support 0, score 1) has p = 1/101 and deopts
    d = g.evaluate_output(out(intent=(7, 0)))
    assert not d.passed and "seen on 0 of 100 witnesses" in d.reason and "novelty p=0.0099" in d.reason
    assert g.evaluate_output(out(deopt=True)).reason == "program deopt"
    assert g.evaluate_output({"answer": 1}).reason.startswith("no-deopt-flag")
    assert g.evaluate_output({"answer": 1, "deopt": False}).reason.startswith("no-evidence")
    bad = out()
    bad["evidence"]["intent"]["rule"] = True  # a bool is not a rule number
    assert not g.decide_output(bad)[0]


def test_batch_matches_single_decisions():
    g = build_guard(ENTRY)
    outs = [out(), out(intent=(1, 0)), out(intent=(0, 3)), out(deopt=True), "error", None, out(order=(1, 0))]
    passed, p = g.evaluate_batch_outputs(outs)
    assert list(passed) == [g.decide_output(o)[0] for o in outs]
    assert np.isnan(p[4]) and not math.isnan(p[0])


def test_without_a_threshold_only_the_evidence_decides():
    g = build_guard({**ENTRY, "risk": {"threshold": None}})
    assert g.evaluate_output(out(intent=(1, 0))).passed
    assert not g.evaluate_output(out(intent=(0, 4))).passed


def test_unusable_entries_always_deopt():
    for bad in ({**ENTRY, "parts": "x"}, {**ENTRY, "parts": [{"name": "a", "alpha": 0.1, "witnesses": 0,
                                                               "calibration_scores": []}]},
                {**ENTRY, "parts": [{**ENTRY["parts"][0], "events": [{"rule": 0, "kind": 0, "support": 1,
                                                                        "precision": 2}]}]},
                {**ENTRY, "risk": {"threshold": float("nan")}}):
        g = build_guard(bad)
        assert isinstance(g, AlwaysDeopt) and not g.evaluate_output(out()).passed
