"""TieredTask with output-based guards (stack, program), tighten / swap, and the shadow audit."""

from __future__ import annotations

import random
import threading
import time

import pytest

from auto_runtime import Artifact, Limits, TieredTask
from auto_runtime.audit import AUDIT_REASON, ShadowAudit
from auto_runtime.guard import Guard, GuardDecision

from .wasm_fixtures import CALIBRATION, build, const_output_wat, echo_wat, manifest

SMALL = Limits(fuel=2_000_000, memory_bytes=4 * 1024 * 1024, timeout_ms=2000)
DEOPT_KEYS = {"task", "input", "output", "reason", "artifact_id", "generation", "latency_us", "artifact_output"}

NOVELTY = {"method": "conformal-novelty", "alpha": 0.1, "n": len(CALIBRATION),
           "calibration_scores": CALIBRATION}
RISK = {"method": "selective-risk", "confidence_field": "margin", "threshold": 0.42,
        "epsilon": 0.05, "delta": 0.1, "n": 80, "reason": None}
STACK = {"method": "stack", "components": [NOVELTY, RISK], "fallback_reason": None,
         "statement": "test stack"}


def load(wat: str, **manifest_overrides) -> Artifact:
    return Artifact.load(build(wat, manifest(**manifest_overrides)), limits=SMALL)


def echo(margin="0.900000000", guard=None, generation=1) -> Artifact:
    """Echo artifact: nonconformity 0.05 (p = 1) for short inputs, 0.99 (p = 0.05) for inputs
    longer than 30 bytes of JSON; the given margin for all."""
    return load(echo_wat("0.050000000", long_nonconformity="0.990000000", long_threshold=30,
                         margin=margin), guard=guard or STACK, generation=generation)


class Recorder:
    def __init__(self, answer=None):
        self.answer = answer
        self.calls: list = []
        self.captured: list = []
        self.lock = threading.Lock()

    def reference(self, inp):
        with self.lock:
            self.calls.append(inp)
        return inp if self.answer is None else self.answer

    def capture(self, rec):
        with self.lock:
            self.captured.append(rec)


SHORT = {"ticket": "hi"}
LONG = {"ticket": "a much longer ticket text here"}


# ---- stack and program through TieredTask -----------------------------------------------------------

def test_stack_guard_in_tiered_task():
    r = Recorder(answer="REF")
    confident = TieredTask(echo("0.900000000"), r.reference, r.capture)
    res = confident(SHORT)
    assert (res.tier, res.reason, res.p_value, res.score) == ("tier-1", "guard-pass", 1.0, 0.05)
    res = confident(LONG)
    assert (res.tier, res.reason, res.p_value) == ("tier-0", "novelty p=0.05<=alpha=0.1", 0.05)
    unsure = TieredTask(echo("0.120000000"), r.reference, r.capture)
    res = unsure(SHORT)
    assert res.tier == "tier-0" and res.answer == "REF" and res.p_value == 1.0
    assert res.reason == "confidence 0.12 < threshold 0.42 (selective risk eps=0.05, delta=0.1)"
    assert r.captured[-1]["reason"] == res.reason and set(r.captured[-1]) == DEOPT_KEYS
    # batch == one by one
    inputs = [SHORT, LONG, {"ticket": 3}, {"ticket": "ok"}]
    for task in (confident, unsure):
        b = task.batch(inputs)
        s = [task(x) for x in inputs]
        assert [(x.tier, x.reason, x.p_value, x.score) for x in b] == \
               [(x.tier, x.reason, x.p_value, x.score) for x in s]
    assert [x.tier for x in confident.batch(inputs)] == ["tier-1", "tier-0", "tier-0", "tier-1"]
    assert confident.guard_errors == 0 and unsure.guard_errors == 0


