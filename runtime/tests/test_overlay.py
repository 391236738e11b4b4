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
