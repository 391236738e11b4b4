"""The table overlay: admission rule, answers ahead of the artifact, audit origin, disable, fold."""

from __future__ import annotations

import pytest

from auto_runtime import TieredTask
from auto_runtime.overlay import TableOverlay, overlay_rule


def test_admission_rule_is_the_lead_of_the_modal_answer():
    ov = TableOverlay(min_lead=1)
    x = {"ticket": "refund please"}
    assert ov.lookup(x) == (False, None)
    assert ov.observe(x, "billing") is True  # one witness, no disagreeing one: answered
    assert ov.lookup(x) == (True, "billing")
    assert ov.observe(x, "bug") is False  # a tie: deopt
    assert ov.lookup(x) == (False, None)
    assert ov.observe(x, "billing") is True  # the next witness breaks the tie
    assert ov.lookup({"ticket": "refund please"}) == (True, "billing")
    ov2 = TableOverlay(min_lead=2)
    ov2.observe(x, ["a", 1])
    assert ov2.lookup(x) == (False, None)
    ov2.observe(x, ["a", 1])
    assert ov2.lookup(x) == (True, ["a", 1])
    ov2.set_min_lead(3)
    assert ov2.lookup(x) == (False, None)


def test_answers_are_copies_and_non_json_is_ignored():
    ov = TableOverlay()
    x = {"q": "a"}
    ov.observe(x, {"label": "a"})
    _, a = ov.lookup(x)
    a["label"] = "mutated"
    assert ov.lookup(x) == (True, {"label": "a"})
    assert ov.observe({"q": object()}, "a") is False
    assert ov.lookup({"q": object()}) == (False, None)


def test_tiered_task_answers_from_the_overlay_before_any_artifact_and_audits_it():
    calls, captured = [], []

    def ref(inp):
        calls.append(inp)
        return "REF"

    ov = TableOverlay()
    tt = TieredTask(None, ref, captured.append, task="t", audit_rate=1.0, overlay=ov)
    x = {"ticket": "hello"}
    r0 = tt(x)
    assert r0.tier == "tier-0" and len(calls) == 1
    ov.observe(x, r0.answer)  # the host feeds what it captured
    r1 = tt(x)
    assert r1.tier == "tier-1" and r1.reason == "overlay" and r1.answer == "REF" and r1.score == 0.0
    tt.audit.wait(5)
    audits = [c for c in captured if c.get("audit")]
    assert len(audits) == 1 and audits[0]["origin"] == "overlay" and audits[0]["agree"] is True
    ov.disable("risk alarm")
    assert tt(x).tier == "tier-0"
    ov.enable()
    assert tt(x).tier == "tier-0"  # the evidence was forgotten
    tt.close()


def test_fold_marks_entries_and_eviction_prefers_folded_ones():
    ov = TableOverlay(max_entries=3)
    xs = [{"i": i} for i in range(3)]
    for x in xs:
        ov.observe(x, "a")
    assert ov.fold([xs[1], {"i": 99}]) == 1
    ov.observe({"i": 3}, "a")  # full: the folded entry goes first
    assert ov.lookup(xs[1]) == (False, None)
    assert ov.lookup(xs[0]) == (True, "a") and ov.lookup({"i": 3}) == (True, "a")
    assert ov.unfolded_inputs(10) == [{"i": 0}, {"i": 2}, {"i": 3}]
    assert ov.describe()["evicted"] == 1


def test_the_manifest_states_the_rule():
    assert overlay_rule({"contract": {"overlay_min_lead": 2}}) == 2
    assert overlay_rule({"contract": {}}) is None and overlay_rule(None) is None
    with pytest.raises(ValueError):
        TableOverlay(min_lead=0)


def test_a_contested_input_deopts_before_the_artifact_and_the_deopt_breaks_the_tie():
    answers = iter(["bug", "billing", "billing"])

    def ref(inp):
        return next(answers)

    ov = TableOverlay()
    tt = TieredTask(None, ref, None, task="t", overlay=ov)
    x = {"ticket": "it is broken and I want a refund"}
    ov.observe(x, tt(x).answer)  # "bug"
    ov.observe(x, "billing")  # a later witness disagrees: a tie, no answer leads
    assert ov.probe(x)[0] == "contested"
    r = tt(x)
    assert r.tier == "tier-0" and r.reason == "overlay-contested" and r.answer == "billing"
    ov.observe(x, r.answer)
    assert ov.probe(x) == ("admitted", "billing", 1)
    assert TableOverlay(min_lead=2).probe(x)[0] == "absent"
    pending = TableOverlay(min_lead=2)
    pending.observe(x, "bug")
    assert pending.probe(x)[0] == "pending"  # one witness, below k: not contested


def test_overlay_audit_rate_halves_per_agreeing_witness_beyond_k():
    ov = TableOverlay(min_lead=1)
    x = {"q": 1}
    rates = []
    for _ in range(4):
        ov.observe(x, "a")
        state, _, lead = ov.probe(x)
        rates.append(ov.audit_rate(0.08, lead))
    assert rates == [0.08, 0.04, 0.02, 0.01]
    ov.observe(x, "b")  # a disagreeing witness: the lead drops, the rate doubles back
    assert ov.audit_rate(0.08, ov.probe(x)[2]) == 0.02


def test_repeats_are_audited_only_within_the_budget_of_derived_answers():
    from auto_runtime.audit import ShadowAudit

    seen = []
    a = ShadowAudit(lambda inp: "x", seen.append, rate=1.0, hit_rate=1.0, hit_budget=0.5)
    assert not a.offer({"i": 0}, "x", score=0.0)  # nothing derived yet: no repeat is audited
    assert a.offer({"i": 1}, "x", score=0.7)  # a derived answer: audited, and it earns 0.5
    assert not a.offer({"i": 2}, "x", score=0.0)  # 1 > 0.5 * 1
    assert a.offer({"i": 3}, "x", score=0.4) and a.offer({"i": 4}, "x", score=0.0)  # 1 <= 0.5 * 2
    a.wait(5)
    st = a.stats()
    assert (st["derived"], st["hit_selected"], st["hit_over_budget"]) == (2, 1, 2)
    free = ShadowAudit(lambda inp: "x", None, rate=1.0, hit_rate=1.0)
    assert free.offer({"i": 0}, "x", score=0.0)  # no budget: as before
    assert ShadowAudit(lambda inp: "x", None, rate=0.0, hit_rate=1.0, hit_budget=1.0).offer({"i": 0}, "x", score=0.0,
                                                                                             rate=1.0) is False
    a.close(), free.close()
