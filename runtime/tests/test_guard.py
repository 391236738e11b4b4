"""Guards: the conformal p-value on known data, batch == single, and the always-deopt fallback.

Every guard decides from the artifact's output object; ``out(s)`` wraps a nonconformity score ``s``
in one (``{"answer", "nonconformity": s, "margin"}``)."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from auto_runtime.guard import (
    GUARD_METHODS,
    AlwaysDeopt,
    ConformalNovelty,
    ExactMatch,
    Guard,
    GuardDecision,
    build_guard,
    register_guard,
)

CAL = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0]  # n = 10


def entry(**over):
    e = {"method": "conformal-novelty", "alpha": 0.1, "n": len(CAL), "calibration_scores": CAL}
    e.update(over)
    return e


def out(score, margin=0.5):
    """An artifact output carrying ``score`` as its nonconformity."""
    return {"answer": "A", "nonconformity": score, "margin": margin}


def outs(scores):
    return [out(s) for s in scores]


@pytest.mark.parametrize("score, count_ge", [
    (0.0, 10), (0.1, 10), (0.15, 9), (0.5, 6), (0.95, 1), (1.0, 1), (1.01, 0), (5.0, 0), (-3.0, 10),
])
def test_p_value_formula(score, count_ge):
    g = build_guard(entry())
    assert isinstance(g, ConformalNovelty)
    expected = (1 + count_ge) / (len(CAL) + 1)
    assert g.p_value(score) == expected
    d = g.evaluate_output(out(score))
    assert d.p_value == expected
    assert g.decide_output(out(score)) == (d.passed, expected)
    assert d.passed is (expected > 0.1)
    # ties count as ">=": a score equal to a calibration score is not novel against it
    assert sum(1 for c in CAL if c >= score) == count_ge


def test_deopt_iff_p_le_alpha_and_reason():
    g = build_guard(entry(alpha=1 / 11))  # p = 1/11 <= alpha exactly: deopt (the doc's "<=")
    d = g.evaluate_output(out(2.0))
    assert d == GuardDecision(False, 1 / 11, d.reason)
    assert d.reason.startswith("novelty p=0.09091<=alpha=0.09091")
    assert g.reason_output(out(2.0), 1 / 11) == d.reason
    assert g.evaluate_output(out(0.95)).passed  # p = 2/11
    assert g.evaluate_output(out(0.95)).reason == "guard-pass"


def test_unsorted_calibration_is_sorted():
    shuffled = CAL[:]
    random.Random(3).shuffle(shuffled)
    assert build_guard(entry(calibration_scores=shuffled)).p_value(0.55) == 6 / 11


@pytest.mark.parametrize("score", [None, "0.5", True, float("nan"), float("inf"), [0.5]])
def test_missing_or_bad_score_deopts(score):
    g = build_guard(entry())
    d = g.evaluate_output(out(score))
    assert not d.passed and d.p_value is None and d.reason.startswith("no-score")
    assert g.decide_output(out(score)) == (False, None)
    assert g.reason_output(out(score), None) == d.reason


@pytest.mark.parametrize("o", [{"answer": "A"}, {"error": "bad_json"}, None, "x", [0.5], ValueError("item")])
def test_output_without_score_deopts(o):
    g = build_guard(entry())
    d = g.evaluate_output(o)
    assert not d.passed and d.p_value is None and d.reason.startswith("no-score")
    assert g.decide_output(o) == (False, None)


def test_int_score_accepted():
    assert build_guard(entry()).evaluate_output(out(0)).passed


def test_batch_matches_single():
    rng = random.Random(11)
    cal = sorted(rng.random() for _ in range(200))
    g = build_guard(entry(calibration_scores=cal, n=200, alpha=0.05))
    scores = [rng.random() * 1.2 for _ in range(500)] + cal[:20] + [None, float("nan"), "x", 2]
    passed, p = g.evaluate_batch_outputs(outs(scores))
    assert passed.dtype == bool and p.shape == (len(scores),)
    for s, ok, pv in zip(scores, passed.tolist(), p.tolist()):
        d = g.evaluate_output(out(s))
        assert d.passed == ok
        if d.p_value is None:
            assert math.isnan(pv)
        else:
            assert d.p_value == pv  # same float, not just close
            if not ok:
                assert g.reason_output(out(s), pv) == d.reason


def test_batch_all_numbers_fast_path_and_bools():
    g = build_guard(entry())
    passed, p = g.evaluate_batch_outputs(outs([0.05, 0.5, 2.0]))
    assert passed.tolist() == [True, True, False]
    assert p.tolist() == [1.0, 7 / 11, 1 / 11]
    passed, p = g.evaluate_batch_outputs(outs([True, 0.5]))
    assert passed.tolist() == [False, True]
    passed, p = g.evaluate_batch_outputs([out(0.5), {"error": "bad_json"}, None])  # non-dict items decline
    assert passed.tolist() == [True, False, False] and p[0] == 7 / 11 and np.isnan(p[1:]).all()


@pytest.mark.parametrize("bad, why", [
    (None, "must be an object"),
    ([], "must be an object"),
    ({}, "unknown guard method None"),
    ({"method": "telepathy"}, "unknown guard method 'telepathy'"),
    (entry(alpha=0), "alpha"),
    (entry(alpha=1.5), "alpha"),
    (entry(alpha="0.1"), "alpha"),
    (entry(calibration_scores=[]), "non-empty"),
    (entry(calibration_scores=None), "non-empty"),
    (entry(calibration_scores=[0.1, "x"]), "calibration_scores\\[1\\]"),
    (entry(calibration_scores=[0.1, float("nan")]), "calibration_scores\\[1\\]"),
    (entry(n=11), "n=11 but there are 10"),
    (entry(n=True), "n=True"),
])
def test_unusable_guard_is_always_deopt(bad, why):
    g = build_guard(bad)
    assert isinstance(g, AlwaysDeopt) and not g.usable
    d = g.evaluate_output(out(0.1))
    assert not d.passed and d.p_value is None
    assert d.reason.startswith("guard-unusable: ")
    import re
    assert re.search(why, d.reason), d.reason
    assert g.decide_output(out(0.1)) == (False, None) and g.reason_output(out(0.1), None) == d.reason
    passed, p = g.evaluate_batch_outputs(outs([0.1, 0.2]))
    assert not passed.any() and np.isnan(p).all()


def test_none_method_is_declared_always_deopt(caplog):
    g = build_guard({"method": "none"})
    assert isinstance(g, AlwaysDeopt)
    assert "declares no guard" in g.evaluate_output(out(0.0)).reason
    assert not [r for r in caplog.records if r.levelname == "WARNING"]


def test_never_deopting_configuration_is_flagged(caplog):
    g = build_guard(entry(alpha=0.01))  # 1/(n+1) = 0.0909 > 0.01
    assert isinstance(g, ConformalNovelty) and g.never_deopts
    assert g.evaluate_output(out(100.0)).passed  # it passes even far out: that is what is flagged
    assert any("can never deopt" in r.getMessage() for r in caplog.records)


def test_registry_accepts_new_methods():
    class Threshold(Guard):
        method = "test-threshold"

        def __init__(self, t):
            self.t = t

        def evaluate_output(self, o):
            score = o.get("nonconformity") if isinstance(o, dict) else None
            ok = isinstance(score, float) and score < self.t
            return GuardDecision(ok, None, "guard-pass" if ok else f"score>={self.t}")

    @register_guard("test-threshold")
    def make(e):
        return Threshold(float(e["t"]))

    try:
        g = build_guard({"method": "test-threshold", "t": 0.3})
        assert g.evaluate_output(out(0.2)).passed and not g.evaluate_output(out(0.4)).passed
        passed, p = g.evaluate_batch_outputs(outs([0.2, 0.4]))
        assert passed.tolist() == [True, False] and np.isnan(p).all()
        assert g.decide_output(out(0.2)) == (True, None)
        assert g.reason_output(out(0.4), None) == "score>=0.3"
        # a factory error becomes always-deopt
        assert isinstance(build_guard({"method": "test-threshold"}), AlwaysDeopt)
    finally:
        GUARD_METHODS.pop("test-threshold", None)


# ---- exact-match (table artifacts) ----------------------------------------------------------------

UNSEEN = "unseen input (exact-match guard)"


def test_exact_match_registered_and_built():
    assert "exact-match" in GUARD_METHODS
    g = build_guard({"method": "exact-match"})
    assert isinstance(g, ExactMatch) and g.usable
    assert g.describe() == {"method": "exact-match", "usable": True}
    # extra fields (e.g. informational counts) are ignored
    assert isinstance(build_guard({"method": "exact-match", "entries": 200}), ExactMatch)


@pytest.mark.parametrize("score, passed, reason", [
    (0.0, True, "guard-pass"), (-0.0, True, "guard-pass"), (0, True, "guard-pass"),
    (1.0, False, UNSEEN), (1, False, UNSEEN), (1e-9, False, UNSEEN), (-1e-9, False, UNSEEN),
    (0.5, False, UNSEEN), (10**400, False, UNSEEN), (np.float64(0.0), True, "guard-pass"),
    (None, False, "no-score"), ("0", False, "no-score"), ("0.0", False, "no-score"),
    (False, False, "no-score"), (True, False, "no-score"), ([0.0], False, "no-score"),
    (float("nan"), False, "no-score"), (float("inf"), False, "no-score"),
    (float("-inf"), False, "no-score"), ({}, False, "no-score"),
])
def test_exact_match_single(score, passed, reason):
    g = build_guard({"method": "exact-match"})
    d = g.evaluate_output(out(score))
    assert d.passed is passed and d.p_value is None
    assert d.reason.startswith(reason)
    assert g.decide_output(out(score)) == (passed, None)
    if not passed:
        assert g.reason_output(out(score), None) == d.reason


def test_exact_match_batch_matches_single():
    g = build_guard({"method": "exact-match"})
    rng = random.Random(5)
    floats = [rng.choice([0.0, 1.0, 0.25, -0.0]) for _ in range(300)]
    mixed = floats[:50] + [0, 1, None, "0", True, False, float("nan"), float("inf"), 10**400,
                           np.float64(0.0), [0.0]]
    for scores in (floats, mixed, [], [0.0], [1.0]):
        passed, p = g.evaluate_batch_outputs(outs(scores))
        assert passed.dtype == bool and passed.shape == p.shape == (len(scores),)
        assert np.isnan(p).all()
        assert passed.tolist() == [g.evaluate_output(out(s)).passed for s in scores]
    passed, _ = g.evaluate_batch_outputs([out(0.0), {"answer": 1}, None, {"error": "bad_json"}])
    assert passed.tolist() == [True, False, False, False]


def test_exact_match_never_raises():
    g = build_guard({"method": "exact-match"})

    class Weird:
        def __eq__(self, other):
            raise RuntimeError("boom")

    assert not g.evaluate_output(out(Weird())).passed
    assert g.decide_output(out(Weird())) == (False, None)
    passed, p = g.evaluate_batch_outputs(outs([Weird(), 0.0]))
    assert passed.tolist() == [False, True]
    passed, p = g.evaluate_batch_outputs(None)  # not even a sequence: nothing passes, no exception
    assert passed.shape == (0,)