def test_malformed_stack_deopts_every_call():
    bad = dict(STACK, components=[NOVELTY, {"method": "telepathy"}])
    task = TieredTask(echo(guard=bad), lambda x: "REF")
    for res in [task(SHORT), *task.batch([SHORT, SHORT])]:
        assert res.tier == "tier-0"
        assert res.reason == "guard-unusable: stack component 1: unknown component method 'telepathy'"


@pytest.mark.parametrize("text, tier, reason", [
    ('{"answer":"A","deopt":false}', "tier-1", "guard-pass"),
    ('{"answer":null,"deopt":true}', "tier-0", "program deopt"),
    ('{"answer":"A"}', "tier-0", "no-deopt-flag: artifact output has no boolean 'deopt'"),
])
def test_program_guard_in_tiered_task(text, tier, reason):
    art = load(const_output_wat(text), guard={"method": "program"}, compiled_as="program")
    task = TieredTask(art, lambda x: "REF")
    for res in [task(SHORT), *task.batch([SHORT, LONG])]:
        assert (res.tier, res.reason) == (tier, reason)
        assert res.score is None and res.p_value is None
        assert res.answer == ("A" if tier == "tier-1" else "REF")
    assert task.guard_errors == 0


# ---- tighten / swap ---------------------------------------------------------------------------------

def test_tighten_then_swap():
    r = Recorder(answer="REF")
    task = TieredTask(echo(), r.reference, r.capture)
    assert task.tightened is None and task(SHORT).tier == "tier-1"
    task.tighten("martingale 130 >= 100")
    assert task.tightened == "martingale 130 >= 100"
    res = task(SHORT)
    assert (res.tier, res.answer, res.reason) == ("tier-0", "REF", "shift alarm: martingale 130 >= 100")
    assert res.p_value == 1.0 and res.score == 0.05  # the monitor keeps getting p-values
    assert r.captured[-1]["reason"] == res.reason
    assert [(x.tier, x.reason, x.p_value) for x in task.batch([SHORT, LONG])] == [
        ("tier-0", "shift alarm: martingale 130 >= 100", 1.0),
        ("tier-0", "shift alarm: martingale 130 >= 100", 0.05)]
    # failures before the guard keep their own reason
    assert task({"ticket": 5}).reason.startswith("input-schema:")
    task.tighten("second alarm")  # replaces, does not nest
    assert task(SHORT).reason == "shift alarm: second alarm" and task.tightened == "second alarm"
    with pytest.raises(ValueError, match="non-empty reason"):
        task.tighten("")
    with pytest.raises(ValueError, match="non-empty reason"):
        task.tighten(None)  # type: ignore[arg-type]
    gen2 = echo(generation=2)
    task.swap(gen2)
    assert task.tightened is None
    res = task(SHORT)
    assert (res.tier, res.generation) == ("tier-1", 2)
    # tightening with no artifact: nothing answers at tier 1 anyway, the reason stays no-artifact
    task.swap(None)
    task.tighten("x")
    assert task(SHORT).reason == "no-artifact" and task.tightened == "x"
    task.swap(echo())
    assert task(SHORT).tier == "tier-1"
    assert task.guard_errors == 0


# ---- a guard that raises ----------------------------------------------------------------------------

class RaisingGuard(Guard):
    """A broken custom guard: ``where`` says which form raises."""

    method = "test-raising"

    def __init__(self, where):
        self.where = where

    def evaluate_output(self, out):
        if "evaluate" in self.where:
            raise ZeroDivisionError("boom")
        return GuardDecision(False, None, "declined")

    def decide_output(self, out):
        if "decide" in self.where:
            raise ZeroDivisionError("boom")
        return (out.get("nonconformity") == 0.05), None

    def evaluate_batch_outputs(self, outs):
        if "batch" in self.where:
            raise ZeroDivisionError("boom")
        if "short" in self.where:  # a verdict missing
            return super().evaluate_batch_outputs(outs[1:])
        return super().evaluate_batch_outputs(outs)


def with_guard(guard):
    art = echo()
    art.guard = guard
    return art


ERR = "guard-error: ZeroDivisionError: boom"


