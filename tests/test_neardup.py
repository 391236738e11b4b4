"""The near-duplicate rung: a certified canonicalization step (greetings, sign-offs, casing,
identifiers, vowel typos) answers never-witnessed near-duplicates in WebAssembly, only where the
witnesses show the reference answers them alike; the ratchet's table lanes rebuild it."""

from __future__ import annotations

import random

import pytest

from auto.codegen.program_lower import compile_program
from auto.compile import compile_task
from auto.compile import neardup as nd
from auto.compile.ladder import ladder
from auto.emit import emit
from auto.errors import GateRefused
from auto.models.program import ast as A
from auto.models.program.interp import run_program
from auto.ratchet.installer import manifest_facts
from auto.ratchet.scheduler import TABLE_RUNGS
from auto.store import Store, new_span_id, new_trace_id
from auto_runtime import Artifact

BASES = [("my order {n} has not arrived yet", "shipping"), ("i was charged twice for order {n}", "billing"),
         ("how do i reset my password", "account"), ("the app crashes when i open settings", "bug"),
         ("where is my package, tracking says delivered", "shipping"), ("please cancel order {n}", "cancel"),
         ("i cannot log in to my account", "account"), ("the export button does nothing", "bug")]
GREET = ["", "Hi, ", "Hello team, ", "hey ", "Good morning, "]
SIGN = ["", " Thanks, Ana", " Regards, Bob", " Cheers!", " thank you"]
MANIFEST = {"format": "auto.artifact/1", "task": "t", "compiled_as": "program",
            "interface": {"input": {"type": "object", "properties": {"ticket": {"type": "string"}},
                                    "required": ["ticket"]}},
            "guard": {"method": "program"}}


def _render(rng: random.Random, text: str) -> str:
    text = text.replace("{n}", str(rng.randint(100, 99999)))
    text = rng.choice(GREET) + text + rng.choice(SIGN)
    return text.upper() if rng.random() < 0.2 else text


def _store(path, items, task="nd", field="ticket"):
    with Store(path) as st:
        st.ingest([{"trace_id": new_trace_id(), "span_id": new_span_id(), "parent_span_id": None, "name": task,
                    "kind": "task", "task": task, "site": None, "started_ns": 10 * i, "ended_ns": 10 * i + 1,
                    "status": "ok", "input": {field: x}, "output": y, "error": None, "attributes": {}}
                   for i, (x, y) in enumerate(items)])


def _tickets(n=160, seed=0):
    rng = random.Random(seed)
    return [(_render(rng, BASES[i % len(BASES)][0]), BASES[i % len(BASES)][1]) for i in range(n)]


def test_steps_cut_greetings_signoffs_case_identifiers_and_vowels():
    t = {"ticket": "Hi team, my order #4821 hasn't arrived!! Thanks, Maria"}
    keys = {s: nd.key_function(s, "ticket")(t) for s in nd.STEPS}
    assert keys == {"case-punctuation": "hi team my order 4821 hasnt arrived thanks maria",
                    "greeting-signoff": "my order 4821 hasnt arrived", "identifiers": "my order hasnt arrived",
                    "vowels": "m rdr hsnt rrvd"}
    same = {"ticket": "HELLO, MY ORDER 99 HASNT ARRIVED. regards bob"}
    assert nd.key_function("identifiers", "ticket")(same) == keys["identifiers"]
    # a text that is only a greeting keeps it; a sign-off word at the start is content
    assert nd.key_function("greeting-signoff", "ticket")({"ticket": "Hi"}) == "hi"
    assert nd.key_function("greeting-signoff", "ticket")({"ticket": "Thanks for the refund"}) == "thanks for the refund"
    with pytest.raises(ValueError, match="unknown canonicalization step"):
        nd.canonicalizer("stemming", "ticket")


def test_the_artifact_computes_the_interpreters_key():
    texts = ["Hi team, my order #4821 hasn't arrived!! Thanks, Maria", "  GOOD MORNING  refund   $12.50 pls ",
             "dear support: (crash) [v2.1]\n\tregards", "", "h\u00e9llo caf\u00e9 ORDER 7 thx", "hey all " * 40]
    for step in nd.STEPS:
        canon = nd.canonicalizer(step, "ticket")
        keys = [nd.key_function(step, "ticket")({"ticket": t}) for t in texts]
        prog = A.Lookup(canon, tuple((k, A.Const(i)) for i, k in enumerate(keys)), A.Deopt())
        art = Artifact.load(emit(compile_program(prog), MANIFEST))
        for i, t in enumerate(texts):
            out = art.call({"ticket": t})
            assert out == run_program(prog, {"ticket": t}) and out["answer"] == keys.index(keys[i]), (step, t)


