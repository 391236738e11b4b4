"""Specialist training, selection, prototypes and the reference predictor."""

from __future__ import annotations

import json

import numpy as np
import pytest

from auto.canonical import canonical_json
from auto.models.specialist.train import DEFAULT_BUCKETS, CompiledModel, Prediction, distill, split_witnesses
from auto.errors import CompileError, InputSchemaError
from auto.models.specialist.features import FeatureSpec, featurize
from specialist_corpus import TOPICS, tickets, witnesses

SPEC = FeatureSpec("ticket", 2, 4, 1024)


@pytest.fixture(scope="module")
def result():
    return distill(witnesses(200, seed=1), [SPEC, FeatureSpec("ticket", 1, 3, 512)],
                   models=("logreg", "linsvc", "tree"), seed=0)


def slow_scores(m: CompiledModel, text: str):
    """Independent transcription of the reference arithmetic: Python floats, one term at a time."""
    idx, x = featurize(text, m.features)
    rows = [(float(m.b[r]), m.W[r]) for r in range(m.n_rows)] + [(0.0, p) for p in m.P]
    out = []
    for init, w in rows:
        s = init
        for i, xi in zip(idx.tolist(), x.tolist()):
            s = s + float(w[i]) * xi
        out.append(s)
    return out


def test_selects_and_reports(result):
    assert len(result.candidates) == 6
    sel = result.selected
    assert sel in result.candidates
    best = max(c.heldout_agreement for c in result.candidates)
    assert sel.heldout_agreement == best
    assert sel.heldout_agreement >= 0.9
    assert 0.9 <= result.sklearn_agreement <= 1.0
    assert len(result.train_idx) + len(result.heldout_idx) == 200
    assert not set(result.train_idx) & set(result.heldout_idx)


def test_model_shapes(result):
    m = result.model
    C, B = 5, m.features.buckets
    assert m.classes == tuple(sorted(canonical_json(t) for t in TOPICS))
    assert m.P.dtype == np.float32 and m.P.shape[1] == B and 5 <= m.P.shape[0] <= 5 * 4
    assert np.allclose(np.linalg.norm(m.P.astype(np.float64), axis=1), 1.0, atol=1e-6)
    if m.kind == "linear":
        assert m.W.shape == (C, B) and m.b.shape == (C,)
    mm = m.manifest_model()
    assert mm["classes"] == sorted(TOPICS) and mm["prototypes"] == m.n_prototypes
    assert mm["features"] == m.features.to_dict()
    json.dumps(mm)


def test_reference_arithmetic_is_sequential_f64(result):
    m = result.model
    for text, _ in tickets(20, seed=5):
        s, d = m.scores(text)
        assert list(s) + list(d) == slow_scores(m, text)


def test_predict(result):
    m = result.model
    p = m.predict({"ticket": "I was charged twice, please refund the invoice"})
    assert isinstance(p, Prediction) and p.label == '"billing"' and p.answer == "billing"
    assert p.margin > 0 and -1e-6 <= p.nonconformity <= 1.0
    label, margin, nc = p  # unpacks as (label, margin, nonconformity)
    with pytest.raises(InputSchemaError):
        m.predict({"other": "x"})
    with pytest.raises(InputSchemaError):
        m.predict({"ticket": 3})


def test_deterministic():
    w = witnesses(120, seed=2)
    a = distill(w, [SPEC], models=("logreg", "tree"), seed=3)
    b = distill(w, [SPEC], models=("logreg", "tree"), seed=3)
    assert a.model.digest() == b.model.digest()
    assert a.candidates == b.candidates


def test_tree_and_sklearn_agree_exactly():
    r = distill(witnesses(150, seed=3), [SPEC], models=("tree",))
    m = r.model
    assert m.kind == "tree" and m.W.shape == (0, SPEC.buckets)
    # the reference reproduces scikit-learn's float32 threshold comparisons
    assert r.sklearn_agreement == 1.0
    p = m.predict_text("")
    assert 0.0 <= p.margin <= 1.0


@pytest.mark.parametrize("model", ["logreg", "linsvc", "ridge", "sgd"])
def test_binary_linear(model):
    topics = {k: TOPICS[k] for k in ("bug", "feature")}
    r = distill(witnesses(80, seed=4, topics=topics), [SPEC], models=(model,))
    m = r.model
    assert m.W.shape == (1, SPEC.buckets) and m.b.shape == (1,)
    for text, t in tickets(20, seed=9, topics=topics):
        p = m.predict_text(text)
        s, _ = m.scores(text)
        assert p.label == (m.classes[1] if s[0] > 0 else m.classes[0])
        assert p.margin == abs(float(s[0]))


