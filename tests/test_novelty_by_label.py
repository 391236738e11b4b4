"""The per-label (label-conditional, "Mondrian") conformal novelty test: an input is judged against
the calibration scores of the inputs the artifact answered with the same label; a label with too
few scores, or none, is judged against the pooled scores; compiler and runtime apply one rule."""

from __future__ import annotations

import random

import numpy as np
import pytest

from auto.guards.novelty import calibrate_novelty, leave_one_out_pass, novelty_passes
from auto_runtime.guard import AlwaysDeopt, build_guard

ALPHA = 0.05


def _calibration(seed: int = 0):
    rng = random.Random(seed)
    scores = [rng.uniform(0.1, 0.3) for _ in range(60)] + [rng.uniform(0.5, 0.8) for _ in range(60)] \
        + [rng.uniform(0.0, 0.9) for _ in range(10)]
    labels = ["tight"] * 60 + ["loose"] * 60 + ["rare"] * 10
    return scores, labels


def test_a_score_ordinary_for_the_pool_is_novel_for_its_own_label():
    scores, labels = _calibration()
    pooled = calibrate_novelty(scores, ALPHA)
    per = calibrate_novelty(scores, ALPHA, labels)
    assert [g["label"] for g in per["calibration_scores_by_label"]] == ["loose", "rare", "tight"]
    assert novelty_passes(pooled, 0.6, "tight")  # the pooled threshold is the loosest label's
    assert not novelty_passes(per, 0.6, "tight")  # no "tight" calibration input scored near 0.6
    assert novelty_passes(per, 0.6, "loose") and novelty_passes(per, 0.2, "tight")
    # too few scores for a test of its own (10 < 19 at alpha 0.05), or a label never seen: pooled
    for label in ("rare", "never-seen", None, {"a": 1}):
        for s in (0.2, 0.6, 0.79, 0.95):
            assert novelty_passes(per, s, label) == novelty_passes(pooled, s, label)


def test_the_runtime_applies_the_compilers_rule():
    scores, labels = _calibration(1)
    entry = calibrate_novelty(scores, ALPHA, labels)
    g = build_guard(entry)
    grid = [(s, y) for s in np.linspace(0.0, 1.0, 41) for y in ("tight", "loose", "rare", "other", 3)]
    outs = [{"answer": y, "nonconformity": float(s)} for s, y in grid]
    single = [g.decide_output(o)[0] for o in outs]
    batch, _p = g.evaluate_batch_outputs(outs)
    assert single == [novelty_passes(entry, s, y) for s, y in grid] == list(batch)
    assert any(a != b for a, b in zip(single, [novelty_passes(calibrate_novelty(scores, ALPHA), s, y) for s, y in grid]))


def test_exchangeable_inputs_deopt_at_most_alpha_within_each_label():
    rng = random.Random(7)
    draw = {"tight": lambda: rng.uniform(0.1, 0.3), "loose": lambda: rng.uniform(0.5, 0.8)}
    deopted = {y: 0 for y in draw}
    trials, fresh = 200, 50
    for _ in range(trials):
        labels = [y for y in draw for _ in range(40)]
        entry = calibrate_novelty([draw[y]() for y in labels], ALPHA, labels)
        for y in draw:
            deopted[y] += sum(not novelty_passes(entry, draw[y](), y) for _ in range(fresh))
    for y, d in deopted.items():  # E[deopt share] <= alpha; 10,000 draws: 3 standard errors ~ 0.0065
        assert d / (trials * fresh) <= ALPHA + 0.0065, (y, d)


def test_leave_one_out_judges_each_point_against_the_others_of_its_label():
    scores, labels = _calibration(2)
    loo = leave_one_out_pass(scores, ALPHA, labels)
    for i in range(len(scores)):
        others = [s for j, s in enumerate(scores) if j != i]
        entry = calibrate_novelty(others, ALPHA, [y for j, y in enumerate(labels) if j != i])
        assert loo[i] == novelty_passes(entry, scores[i], labels[i]), i
    assert leave_one_out_pass(scores, ALPHA) == leave_one_out_pass(scores, ALPHA, None)
    with pytest.raises(Exception):
        leave_one_out_pass(scores, ALPHA, labels[:-1])


@pytest.mark.parametrize("bad", ["x", [{"label": "a"}], [{"label": "a", "calibration_scores": [0.1, float("nan")]}],
                                 [{"calibration_scores": [0.1]}],
                                 [{"label": "a", "calibration_scores": [0.1]}, {"label": "a", "calibration_scores": [0.2]}]])
def test_a_malformed_per_label_entry_always_deopts(bad):
    entry = {**calibrate_novelty([0.1, 0.2, 0.3] * 10, ALPHA), "calibration_scores_by_label": bad}
    assert isinstance(build_guard(entry), AlwaysDeopt)