@pytest.mark.parametrize("where, single, single_errors, batch, batch_errors", [
    # decide_output raises (so does the default batch form built on it): everything deopts
    ("decide", [("tier-0", ERR), ("tier-0", ERR)], 2, [("tier-0", ERR)] * 3, 1),
    # the decision works, asking for the reason of a declined output raises
    ("evaluate", [("tier-1", "guard-pass"), ("tier-0", ERR)], 1,
     [("tier-1", "guard-pass"), ("tier-0", ERR), ("tier-1", "guard-pass")], 1),
    # only the batch decision raises: single calls are fine, the whole chunk deopts
    ("batch", [("tier-1", "guard-pass"), ("tier-0", "declined")], 0, [("tier-0", ERR)] * 3, 1),
])
def test_raising_guard_deopts_is_logged_and_counted(where, single, single_errors, batch, batch_errors,
                                                    caplog):
    r = Recorder(answer="REF")
    task = TieredTask(with_guard(RaisingGuard(where)), r.reference, r.capture, batch_chunk=8)
    with caplog.at_level("WARNING", logger="auto_runtime.tiered"):
        res = [task(SHORT), task(LONG)]
        assert [(x.tier, x.reason) for x in res] == single
        assert task.guard_errors == single_errors
        out = task.batch([SHORT, LONG, SHORT])
    assert [(x.tier, x.reason) for x in out] == batch
    assert task.guard_errors == single_errors + batch_errors
    for x in res + out:  # no answer is lost: a guard error is answered by the reference
        assert x.answer == ({"ticket": "hi"} if x.tier == "tier-1" else "REF")
    assert [c["reason"] for c in r.captured] == [x.reason for x in res + out if x.tier == "tier-0"]
    logged = [rec for rec in caplog.records if "raised, deopting" in rec.getMessage()]
    assert len(logged) == task.guard_errors
    assert [bool(rec.exc_info) for rec in logged] == [i == 0 for i in range(len(logged))]  # one traceback


def test_batch_decision_of_the_wrong_length_is_a_guard_error():
    task = TieredTask(with_guard(RaisingGuard("short")), lambda x: "REF")
    out = task.batch([SHORT, SHORT])
    assert [(x.tier, x.answer) for x in out] == [("tier-0", "REF")] * 2
    assert out[0].reason == "guard-error: ValueError: the batch decision has 1 verdicts and 1 " \
                            "p-values for 2 outputs"
    assert task.guard_errors == 1


def test_raising_guard_without_reference_is_declined_not_raised():
    task = TieredTask(with_guard(RaisingGuard("decide batch")), None)
    assert task(SHORT).tier == "declined" and task(SHORT).reason.startswith("guard-error: ")
    assert [x.tier for x in task.batch([SHORT, SHORT])] == ["declined"] * 2
    assert task.guard_errors == 3  # two single calls, one batch chunk


# ---- shadow audit -----------------------------------------------------------------------------------

def inputs(n):
    return [{"ticket": f"t{i}"} for i in range(n)]


def test_audit_rate_zero_audits_nothing():
    r = Recorder()
    task = TieredTask(echo(), r.reference, r.capture)
    for x in inputs(50):
        assert task(x).tier == "tier-1"
    task.batch(inputs(20))
    a = task.audit
    assert isinstance(a, ShadowAudit) and not a.active
    assert (a.n, a.selected, a.skipped, a.errors) == (0, 0, 0, 0)
    assert a._thread is None and a.wait(0.01) and r.calls == [] and r.captured == []