def test_calibration_certifies_a_step_only_where_the_answers_agree():
    items = _tickets(200)
    inputs = [{"ticket": x} for x, _ in items]
    alike = nd.calibrate(inputs, [y for _, y in items], [True] * len(items), "ticket", epsilon=0.05, delta=0.1)
    assert alike.chosen is not None and alike.chosen_evidence().wrong == 0 and alike.chosen_evidence().merges >= 74
    # the reference answers by the amount: deleting identifiers merges inputs it answers differently
    words = [chr(97 + i // 26) + chr(97 + i % 26) for i in range(40)]
    pairs = [(f"refund {amt} dollars for item {w}", "escalation" if amt >= 500 else "refund")
             for w in words for amt in (120, 900)]
    both = items + pairs
    cal = nd.calibrate([{"ticket": x} for x, _ in both], [y for _, y in both], [True] * len(both), "ticket",
                       epsilon=0.05, delta=0.1)
    ev = {s.step: s for s in cal.steps}
    assert ev["identifiers"].wrong >= 80 and not ev["identifiers"].certified and not ev["vowels"].certified
    assert cal.chosen == "greeting-signoff" and ev["greeting-signoff"].wrong == 0
    # a neighbourhood whose witnessed inputs disagree is not in the deployed table
    keys = dict(nd.table("identifiers", "ticket", [{"ticket": x} for x, _ in both], [y for _, y in both], [True] * len(both)))
    assert "refund dollars for item aa" not in keys and keys["how do i reset my password"] == "account"


def test_upper_bound_is_the_one_sided_clopper_pearson_bound():
    assert nd.upper_bound(0, 0, 0.975) is None and nd.upper_bound(5, 5, 0.975) == 1.0
    # k = 0: the bound solves (1 - p)^n = 1 - confidence
    assert nd.upper_bound(0, 74, 0.975) == pytest.approx(1 - 0.025 ** (1 / 74))


def test_rung_answers_unseen_near_duplicates_and_deopts_the_rest(tmp_path):
    _store(tmp_path / "s.db", _tickets(160))
    with Store(tmp_path / "s.db") as st:
        o = compile_task(st, "nd", rungs=["neardup"], out_path=tmp_path / "g.wasm")
    m = o.manifest
    assert m["compiled_as"] == "program" and m["guard"]["method"] == "program"
    near = m["model"]["near_duplicate"]
    assert near["step"] in nd.STEPS and near["steps"][0]["step"] == "case-punctuation" and "guarantee" in near
    assert manifest_facts(m).near_duplicate
    art = Artifact.load(o.wasm)
    assert art.call({"ticket": "HEY THERE, my order 77 has not arrived yet!! Best regards, Zed"}) == \
        {"answer": "shipping", "deopt": False}
    assert art.call({"ticket": "something else entirely"})["deopt"] is True
    for x, y in _tickets(160)[:40]:  # every witnessed input answered with its answer
        assert art.call({"ticket": x}) == {"answer": y, "deopt": False}


def test_a_neighbourhood_whose_inputs_disagree_deopts_but_its_inputs_are_still_answered(tmp_path):
    items = _tickets(320)
    items += [("Hi, the printer is on fire", "bug"), ("the printer is on fire. Thanks", "hardware")]
    _store(tmp_path / "s.db", items)
    with Store(tmp_path / "s.db") as st:
        o = compile_task(st, "nd", rungs=["neardup"], out_path=tmp_path / "g.wasm")
    art = Artifact.load(o.wasm)
    assert art.call({"ticket": "Hello team, THE PRINTER IS ON FIRE"})["deopt"] is True
    assert art.call({"ticket": "Hi, the printer is on fire"})["answer"] == "bug"
    assert art.call({"ticket": "the printer is on fire. Thanks"})["answer"] == "hardware"


def test_rung_refuses_with_every_steps_evidence(tmp_path):
    _store(tmp_path / "s.db", _tickets(24))
    with Store(tmp_path / "s.db") as st, pytest.raises(GateRefused) as e:
        compile_task(st, "nd", rungs=["neardup"], out_path=tmp_path / "g.wasm")
    msg = str(e.value)
    assert "no canonicalization step certified at epsilon 0.05" in msg
    assert all(f"{s}:" in msg for s in nd.STEPS)


def test_rung_needs_one_text_field(tmp_path):
    with Store(tmp_path / "s.db") as st:
        st.ingest([{"trace_id": new_trace_id(), "span_id": new_span_id(), "parent_span_id": None, "name": "two",
                    "kind": "task", "task": "two", "site": None, "started_ns": i, "ended_ns": i + 1, "status": "ok",
                    "input": {"a": f"x{i}", "b": "y"}, "output": "l", "error": None, "attributes": {}} for i in range(5)])
        with pytest.raises(GateRefused, match="needs inputs of one text field"):
            compile_task(st, "two", rungs=["neardup"], out_path=tmp_path / "g.wasm")


def test_the_ladder_and_the_table_lanes_try_neardup_before_memo():
    assert ladder()[-2:] == ["neardup", "memo"] and "neardup" not in ladder(memo=False)
    assert TABLE_RUNGS == ("neardup", "memo")
