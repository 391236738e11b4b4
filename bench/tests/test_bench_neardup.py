"""The near-duplicate bench: its stream, its reference, and one small run through the ratchet."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest

from auto.errors import ArgumentError
from bench.neardup import corpus
from bench.neardup.reference import NOISE, Reference


def test_the_stream_is_seeded_shifted_and_varied():
    a, shift = corpus.stream(400, 3)
    b, _ = corpus.stream(400, 3)
    assert a == b and shift == 200
    assert not any(it.shift for it in a[:shift]) and any(it.shift for it in a[shift:])
    texts = [it.ticket for it in a]
    assert len(set(texts)) < len(texts)  # exact repeats
    assert any(t.isupper() for t in texts) and any(t.lower().startswith(("hi", "hello", "hey")) for t in texts)
    assert any(" thanks" in t.lower() or " regards" in t.lower() for t in texts)
    with pytest.raises(ArgumentError, match="at least 1"):
        corpus.stream(0, 0)


def test_the_category_follows_the_amount_and_the_reference_ignores_surface_variation():
    refund = next(i for i, t in enumerate(corpus.TICKETS) if "{amt}" in t[1])
    assert corpus.category_of(refund, corpus.ESCALATE_AT - 1) == "refund"
    assert corpus.category_of(refund, corpus.ESCALATE_AT) == "escalation"
    rng = random.Random(0)
    items = [corpus.render(rng, b) for b in range(len(corpus.TICKETS)) for _ in range(20)]
    ref = Reference(0)
    ref.register(items)
    assert all(ref.belief(it.ticket) == corpus.category_of(it.base, it.amount) for it in items)
    assert ref.belief("a text nobody registered") == "other"
    answers = [ref.answer(items[0].ticket) for _ in range(2000)]
    flipped = sum(a != ref.belief(items[0].ticket) for a, _ in answers) / len(answers)
    assert abs(flipped - NOISE) < 0.012 and all(c > 0 for _, c in answers)
    quiet = Reference(0, noise=0.0)
    quiet.register(items)
    assert {quiet.answer(items[0].ticket)[0] for _ in range(200)} == {quiet.belief(items[0].ticket)}
    with pytest.raises(ArgumentError, match="--noise must be in"):
        Reference(0, noise=1.5)


def _bag_embed(texts):
    out = np.zeros((len(texts), 64))
    for i, t in enumerate(texts):
        for w in t.lower().split():
            out[i, hash(w) % 64] += 1.0
    return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-9)


def test_a_small_run_writes_the_ratchet_and_its_peers_on_the_same_items(tmp_path):
    from bench.neardup.run import render, run_neardup

    res = run_neardup(out_dir=tmp_path, items=30, seed=0, worker="thread", embed=_bag_embed)
    saved = json.loads((tmp_path / "results.json").read_text())
    assert saved["peers"]["items"] == 30 == saved["items"]
    assert [p["threshold"] for p in saved["peers"]["similarity_cache"]] == [0.7, 0.8, 0.9, 0.95]
    assert saved["cost_ratio"] is not None and saved["compile_errors"] == 0
    assert "near-duplicate stream" in render(res)
    assert [f["step"] for f in saved["neardup_replay"]] == ["case-punctuation", "greeting-signoff", "identifiers",
                                                            "vowels"]


def test_the_replay_serves_neighbours_and_repeats_a_wrong_merge_it_never_witnesses():
    from bench.peers import PeerItem
    from bench.neardup.replay import replay

    def it(text, answer):
        return PeerItem(json.dumps({"ticket": text}), text, answer, 10.0, answer)

    rows = [it("Hi, my order 1 is late", "shipping"), it("my order 2 is late. Thanks", "shipping"),
            it("refund $20 please", "refund"), it("REFUND $900 PLEASE", "escalation"), it("refund $55 please", "refund")]
    got = {f["step"]: f for f in replay(rows)}
    assert got["case-punctuation"]["served_without_paid_call"] == 0
    # identifiers: the second order and both later refunds are served; the $900 one is an escalation
    # the replay never witnesses (it is served), so its neighbourhood stays unanimous and wrong
    ident = got["identifiers"]
    assert ident["served_without_paid_call"] == 3 and ident["served_disagreement_with_control"] == 1 / 3