def test_audit_rate_one_audits_every_tier1_answer_and_counts_disagreements():
    wrong = {"t3", "t7"}
    r = Recorder()

    def reference(x):
        r.reference(x)
        return {"ticket": "WRONG"} if x["ticket"] in wrong else x

    task = TieredTask(echo(), reference, r.capture, audit_rate=1.0)
    xs = inputs(10)
    for x in xs:
        assert task(x).tier == "tier-1"
    res = task(LONG)  # a deopt: answered by the reference, not audited
    assert res.tier == "tier-0"
    assert task.audit.wait(5)
    a = task.audit
    assert (a.n, a.disagreements, a.errors, a.skipped, a.selected) == (10, 2, 0, 0, 10)
    recs = sorted(a.records, key=lambda d: d["input"]["ticket"])
    assert [d["input"] for d in recs] == sorted(xs, key=lambda d: d["ticket"])
    for d in recs:
        assert d["tier1_answer"] == d["input"]
        assert d["agree"] is (d["input"]["ticket"] not in wrong)
        assert d["reference_answer"] == ({"ticket": "WRONG"} if not d["agree"] else d["input"])
        assert d["error"] is None and d["latency_us"] > 0
        assert d["generation"] == 1 and d["artifact_id"] == task.artifact.id
    audits = [c for c in r.captured if c.get("audit")]
    deopts = [c for c in r.captured if not c.get("audit")]
    assert len(audits) == 10 and len(deopts) == 1
    assert set(deopts[0]) == DEOPT_KEYS and deopts[0]["input"] == LONG
    for c in audits:
        assert set(c) == (DEOPT_KEYS - {"artifact_output"}) | {"audit", "tier1_answer", "agree", "tier1_score"}
        assert c["reason"] == AUDIT_REASON and c["task"] == "echo"
        assert c["agree"] is (c["input"]["ticket"] not in wrong)
    assert a.stats()["disagreements"] == 2
    assert task.close(5)


def test_audit_fractional_rate_is_seeded_and_deterministic():
    xs = inputs(200)

    def audited(seed, rate=0.3):
        # a queue as long as the stream: nothing is skipped however late the worker runs
        task = TieredTask(echo(), lambda x: x, audit_rate=rate, audit_seed=seed, audit_queue=200)
        for x in xs:
            task(x)
        assert task.audit.wait(5) and task.audit.skipped == 0
        got = sorted(int(d["input"]["ticket"][1:]) for d in task.audit.records)
        task.close()
        return got

    first = audited(7)
    # the documented rule: the k-th tier-1 answer is audited iff the k-th draw is < rate
    rng = random.Random(7)
    assert first == [k for k in range(200) if rng.random() < 0.3]
    assert audited(7) == first
    assert audited(8) != first
    assert 30 <= len(first) <= 90  # Binomial(200, 0.3): mean 60, sd 6.5


def test_audit_max_respected_and_batch_offers_only_tier1():
    task = TieredTask(echo(), lambda x: x, audit_rate=1.0, audit_max=5, audit_queue=20)
    for x in inputs(20):
        task(x)
    assert task.audit.wait(5)
    assert (task.audit.n, task.audit.selected) == (5, 5) and not task.audit.active
    b = TieredTask(echo(), lambda x: x, audit_rate=1.0)
    res = b.batch([SHORT, LONG, {"ticket": 1}, {"ticket": "ok"}])
    assert [x.tier for x in res] == ["tier-1", "tier-0", "tier-0", "tier-1"]
    assert b.audit.wait(5)
    assert sorted(d["input"]["ticket"] for d in b.audit.records) == ["hi", "ok"]
    assert TieredTask(echo(), lambda x: x, audit_rate=1.0, audit_max=0).audit.active is False
    task.close()
    b.close()


def test_raising_reference_in_audit_is_recorded_not_raised():
    captured: list = []

    def reference(x):
        raise ConnectionError("agent down")

    task = TieredTask(echo(), reference, captured.append, audit_rate=1.0)
    res = task(SHORT)
    assert res.tier == "tier-1" and res.answer == SHORT
    assert task.audit.wait(5)
    a = task.audit
    assert (a.n, a.errors, a.disagreements) == (0, 1, 0)
    (rec,) = a.records
    assert rec["error"] == "ConnectionError: agent down"
    assert rec["agree"] is None and rec["reference_answer"] is None
    assert captured == []  # nothing answered, nothing captured
    task(SHORT)  # the worker survived
    assert task.audit.wait(5) and task.audit.errors == 2
    task.close()


