"""The memo compile is linear: fuel measured on a bounded sample, the gate batched within the
artifact's limits, and a clean refusal past the runtime's artifact cap."""

from __future__ import annotations

import pytest

from auto.compile import compile_task
from auto.compile import measure
from auto.compile.batching import chunked
from auto.compile.rungs import memo as memo_rung
from auto.errors import GateRefused
from auto.store import Store, new_span_id, new_trace_id


def _memo_store(path, n: int, pad: int = 0) -> None:
    labels = ("billing", "bug", "feature", "account")
    with Store(path) as st:
        batch = []
        for rep in range(2):
            for i in range(n):
                batch.append({"trace_id": new_trace_id(), "span_id": new_span_id(), "parent_span_id": None,
                              "name": "memo", "kind": "task", "task": "memo", "site": None,
                              "started_ns": 10 * i + rep, "ended_ns": 10 * i + rep, "status": "ok",
                              "input": {"ticket": f"ticket {i:06d} " + "x" * pad}, "output": labels[(i * 7) % 4],
                              "error": None, "attributes": {}})
        st.ingest(batch)


def test_fuel_sample_is_bounded_spread_and_deterministic():
    xs = list(range(1000))
    s = measure.fuel_sample(xs, 5)
    assert s == [0, 250, 500, 749, 999] and measure.fuel_sample(xs, 5) == s
    assert measure.fuel_sample(xs[:3], 5) == [0, 1, 2]


def test_chunked_batches_stay_within_bytes_and_items():
    calls = []

    def run_batch(items):
        calls.append(len(items))
        return [{"answer": x} for x in items]

    items = [{"t": "y" * 100} for _ in range(50)]
    out = chunked(run_batch, max_bytes=1000, max_items=8)(items)
    assert out == [{"answer": x} for x in items]
    assert max(calls) <= 8 and sum(calls) == 50 and all(c * 109 <= 1000 or c == 1 for c in calls)


def test_memo_compile_measures_a_bounded_sample_and_batches_its_gate(tmp_path, monkeypatch):
    _memo_store(tmp_path / "s.db", 600)
    sizes = []
    real = memo_rung.chunked

    def spy(run_batch, **kw):
        def run(items):
            sizes.append(len(items))
            return real(run_batch, **{**kw, "max_bytes": 4096})(items)
        return run

    monkeypatch.setattr(memo_rung, "chunked", spy)
    with Store(tmp_path / "s.db") as st:
        o = compile_task(st, "memo", rungs=["memo"], out_path=tmp_path / "m.wasm")
    fuel = o.manifest["fuel_per_call"]
    assert o.manifest["compiled_as"] == "memo" and fuel["of"] == 600 and fuel["n"] == measure.FUEL_SAMPLE
    assert sizes and sizes[0] == 600  # the gate handed all witnessed inputs to the chunked runner


def test_a_table_past_the_artifact_cap_is_refused_cleanly(tmp_path, monkeypatch):
    _memo_store(tmp_path / "s.db", 300, pad=200)
    monkeypatch.setattr(memo_rung, "MAX_ARTIFACT_BYTES", 64 * 1024 + memo_rung.MANIFEST_HEADROOM)
    with Store(tmp_path / "s.db") as st:
        with pytest.raises(GateRefused, match="too large for one artifact") as e:
            compile_task(st, "memo", rungs=["memo"], out_path=tmp_path / "m.wasm")
        rec = st.get_eval_run(e.value.eval_run_id)
        assert rec["verdict"] != "pass" and rec["checks"][0]["name"] == "artifact-size"
    assert not (tmp_path / "m.wasm").exists()
