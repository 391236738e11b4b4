"""The host-side semantic novelty guard (auto.guards.semantic): the conformal p-value, the
deterministic calibration split, the offline WordLlama load, and the host guard's decision."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest

from auto_runtime.manifest import Manifest

from auto.errors import ArgumentError
from auto.guards.semantic import HostGuard, SemanticNovelty, load_embedder, make_host_guard, without_novelty


def _letters(texts):
    """A stand-in embedding: unit-norm letter counts (a-z); zero for text without letters."""
    out = np.zeros((len(texts), 26))
    for i, t in enumerate(texts):
        for ch in t.lower():
            if "a" <= ch <= "z":
                out[i, ord(ch) - 97] += 1
    n = np.linalg.norm(out, axis=1, keepdims=True)
    return np.divide(out, n, out=np.zeros_like(out), where=n > 0)


def test_semantic_novelty_p_value_is_the_conformal_formula():
    ref = ["billing refund invoice", "crash error bug", "login password account"]
    cal = ["refund my invoice", "the app crashes", "reset password", "invoice charge", "bug in export"]
    sem = SemanticNovelty(ref, cal, 0.2, _letters)
    cal_scores = sem.scores(cal)
    assert np.all(np.diff(sem.calibration) >= 0) and sem.n == 5
    for text in ["refund the invoice", "zzzz qqqq", "", "   ", "password"]:
        s = float(sem.scores([text])[0])
        expected = (1 + sum(1 for c in cal_scores if c >= s)) / (len(cal) + 1)
        assert math.isclose(float(sem.p_values([text])[0]), expected)
    # no letters at all: the embedding is zero, the score is the maximum 1.0, p is the smallest possible
    assert float(sem.scores([""])[0]) == 1.0
    assert float(sem.p_values(["1234 !!"])[0]) == pytest.approx(1 / 6)
    with pytest.raises(Exception, match="alpha"):
        SemanticNovelty(ref, cal, 1.5, _letters)
    with pytest.raises(Exception, match="at least one"):
        SemanticNovelty([], cal, 0.1, _letters)


def test_semantic_split_is_deterministic_and_disjoint():
    texts = [f"ticket number {i} about billing" for i in range(60)]
    a = SemanticNovelty.from_witness_texts(texts + texts[:10], 0.1, _letters)
    b = SemanticNovelty.from_witness_texts(list(reversed(texts)), 0.1, _letters)
    assert a.n == b.n and 0 < a.n < 60 and np.array_equal(a.calibration, b.calibration)
    assert a.describe()["reference"] + a.n == 60


def test_wordllama_loads_offline(monkeypatch):
    pytest.importorskip("wordllama")
    import socket

    def no_network(*a, **k):
        raise OSError("network disabled in this test")

    monkeypatch.setattr(socket, "create_connection", no_network)
    monkeypatch.setattr(socket.socket, "connect", no_network)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    embed = load_embedder()
    e = embed(["I was charged twice", "my package never arrived", ""])
    assert e.shape == (3, 256)
    assert np.allclose(np.linalg.norm(e[:2], axis=1), 1.0) and not e[2].any()


class _Stub:
    """A runtime-guard stand-in: passes iff the output's margin >= 0.5."""

    def decide_output(self, out):
        return (isinstance(out.get("margin"), float) and out["margin"] >= 0.5), 0.3

    def reason_output(self, out, p):
        return "confidence below threshold"

    def describe(self):
        return {"method": "stub"}


def test_host_guard_needs_both_parts():
    ref = ["billing refund invoice", "crash error bug", "login password account"]
    cal = ["refund my invoice", "the app crashes", "reset password", "invoice charge", "bug in export",
           "billing question", "crash on save", "account locked", "refund please"]
    sem = SemanticNovelty(ref, cal, 0.15, _letters)
    g = HostGuard(sem, _Stub(), "semantic")
    g.prime({"ticket": "refund my invoice"})
    assert g.decide_output({"answer": "billing", "margin": 0.9})[0] is True
    passed, p = g.decide_output({"answer": "billing", "margin": 0.1})
    assert passed is False and p == pytest.approx(float(sem.p_values(["refund my invoice"])[0]))
    assert g.reason_output({"margin": 0.1}, p) == "confidence below threshold"
    g.prime({"ticket": "1234"})  # no letters: p = 1/(n+1) = 0.1 <= alpha
    passed, p = g.decide_output({"answer": "billing", "margin": 0.9})
    assert passed is False and p == pytest.approx(0.1)
    assert g.reason_output({}, p).startswith("semantic novelty p=0.1<=alpha=0.15")
    combined = HostGuard(sem, _Stub(), "combined")
    combined.prime({"ticket": "refund my invoice"})
    assert combined.decide_output({"answer": "billing", "margin": 0.9}) == (True, 0.3)  # p: the compiled guard's
    no_rest = HostGuard(sem, None, "semantic")
    no_rest.prime({"ticket": "refund my invoice"})
    assert no_rest.decide_output({"answer": "x"})[0] is True


def test_make_host_guard_modes_keep_what_they_say():
    sem = SemanticNovelty(["billing refund invoice"], ["refund my invoice", "the app crashes"], 0.2, _letters)
    novelty = {"method": "conformal-novelty", "alpha": 0.2, "n": 2, "calibration_scores": [0.1, 0.2]}
    art = SimpleNamespace(guard=_Stub(), manifest={"guard": novelty}, typed_manifest=Manifest.of({"guard": novelty}))
    g = make_host_guard("semantic", art, sem)
    assert isinstance(g, HostGuard) and g.rest is None and g.mode == "semantic"  # novelty replaced, nothing left
    c = make_host_guard("combined", art, sem)
    assert c.rest is art.guard and c.mode == "combined"  # the whole compiled guard kept
    with pytest.raises(ArgumentError, match="mode"):
        make_host_guard("lexical", art, sem)
    assert without_novelty({"method": "stack", "components": [novelty]})[0] is None
    kept, note = without_novelty({"method": "exact-match"})
    assert kept is not None and "no novelty component" in note
    # a guard entry that is not an object: the artifact's own (always-deopt) guard is kept
    bad = SimpleNamespace(guard=_Stub(), manifest={"guard": 3}, typed_manifest=Manifest.of({"guard": 3}))
    assert make_host_guard("semantic", bad, sem).rest is bad.guard
