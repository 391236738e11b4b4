"""The unexplained mass in the specialist's nonconformity: n-grams no training input of the answer's
class contains (a negation that keeps the topic's words), in the artifact and its Python reference."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from auto.canonical import canonical_json
from auto.codegen import compile_model, reference_run
from auto.models.specialist.features import FeatureSpec, featurize, featurize_many
from auto.models.specialist.train import class_support, distill, unexplained_mass
from specialist_corpus import Artifact, witnesses

SPEC = FeatureSpec("ticket", 3, 5, 1024)


@pytest.fixture(scope="module")
def fitted():
    ws = witnesses(150, seed=11)
    res = distill(ws, [SPEC], models=("linsvc",))
    return ws, res, Artifact(compile_model(res.model))


def test_the_support_is_each_class_s_training_buckets(fitted):
    ws, res, _art = fitted
    m = res.model
    assert m.support is not None and m.support.shape == (len(m.classes), SPEC.buckets)
    tr = [ws[i] for i in res.train_idx]
    X = featurize_many([w[0]["ticket"] for w in tr], SPEC)
    want = np.zeros_like(m.support)
    for i, w in enumerate(tr):
        want[m.classes.index(canonical_json(w[1])), X[i].indices] = True
    assert (m.support == want).all()
    assert m.manifest_model()["nonconformity"] == "prototype-distance+unexplained-mass"


def test_class_support_and_unexplained_mass_by_hand():
    import scipy.sparse as sp
    X = sp.csr_matrix(np.array([[1.0, 0, 0, 0], [0, 1.0, 0, 0], [0, 0, 1.0, 0]]))
    sup = class_support(X, ['"a"', '"b"', '"a"'], ['"a"', '"b"'])
    assert sup.tolist() == [[True, False, True, False], [False, True, False, False]]
    idx, x = np.array([3, 0, 1]), np.array([0.6, 0.0, 0.8])
    assert unexplained_mass(sup[0], idx, x) == 0.6 * 0.6 + 0.8 * 0.8  # buckets 3 and 1: outside "a"
    assert unexplained_mass(sup[1], idx, x) == 0.6 * 0.6 + 0.0 * 0.0
    assert unexplained_mass(sup[0], np.zeros(0, np.int64), np.zeros(0)) == 0.0


def test_a_negated_training_ticket_scores_higher_by_its_unexplained_mass(fitted):
    ws, res, art = fitted
    m = res.model
    text = ws[res.train_idx[0]][0]["ticket"]
    flipped = "Nobody wants this anymore, disregard: " + text
    p0, p1 = m.predict_text(text), m.predict_text(flipped)
    assert p0.nonconformity < 1.0
    idx, x = featurize(flipped, SPEC)
    u = unexplained_mass(m.support[m.classes.index(p1.label)], idx, x)
    assert u > 0.05  # "nobody", "anymore", "disregard" are in no training ticket of the corpus
    bare = 1.0 - float(np.max(m.scores(flipped)[1]))
    assert p1.nonconformity == bare + u
    data = json.dumps({"ticket": flipped}).encode()
    assert art.run(data) == reference_run(m, data)
    out = json.loads(art.run(data))
    assert out["answer"] == p1.answer and out["nonconformity"] > p0.nonconformity


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=200))
def test_artifact_matches_the_reference_on_any_text(fitted, text):
    _ws, res, art = fitted
    m = res.model
    data = json.dumps({"ticket": text}).encode()
    assert art.run(data) == reference_run(m, data)


def test_negated_tickets_that_keep_the_topic_s_words_deopt_and_fresh_ones_pass():
    """On the triage bench's corpus (the cross-fit calibration the specialist rung uses, per-label
    novelty at alpha 0.05): a request negated in the topic's own words brings n-grams its class's
    witnesses never contain, so the novelty test deopts it; fresh in-distribution tickets pass."""
    from auto.compile.crossfit import choose_config, cross_fit, fit
    from auto.guards.novelty import calibrate_novelty, novelty_passes
    from bench.triage import corpus
    from bench.triage.oracle import triage_oracle
    from bench.triage.probes import generate_probes

    data = corpus.default_corpus(0)
    seen: dict[str, object] = {}
    for t in data["train"]:
        seen.setdefault(t.ticket, triage_oracle(t.ticket)[0])
    items = [({"ticket": k}, v, 1.0) for k, v in seen.items()]
    config, _ = choose_config(items, 0, field="ticket")
    cf = cross_fit(items, config, folds=5, seed=0)
    entry = calibrate_novelty(cf.scores, 0.05, list(cf.answers))
    model = fit(items, config, 0).model

    def passes(text: str) -> bool:
        p = model.predict_text(text)
        return novelty_passes(entry, p.nonconformity, p.answer)

    flipped = [p.ticket for p in generate_probes(0) if p.kind == "flipped-meaning"]
    fresh = [t.ticket for t in corpus.generate(len(seen) + 200, seed=5000) if t.ticket not in seen][:200]
    assert len(flipped) == 18 and len(fresh) == 200
    assert sum(map(passes, flipped)) <= 1
    assert sum(map(passes, fresh)) >= 190


def test_a_model_without_support_scores_as_before(fitted):
    import dataclasses
    ws, res, _art = fitted
    m = dataclasses.replace(res.model, support=None)
    art = Artifact(compile_model(m))
    text = "Nobody wants this anymore: " + ws[0][0]["ticket"]
    data = json.dumps({"ticket": text}).encode()
    assert art.run(data) == reference_run(m, data)
    assert m.predict_text(text).nonconformity == 1.0 - float(np.max(m.scores(text)[1]))
    assert m.top_score == 1.0 and res.model.top_score == 2.0
    assert "nonconformity" not in m.manifest_model() and m.digest() != res.model.digest()


def test_support_of_the_wrong_shape_is_refused(fitted):
    import dataclasses
    _ws, res, _art = fitted
    with pytest.raises(ValueError, match="support must be bool"):
        dataclasses.replace(res.model, support=np.zeros((1, SPEC.buckets), bool))
