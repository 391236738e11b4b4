"""TieredTask: tier-1 on guard pass, deopt to the reference + capture otherwise, swap, batches."""

from __future__ import annotations

import logging
import threading

import pytest

from auto_runtime import Artifact, CallResult, Limits, TieredTask
from auto_runtime.errors import InputSchemaError, ManifestError

from .wasm_fixtures import (
    GROW_BOMB_WAT,
    LOOP_WAT,
    UNREACHABLE_WAT,
    build,
    const_output_wat,
    echo_wat,
    manifest,
)

SMALL = Limits(fuel=2_000_000, memory_bytes=4 * 1024 * 1024, timeout_ms=2000)
CAPTURE_KEYS = {"task", "input", "output", "reason", "artifact_id", "generation", "latency_us", "artifact_output"}


def load(wat: str, limits: Limits | None = None, **manifest_overrides) -> Artifact:
    return Artifact.load(build(wat, manifest(**manifest_overrides)), limits=limits or SMALL)


@pytest.fixture(scope="module")
def passing() -> Artifact:
    return load(echo_wat("0.050000000"))  # p = 20/20 = 1.0 > alpha = 0.1


@pytest.fixture(scope="module")
def novel() -> Artifact:
    return load(echo_wat("0.990000000"))  # p = 1/20 = 0.05 <= 0.1


class Recorder:
    def __init__(self, answer="REF"):
        self.answer = answer
        self.ref_calls: list = []
        self.captured: list = []

    def reference(self, inp):
        self.ref_calls.append(inp)
        return self.answer

    def capture(self, rec):
        self.captured.append(rec)


def test_guard_pass_is_tier_1(passing):
    r = Recorder()
    task = TieredTask(passing, r.reference, r.capture)
    res = task({"ticket": "hello"})
    assert isinstance(res, CallResult)
    assert res.tier == "tier-1" and res.reason == "guard-pass"
    assert res.answer == {"ticket": "hello"}
    assert res.score == 0.05 and res.p_value == 1.0
    assert res.generation == 1 and res.artifact_id == passing.id
    assert res.latency_us > 0
    assert r.ref_calls == [] and r.captured == []
    assert task.task == "echo" and task.generation == 1
    assert task.guard_errors == 0


def test_novel_input_deopts_and_captures(novel):
    r = Recorder()
    task = TieredTask(novel, r.reference, r.capture)
    res = task({"ticket": "something new"})
    assert res.tier == "tier-0" and res.answer == "REF"
    assert res.reason == "novelty p=0.05<=alpha=0.1"
    assert res.score == 0.99 and res.p_value == 0.05
    assert r.ref_calls == [{"ticket": "something new"}]
    (rec,) = r.captured
    assert set(rec) == CAPTURE_KEYS
    assert rec["task"] == "echo" and rec["output"] == "REF" and rec["reason"] == res.reason
    assert rec["artifact_id"] == novel.id and rec["generation"] == 1
    assert task.guard_errors == 0
    assert rec["input"] == {"ticket": "something new"} and rec["latency_us"] == res.latency_us
    # the deopt is a labeled point for the installed generation: its would-be output comes along
    assert rec["artifact_output"]["nonconformity"] == 0.99 and "answer" in rec["artifact_output"]
    assert res.output == rec["artifact_output"]


def test_declined_without_reference(novel):
    res = TieredTask(novel, None)({"ticket": "x"})
    assert res.tier == "declined" and res.answer is None and res.reason.startswith("novelty")


def test_no_artifact():
    r = Recorder()
    task = TieredTask(None, r.reference, r.capture, task="triage")
    res = task({"ticket": "x"})
    assert (res.tier, res.reason, res.artifact_id, res.generation) == ("tier-0", "no-artifact", None, None)
    assert r.captured[0]["task"] == "triage" and r.captured[0]["artifact_id"] is None
    assert TieredTask(None, None)({"a": 1}).tier == "declined"


