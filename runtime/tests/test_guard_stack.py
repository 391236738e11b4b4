"""Output-based guards: the stack, selective-risk and program methods, malformed stack entries,
the score-based methods through outputs, custom methods, and the tightened wrapper."""

from __future__ import annotations

import logging
import math
import random
import re

import numpy as np
import pytest

from auto_runtime.guard import (
    GUARD_METHODS,
    AlwaysDeopt,
    ConformalNovelty,
    ExactMatch,
    Guard,
    GuardDecision,
    GuardStack,
    ProgramGuard,
    SelectiveRisk,
    TightenedGuard,
    build_guard,
    register_guard,
)

CAL = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0]  # n = 10


def novelty(**over):
    e = {"method": "conformal-novelty", "alpha": 0.1, "calibration_scores": CAL, "n": len(CAL)}
    e.update(over)
    return e


def risk(**over):
    e = {"method": "selective-risk", "confidence_field": "margin", "threshold": 0.42,
         "epsilon": 0.05, "delta": 0.1, "n": 80,
         "procedure": "fixed-sequence (LTT, mapie.risk_control)",
         "smallest_certifiable_epsilon": 0.03, "heldout_coverage": 0.81,
         "heldout_selective_risk": 0.012, "heldout_selective_risk_ci95_high": 0.05, "reason": None}
    e.update(over)
    return e


def stack(*components, **over):
    e = {"method": "stack", "components": list(components) or [novelty(), risk()],
         "fallback_reason": None, "statement": "test"}
    e.update(over)
    return e


def out(nc=0.5, margin=0.8, **extra):
    o = {"answer": "A", "margin": margin, "nonconformity": nc}
    o.update(extra)
    return o


CONF_REASON = "confidence 0.12 < threshold 0.42 (selective risk eps=0.05, delta=0.1)"
NOVEL_REASON = "novelty p=0.09091<=alpha=0.1"


# ---- stack decisions ------------------------------------------------------------------------------

def test_stack_is_built_and_described():
    g = build_guard(stack())
    assert isinstance(g, GuardStack) and g.usable
    d = g.describe()
    assert d["method"] == "stack"
    assert [c["method"] for c in d["components"]] == ["conformal-novelty", "selective-risk"]
    assert d["components"][1]["threshold"] == 0.42 and d["components"][1]["epsilon"] == 0.05
    assert g.statement == "test"


@pytest.mark.parametrize("o, passed, p, reason", [
    (out(0.5, 0.8), True, 7 / 11, "guard-pass"),
    (out(0.5, 0.42), True, 7 / 11, "guard-pass"),          # >= threshold passes
    (out(0.5, 0.12), False, 7 / 11, CONF_REASON),           # risk fails, p still reported
    (out(2.0, 0.8), False, 1 / 11, NOVEL_REASON),           # novelty fails
    (out(2.0, 0.12), False, 1 / 11, NOVEL_REASON),          # both fail: the first one's reason
    (out(0.5, None), False, 7 / 11, "no-confidence: artifact output has no finite 'margin'"),
    (out(0.5, float("nan")), False, 7 / 11, "no-confidence"),
    (out(0.5, float("inf")), False, 7 / 11, "no-confidence"),
    (out(0.5, True), False, 7 / 11, "no-confidence"),
    (out(0.5, "0.9"), False, 7 / 11, "no-confidence"),
    (out(None, 0.8), False, None, "no-score"),
    ({"answer": "A"}, False, None, "no-score"),
    ("not a dict", False, None, "no-score"),
    (None, False, None, "no-score"),
])
def test_stack_decision(o, passed, p, reason):
    g = build_guard(stack())
    assert g.decide_output(o) == (passed, p)
    d = g.evaluate_output(o)
    assert d.passed is passed and d.p_value == p
    assert d.reason.startswith(reason), d.reason
    if not passed:
        assert g.reason_output(o, p) == d.reason


def test_stack_reason_follows_component_order_and_p_comes_from_novelty():
    g = build_guard(stack(risk(), novelty()))
    d = g.evaluate_output(out(2.0, 0.12))
    assert d.reason == CONF_REASON and d.p_value == 1 / 11
    assert g.evaluate_output(out(2.0, 0.8)).reason == NOVEL_REASON
    # without a novelty component there is no p-value
    g2 = build_guard(stack(risk()))
    assert g2.evaluate_output(out(0.5, 0.8)) == GuardDecision(True, None, "guard-pass")
    assert g2.evaluate_output(out(0.5, 0.12)).reason == CONF_REASON


