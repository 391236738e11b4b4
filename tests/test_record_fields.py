"""Records compile per field: a field whose program misfits deopts where it is unsure, the others
answer from their programs, and the record answers at tier-1 when every field does.

The extractor is the bench's invoice reader (:mod:`bench.invoices`): ``invoice_no``, ``total`` and
``due_date`` are regular; ``currency`` is written as a code on most invoices and only as
"dollars" on some, where the simulated reference samples ``CAD`` or ``USD`` for a Canadian vendor.
Compiled whole, the record's program is wrong on the "dollars" invoices (its currency field), the
gate refuses it and, with no repeats, there is no memo either: nothing answers at tier-1.
"""

from __future__ import annotations

import json
import random

import pytest

import auto
from auto.compile import compile_task
from auto.compile.fields import categorical_fields, declared_fields
from auto.errors import GateRefused
from auto.models.program import ast as A
from auto.models.program.synth import synthesize
from auto.ratchet.policy import unanswerable_labels
from auto.store import Store
from auto_runtime import Artifact, TieredTask
from bench.invoices import agent
from bench.invoices.reference import invoices, read_invoice, reference_reply


def _pairs(n: int, seed: int = 0) -> list[tuple[dict, dict]]:
    rng = random.Random(seed)
    return [({"text": i.text}, json.loads(reference_reply(i.text, rng))) for i in invoices(n, seed)]


def test_a_misfitting_field_deopts_where_unsure_and_the_others_keep_their_programs():
    pairs = _pairs(20)
    whole = synthesize(pairs, field="text", time_budget_s=10)
    assert whole.per_field["currency"].train_agreement < 1.0  # compiled whole, the currency is wrong somewhere
    assert not any(type(n) is A.Deopt for n in A.walk(whole.per_field["currency"].program))
    res = synthesize(pairs, field="text", time_budget_s=10, per_field=True)
    assert res.program is not None and res.reason is None
    kinds = {k: f.kind for k, f in res.per_field.items()}
    assert kinds["currency"] == "selective" and all(kinds[k] != "selective" for k in ("invoice_no", "total", "due_date"))
    assert any(type(n) is A.Deopt for n in A.walk(res.per_field["currency"].program))
    assert 0.5 <= res.answered < 1.0 and res.train_agreement == pytest.approx(res.answered)  # right where it answers
    assert res.train_agreement >= whole.per_field["currency"].train_agreement


def test_the_first_20_witnesses_compile_per_field_and_answer_fresh_invoices(tmp_path):
    store = Store(tmp_path / "s.sqlite")
    agent.reseed(0)
    with auto.recording(store):
        for inv in invoices(20, 0):
            agent.invoice(inv.text)
    out = compile_task(store, "invoice", out_path=tmp_path / "g.wasm")
    m = out.manifest
    assert m["compiled_as"] == "program"
    fields = m["model"]["per_field"]["fields"]
    assert fields["currency"]["how"] == "selective" and fields["invoice_no"]["how"] == "program"
    assert set(m["interface"]["output"]["fields"]) == {"currency"}  # the one categorical field
    assert "witnesses it answers" in out.reason
    art = Artifact.load(out.wasm)
    tt = TieredTask(art, lambda inp: agent.extract(inp["text"]))
    fresh = invoices(100, 1)
    res = [tt({"text": i.text}) for i in fresh]
    t1 = [(r, i) for r, i in zip(res, fresh) if r.tier == "tier-1"]
    assert len(t1) >= 70  # the invoices that name their currency
    assert all(r.answer == read_invoice(i.text) for r, i in t1)
    deopted = [i for r, i in zip(res, fresh) if r.tier != "tier-1"]
    assert deopted and all("Amounts in dollars." in i.text for i in deopted)
    store.close()


def test_a_record_compiled_whole_is_unchanged_when_every_field_fits():
    rng = random.Random(1)
    pairs = []
    for k in range(40):
        no = f"INV-{rng.randint(10000, 99999)}"
        pairs.append(({"text": f"Invoice {no}, due 2026-0{k % 9 + 1}-1{k % 9}"}, {"no": no, "due": f"2026-0{k % 9 + 1}-1{k % 9}"}))
    a = synthesize(pairs, field="text", time_budget_s=10)
    b = synthesize(pairs, field="text", time_budget_s=10, per_field=True)
    assert a.program is not None and a.program == b.program and b.answered is None


def test_categorical_fields_leave_ids_amounts_and_dates_open():
    recs = [{"order_id": f"ORD-{i}" if i % 3 == 0 else None, "intent": ("refund", "status", "cancel")[i % 3],
             "amount": i * 1.5, "count": i % 2} for i in range(30)]
    assert categorical_fields(recs) == {"count": [0, 1], "intent": ["cancel", "refund", "status"]}
    assert categorical_fields(["a", "b"]) == {}
    assert declared_fields({"enum": recs}) == {"count": {"0", "1"}, "intent": {'"cancel"', '"refund"', '"status"'}}
    assert declared_fields({"fields": {"intent": {"enum": ["refund"]}}}) == {"intent": {'"refund"'}}
    assert declared_fields({"program_type": "record", "keys": ["a"]}) == {}


def test_new_labels_count_only_categorical_fields():
    fields = {"intent": {'"refund"', '"status"'}}
    rec = {"order_id": "ORD-99999", "intent": "refund", "amount": 12.5}
    assert unanswerable_labels(rec, set(), fields) == []  # a new id and a new amount are not new labels
    assert unanswerable_labels({**rec, "intent": "cancel"}, set(), fields) == ['intent="cancel"']
    assert unanswerable_labels(rec, set(), {}) == []  # a record generation declaring no categorical field
    assert unanswerable_labels("cancel", {'"refund"'}, {}) == ['"cancel"']  # a scalar task as before
    assert unanswerable_labels("refund", {'"refund"'}, {}) == []


def test_no_field_with_a_precise_part_refuses_with_each_fields_reason(tmp_path):
    rng = random.Random(2)
    store = Store(tmp_path / "n.sqlite")
    for k in range(24):  # both fields noise: nothing answers any witness at the bar
        store.add_witness(task="noise", input={"text": f"item {k} {rng.random():.6f}"},
                          output={"a": rng.choice("xyz"), "b": rng.choice("uvw")})
    with pytest.raises(GateRefused, match="program rung"):
        compile_task(store, "noise", out_path=tmp_path / "n.wasm", rungs=["program"])
    store.close()


def test_an_id_on_a_few_records_is_open_valued_and_never_a_new_label():
    # a refund's order number on one request in ten, unique on each: the Good-Turing missing mass of
    # its values is 3/3 (every record that carries one brings a new one), though 3 of 30 records is 10%
    recs = [{"refund_order": f"ORD-{i}" if i % 10 == 0 else None, "intent": ("refund", "status")[i % 2]}
            for i in range(30)]
    assert categorical_fields(recs) == {"intent": ["refund", "status"]}
    fields = declared_fields({"enum": recs})
    assert unanswerable_labels({"refund_order": "ORD-77", "intent": "refund"}, set(), fields) == []
    assert unanswerable_labels({"refund_order": None, "intent": "cancel"}, set(), fields) == ['intent="cancel"']
    # a category present on some records only stays categorical (its values repeat)
    opt = [{"reason": ("late", "damaged", None, None)[i % 4]} for i in range(30)]
    assert categorical_fields(opt) == {"reason": ["damaged", "late", None]}