def test_json_valued_labels():
    lab = {"billing": 1, "bug": [1, "x"], "feature": {"b": 2, "a": None},
           "account": "ünïcødé \"q\"", "security": True}
    r = distill(witnesses(150, seed=6, label=lambda t: lab[t]), [SPEC], models=("logreg",))
    m = r.model
    assert set(m.classes) == {canonical_json(v) for v in lab.values()}
    assert sorted(map(canonical_json, m.answers)) == sorted(m.classes)
    text, t = tickets(1, seed=11)[0]
    assert r.selected.heldout_agreement > 0.8
    assert m.predict_text(text).answer in list(lab.values())


def test_empty_text_nonconformity_is_one():
    r = distill(witnesses(60, seed=7), [FeatureSpec("ticket", 3, 4, 256)], models=("logreg",))
    p = r.model.predict({"ticket": ""})
    assert p.nonconformity == 1.0


def test_errors():
    with pytest.raises(CompileError, match="no witnesses"):
        distill([], [SPEC])
    one = [({"ticket": f"text {i}"}, "same", 1.0) for i in range(10)]
    with pytest.raises(CompileError, match="two distinct"):
        distill(one, [SPEC])
    w = witnesses(20)
    with pytest.raises(CompileError, match="weight"):
        distill([(w[0][0], "a", 0.0)] + w, [SPEC])
    with pytest.raises(CompileError, match="not a string"):
        distill([({"ticket": 5}, "a", 1.0)] + w, [SPEC])
    with pytest.raises(CompileError, match="unknown candidate"):
        distill(w, [SPEC], models=("transformer",))
    with pytest.raises(CompileError, match="JSON"):
        distill([({"ticket": "x"}, float("nan"), 1.0)] + w, [SPEC])
    with pytest.raises(CompileError, match="prototypes_per_class"):
        distill(w, [SPEC], prototypes_per_class=0)
    with pytest.raises(CompileError, match="heldout_fraction"):
        distill(w, [SPEC], heldout_fraction=1.0)
    with pytest.raises(CompileError, match="infer"):
        distill([({"a": "x", "b": "y"}, "p", 1.0), ({"a": "z", "b": "w"}, "q", 1.0)])


def test_default_specs_and_explicit_heldout():
    w = witnesses(100, seed=8)
    r = distill(w[:70], heldout=w[70:], models=("logreg",))
    assert r.model.features.field == "ticket" and r.model.features.buckets == DEFAULT_BUCKETS
    assert len(r.candidates) == 4  # three byte-only ranges, then 3-5-byte grams with words 1-2 at weight 2
    assert [c.features.word_max for c in r.candidates] == [0, 0, 0, 2]
    assert r.heldout_idx == tuple(range(70, 100))


def test_split_is_stratified_and_deterministic():
    labels = ["a"] * 8 + ["b"] * 4 + ["c"]
    tr, ho = split_witnesses(labels, 0.25, seed=1)
    assert (tr, ho) == split_witnesses(labels, 0.25, seed=1)
    assert sorted(tr + ho) == list(range(13))
    assert [labels[i] for i in ho].count("a") == 2 and [labels[i] for i in ho].count("b") == 1
    assert 12 in tr  # a singleton class stays in training


def test_model_validation():
    spec = FeatureSpec("t", 1, 2, 8)
    P = np.eye(1, 8, dtype=np.float32)
    with pytest.raises(ValueError):
        CompiledModel("linear", ('"a"',), spec, np.zeros((1, 8), np.float32), np.zeros(1, np.float32), P)
    with pytest.raises(ValueError):
        CompiledModel("linear", ('"b"', '"a"'), spec, np.zeros((1, 8), np.float32),
                      np.zeros(1, np.float32), P)
    with pytest.raises(ValueError):
        CompiledModel("linear", ('"a"', '"b"'), spec, np.zeros((2, 8), np.float32),
                      np.zeros(2, np.float32), P)
    with pytest.raises(ValueError):
        CompiledModel("linear", ('"a"', '"b"'), spec, np.zeros((1, 8)), np.zeros(1, np.float32), P)
    ok = CompiledModel("linear", ('"a"', '"b"'), spec, np.zeros((1, 8), np.float32),
                       np.zeros(1, np.float32), P)
    assert ok.predict_text("x").label == '"a"'  # score 0 is not > 0
