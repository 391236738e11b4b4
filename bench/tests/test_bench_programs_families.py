"""The extraction (F3) and routing (F4) bench families: corpora, oracles, simulator noise, agents."""

from __future__ import annotations

import collections
import json
import random
import re
from pathlib import Path

import openai
import pytest

from auto.errors import ReferenceModelError, ArgumentError
from bench.extraction import agent as ex_agent
from bench.extraction import corpus as ex_corpus
from bench.extraction import oracle as sim_extraction
from bench.extraction.oracle import extraction_oracle, extraction_reading, money_amounts, words_to_number
from bench.families import FAMILIES, get_family
from bench.routing import agent as ro_agent
from bench.routing import corpus as ro_corpus
from bench.routing import oracle as sim_routing
from bench.routing.oracle import decide, routing_oracle, routing_reading
from bench.sim import SimModel, SimServer
from bench.triage.oracle import flip_probability

ANCHORS = Path(__file__).resolve().parents[3] / "shared" / "anchor-bench"
needs_anchors = pytest.mark.skipif(not (ANCHORS / "routing-requests.jsonl").exists(),
                                   reason="shared anchor-bench inputs not present")


def _jsonl(name: str) -> list[dict]:
    return [json.loads(line) for line in (ANCHORS / name).read_text(encoding="utf-8").splitlines() if line.strip()]


# -- corpora --------------------------------------------------------------------------------

@pytest.mark.parametrize("mod,field", [(ex_corpus, "email"), (ro_corpus, "request")])
def test_generators_are_deterministic_and_distinct(mod, field):
    a, b = mod.generate(300, seed=5), mod.generate(300, seed=5)
    assert a == b
    texts = [getattr(i, field) for i in a]
    assert len(set(texts)) == len(texts) == 300
    other = [getattr(i, field) for i in mod.generate(300, seed=6)]
    assert len(set(texts) & set(other)) < 30  # another seed is another corpus
    corpus = mod.default_corpus(seed=0)
    assert len(corpus["train"]) >= 400 and len(corpus["heldout"]) >= 150
    train, held = {getattr(i, field) for i in corpus["train"]}, {getattr(i, field) for i in corpus["heldout"]}
    assert len(train) == len(corpus["train"]) and not train & held
    kinds = {p.kind for p in corpus["ood"]}
    assert {"language", "missing_amount", "two_amounts", "negation", "amount_words", "amount_format", "empty",
            "garbage"} <= kinds
    assert all(i.kind is None for i in corpus["train"] + corpus["heldout"])
    with pytest.raises(ValueError):
        mod.generate(-1)
    with pytest.raises(ValueError):
        mod.generate(3, mix_rate=1.5)


@pytest.mark.parametrize("mod,field", [(ex_corpus, "email"), (ro_corpus, "request")])
def test_phrasing_varies(mod, field):
    items = mod.generate(400, seed=1)
    texts = [getattr(i, field) for i in items]
    openings = {" ".join(t.split()[:2]) for t in texts}
    assert len(openings) > 60  # greetings, frames and sentence orders vary
    assert any("$" in t and "," in t.split("$", 1)[1][:6] for t in texts)  # $1,200 form
    assert any(re.search(r"\$\d+\.\d\d\b", t) for t in texts)  # $58.40 form
    assert any(re.search(r"\$\d{1,3}(?![\d,.])", t) for t in texts)  # $45 form


def test_routing_class_balance_is_60_25_15():
    corpus = ro_corpus.default_corpus(seed=0)
    items = corpus["train"] + corpus["heldout"]
    counts = collections.Counter(i.label for i in items)
    n = len(items)
    for label, share in {"approve": 0.60, "review": 0.25, "reject": 0.15}.items():
        assert abs(counts[label] / n - share) < 0.03, counts
    tiers = collections.Counter(i.tier for i in items)
    assert set(tiers) == {"preferred", "standard", "new", "blocked"}
    words = " ".join(i.request for i in items)
    for noun in ("vendor", "supplier", "reseller", "firm", "partner"):
        assert noun in words