def test_slow_reference_does_not_block_calls_and_full_queue_skips():
    started, release = threading.Event(), threading.Event()

    def reference(x):
        started.set()
        release.wait(10)
        return x

    task = TieredTask(echo(), reference, audit_rate=1.0, audit_queue=2)
    try:
        t0 = time.perf_counter()
        task(inputs(1)[0])
        assert started.wait(5)  # the worker is now stuck in the reference
        for x in inputs(5)[1:]:
            assert task(x).tier == "tier-1"
        elapsed = time.perf_counter() - t0
        assert elapsed < 2.0, elapsed  # the reference blocks for up to 10 s
        a = task.audit
        assert (a.selected, a.skipped, a.pending) == (3, 2, 3)  # 1 running + 2 queued; 2 skipped
        assert a.wait(0.05) is False
    finally:
        release.set()
    assert task.audit.wait(5)
    assert (task.audit.n, task.audit.pending) == (3, 0)
    assert task.close(5) and not task.audit._thread.is_alive()
    task(SHORT)  # after close: answers, no audit
    assert task.audit.selected == 3


def test_audit_snapshots_the_answer_the_caller_got():
    task = TieredTask(echo(), lambda x: {"ticket": "t0"}, audit_rate=1.0)
    res = task({"ticket": "t0"})
    res.answer["ticket"] = "mutated by the caller"
    assert task.audit.wait(5)
    (rec,) = task.audit.records
    assert rec["tier1_answer"] == {"ticket": "t0"} and rec["agree"] is True
    task.close()


def test_audit_under_concurrent_calls():
    task = TieredTask(echo(), lambda x: x, audit_rate=0.5, audit_seed=3, audit_queue=1000)
    errors: list = []

    def worker(k):
        try:
            for i in range(100):
                assert task({"ticket": f"{k}-{i}"}).tier == "tier-1"
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert task.audit.wait(10)
    s = task.audit.stats()
    assert s["skipped"] == 0 and s["n"] == s["selected"] == len(task.audit.records)
    assert 120 <= s["n"] <= 280 and s["disagreements"] == 0  # Binomial(400, 0.5)
    task.close()


@pytest.mark.parametrize("kwargs, err, match", [
    ({"audit_rate": 1.5}, ValueError, "audit rate"),
    ({"audit_rate": -0.1}, ValueError, "audit rate"),
    ({"audit_rate": float("nan")}, ValueError, "audit rate"),
    ({"audit_rate": "0.5"}, ValueError, "audit rate"),
    ({"audit_rate": 0.5, "audit_max": -1}, ValueError, "audit_max"),
    ({"audit_rate": 0.5, "audit_max": 2.5}, TypeError, "audit_max"),
    ({"audit_rate": 0.5, "audit_seed": "x"}, TypeError, "seed"),
    ({"audit_rate": 0.5, "audit_queue": 0}, ValueError, "queue_size"),
])
def test_bad_audit_settings(kwargs, err, match):
    with pytest.raises(err, match=match):
        TieredTask(None, lambda x: x, **kwargs)


def test_audit_needs_a_reference():
    with pytest.raises(ValueError, match="needs a reference"):
        TieredTask(None, None, audit_rate=0.1)
    assert TieredTask(None, None).audit.active is False


def test_audit_capture_failure_is_logged_and_the_record_kept(caplog):
    def capture(rec):
        raise OSError("disk full")

    task = TieredTask(echo(), lambda x: x, capture, audit_rate=1.0)
    with caplog.at_level("ERROR", logger="auto_runtime.audit"):
        assert task(SHORT).tier == "tier-1"
        assert task.audit.wait(5)
    assert task.audit.n == 1 and task.audit.records[0]["agree"] is True
    assert any("capture hook failed for a shadow audit" in r.getMessage() for r in caplog.records)
    task.close()
