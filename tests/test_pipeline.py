"""compile_task: reproducible bytes, honest manifests, refusals that store their eval run."""

from __future__ import annotations

import pytest

from auto.emit import read_manifest
from auto.errors import GateRefused
from auto.compile import compile_task
from auto.store import Store
from auto.gate import Contract


def test_same_witnesses_give_same_bytes(triage_store, tmp_path):
    with Store(triage_store) as st:
        a = compile_task(st, "triage", generation=7, out_path=tmp_path / "a.wasm")
        b = compile_task(st, "triage", generation=7, out_path=tmp_path / "b.wasm")
    assert (tmp_path / "a.wasm").read_bytes() == (tmp_path / "b.wasm").read_bytes()
    assert a.artifact_id == b.artifact_id and a.eval_run_id == b.eval_run_id


def test_manifest_carries_measured_numbers(triage_artifact, triage_store):
    path, outcome = triage_artifact
    m = read_manifest(path.read_bytes())
    assert m == outcome.manifest
    held = m["parity"]["heldout"]
    assert held["n"] > 0 and held["agree"] <= held["n"] and held["ci95_low"] <= held["rate"]
    g = m["guard"]
    nov, risk = g["components"]
    assert g["method"] == "stack" and nov["method"] == "conformal-novelty" and nov["n"] == len(nov["calibration_scores"]) > 0
    assert nov["calibration_scores"] == sorted(nov["calibration_scores"])
    # cross-fit: the out-of-fold predictions of every distinct input are the calibration set
    assert "out-of-fold" in held["method"] and nov["n"] == held["n"] == m["provenance"]["distinct_inputs"]
    assert risk["method"] == "selective-risk" and 0.0 < risk["calibration_coverage"] <= 1.0
    assert risk["calibration_selective_risk"] <= risk["epsilon"]
    assert m["latency_us"] is None and m["fuel_per_call"]["p50"] > 0
    assert m["provenance"]["reference_model"].startswith("simulated:")
    with Store(triage_store) as st:
        ev = st.get_eval_run(m["eval_runs"][0])
        assert ev["verdict"] == "pass" and st.get_artifact(outcome.artifact_id).wasm == path.read_bytes()
        assert m["provenance"]["store_digest"] == st.digest("triage")


def test_refusals_store_an_eval_run(tmp_path):
    with Store(tmp_path / "s.sqlite") as st:
        for i in range(10):
            st.add_witness("t", {"text": f"item {i}"}, "a" if i % 2 else "b")
        with pytest.raises(GateRefused) as e:
            compile_task(st, "t", out_path=tmp_path / "x.wasm")
        assert "only 10 distinct" in e.value.reason
        assert st.get_eval_run(e.value.eval_run_id)["verdict"] == "refuse"
        for i in range(10, 60):
            for _ in range(2):  # every input answered twice, consistently: evidence the task repeats itself
                st.add_witness("t", {"text": f"item {i}"}, "same")
        with pytest.raises(GateRefused):
            compile_task(st, "t", contract=Contract(task="t", min_witnesses=4), out_path=tmp_path / "x.wasm", memo=False)
        assert not (tmp_path / "x.wasm").exists()
        # with memo (the default) a refused specialist falls back to the exact-match table
        out = compile_task(st, "t", contract=Contract(task="t", min_witnesses=4), out_path=tmp_path / "m.wasm")
        assert out.manifest["compiled_as"] == "memo" and "specialist refused" in out.reason
        assert out.manifest["guard"]["method"] == "exact-match" and out.manifest["parity"]["witnessed"]["rate"] == 1.0
        from auto_runtime import Artifact, TieredTask

        tt = TieredTask(Artifact.load(out.wasm), reference=lambda inp: "REF")
        assert tt({"text": "item 3"}).tier == "tier-1" and tt({"text": "item 3"}).answer == "a"
        assert tt({"text": "item 3 "}).tier == "tier-0"  # never witnessed → deopt


def test_memo_refuses_an_agent_that_does_not_repeat_itself(tmp_path):
    import random

    rng = random.Random(0)
    with Store(tmp_path / "coin.sqlite") as st:
        for i in range(100):
            for _ in range(2):
                st.add_witness("coin", {"text": f"ticket {i}"}, rng.choice(["a", "b", "c"]))
        with pytest.raises(GateRefused, match="memo refused") as e:
            compile_task(st, "coin", out_path=tmp_path / "coin.wasm")
        ev = st.get_eval_run(e.value.eval_run_id)
        assert ev["checks"][0]["name"] == "memo-determinism-evidence" and ev["checks"][0]["rate"] < 0.5
    assert not (tmp_path / "coin.wasm").exists()


def test_constant_task_is_refused(tmp_path):
    with Store(tmp_path / "s.sqlite") as st:
        for i in range(50):
            st.add_witness("c", {"text": f"item {i}"}, "always")
        with pytest.raises(GateRefused, match="same output"):
            compile_task(st, "c", out_path=tmp_path / "c.wasm")


def test_wasm_equals_the_scikit_learn_model_on_generated_inputs(triage_artifact):
    """Differential: the artifact's answer equals scikit-learn's own predict, unicode included."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    from auto_runtime import Artifact
    from bench.triage import corpus

    path, outcome = triage_artifact
    art = Artifact.load(path)
    tickets = [t.ticket for t in corpus.generate(150, seed=99)]
    outs = art.call_batch([{"ticket": t} for t in tickets])
    assert [o["answer"] for o in outs] == [outcome.sklearn_predict({"ticket": t}) for t in tickets]

    @settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(st.text(max_size=300) | st.sampled_from(tickets).map(lambda t: t.upper() + " ünïcødé ✓ 😀"))
    def check(text):
        assert art.call({"ticket": text})["answer"] == outcome.sklearn_predict({"ticket": text})

    check()


def test_memo_needs_enough_repetition_evidence(tmp_path):
    with Store(tmp_path / "few.sqlite") as st:
        # 20 inputs, each answered twice the same way: too few for a specialist, enough evidence for a memo
        for i in range(20):
            for _ in range(2):
                st.add_witness("t", {"text": f"item {i}"}, "a" if i % 3 else "b")
        out = compile_task(st, "t", out_path=tmp_path / "few.wasm")
        assert out.manifest["compiled_as"] == "memo" and "specialist not attempted" in out.reason
        rep = out.manifest["parity"]["repetition"]
        assert rep["repeated_inputs"] == 20 and rep["consistent"] == 20 and rep["ci95_low"] > 0.8
        assert len(out.manifest["eval_runs"]) == 2 and st.get_eval_run(rep["specialist_eval_run"])["verdict"] == "refuse"
    with Store(tmp_path / "weak.sqlite") as st:
        # 45 inputs, only 2 of them seen twice: 2/2 consistent is no evidence (lower bound 0.16)
        for i in range(45):
            for _ in range(2 if i < 2 else 1):
                st.add_witness("t", {"text": f"item {i}"}, "a" if i % 3 else "b")
        with pytest.raises(GateRefused, match="memo refused"):
            compile_task(st, "t", out_path=tmp_path / "weak.wasm")