def test_input_schema_violation(passing):
    r = Recorder()
    res = TieredTask(passing, r.reference, r.capture)({"ticket": 42})
    assert res.tier == "tier-0" and res.reason == "input-schema: $.ticket: expected string, got integer"
    assert r.captured[0]["reason"] == res.reason
    with pytest.raises(InputSchemaError, match=r"\$: missing required property 'ticket'"):
        TieredTask(passing, None)({"text": "x"})
    # not JSON-encodable after passing a permissive schema
    loose = load(echo_wat("0.050000000"), interface={"input": {"type": "object"}, "output": {}})
    res = TieredTask(loose, r.reference)({"ticket": float("nan")})
    assert res.tier == "tier-0" and res.reason.startswith("input-schema: $: input is not JSON-encodable")
    with pytest.raises(InputSchemaError):
        TieredTask(loose, None)({"ticket": float("nan")})


@pytest.mark.parametrize("wat, limits, reason", [
    (LOOP_WAT, SMALL, "limit: fuel"),
    (LOOP_WAT, Limits(fuel=10**15, timeout_ms=30), "limit: timeout"),
    (GROW_BOMB_WAT, SMALL, "limit: memory"),
    (UNREACHABLE_WAT, SMALL, "trap: wasm `unreachable` instruction executed"),
    (const_output_wat("garbage"), SMALL, "output-error: artifact output is not valid JSON"),
    (const_output_wat('{"error":"missing_field"}'), SMALL, "artifact-error: missing_field"),
])
def test_artifact_failures_deopt(wat, limits, reason, caplog):
    r = Recorder()
    task = TieredTask(load(wat, limits), r.reference, r.capture)
    with caplog.at_level(logging.ERROR, logger="auto_runtime"):
        res = task({"ticket": "x"})
        assert res.tier == "tier-0" and res.answer == "REF"
        assert res.reason.startswith(reason), res.reason
        assert r.captured[0]["reason"] == res.reason
        res2 = TieredTask(task.artifact, None)({"ticket": "x"})
    assert res2.tier == "declined" and res2.reason.startswith(reason)


def test_capture_failure_keeps_answer(novel, caplog):
    def bad_capture(rec):
        raise RuntimeError("disk full")

    task = TieredTask(novel, lambda x: "REF", bad_capture)
    with caplog.at_level(logging.ERROR, logger="auto_runtime"):
        res = task({"ticket": "x"})
    assert res.answer == "REF" and res.tier == "tier-0"
    assert any("capture hook failed" in rec.getMessage() for rec in caplog.records)


def test_reference_errors_propagate(novel):
    def ref(x):
        raise ValueError("agent down")

    with pytest.raises(ValueError, match="agent down"):
        TieredTask(novel, ref)({"ticket": "x"})


def test_unusable_guard_always_deopts():
    art = load(echo_wat("0.050000000"), guard={"method": "conformal-novelty", "alpha": 0.1,
                                               "calibration_scores": []})
    res = TieredTask(art, lambda x: "REF")({"ticket": "x"})
    assert res.tier == "tier-0"
    assert res.reason == "guard-unusable: calibration_scores must be a non-empty list"


def test_swap(passing, novel):
    r = Recorder()
    task = TieredTask(None, r.reference, r.capture)
    assert task({"ticket": "x"}).reason == "no-artifact"
    assert task.swap(novel) is None
    res = task({"ticket": "x"})
    assert res.tier == "tier-0" and res.artifact_id == novel.id
    gen2 = load(echo_wat("0.050000000"), generation=2)
    assert task.swap(gen2) is novel
    res = task({"ticket": "x"})
    assert (res.tier, res.generation, res.artifact_id) == ("tier-1", 2, gen2.id)
    other = load(echo_wat("0.050000000"), task="other")
    with pytest.raises(ManifestError, match="'other'"):
        task.swap(other)
    assert task.artifact is gen2  # a refused swap changes nothing
    task.swap(None)
    assert task({"ticket": "x"}).reason == "no-artifact"


