"""Model-call sites: leaf alignment, discovery, the census per site, and compiling a site."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from auto.census import census, render_table
from auto.compile import compile_task
from auto.errors import CompileError
from auto.record.template import request_leaves, request_skeleton, shape_digest
from auto.sites import SITE_PREFIX, Site, answer_choices, census_view, discover, is_site_id, read_site, site_answer
from auto.sites.align import MIN_ALIGN_VALUES, SLOT, align, extract, render
from auto.store import Store

from site_fixtures import SYSTEM, WORDS, chat_span, compiled_site, label_of, site_words, ticket_call

# ----------------------------------------------------------------------------- alignment


def test_align_finds_fixed_text_and_slots():
    vals = [f"Ticket: my {w} is broken\nReply with one label." for w in WORDS]
    parts = align(vals)
    assert parts == ("Ticket: my ", SLOT, " is broken\nReply with one label.")
    assert extract(parts, vals[3]) == ["invoice"]


def test_align_needs_enough_values_and_never_invents_text():
    few = ["I was charged twice", "Crash on start", "Add dark mode"]
    assert align(few) == (SLOT,)
    assert align(["same"] * 5) == ("same",)
    free = ["I was charged twice for my plan", "My app crashes when I log in", "Please add a dark mode to the app",
            "Where is my order", "Reset my password please", "The export button does nothing", "Invoice 44 is wrong",
            "Cannot upload files", "Coupon code rejected"]
    assert len(free) >= MIN_ALIGN_VALUES
    parts = align(free)
    assert all(extract(parts, v) is not None for v in free)  # whatever it found fits every value


def test_align_refuses_empty():
    with pytest.raises(ValueError):
        align([])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.text(min_size=0, max_size=12), min_size=8, max_size=20),
       st.sampled_from(["Q: ", "Answer this: ", ""]), st.sampled_from([" Thanks.", "\nReply briefly.", ""]))
def test_extract_render_roundtrip(values, prefix, suffix):
    texts = [prefix + v + suffix for v in values]
    parts = align(texts)
    for t in texts:
        got = extract(parts, t)
        assert got is not None
        assert render(parts, got) == t


# ----------------------------------------------------------------------------- shapes and discovery


def test_shape_ignores_text_and_transport_but_not_parameters():
    a = {"model": "m", "temperature": 0.3, "messages": [{"role": "user", "content": "x"}], "stream": True, "user": "u1"}
    b = {"model": "m", "temperature": 0.3, "messages": [{"role": "user", "content": "y"}]}
    c = {"model": "m", "temperature": 0.7, "messages": [{"role": "user", "content": "y"}]}
    assert shape_digest(a) == shape_digest(b) != shape_digest(c)
    tools = {**b, "tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}]}
    assert shape_digest(tools) != shape_digest(b)
    hist = {"model": "m", "messages": [
        {"role": "assistant", "content": None, "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "42"}]}
    hist2 = json.loads(json.dumps(hist).replace("call_1", "call_zz"))
    assert shape_digest(hist) == shape_digest(hist2)  # tool-call ids are random per run
    assert [p for p, _ in request_leaves(hist["messages"])] == ["0.tool_calls.0.function.arguments", "1.content"]
    assert request_skeleton(hist)["messages"][1]["tool_call_id"] == "{tool_call_0}"


def test_discover_one_site_with_slots_per_call_site():
    spans = [ticket_call(w, "billing" if w in ("refund", "invoice", "coupon") else "bug") for w in WORDS]
    spans += [chat_span([{"role": "system", "content": "Summarize."}, {"role": "user", "content": f"text {w}"}], "ok")
              for w in WORDS]
    d = discover(spans)
    assert len(d.sites) == 2  # two system prompts: two call sites
    site = next(s for s in d.sites.values() if s.fixed.get("0.content") == SYSTEM)
    assert is_site_id(site.id) and site.id.startswith(SITE_PREFIX)
    assert [s.name for s in site.slots] == ["ticket", "customer"]
    assert site.leaves["1.content"] == ("Ticket: ", SLOT, " is broken\nCustomer: ", SLOT)
    inp = d.inputs[0]
    assert inp[site.slots[0].name] == "refund"
    # rendering the slots gives the request back
    assert site.render(inp)["messages"] == spans[0]["input"]["messages"]
    assert site.extract(spans[0]["input"]) == inp
    # a request with another temperature is not this site
    other = ticket_call("refund", "billing", temperature=0.9)["input"]
    assert site.extract(other) is None


def test_output_affecting_parameters_split_sites():
    spans = [ticket_call(w, "bug", temperature=0.0) for w in WORDS] + [ticket_call(w, "bug", temperature=1.0) for w in WORDS]
    assert len(discover(spans).sites) == 2


def test_site_ids_do_not_depend_on_order_or_on_refined_slots():
    spans = [ticket_call(w, "bug") for w in WORDS]
    a = discover(spans).sites
    b = discover(list(reversed(spans))).sites
    assert list(a) == list(b)
    fewer = discover(spans[:3]).sites  # too few values to align: one whole-message slot
    assert list(fewer) == list(a)
    assert list(fewer.values())[0].leaves["1.content"] == (SLOT,)


def test_site_answers_drop_random_tool_call_ids():
    out = {"content": None, "tool_calls": [{"id": "call_abc", "type": "function", "function": {"name": "f", "arguments": "{\"a\":1}"}}],
           "refusal": None, "finish_reason": "tool_calls"}
    ans = site_answer(out)
    assert ans == {"content": None, "tool_calls": [{"name": "f", "arguments": "{\"a\":1}"}], "refusal": None,
                   "finish_reason": "tool_calls"}
    assert site_answer({"content": "hi", "tool_calls": None, "refusal": None, "finish_reason": "stop"}) == "hi"
    msg, finish = answer_choices(ans)[0]
    assert finish == "tool_calls" and msg["tool_calls"][0]["id"].startswith("call_auto_")
    assert answer_choices("hi") == [({"role": "assistant", "content": "hi", "refusal": None}, "stop")]


def test_manifest_entry_roundtrip():
    site = next(iter(discover([ticket_call(w, "bug") for w in WORDS]).sites.values()))
    again = Site.from_manifest(json.loads(json.dumps(site.to_manifest())))
    body = ticket_call("refund", "x")["input"]
    assert again.extract(body) == site.extract(body)
    with pytest.raises(ValueError):
        Site.from_manifest({"format": "other"})


# ----------------------------------------------------------------------------- census


def test_census_counts_model_calls_per_site_with_slots():
    spans = [ticket_call(w, "bug") for w in WORDS for _ in range(2)]
    spans.append(ticket_call("refund", "billing"))  # divergent: the same request answered differently
    c = census(spans)
    assert len(c.sites) == 1
    s = c.sites[0]
    assert s.model_call is not None and [x["name"] for x in s.model_call["slots"]]
    assert s.counts["witnessed-deterministic"] == len(WORDS) - 1 and s.counts["divergent"] == 1
    assert "slots:" in render_table(c)
    old = census(spans, model_call_sites=False)  # every distinct prompt its own site before
    assert len(old.sites) == 1 and old.sites[0].site == "x"
    rekeyed, found = census_view(spans)
    assert set(found) == {s.site}
    assert rekeyed[0]["input"] == {"ticket": "refund", "customer": "6"} and rekeyed[0]["output"] == "bug"


# ----------------------------------------------------------------------------- compile


def test_compile_a_site_through_the_ladder(tmp_path):
    path, sid, out = compiled_site(tmp_path)
    with Store(path) as store:
        sw = read_site(store, sid)
        assert sw is not None and len(sw.witnesses) == 2 * len(site_words()) and sw.reference_model == "m-1"
        assert out.manifest["task"] == sid and out.manifest["compiled_as"] == "memo"
        site = Site.from_manifest(out.manifest["site"])
        assert site.id == sid
        assert sorted(out.manifest["interface"]["input"]["properties"]) == sorted(s.name for s in site.slots)
        assert out.manifest["provenance"]["reference_model"] == "m-1"
        from auto_runtime import Artifact

        art = Artifact.load(out.wasm)
        w = site_words()[0]
        inp = site.extract(ticket_call(w, "x")["input"])
        assert art.call(inp)["answer"] == label_of(w)
        with pytest.raises(CompileError):
            compile_task(store, SITE_PREFIX + "0" * 16)


def test_a_site_keeps_the_template_of_its_latest_generation_while_it_fits(tmp_path):
    from auto.compile import compile_task

    path = tmp_path / "k.sqlite"
    first = [ticket_call(w, label_of(w)) for w in site_words()[:7] for _ in range(2)]  # too few values: one slot
    with Store(path) as store:
        store.ingest(first)
        (sid,) = discover(store.spans(kind="llm")).sites
        out = compile_task(store, sid, rungs=["memo"], out_path=tmp_path / "a.wasm")
        assert [s.name for s in Site.from_manifest(out.manifest["site"]).slots] == ["user"]
        store.ingest([ticket_call(w, label_of(w)) for w in site_words()[7:] for _ in range(2)])
        assert [s.name for s in discover(store.spans(kind="llm")).sites[sid].slots] == ["ticket", "customer"]
        sw = read_site(store, sid)
        assert [s.name for s in sw.site.slots] == ["user"]  # the generation's template still fits: kept
        assert set(sw.witnesses[0].input) == {"user"}


def test_a_store_s_model_calls_are_read_once_per_state_and_checked(tmp_path, monkeypatch):
    import sqlite3
    import sys

    from auto.errors import IntegrityError

    discover_mod = sys.modules["auto.sites.discover"]

    path = tmp_path / "c.sqlite"
    calls = {"spans": 0, "verified": 0}
    with Store(path) as store:
        store.ingest([ticket_call(w, label_of(w)) for w in site_words() for _ in range(2)])
        (sid,) = discover(store.spans(kind="llm")).sites
        real_spans, real_verified = store.spans, store.verified_spans

        def spans(*a, **k):
            calls["spans"] += 1
            return real_spans(*a, **k)

        def verified(kind):
            calls["verified"] += 1
            return real_verified(kind)

        monkeypatch.setattr(store, "spans", spans)
        monkeypatch.setattr(store, "verified_spans", verified)
        first = read_site(store, sid, verify=True)
        again = read_site(store, sid, verify=True)
        assert calls == {"spans": 0, "verified": 1}  # the second read of the same rows came from the cache
        assert [w.span_id for w in again.witnesses] == [w.span_id for w in first.witnesses] and again.digest == first.digest
        assert store.verify(kind="llm", incremental=True).spans == 0  # the read moved the kind's watermark
        store.ingest([ticket_call("late 1", "bug")])  # a new row: read again
        assert len(read_site(store, sid, verify=True).witnesses) == len(first.witnesses) + 1
        assert calls["verified"] == 2
        monkeypatch.setattr(discover_mod, "MODEL_CALL_CACHE_SPANS", 0)  # more spans than the cap: not kept
        store.ingest([ticket_call("late 2", "bug")])
        read_site(store, sid)
        read_site(store, sid)
        assert calls["spans"] == 2
    con = sqlite3.connect(path)
    con.execute("DROP TRIGGER spans_no_update")
    con.commit()
    con.close()
    with Store(path) as store:
        assert read_site(store, sid) is not None  # without the check the rows are read as they are
        with pytest.raises(IntegrityError):
            read_site(store, sid, verify=True)
