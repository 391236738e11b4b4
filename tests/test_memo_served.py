"""The memo rung's evidence from a table overlay: repeats answered from the first witness."""

from __future__ import annotations

import pytest

from auto_runtime import Artifact, TieredTask

from auto.compile import compile_task
from auto.errors import GateRefused
from auto.gate import Contract
from auto.store import Store

SERVED = {"answers": 12, "inputs": 6, "unfolded_answers": 12, "inputs_first_served": 6, "min_lead": 1}


def _store(tmp_path, outputs: dict[str, list[str]]) -> Store:
    st = Store(tmp_path / "s.sqlite")
    for text, outs in outputs.items():
        for out in outs:
            st.add_witness(task="t", input={"text": text}, output=out)
    return st


def test_single_witnesses_are_refused_without_evidence_and_tabulated_with_served_repeats(tmp_path):
    with _store(tmp_path, {f"item {i}": [f"label {i % 3}"] for i in range(8)}) as st:
        with pytest.raises(GateRefused, match="no input was witnessed twice"):
            compile_task(st, "t", rungs=["memo"], out_path=tmp_path / "a.wasm")
        out = compile_task(st, "t", rungs=["memo"], out_path=tmp_path / "b.wasm", served=SERVED)
    m = out.typed_manifest
    assert m.compiled_as == "memo"
    rep = m.fields["parity"]["repetition"]
    assert rep["repeated_inputs"] == 0 and rep["rate"] is None and rep["ci95_low"] is None  # unmeasured: null
    assert rep["single_witness_entries"] == 8 and rep["served_from_first_witness"] == {"answers": 12, "inputs": 6}
    assert rep["admitted_by"].startswith("table overlay rule")


def test_re_asked_inputs_that_contradict_consistency_refuse_the_served_table(tmp_path):
    # 3 of 4 re-asked inputs changed answer: rate 0.25 < the contract's 0.5, served repeats or not
    outs = {f"item {i}": [f"label {i}"] for i in range(6)}
    outs.update({f"noisy {i}": ["a", "b"] for i in range(3)})
    outs["steady"] = ["c", "c"]
    with _store(tmp_path, outs) as st:
        with pytest.raises(GateRefused, match="1 of 4 repeated inputs answered consistently"):
            compile_task(st, "t", rungs=["memo"], out_path=tmp_path / "a.wasm", served=SERVED)


def test_a_larger_overlay_rule_leaves_single_witness_entries_out(tmp_path):
    outs = {f"item {i}": [f"label {i % 2}"] for i in range(5)}
    outs["twice"] = ["label 0", "label 0"]
    with _store(tmp_path, outs) as st:
        out = compile_task(st, "t", rungs=["memo"], out_path=tmp_path / "a.wasm", contract=Contract.default_for("t"),
                           served={**SERVED, "min_lead": 2})
    rep = out.typed_manifest.fields["parity"]["repetition"]
    # one re-asked input, consistent, but its CP lower bound (0.025) is below the bar: admitted by the rule
    assert rep["repeated_inputs"] == 1 and rep["single_witness_entries"] == 0
    tt = TieredTask(Artifact.load(out.wasm), reference=None)
    assert tt({"text": "twice"}).answer == "label 0" and tt({"text": "item 0"}).tier == "declined"  # no reference: a deopt declines