def test_stack_batch_matches_single():
    rng = random.Random(2)
    g = build_guard(stack(novelty(alpha=0.2), risk(threshold=0.3, confidence_field="conf")))
    outs = [{"answer": i, "nonconformity": rng.random() * 1.3, "conf": rng.random()}
            for i in range(300)]
    outs += [{"answer": 1, "nonconformity": 0.1, "conf": None}, {"answer": 1, "conf": 0.9},
             {"error": "bad_json"}, ValueError("item failed"), None,
             {"answer": 1, "nonconformity": 0.1, "conf": 10**400},
             {"answer": 1, "nonconformity": 0.1, "conf": float("nan")}]
    passed, p = g.evaluate_batch_outputs(outs)
    assert passed.dtype == bool and passed.shape == p.shape == (len(outs),)
    assert 0 < passed.sum() < len(outs)
    for o, ok, pv in zip(outs, passed.tolist(), p.tolist()):
        d = g.evaluate_output(o)
        assert d.passed is ok
        assert (d.p_value is None and math.isnan(pv)) or d.p_value == pv
        if not ok:
            assert g.reason_output(o, None if math.isnan(pv) else pv) == d.reason


def test_stack_declines_an_output_with_only_a_score():
    # there is no score API: a bare score is an output without the confidence the stack needs
    g = build_guard(stack())
    for name in ("evaluate", "decide", "evaluate_batch", "reason"):
        assert not hasattr(g, name)
    d = g.evaluate_output({"nonconformity": 0.5})
    assert not d.passed and d.p_value == 7 / 11 and d.reason.startswith("no-confidence")
    assert g.decide_output({"nonconformity": 0.5}) == (False, 7 / 11)
    passed, p = g.evaluate_batch_outputs([{"nonconformity": 0.5}, {"nonconformity": 0.6}])
    assert passed.tolist() == [False, False] and p.tolist() == [7 / 11, 6 / 11]


# ---- malformed stack entries ------------------------------------------------------------------------

@pytest.mark.parametrize("bad, why", [
    (stack(components=None), "components must be a non-empty list"),
    (stack(components=[]), "components must be a non-empty list"),
    (stack(components={"0": novelty()}), "components must be a non-empty list"),
    (stack(novelty(), 3), "stack component 1 must be an object, got int"),
    (stack(novelty(), {"method": "telepathy"}), "stack component 1: unknown component method 'telepathy'"),
    (stack({"threshold": 0.4}), "stack component 0: unknown component method None"),
    (stack(novelty(), stack()), "stack component 1: unknown component method 'stack'"),
    (stack(novelty(alpha=0), risk()), r"stack component 0 \(conformal-novelty\): alpha"),
    (stack(novelty(calibration_scores=[]), risk()), r"component 0 \(conformal-novelty\): calibration_scores"),
    (stack(novelty(), risk(threshold="0.4")), r"stack component 1 \(selective-risk\): threshold"),
    (stack(novelty(), risk(threshold=float("inf"))), r"component 1 \(selective-risk\): threshold"),
    (stack(novelty(), {k: v for k, v in risk().items() if k != "threshold"}), "has no 'threshold'"),
    (stack(novelty(), risk(epsilon=1.5)), "epsilon must be a number in"),
    (stack(novelty(), risk(delta="x")), "delta must be a number in"),
    (stack(novelty(), risk(confidence_field="")), "confidence_field"),
    (stack(novelty(), risk(n=-1)), "n must be a non-negative integer"),
    (stack(fallback_reason=5), "fallback_reason must be a non-empty string"),
    (stack(fallback_reason="  "), "fallback_reason must be a non-empty string"),
])
def test_malformed_stack_is_always_deopt(bad, why, caplog):
    with caplog.at_level(logging.WARNING, logger="auto_runtime.guard"):
        g = build_guard(bad)
    assert isinstance(g, AlwaysDeopt) and not g.usable and not g.declared
    d = g.evaluate_output(out(0.1, 0.9))  # an output every usable stack would pass
    assert not d.passed and d.p_value is None
    assert d.reason.startswith("guard-unusable: ")
    assert re.search(why, d.reason), d.reason
    assert any("guard unusable" in r.getMessage() for r in caplog.records)
    passed, p = g.evaluate_batch_outputs([out(0.1, 0.9)] * 3)
    assert not passed.any() and np.isnan(p).all()


