"""The latency benchmark's warm loops count an artifact's failures (a wall-clock timeout on a
loaded host above all) instead of dying of them."""

from __future__ import annotations

from auto_runtime import Artifact, Limits, TieredTask
from auto_runtime.errors import CallTimeout, TrapError

from bench.latency import _failure_kind, _timeit


def test_timeit_counts_timeouts_and_failures_instead_of_raising():
    calls = []

    def flaky(x):
        calls.append(x)
        if len(calls) % 3 == 0:
            raise CallTimeout("artifact call exceeded its wall-clock deadline (~100 ms)")
        if len(calls) % 7 == 0:
            raise TrapError("artifact trapped: unreachable")
        return {"answer": x}

    row = _timeit(flaky, [1, 2, 3], n=210, warmup=0)
    assert row["n"] == 210 and len(calls) == 210
    assert row["timeouts"] == 70 == row["failures"]["timeout"]
    assert row["failures"]["trap"] == len([i for i in range(1, 211) if i % 7 == 0 and i % 3])


def test_a_tiered_timeout_is_counted_as_a_timeout():
    from runtime.tests.wasm_fixtures import LOOP_WAT, build

    art = Artifact.load(build(LOOP_WAT), limits=Limits(fuel=10**15, timeout_ms=4))
    task = TieredTask(art, reference=None)
    r = task({"ticket": "x"})
    assert (r.tier, r.reason) == ("declined", "limit: timeout")
    assert _failure_kind(r) == "timeout"
    row = _timeit(art.call, [{"ticket": "x"}], n=3, warmup=0)
    assert row["timeouts"] == 3
    assert _failure_kind(TieredTask(art, reference=lambda x: 0)({})) is None  # a schema deopt: no artifact failure