def test_extraction_field_balance():
    items = ex_corpus.generate(1000, seed=3)
    intents = collections.Counter(i.label["intent"] for i in items)
    urg = collections.Counter(i.label["urgency"] for i in items)
    assert set(intents) == set(sim_extraction.INTENTS) and min(intents.values()) > 150
    assert set(urg) == {"high", "normal", "low"} and min(urg.values()) > 150
    with_id = sum(i.label["order_id"] is not None for i in items) / len(items)
    with_amount = sum(i.label["amount"] is not None for i in items) / len(items)
    assert 0.8 < with_id < 0.95 and 0.25 < with_amount < 0.45


@pytest.mark.parametrize("mod", [ex_corpus, ro_corpus])
def test_oracle_agrees_with_generator_design(mod):
    items = mod.generate(800, seed=11)
    unmixed = [i for i in items if not i.mixed]
    assert len(unmixed) > 650
    bad = [i for i in unmixed if i.label != i.intended]
    assert not bad, bad[:3]


def _words(text: str) -> set[str]:
    return set(re.findall(r"[a-z][a-z']*", text.lower()))


def test_extraction_filler_words_are_label_independent():
    # Words outside the label-bearing phrases (cue phrases, ``other`` requests, the neutral
    # urgency fillers) come from pools shared by every label: their document frequency given a
    # label must match their frequency given the other labels (the old templates had "this" in
    # 64% of high-urgency emails and 4% of the rest).
    specific: set[str] = set()
    for pools in (ex_corpus.INTENT_VP, ex_corpus.INTENT_NP, ex_corpus.URGENCY_PREDICATE, ex_corpus.URGENCY_ADVERB,
                  ex_corpus.URGENCY_INTERJECTION):
        for key, phrases in pools.items():
            if key != "frames":
                for phrase in phrases:
                    specific |= _words(re.sub(r"\{\w+\}", " ", phrase))
    items = [i for i in ex_corpus.generate(3000, seed=7) if not i.mixed]
    checked = set()
    for fld in ("urgency", "intent"):
        labels = collections.Counter(i.label[fld] for i in items)
        df: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
        for i in items:
            for w in _words(i.email) - specific:
                df[w][i.label[fld]] += 1
        for w, counts in df.items():
            total = sum(counts.values())
            if total < 30:
                continue
            checked.add(w)
            for lab, n_lab in labels.items():
                gap = abs(counts[lab] / n_lab - (total - counts[lab]) / (len(items) - n_lab))
                assert gap < 0.09, (fld, w, lab, gap)
    assert {"this", "it's", "i", "thanks", "could", "fine"} <= checked