def test_fallback_reason_always_deopts_with_the_entry_reason(caplog):
    with caplog.at_level(logging.WARNING, logger="auto_runtime.guard"):
        g = build_guard(stack(fallback_reason="only 12 calibration points: no guarantee"))
    assert isinstance(g, AlwaysDeopt) and g.declared
    assert g.evaluate_output(out(0.1, 0.9)).reason == \
        "guard-unusable: only 12 calibration points: no guarantee"
    assert g.decide_output(out(0.1, 0.9)) == (False, None)
    assert not [r for r in caplog.records if r.levelname == "WARNING"]  # declared: not a fault
    # the fallback wins even over broken components
    assert build_guard(stack(components=None, fallback_reason="x")).why == "x"


def test_null_threshold_component_makes_the_stack_always_deopt():
    g = build_guard(stack(novelty(), risk(threshold=None, reason="confidence is constant")))
    assert isinstance(g, AlwaysDeopt) and g.declared
    assert g.evaluate_output(out(0.1, 0.9)).reason == \
        "guard-unusable: selective-risk: confidence is constant"
    g = build_guard(stack(novelty(), risk(threshold=None, reason=None)))
    assert "threshold null" in g.evaluate_output(out()).reason


# ---- selective-risk and program alone ---------------------------------------------------------------

def test_selective_risk_alone():
    g = build_guard(risk())
    assert isinstance(g, SelectiveRisk)
    assert g.decide_output(out(5.0, 0.5)) == (True, None)   # nonconformity is not looked at
    assert g.evaluate_output(out(0.0, 0.12)) == GuardDecision(False, None, CONF_REASON)
    assert g.evaluate_output(out(0.0, -1)).reason.startswith("confidence -1 < threshold 0.42")
    assert g.decide_output(out(0.0, 1)) == (True, None)     # ints are numbers
    g2 = build_guard(risk(epsilon=None, delta=None, confidence_field="conf", threshold=-0.5))
    assert g2.evaluate_output({"answer": 1, "conf": -0.75}).reason == \
        "confidence -0.75 < threshold -0.5 (selective risk eps=?, delta=?)"
    assert g2.decide_output({"answer": 1, "conf": -0.5}) == (True, None)
    assert g2.evaluate_output(out(0.0, 0.9)).reason == \
        "no-confidence: artifact output has no finite 'conf'"
    assert build_guard({"method": "selective-risk", "threshold": 0.1}).confidence_field == "margin"
    null = build_guard(risk(threshold=None, reason="too few points (n=7)"))
    assert isinstance(null, AlwaysDeopt) and null.declared
    assert null.evaluate_output(out()).reason == "guard-unusable: selective-risk: too few points (n=7)"


@pytest.mark.parametrize("o, passed, reason", [
    ({"answer": "A", "deopt": False}, True, "guard-pass"),
    ({"answer": "A", "deopt": True}, False, "program deopt"),
    ({"answer": "A"}, False, "no-deopt-flag"),
    ({"answer": "A", "deopt": 0}, False, "no-deopt-flag"),
    ({"answer": "A", "deopt": "false"}, False, "no-deopt-flag"),
    ({"answer": "A", "deopt": None}, False, "no-deopt-flag"),
    ({"error": "bad_json"}, False, "no-deopt-flag"),
    ([False], False, "no-deopt-flag"),
])
def test_program_guard(o, passed, reason):
    g = build_guard({"method": "program"})
    assert isinstance(g, ProgramGuard)
    assert g.decide_output(o) == (passed, None)
    d = g.evaluate_output(o)
    assert d.passed is passed and d.p_value is None and d.reason.startswith(reason)
    ps, p = g.evaluate_batch_outputs([o, {"answer": 1, "deopt": False}])
    assert ps.tolist() == [passed, True] and np.isnan(p).all()
    assert not g.evaluate_output(out(0.0, 1.0)).passed  # a score says nothing about a program


# ---- score-based methods through outputs ---------------------------------------------------------

