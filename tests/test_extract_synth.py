"""Program synthesis (auto.models.program.synth) and proposals (auto.models.program.propose) on witness sets
generated here: extraction with nulls, money amounts, a routing policy, keyword intents,
records, determinism, label noise, random labels, and the proposers."""

from __future__ import annotations

import random

import pytest

from auto.errors import SpendCapExceeded, ArgumentError
from auto.models.program import ast as A
from auto.models.program.interp import run_program
from auto.models.program.propose import LLMProposer, ScriptedProposer, extract_json_values
from auto.models.program.serial import to_json
from auto.models.program.synth import _roundest, description_length, py_pattern, synthesize
from auto.models.program.types import check

# ---------------------------------------------------------------------------------------------
# witness generators (seeded)
# ---------------------------------------------------------------------------------------------

GREETINGS = ["Hi team,", "Hello,", "Dear support,", "Hey there,", "Good morning,"]


def order_emails(n: int, seed: int) -> list[tuple[dict, str | None]]:
    """Emails that may mention an order id ``ORD-<5 digits>``; a decoy ticket id ``REF-<3 digits>``
    sometimes comes first; the answer is the order id or null."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        oid = f"ORD-{rng.randint(10000, 99999)}"
        text = rng.choice(GREETINGS) + " "
        if rng.random() < 0.5:
            text += f"my ticket REF-{rng.randint(100, 999)} is still open. "
        has = rng.random() < 0.7
        if has:
            text += rng.choice([f"Order {oid} never arrived.", f"About order {oid}: wrong size.",
                                f"I paid for {oid} twice.", f"{oid} is late"])
        else:
            text += rng.choice(["Where is my package?", "Please call me back.", "The app keeps crashing."])
        out.append(({"email": text}, oid if has else None))
    return out


def invoices(n: int, seed: int, flip: float = 0.0) -> list[tuple[dict, str]]:
    """Invoices routed by the policy: reject if blocked; reject if amount >= 20000; approve if
    amount < 500; approve if preferred and amount < 5000; else review. ``flip``: share of labels
    replaced by another label (noise)."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        lo, hi = rng.choices([(20, 700), (300, 7000), (2000, 40000)], [0.15, 0.6, 0.25])[0]
        amt = round(rng.uniform(lo, hi), 2)
        tier = rng.choices(["preferred", "standard", "blocked"], [0.3, 0.65, 0.05])[0]
        vendor = rng.choice(["Acme", "Globex", "Initech", "Umbrella", "Hooli", "Stark"])
        text = (f"Invoice {rng.randint(1000, 9999)} from {vendor} ({tier} vendor). "
                f"Amount: ${amt:,.2f}. Due in {rng.randint(5, 60)} days.")
        out.append(({"invoice": text}, route(amt, tier)))
    if flip:
        for i in rng.sample(range(n), int(flip * n)):
            inp, lab = out[i]
            out[i] = (inp, rng.choice([x for x in ("approve", "review", "reject") if x != lab]))
    return out


def route(amount: float, tier: str) -> str:
    if tier == "blocked" or amount >= 20000:
        return "reject"
    if amount < 500 or (tier == "preferred" and amount < 5000):
        return "approve"
    return "review"


INTENTS = {
    "billing": ["I want a refund", "you charged me twice", "please send my money back", "refund the fee"],
    "cancel": ["cancel my subscription", "please unsubscribe me", "I want to cancel the plan"],
    "account": ["I forgot my password", "cannot login to the site", "reset my password please"],
}
FILLER = ["Thanks.", "Regards, Sam.", "This is the second time I write.", "My name is Alex.",
          "The weather is nice today.", "See the attached screenshot."]
OTHER = ["where is the office", "do you sell gift cards", "your app is great", "what are your hours"]