def test_swap_under_concurrent_calls(passing):
    gens = [load(echo_wat("0.050000000"), generation=g) for g in (1, 2, 3)]
    task = TieredTask(gens[0], lambda x: "REF")
    errors: list = []
    seen: set = set()

    def worker():
        try:
            for i in range(300):
                res = task({"ticket": str(i)})
                assert res.tier == "tier-1" and res.answer == {"ticket": str(i)}
                seen.add(res.generation)
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for k in range(60):
        task.swap(gens[k % 3])
    for t in threads:
        t.join()
    assert not errors, errors[:1]
    assert seen <= {1, 2, 3}


def test_batch_mixed(passing):
    art = load(echo_wat("0.050000000", long_nonconformity="0.990000000", long_threshold=30))
    r = Recorder()
    task = TieredTask(art, r.reference, r.capture, batch_chunk=3)
    inputs = [
        {"ticket": "short"},                       # pass
        {"ticket": "a much longer ticket text"},   # > 30 bytes of JSON: deopt
        {"ticket": 7},                             # schema violation: deopt
        {"ticket": "ok"},                          # pass
        {"ticket": "yet another long ticket text"},  # deopt
        {"ticket": "hi"},                          # pass
        {"ticket": "x", "extra": True},            # schema violation
    ]
    res = task.batch(inputs)
    assert [x.tier for x in res] == ["tier-1", "tier-0", "tier-0", "tier-1", "tier-0", "tier-1", "tier-0"]
    assert res[0].answer == {"ticket": "short"} and res[0].p_value == 1.0
    assert res[1].reason == "novelty p=0.05<=alpha=0.1" and res[1].score == 0.99
    assert res[2].reason.startswith("input-schema: $.ticket")
    assert r.ref_calls == [inputs[1], inputs[2], inputs[4], inputs[6]]  # input order
    assert [c["input"] for c in r.captured] == r.ref_calls
    assert all(x.latency_us > 0 for x in res)
    # batch == one by one
    single = [task(x) for x in inputs]
    assert [(a.tier, a.answer, a.reason, a.score, a.p_value) for a in res] == \
           [(b.tier, b.answer, b.reason, b.score, b.p_value) for b in single]
    assert task.batch([]) == []
    with pytest.raises(InputSchemaError):
        TieredTask(art, None).batch(inputs)
    declined = TieredTask(art, None).batch([inputs[0], inputs[1]])
    assert [x.tier for x in declined] == ["tier-1", "declined"]
    assert task.guard_errors == 0


def test_batch_without_artifact():
    res = TieredTask(None, lambda x: x["n"] * 2).batch({"n": i} for i in range(3))
    assert [(x.tier, x.answer) for x in res] == [("tier-0", 0), ("tier-0", 2), ("tier-0", 4)]


def test_batch_falls_back_item_by_item_when_run_batch_fails():
    out = '{"answer":"A","margin":1.000000000,"nonconformity":0.050000000}'
    wat = const_output_wat(out).replace(
        '(func (export "run_batch") (param $p i32) (param $n i32) (result i64)\n'
        '    (call $body (local.get $p) (local.get $n)))',
        '(func (export "run_batch") (param $p i32) (param $n i32) (result i64) unreachable)')
    assert "unreachable)" in wat
    art = load(wat)
    res = TieredTask(art, lambda x: "REF").batch([{"ticket": "a"}, {"ticket": "b"}])
    assert [(x.tier, x.answer) for x in res] == [("tier-1", "A"), ("tier-1", "A")]


def test_batch_item_failures_deopt_individually():
    r = Recorder()
    task = TieredTask(load(LOOP_WAT), r.reference, r.capture)
    res = task.batch([{"ticket": "a"}, {"ticket": "b"}])
    assert [(x.tier, x.reason) for x in res] == [("tier-0", "limit: fuel")] * 2
    assert task.guard_errors == 0  # an artifact failure is not a guard failure