def test_extraction_cues_vary_in_position_and_phrasing():
    items = [i for i in ex_corpus.generate(1500, seed=8) if not i.mixed]
    for fld, pick in (("intent", lambda r: [h for hits in r.cues["intent"].values() for h in hits]),
                      ("urgency", lambda r: r.cues["urgency_high"] + r.cues["urgency_low"])):
        places, phrases = collections.Counter(), collections.defaultdict(set)
        for i in items:
            r = extraction_reading(i.email)
            hits = pick(r)
            if not hits:
                continue
            low = i.email.lower()
            start = min(low.find(h) for h in hits)
            places[min(2, 3 * start // max(1, len(low)))] += 1
            phrases[r.answer[fld]].add(hits[0])
        n = sum(places.values())
        assert all(places[k] / n > 0.1 for k in range(3)), (fld, places)  # start, middle and end of the email
        assert all(len(v) >= 3 for v in phrases.values()), (fld, {k: len(v) for k, v in phrases.items()})  # synonyms


def test_mixed_extraction_items_are_ambiguous():
    items = [i for i in ex_corpus.generate(800, seed=12) if i.mixed]
    assert len(items) > 30
    amb = [i for i in items if extraction_reading(i.email).ambiguous]
    assert amb == items


# -- oracles on the published anchor inputs --------------------------------------------------

@needs_anchors
def test_routing_oracle_on_anchor_requests():
    rows = _jsonl("routing-requests.jsonl")
    got = {r["id"]: routing_oracle(r["request"]) for r in rows}
    assert collections.Counter(got.values()) == {"approve": 24, "review": 10, "reject": 6}
    # by hand: $499 new vendor; $4,900 preferred; $8,000 preferred; $15,000 preferred; $22,000 preferred;
    # $600 from a blocked reseller; $12,500 standard
    assert [got[k] for k in ("f4-005", "f4-020", "f4-031", "f4-034", "f4-036", "f4-039", "f4-032")] == [
        "approve", "approve", "review", "review", "reject", "reject", "review"]
    assert not any(routing_reading(r["request"]).ambiguous for r in rows)


# The expected records of the 40 anchor emails, read by hand (intent, urgency; amount only f3-001).
ANCHOR_EXPECTED = {
    "f3-001": ("refund", "high"), "f3-002": ("replacement", "high"), "f3-003": ("status", "high"),
    "f3-004": ("cancel", "high"), "f3-005": ("other", "high"), "f3-006": ("refund", "high"),
    "f3-007": ("replacement", "high"), "f3-008": ("status", "high"), "f3-009": ("cancel", "high"),
    "f3-010": ("other", "high"), "f3-011": ("refund", "high"), "f3-012": ("replacement", "high"),
    "f3-013": ("status", "high"), "f3-014": ("cancel", "high"), "f3-015": ("other", "high"),
    "f3-016": ("refund", "normal"), "f3-017": ("replacement", "normal"), "f3-018": ("status", "normal"),
    "f3-019": ("cancel", "normal"), "f3-020": ("other", "normal"), "f3-021": ("refund", "normal"),
    "f3-022": ("replacement", "normal"), "f3-023": ("status", "normal"), "f3-024": ("cancel", "normal"),
    "f3-025": ("other", "normal"), "f3-026": ("refund", "normal"), "f3-027": ("replacement", "normal"),
    "f3-028": ("status", "normal"), "f3-029": ("cancel", "normal"), "f3-030": ("other", "normal"),
    "f3-031": ("refund", "low"), "f3-032": ("replacement", "low"), "f3-033": ("status", "low"),
    "f3-034": ("cancel", "low"), "f3-035": ("other", "low"), "f3-036": ("refund", "low"),
    "f3-037": ("replacement", "low"), "f3-038": ("status", "low"), "f3-039": ("cancel", "low"),
    "f3-040": ("other", "low"),
}


@needs_anchors
def test_extraction_oracle_on_anchor_emails():
    rows = _jsonl("extraction-emails.jsonl")
    assert len(rows) == len(ANCHOR_EXPECTED)
    for r in rows:
        rec = extraction_oracle(r["email"])
        assert list(rec) == ["order_id", "intent", "urgency", "amount"]
        assert rec["order_id"] is not None and rec["order_id"] in r["email"], r
        assert rec["intent"] in sim_extraction.INTENTS and rec["urgency"] in sim_extraction.URGENCIES
        assert (rec["intent"], rec["urgency"]) == ANCHOR_EXPECTED[r["id"]], (r, rec)
        assert rec["amount"] == (58.4 if r["id"] == "f3-001" else None), (r, rec)
    first = extraction_oracle(rows[0]["email"])
    assert first == {"order_id": "ORD-84213", "intent": "refund", "urgency": "high", "amount": 58.4}


# -- oracle details ---------------------------------------------------------------------------

def test_money_amounts():
    vals = lambda t, **kw: [m.value for m in money_amounts(t, **kw)]  # noqa: E731
    assert vals("charged $58.40 then $1,200 and $45") == [58.4, 1200.0, 45.0]
    assert vals("USD 300, 250 EUR, 12 dollars, €20, US$9") == [300.0, 250.0, 12.0, 20.0, 9.0]
    assert vals("about $3k") == [3000.0] and vals("3k chairs") == [] and vals("3k chairs", bare_k=True) == [3000.0]
    assert vals("fifty-eight dollars and forty cents") == [58.4]
    assert vals("49,90 EUR and €1.234,56 and $1,200") == [49.9, 1234.56, 1200.0]
    assert vals("two thousand five hundred dollars") == [2500.0]
    assert vals("size 13, 44 Corbett Lane, order ORD-12345, the 60th") == []
    assert words_to_number("one hundred and twenty") == 120 and words_to_number("a") is None


def test_extraction_negation_and_precedence():
    assert extraction_oracle("Please do not cancel order ORD-12345. Where is it?")["intent"] == "status"
    assert extraction_oracle("Do not cancel ORD-12345, I still want it.")["intent"] == "other"
    assert extraction_oracle("I want a replacement instead of a refund for ORD-22222.")["intent"] == "replacement"
    assert extraction_oracle("I have not received my refund for ORD-33333.")["intent"] == "refund"
    assert extraction_oracle("Please cancel ORD-44444 and refund my card.")["intent"] == "cancel"
    assert extraction_oracle("This is not urgent: update the address on ORD-55555.")["urgency"] == "low"
    r = extraction_reading("Cancel ORD-12345 or ORD-54321, refund $20 or $30, asap but no rush")
    assert r.answer == {"order_id": "ORD-12345", "intent": "cancel", "urgency": "high", "amount": 20.0}
    assert r.alternatives == {"order_id": "ORD-54321", "intent": "refund", "urgency": "low", "amount": 30.0}
    assert extraction_oracle("") == {"order_id": None, "intent": "other", "urgency": "normal", "amount": None}
    with pytest.raises(TypeError):
        extraction_oracle(None)  # type: ignore[arg-type]


def test_routing_policy_thresholds():
    assert decide(499.99, "standard") == "approve" and decide(500, "standard") == "review"
    assert decide(500, "preferred") == "approve" and decide(4999, "preferred") == "approve"
    assert decide(5000, "preferred") == "review" and decide(19999, "standard") == "review"
    assert decide(20000, "preferred") == "reject" and decide(10, "blocked") == "reject"
    assert decide(None, "preferred") == "review" and decide(None, "blocked") == "reject"
    with pytest.raises(ValueError):
        decide(10, "gold")
    with pytest.raises(ValueError):
        decide(-1, "standard")
    assert routing_oracle("$1,300 from a supplier that is not blocked, a preferred one") == "approve"
    assert routing_oracle("$900 from a vendor that is not a preferred partner") == "review"
    assert routing_oracle("3k from a preferred vendor") == "approve"
    r = routing_reading("$400 now and $6,000 later, standard vendor")
    assert (r.decision, r.runner_up, r.ambiguous, r.amount) == ("review", "approve", True, 6000.0)


# -- the simulator through the real openai client, and the agents ------------------------------

@pytest.fixture(scope="module")
def sim():
    import os

    saved = {k: os.environ.get(k) for k in ("OPENAI_BASE_URL", "OPENAI_API_KEY")}
    with SimServer(seed=3, error_rate=0.0) as server:
        os.environ["OPENAI_BASE_URL"] = server.base_url
        os.environ["OPENAI_API_KEY"] = "sk-test-not-a-key"
        ex_agent.reset_client()
        yield server
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
    ex_agent.reset_client()


def _inputs(fam: str, n: int) -> list[str]:
    f = get_family(fam)
    corpus = f.default_corpus(0)
    texts = [f.text_of(i) for i in corpus["heldout"][:n] + corpus["ood"]]
    if (ANCHORS / f.anchor_file).exists():
        texts += [r[f.field] for r in f.read_anchor(ANCHORS)]
    return texts


@pytest.mark.parametrize("fam", ["extraction", "routing"])
def test_agents_match_oracle_at_temperature_zero(sim, fam, monkeypatch):
    f = get_family(fam)
    agent = ex_agent if fam == "extraction" else ro_agent
    monkeypatch.setattr(agent, "TEMPERATURE", 0.0)
    for text in _inputs(fam, 40):
        answer, resp, headers = f.ask(text)
        assert headers["x-auto-reference-model"] == "simulated" and resp.usage.completion_tokens >= 1
        assert answer == f.oracle(text), text
        assert resp.choices[0].message.content == (json.dumps(f.oracle(text)) if fam == "extraction" else f.oracle(text))


@pytest.mark.parametrize("fam", ["extraction", "routing"])
def test_recorded_agent_stores_the_normalized_answer(sim, fam, tmp_path):
    import auto
    from auto.store import Store

    f = get_family(fam)
    texts = [f.text_of(i) for i in f.default_corpus(0)["train"][:25]]
    with Store(tmp_path / "s.sqlite") as st, auto.recording(st):
        answers = [f.run_agent(t) for t in texts]
    with Store(tmp_path / "s.sqlite") as st:
        ws = st.witnesses(f.task)
    assert [w.input for w in ws] == [{f.field: t} for t in texts]
    assert [w.output for w in ws] == answers
    # at the agent's own temperature (0.3) unambiguous inputs always get the oracle's answer
    for t, a in zip(texts, answers):
        amb = extraction_reading(t).ambiguous if fam == "extraction" else routing_reading(t).ambiguous
        if not amb:
            assert a == f.oracle(t)


def test_openai_client_sees_formatting_variants_and_agent_normalizes(sim):
    client = openai.OpenAI(base_url=sim.base_url, api_key="sk-test-not-a-key", max_retries=0)
    email = "Please cancel order ORD-24680 right away, I paid $19.99 by mistake."
    want = extraction_oracle(email)
    raws = set()
    for _ in range(60):  # identical requests draw fresh noise (k counts occurrences per body)
        r = client.chat.completions.create(model="auto-sim-1", temperature=2.0, messages=[
            {"role": "system", "content": ex_agent.SYSTEM_PROMPT}, {"role": "user", "content": email}])
        raw = r.choices[0].message.content
        raws.add(raw)
        assert ex_agent.normalize(raw) == want
    assert len(raws) >= 3 and any(x.startswith("```") or "\n" in x for x in raws)


# -- the noise model ------------------------------------------------------------------------

def _respond(mod, text: str, temperature: float, seed: int, system: str) -> str:
    msgs = [{"role": "system", "content": system}, {"role": "user", "content": text}]
    return mod.respond(msgs, temperature, random.Random(seed))


def test_extraction_noise_formats_and_flips():
    clear = "Hi, the kettle from ORD-11223 arrived broken. Please send a replacement. No rush."
    assert not extraction_reading(clear).ambiguous
    want = extraction_oracle(clear)
    raws = [_respond(sim_extraction, clear, 2.0, s, ex_agent.SYSTEM_PROMPT) for s in range(600)]
    assert {ex_agent.normalize(r)["intent"] for r in raws} == {want["intent"]}
    assert all(ex_agent.normalize(r) == want for r in raws)
    variants = {v for v in sim_extraction.FORMAT_VARIANTS
                if sim_extraction.format_reply(want, v) in raws}
    assert len(variants) == len(sim_extraction.FORMAT_VARIANTS)
    assert all(_respond(sim_extraction, clear, 0.0, s, "") == json.dumps(want) for s in range(50))
    amb = "Cancel ORD-10101, or if it is too late, refund me."
    reading = extraction_reading(amb)
    assert reading.alternatives == {"intent": "refund"}
    flips = sum(ex_agent.normalize(_respond(sim_extraction, amb, 1.0, s, ""))["intent"] == "refund"
                for s in range(2000))
    p = flip_probability(1.0)
    assert abs(flips / 2000 - p) < 4 * (p * (1 - p) / 2000) ** 0.5
    assert all(ex_agent.normalize(_respond(sim_extraction, amb, 0.0, s, ""))["intent"] == "cancel" for s in range(100))
    with pytest.raises(ValueError):
        sim_extraction.format_reply(want, "yaml")


def test_routing_noise_formats_and_flips():
    clear = "Ops requests $250 for label printers from a standard vendor."
    raws = [_respond(sim_routing, clear, 2.0, s, ro_agent.SYSTEM_PROMPT) for s in range(600)]
    assert {ro_agent.normalize(r) for r in raws} == {"approve"}
    assert {"Approve", "APPROVE", "approve.", "  approve\n", "approve"} <= set(raws)
    amb = "$400 deposit and $6,000 on delivery, standard supplier."
    assert routing_reading(amb).runner_up == "approve"
    got = [ro_agent.normalize(_respond(sim_routing, amb, 1.0, s, "")) for s in range(2000)]
    p = flip_probability(1.0)
    assert set(got) == {"review", "approve"}
    assert abs(got.count("approve") / 2000 - p) < 4 * (p * (1 - p) / 2000) ** 0.5
    assert {_respond(sim_routing, amb, 0.0, s, "") for s in range(100)} == {"review"}


def test_tool_calls_carry_the_answer():
    model = SimModel(seed=1, error_rate=0.0)
    email = "Where is ORD-99887? It has been two weeks."
    tools = [{"type": "function", "function": {"name": "save", "parameters": {"type": "object", "properties": {
        "order_id": {"type": ["string", "null"]}, "intent": {"type": "string"}}}}}]
    r = model.chat({"model": "auto-sim-1", "temperature": 0, "tools": tools, "messages": [
        {"role": "system", "content": ex_agent.SYSTEM_PROMPT}, {"role": "user", "content": email}]})
    call = r.body["choices"][0]["message"]["tool_calls"][0]["function"]
    assert call["name"] == "save" and json.loads(call["arguments"]) == extraction_oracle(email)
    tools = [{"type": "function", "function": {"name": "route", "parameters": {"type": "object", "properties": {
        "decision": {"type": "string"}}}}}]
    r = model.chat({"model": "auto-sim-1", "temperature": 0, "tools": tools, "messages": [
        {"role": "system", "content": ro_agent.SYSTEM_PROMPT},
        {"role": "user", "content": "$90 for pens, banned vendor"}]})
    assert json.loads(r.body["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"]) == {"decision": "reject"}


def test_extraction_normalize():
    want = {"order_id": "ORD-12345", "intent": "refund", "urgency": "high", "amount": 58.4}
    assert ex_agent.normalize('```json\n{"amount": "$58.40", "urgency": "High", "intent": "Refund.", '
                              '"order_id": "ord-12345"}\n```') == want
    assert ex_agent.normalize(' {"order_id": null, "intent": "other"}. ') == {
        "order_id": None, "intent": "other", "urgency": None, "amount": None}
    for bad in ("refund", "[1, 2]", "", None):
        with pytest.raises(ReferenceModelError):
            ex_agent.normalize(bad)


# -- registry -------------------------------------------------------------------------------

def test_family_registry():
    assert set(FAMILIES) == {"triage", "extraction", "routing", "inbox", "assistant", "intents"}
    with pytest.raises(ArgumentError, match="available: triage, extraction, inbox, assistant, routing"):
        get_family("summarize")
    f = get_family("routing")
    item = f.default_corpus(0)["train"][0]
    assert f.label_of(item) == f.oracle(f.text_of(item))
    t = get_family("triage")
    ticket = t.default_corpus(0)["train"][0]
    assert t.label_of(ticket) == ticket.category and t.oracle(ticket.ticket) in ("billing", "bug", "feature",
                                                                                  "account", "security", "shipping")


def test_read_anchor_errors(tmp_path):
    f = get_family("extraction")
    with pytest.raises(ArgumentError, match="not found"):
        f.read_anchor(tmp_path)
    (tmp_path / f.anchor_file).write_text('{"email": "ok"}\n{"nope": 1}\n')
    with pytest.raises(ArgumentError, match=":2:"):
        f.read_anchor(tmp_path)
    (tmp_path / f.anchor_file).write_text('{"email": "ok"}\n\n{"email": "two"}\n')
    assert [r["email"] for r in f.read_anchor(tmp_path)] == ["ok", "two"]


@pytest.mark.slow
def test_routing_family_results_json(tmp_path):
    from bench.compile_family import run_compile_family

    r = run_compile_family("routing", out_dir=tmp_path, seed=0)
    assert r["compiled_as"] == "program"
    for k in ("heldout_agreement", "heldout_agreement_ci95_low", "artifact_bytes"):
        assert isinstance(r[k], (int, float))
    assert r["heldout_agreement"] >= 0.97 and r["fresh_heldout"]["n"] >= 150
    # the specialist beside the program is refused on these witnesses, with its reason and eval run
    assert r["specialist"]["compiled"] is False and r["specialist"]["reason"]
    assert r["specialist"]["eval_run_id"].startswith("sha256:")
    assert json.loads((tmp_path / "results.json").read_text())["compiled_as"] == "program"
    # every probe is answered at tier 1, deopted by the program itself, or declined by its guard
    ood = r["ood"]
    assert ood["tier1"] + ood["deopt_reasons"].get("program deopt", 0) + ood["guard_declined"] == ood["n"]
    assert 0 <= ood["guard_declined_would_be_wrong"] <= ood["guard_declined"]
