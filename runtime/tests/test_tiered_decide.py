"""TieredTask.decide / capture_deopt: a host that answers deopts itself gets the same captures."""

from __future__ import annotations

import pytest

from auto_runtime import Artifact, Limits, TieredTask

from .wasm_fixtures import build, echo_wat, manifest

SMALL = Limits(fuel=2_000_000, memory_bytes=4 * 1024 * 1024, timeout_ms=2000)


def load(nonconformity: str) -> Artifact:
    return Artifact.load(build(echo_wat(nonconformity), manifest()), limits=SMALL)


def test_decide_never_calls_the_reference_and_capture_matches_a_deopt():
    calls, caps = [], []
    ref = lambda inp: calls.append(inp) or "ref"  # noqa: E731
    novel = load("0.990000000")
    tt = TieredTask(novel, reference=ref, capture=caps.append)
    res = tt.decide({"ticket": "x"})
    assert res.tier == "declined" and res.answer is None and calls == []
    assert res.reason.startswith("novelty") and res.output is not None  # the would-be answer is there
    tt.capture_deopt({"ticket": "x"}, "ref", res, latency_us=12.5)
    direct = TieredTask(novel, reference=ref, capture=caps.append)({"ticket": "x"})
    assert direct.tier == "tier-0" and len(calls) == 1
    (deferred, called) = caps
    assert set(deferred) == set(called)
    for k in ("task", "input", "output", "reason", "artifact_id", "generation", "artifact_output"):
        assert deferred[k] == called[k], k
    assert deferred["latency_us"] == 12.5


def test_decide_answers_tier1_and_declines_bad_input_without_raising():
    tt = TieredTask(load("0.050000000"), reference=None)
    assert tt.decide({"ticket": "x"}).tier == "tier-1"
    bad = tt.decide({"nope": 1})
    assert bad.tier == "declined" and bad.reason.startswith("input-schema")
    none = TieredTask(None, reference=None).decide({"ticket": "x"})
    assert none.tier == "declined" and none.reason == "no-artifact"


def test_capture_failure_is_logged_not_raised(caplog):
    def boom(rec):
        raise RuntimeError("store down")

    tt = TieredTask(load("0.990000000"), reference=None, capture=boom)
    res = tt.decide({"ticket": "x"})
    tt.capture_deopt({"ticket": "x"}, "a", res)  # no exception
    assert "capture hook failed" in caplog.text
    TieredTask(None, reference=None).capture_deopt({"ticket": "x"}, "a", res)  # no capture: nothing


@pytest.mark.parametrize("tier", ["tier-1"])
def test_decide_offers_tier1_answers_to_the_audit(tier):
    seen = []
    tt = TieredTask(load("0.050000000"), reference=lambda inp: seen.append(inp) or "x", audit_rate=1.0)
    assert tt.decide({"ticket": "y"}).tier == tier
    tt.audit.wait(5)
    assert seen == [{"ticket": "y"}]
    tt.close()