def test_score_methods_forms_agree():
    rng = random.Random(4)
    scores = [rng.random() * 1.2 for _ in range(100)] + [0.0, 0, 1, None, "x", float("nan"), 10**400]
    outs = [{"answer": 1, "margin": 1.0, "nonconformity": s} for s in scores]
    nov = build_guard(novelty())
    for s, o in zip(scores, outs):  # the novelty p-value is the formula's on the output's score
        finite = not isinstance(s, (str, type(None))) and s == s and s < 10**300
        assert nov.decide_output(o) == ((nov.p_value(s) > 0.1, nov.p_value(s)) if finite else (False, None))
    for entry in (novelty(), {"method": "exact-match"}, {"method": "none"}):
        g = build_guard(entry)
        for o in outs:
            d = g.evaluate_output(o)
            assert g.decide_output(o) == (d.passed, d.p_value)
            if not d.passed:
                assert g.reason_output(o, d.p_value) == d.reason
        ps, p = g.evaluate_batch_outputs(outs)
        assert ps.tolist() == [g.decide_output(o)[0] for o in outs]
        assert [None if math.isnan(x) else x for x in p.tolist()] == [g.decide_output(o)[1] for o in outs]
    assert isinstance(build_guard(novelty()), ConformalNovelty)
    assert isinstance(build_guard({"method": "exact-match"}), ExactMatch)
    assert build_guard({"method": "exact-match"}).evaluate_output({"answer": 1}).reason.startswith("no-score")


def test_custom_method_gets_the_other_forms_by_default():
    class Below(Guard):  # implements evaluate_output only
        method = "test-below"

        def evaluate_output(self, o):
            score = o.get("nonconformity") if isinstance(o, dict) else None
            ok = isinstance(score, float) and score < 0.3
            return GuardDecision(ok, 0.5 if ok else None, "guard-pass" if ok else "too high")

    @register_guard("test-below")
    def make(e):
        return Below()

    try:
        g = build_guard({"method": "test-below"})
        assert g.decide_output(out(0.2)) == (True, 0.5)
        assert g.evaluate_output(out(0.4)).reason == "too high"
        assert g.reason_output(out(0.4), None) == "too high"
        passed, p = g.evaluate_batch_outputs([out(0.2), out(0.4), None])
        assert passed.tolist() == [True, False, False] and p[0] == 0.5 and np.isnan(p[1:]).all()
        assert g.describe() == {"method": "test-below", "usable": True}
        # a registered method may be a stack component
        s = build_guard(stack(novelty(), {"method": "test-below"}))
        assert isinstance(s, GuardStack)
        assert s.evaluate_output(out(0.4)).reason == "too high"
    finally:
        GUARD_METHODS.pop("test-below", None)


# ---- tightened wrapper ------------------------------------------------------------------------------

def test_tightened_guard_declines_but_keeps_p():
    inner = build_guard(stack())
    g = TightenedGuard(inner, "martingale 140 >= 100")
    assert g.decide_output(out(0.5, 0.8)) == (False, 7 / 11)
    d = g.evaluate_output(out(0.5, 0.8))
    assert d == GuardDecision(False, 7 / 11, "shift alarm: martingale 140 >= 100")
    passed, p = g.evaluate_batch_outputs([out(0.5, 0.8), out(2.0, 0.8)])
    assert passed.tolist() == [False, False] and p.tolist() == [7 / 11, 1 / 11]
    assert g.reason_output(out(), 0.5) == "shift alarm: martingale 140 >= 100"
    assert g.describe()["inner"]["method"] == "stack"
    n = TightenedGuard(build_guard(novelty()), "x")
    assert n.decide_output(out(0.5)) == (False, 7 / 11)
    assert n.evaluate_output(out(0.5)).reason == "shift alarm: x"

    class Broken(Guard):
        def evaluate_output(self, o):
            raise RuntimeError("boom")

        def evaluate_batch_outputs(self, outs):
            raise RuntimeError("boom")

    b = TightenedGuard(Broken(), "y")  # a raising inner guard: still "deopt", no p-value
    assert b.evaluate_output(out()) == GuardDecision(False, None, "shift alarm: y")
    passed, p = b.evaluate_batch_outputs([out(), out()])
    assert passed.tolist() == [False, False] and np.isnan(p).all()


def test_new_methods_never_raise_on_weird_outputs():
    class Weird:
        def __ge__(self, other):
            raise RuntimeError("boom")

        def __float__(self):
            raise RuntimeError("boom")

    weird_outs = [{"answer": 1, "margin": Weird(), "nonconformity": Weird(), "deopt": Weird()},
                  Weird(), {}, [], 3]
    for entry in (stack(), risk(), {"method": "program"}):
        g = build_guard(entry)
        for o in weird_outs:
            assert g.decide_output(o)[0] is False
            assert not g.evaluate_output(o).passed
        passed, _ = g.evaluate_batch_outputs(weird_outs)
        assert not passed.any()
        assert g.evaluate_batch_outputs(None)[0].shape == (0,)