def intent_emails(n: int, seed: int) -> list[tuple[dict, dict]]:
    """Emails with an intent from keyword phrases (or ``other``), an urgency flag (``urgent`` /
    ``asap`` anywhere), an optional order id and an optional amount."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        intent = rng.choices(["billing", "cancel", "account", "other"], [0.35, 0.2, 0.2, 0.25])[0]
        phrase = rng.choice(INTENTS[intent] if intent != "other" else OTHER)
        urgent = rng.random() < 0.3
        oid = f"ORD-{rng.randint(10000, 99999)}" if rng.random() < 0.6 else None
        amount = round(rng.uniform(5, 900), 2) if rng.random() < 0.5 else None
        parts = [rng.choice(GREETINGS), phrase.capitalize() + "."]
        if oid:
            parts.append(f"Order number: {oid}.")
        if amount is not None:
            parts.append(f"The charge was ${amount:,.2f} on my card.")
        if urgent:
            parts.append(rng.choice(["This is URGENT.", "Please fix it ASAP.", "urgent!"]))
        parts.append(rng.choice(FILLER))
        rng.shuffle(parts[2:])
        out.append(({"email": " ".join(parts)},
                    {"intent": intent, "urgent": urgent, "order_id": oid, "amount": amount}))
    return out


def interp_agreement(program, pairs) -> float:
    ok = 0
    for inp, ref in pairs:
        out = run_program(program, inp)
        ok += (not out["deopt"]) and out["answer"] == ref and type(out["answer"]) is type(ref)
    return ok / len(pairs)


# ---------------------------------------------------------------------------------------------
# extraction
# ---------------------------------------------------------------------------------------------

def test_order_id_extraction_with_nulls_and_decoys():
    data = order_emails(500, seed=1)
    res = synthesize(data[:400], field="email", heldout=data[400:450])
    assert res.program is not None, res.reason
    assert check(res.program, "email") == "text"
    assert res.train_agreement == 1.0 and res.heldout_agreement == 1.0
    fresh = order_emails(200, seed=99)
    assert interp_agreement(res.program, fresh) == 1.0
    # nulls are reproduced, and a decoy id is never returned
    assert run_program(res.program, {"email": "Hello, my ticket REF-123 is open."}) == {"answer": None, "deopt": False}
    assert res.per_field[""].kind == "search"
    assert res.seconds < 10


def test_money_amount_is_parsed_next_to_decoy_numbers():
    rng = random.Random(3)
    data = []
    for _ in range(300):
        amt = round(rng.uniform(1, 50000), rng.choice([0, 2]))
        amt_text = f"${amt:,.2f}" if rng.random() < 0.7 else f"${amt:,.0f}" if amt == int(amt) else f"${amt:,.2f}"
        text = (f"Invoice {rng.randint(1000, 9999)} dated 2024-0{rng.randint(1, 9)}-1{rng.randint(0, 9)}: "
                f"total {amt_text}, {rng.randint(2, 9)} items.")
        data.append(({"invoice": text}, float(amt)))
    res = synthesize(data[:200], field="invoice", heldout=data[200:250])
    assert res.program is not None, res.reason
    assert check(res.program, "invoice") == "float"
    assert type(res.program) in (A.ParseMoney, A.ParseFloat)
    assert res.train_agreement == 1.0 and res.heldout_agreement == 1.0
    assert interp_agreement(res.program, data[250:]) == 1.0
    assert run_program(res.program, {"invoice": "Invoice 5 dated 2024-01-10: total $1,234.50, 3 items."})["answer"] == 1234.5


# ---------------------------------------------------------------------------------------------
# decision lists
# ---------------------------------------------------------------------------------------------

def test_routing_policy_with_thresholds_and_keywords_is_learned_exactly():
    data = invoices(600, seed=5)
    counts = {lab: sum(1 for _i, a in data if a == lab) for lab in ("approve", "review", "reject")}
    assert min(counts.values()) < 0.2 * len(data)  # imbalanced classes
    res = synthesize(data[:400], field="invoice", heldout=data[400:500])
    assert res.program is not None, res.reason
    assert res.train_agreement == 1.0 and res.heldout_agreement == 1.0
    assert interp_agreement(res.program, invoices(400, seed=77)) == 1.0
    consts = {n.value for n in A.walk(res.program) if type(n) is A.Compare}
    assert 20000 in consts and 500 in consts  # the policy's own round thresholds were recovered
    probes = [("standard", 19999.0, "review"), ("standard", 20000.0, "reject"), ("blocked", 12.0, "reject"),
              ("preferred", 4999.0, "approve"), ("preferred", 5001.0, "review"), ("standard", 499.0, "approve")]
    for tier, amt, want in probes:
        text = f"Invoice 1234 from Acme ({tier} vendor). Amount: ${amt:,.2f}. Due in 30 days."
        assert run_program(res.program, {"invoice": text})["answer"] == want, (tier, amt)
    assert res.seconds < 10


def test_keyword_intent_list():
    data = [(inp, ans["intent"]) for inp, ans in intent_emails(500, seed=11)]
    res = synthesize(data[:300], field="email", heldout=data[300:400])
    assert res.program is not None, res.reason
    assert res.train_agreement == 1.0 and res.heldout_agreement == 1.0
    assert interp_agreement(res.program, data[400:]) == 1.0
    kws = {n.s for n in A.walk(res.program) if type(n) is A.Contains}
    assert kws & {"refund", "charged", "money back", "cancel", "unsubscribe", "password", "login"}


def test_record_answer_is_decomposed_per_field():
    data = intent_emails(500, seed=21)
    res = synthesize(data[:300], field="email", heldout=data[300:400])
    assert res.program is not None, res.reason
    assert type(res.program) is A.Record and check(res.program, "email") == "record"
    assert set(res.per_field) == {"intent", "urgent", "order_id", "amount"}
    assert all(f.program is not None and f.train_agreement == 1.0 for f in res.per_field.values())
    assert res.per_field["order_id"].kind == "search" and res.per_field["amount"].kind == "number"
    assert res.train_agreement == 1.0 and res.heldout_agreement == 1.0
    assert interp_agreement(res.program, data[400:]) == 1.0
    assert res.candidates == sum(f.candidates for f in res.per_field.values())


def test_same_witnesses_give_the_same_program():
    data = invoices(300, seed=8)
    a = synthesize(data[:200], field="invoice", heldout=data[200:])
    b = synthesize(data[:200], field="invoice", heldout=data[200:])
    assert a.program is not None and a.program == b.program
    assert to_json(a.program) == to_json(b.program)
    assert a.candidates == b.candidates


def test_noisy_labels_still_give_the_policy():
    train = invoices(400, seed=31, flip=0.03)
    clean = invoices(400, seed=31)
    flipped = sum(1 for (_i, a), (_j, b) in zip(train, clean) if a != b)
    assert flipped == 12
    held = invoices(200, seed=32)
    res = synthesize(train, field="invoice", heldout=held)
    assert res.program is not None, res.reason
    assert res.train_agreement <= 1 - flipped / len(train) + 1e-9  # the flipped labels were not memorized
    assert res.heldout_agreement == 1.0
    assert interp_agreement(res.program, invoices(300, seed=33)) == 1.0


def test_random_labels_give_no_program():
    rng = random.Random(4)
    data = [(inp, rng.choice(["a", "b", "c"])) for inp, _ in invoices(300, seed=41)]
    res = synthesize(data[:200], field="invoice", heldout=data[200:])
    assert res.program is None
    assert res.reason and "agreement" in res.reason
    assert res.candidates > 0


# ---------------------------------------------------------------------------------------------
# proposers
# ---------------------------------------------------------------------------------------------

def _csv_witnesses(n: int, seed: int) -> list[tuple[dict, str]]:
    """Answer = the comma-separated words joined by spaces: no Search pattern, constant or
    decision list can produce it."""
    rng = random.Random(seed)
    words = ["red", "green", "blue", "cyan", "teal", "gold", "gray", "pink"]
    out = []
    for _ in range(n):
        ws = rng.sample(words, rng.randint(2, 4))
        out.append(({"tags": ",".join(ws)}, " ".join(ws)))
    return out


GOOD = A.Join(A.Split(A.Field("tags"), ","), " ")


def test_scripted_proposer_fixes_what_enumeration_cannot():
    data = _csv_witnesses(60, seed=2)
    alone = synthesize(data[:40], field="tags", heldout=data[40:])
    assert alone.program is None
    bad = {"format": "auto.program/1", "program": {"op": "lower", "x": {"op": "const", "type": "int", "value": 3}}}
    prop = ScriptedProposer([[bad, to_json(GOOD)]])
    res = synthesize(data[:40], field="tags", heldout=data[40:], proposer=prop)
    assert res.program == GOOD
    assert res.train_agreement == 1.0 and res.heldout_agreement == 1.0
    assert res.per_field[""].kind == "proposed"
    assert len(prop.calls) == 1
    field_name, failing, current = prop.calls[0]
    assert field_name == "tags" and failing and all(isinstance(p[0], dict) for p in failing)
    assert any("proposal rejected" in n for n in res.notes)  # the ill-typed proposal was refused


def test_llm_proposer_under_default_cap_refuses_cleanly(tmp_path, monkeypatch):
    from auto.frontier import FrontierClient

    class NeverCalled:
        class chat:  # noqa: N801
            class completions:  # noqa: N801
                @staticmethod
                def create(**_kw):
                    raise AssertionError("a refused call must never reach the model")

    monkeypatch.delenv("AUTO_SPEND_CAP_USD_MICROS", raising=False)
    client = FrontierClient("auto-sim-1", ledger=tmp_path / "ledger.jsonl", client=NeverCalled())
    prop = LLMProposer(client, "auto-sim-1")
    data = _csv_witnesses(50, seed=3)
    res = synthesize(data[:30], field="tags", heldout=data[30:], proposer=prop)
    assert res.program is None and res.reason
    assert len(prop.refusals) == 1 and "cap" in prop.refusals[0]
    assert any("SpendCapExceeded" in n for n in res.notes)
    assert not (tmp_path / "ledger.jsonl").exists()
    # a record with two parts enumeration cannot build: the refused proposer is asked only once
    rec = [(inp, {"a": ans, "b": ans.upper()}) for inp, ans in data]
    prop2 = LLMProposer(client, "auto-sim-1")
    res2 = synthesize(rec[:30], field="tags", proposer=prop2)
    assert res2.program is None and "field 'a'" in res2.reason and len(prop2.refusals) == 1
    with pytest.raises(SpendCapExceeded):
        prop.propose("tags", data[:2], None)
    with pytest.raises(ArgumentError):
        LLMProposer(client, "another-model")


def test_llm_proposer_parses_programs_from_a_reply():
    class Fake:
        model = "m"

        def __init__(self):
            self.seen = []

        def chat(self, messages, *, purpose, max_tokens, **kw):
            self.seen.append(messages)
            return "Here you go:\n```json\n[" + __import__("json").dumps(to_json(GOOD)["program"]) + "]\n```"

    fake = Fake()
    data = _csv_witnesses(40, seed=4)
    res = synthesize(data, field="tags", proposer=LLMProposer(fake, "m"))
    assert res.program == GOOD and res.train_agreement == 1.0
    system, user = fake.seen[0]
    assert "Join" in system["content"] and "'tags'" in user["content"]
    assert extract_json_values('x {"a": 1} y [2] z {bad') == [{"a": 1}, [2]]


# ---------------------------------------------------------------------------------------------
# helpers and errors
# ---------------------------------------------------------------------------------------------

def test_pattern_translation_and_round_thresholds():
    assert py_pattern(r"(\d+)$") == r"(\d+)\Z"
    assert py_pattern(r"[$]\$x$") == r"[$]\$x\Z"
    assert _roundest(19870_0000, 20150_0000, True, False) == 20000_0000  # ten-thousandths
    assert _roundest(498_5000, 501_0000, True, False) == 500_0000
    assert _roundest(1, 3, True, False) == 2
    assert description_length(A.Compare("ge", A.Field("x"), 20000)) < description_length(A.Compare("ge", A.Field("x"), 19873))


def test_search_time_regex_agrees_with_the_pike_vm():
    """The search evaluates Search with Python's re; the interpreter runs the Pike VM. On the
    pattern shapes the search enumerates, both must give the same answer."""
    from auto.models.program.synth import _answer, _shape_bodies

    rng = random.Random(9)
    alphabet = "ab AZ09-_.,:$#\n\té"
    texts = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 30))) for _ in range(60)]
    texts += [inp["email"] for inp, _ in order_emails(20, seed=5)]
    bodies = _shape_bodies(["ORD-12345", "ORD-9", "AB-77"]) + ["-?\\$?\\d[\\d,]*(\\.\\d+)?"]
    patterns = []
    for body in bodies:
        for left, right, capture in (("", "", False), ("\\b", "\\b", False), ("Order ", "", True),
                                     (": ", "$", True), (":\\s*", "\\.", True)):
            patterns.append((left + ("(" + body + ")" if capture else body) + right, 1 if capture else 0))
    checked = 0
    for pat, group in patterns:
        for x in (A.Field("t"), A.Lower(A.Field("t"))):
            prog = A.Search(x, pat, group)
            for t in texts:
                assert _answer(prog, {"t": t}) == run_program(prog, {"t": t})["answer"], (pat, t)
                checked += 1
    assert checked > 1000


def test_bad_input_is_a_usage_error():
    with pytest.raises(ArgumentError):
        synthesize([], field="t")
    with pytest.raises(ArgumentError, match="no string field"):
        synthesize([({"x": "a"}, "a")], field="t")
    with pytest.raises(ArgumentError, match="same keys"):
        synthesize([({"t": "a"}, {"k": 1}), ({"t": "b"}, {"j": 1})], field="t")
    with pytest.raises(ArgumentError):
        synthesize([({"t": "a"}, "a")], field="t", time_budget_s=0)
