"""The intents family: real-utterance streams, the simulated reference's error structure, the peers,
and a short cold run end to end (deterministic, seeded)."""

from __future__ import annotations

import json
import random
from collections import Counter

import numpy as np
import pytest

from bench.intents import corpus, oracle
from bench.peers import PeerItem, exact_dict, peer_figures, similarity_cache


def test_stream_is_seeded_zipf_with_shift_and_out_of_scope():
    s1, cut = corpus.stream(3000, 0)
    s2, _ = corpus.stream(3000, 0)
    assert s1 == s2 and cut == 1500
    assert corpus.stream(3000, 1)[0] != s1
    ceiling = len(s1) / len({u.utterance for u in s1})
    assert 2.0 <= ceiling <= 2.6  # the memo-only ceiling of the default stream
    roles = Counter(u.role for u in s1)
    assert 0.03 <= roles["out-of-scope"] / len(s1) <= 0.07
    assert all(u.role != "shift" for u in s1[:cut]) and sum(u.role == "shift" for u in s1[cut:]) > 200
    assert all(u.label == corpus.OUT_OF_SCOPE for u in s1 if u.role == "out-of-scope")
    assert corpus.OUT_OF_SCOPE in corpus.labels() and not set(corpus.OUT_OF_SCOPE_INTENTS) & set(corpus.labels())


def test_near_duplicate_stream_varies_the_surface():
    s, _ = corpus.stream(400, 0, "near-duplicate")
    data = {u.utterance for u in corpus.load()}
    varied = [u for u in s if u.utterance not in data]
    assert len(varied) > 200
    rng = random.Random(3)
    kinds = Counter(corpus.vary("set an alarm for 7 am", rng)[1] for _ in range(300))
    assert set(kinds) == set(corpus.VARIATIONS)


def test_reference_is_consistent_wrong_on_the_ambiguous_share_and_noisy_per_call():
    data = corpus.load()
    wrong = sum(oracle.is_believed_wrong(u.utterance) for u in data)
    assert abs(wrong / len(data) - oracle.WRONG_SHARE) < 0.002
    u = next(u for u in data if oracle.is_believed_wrong(u.utterance))
    assert oracle.intents_oracle(u.utterance) != u.label  # a confusable label, consistently
    msgs = [{"role": "system", "content": oracle.MARKER}, {"role": "user", "content": u.utterance}]
    belief = oracle.intents_oracle(u.utterance)
    assert all(oracle.respond(msgs, 0.0, random.Random(i)) == belief for i in range(50))
    answers = [oracle.respond(msgs, 0.3, random.Random(i)) for i in range(2000)]
    flips = sum(a != belief for a in answers) / len(answers)
    assert 0.01 <= flips <= 0.03


def test_near_duplicates_get_the_same_belief():
    rng = random.Random(0)
    base = [u for u in corpus.load() if u.role == "in-scope"][:300]
    same = 0
    for u in base:
        text, _ = corpus.vary(u.utterance, rng)
        same += oracle.intents_oracle(text) == oracle.intents_oracle(u.utterance)
    assert same / len(base) >= 0.9


def _items():
    # a, a (repeat), "a!" (near-duplicate), b; the reference disagrees with itself once
    return [PeerItem("a", "alpha", "x", 10.0, "x"), PeerItem("a", "alpha", "x", 10.0, "y"),
            PeerItem("a2", "alpha!", "x", 10.0, "x"), PeerItem("b", "beta", "z", 10.0, "z")]


def test_exact_dict_and_similarity_cache():
    d = exact_dict(_items())
    assert d["served_without_paid_call"] == 1 and d["cost_ratio"] == pytest.approx(40 / 30)
    # on the one hit the served answer "x" equals the control's "x", the second answer "y" does not
    assert d["excess_silent_wrong"] == pytest.approx(-1.0)
    vec = {"alpha": [1.0, 0.0], "alpha!": [0.96, 0.28], "beta": [0.0, 1.0]}
    embed = lambda texts: np.asarray([vec[t] for t in texts])  # noqa: E731
    lo, hi = similarity_cache(_items(), embed, thresholds=(0.9, 0.99))
    assert lo["served_without_paid_call"] == 2 and hi["served_without_paid_call"] == 1
    p = peer_figures(_items(), embed)
    assert p["memo_ceiling"] == pytest.approx(4 / 3) and len(p["similarity_cache"]) == 4


def test_cold_run_end_to_end(tmp_path):
    from bench.intents.run import render, run_intents

    embed = lambda texts: np.asarray([[1.0, float(len(t) % 7)] for t in texts]) / np.sqrt(  # noqa: E731
        1.0 + np.asarray([[float(len(t) % 7) ** 2] for t in texts]))
    res = run_intents(out_dir=tmp_path, items=12, seed=0, worker="thread", embed=embed)
    saved = json.loads((tmp_path / "results.json").read_text())
    assert saved["items"] == 12 and saved["family"] == "intents" and saved["compile_errors"] == 0
    assert saved["cost_ratio"] == res["cost_ratio"] and "cost_ratio_without_audit" in saved
    assert saved["cost_ratio"] <= saved["cost_ratio_without_audit"]  # the headline counts the audits' spend
    assert saved["peers"]["exact_dict"]["items"] == 12 and saved["memo_ceiling"] >= 1.0
    assert set(saved["roles"]) <= {"in-scope", "shift", "out-of-scope"}
    probe = saved["noise_probe"]  # the paid re-asks are reported: none here (no specialist refused near epsilon)
    assert probe["probes"] == probe["answered"] == 0 and probe["why_not"] and "noise probe: 0 paid re-asks" in render(saved)
    assert (tmp_path / "ratchet.csv").is_file() and (tmp_path / "cost.png").is_file()
    # the peers replayed from the finished run's ratchet.csv are the run's own peers
    from bench.peers import exact_dict, items_from_csv

    replayed = items_from_csv(tmp_path / "ratchet.csv", lambda inp: inp["utterance"])
    assert exact_dict(replayed) == saved["peers"]["exact_dict"]


def test_role_figures_count_the_references_own_noise_beside_the_disagreements():
    from bench.intents.run import role_figures
    from bench.stream import StreamRow

    def row(tier, answer, ref, ref2):
        return StreamRow(position=0, tier=tier, reason="", score=None, p_value=None, latency_us=0.0, cost_usd_micros=0.0,
                         generation=None, answer=answer, reference_answer=ref, reference_answer_2=ref2,
                         control_cost_usd_micros=1.0, reference_latency_ms=1.0)

    rows = [row("tier-1", "oos", "x", "oos"),   # the control call was the noisy one
            row("tier-1", "oos", "oos", "oos"), row("tier-0", "oos", "y", "oos"), row("tier-1", "a", "b", "b")]
    f = role_figures(rows, ["out-of-scope"] * 3 + ["in-scope"])
    o = f["out-of-scope"]
    assert (o["items"], o["tier1"], o["admitted_disagreeing"], o["reference_self_disagreeing"]) == (3, 2, 1, 1)
    assert o["admitted_disagreeing_share"] == pytest.approx(1 / 3) and o["admitted_disagreeing_excess_share"] == 0.0
    assert f["in-scope"]["admitted_disagreeing_excess_share"] == 1.0
