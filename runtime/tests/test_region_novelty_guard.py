"""The ``region-novelty`` guard: conformal novelty of a region's input against its path's witnesses."""

from __future__ import annotations

from auto_runtime.guard import RegionNovelty, build_guard
from auto_runtime.guard.entries import RegionNoveltyEntry, guard_entry
from auto_runtime.guard.region import PATH_KEY, PathIndex, jackknife_scores, tokens

TODO = ["add milk to my list", "add eggs to my list", "put bread on my list", "add rice to my list"]
FX = ["convert 5 usd to eur", "convert 10 gbp to usd", "convert 7 chf to jpy"]


def rec(path, text):
    return {"answer": {PATH_KEY: path, "request": text}, "deopt": False}


def test_tokens_fold_case_and_digits():
    assert tokens("Convert 250 USD to EUR!") == tokens("convert 5 usd to eur") == {"convert", "0", "usd", "to", "eur"}
    assert tokens("") == frozenset()


def test_jackknife_scores_leave_each_input_out():
    paths = [[tokens(t) for t in TODO], [tokens(t) for t in FX], [tokens("alone here")]]
    cal = jackknife_scores(paths)
    assert len(cal) == 8 and cal[-1] == 1.0  # an input alone on its path has no neighbour
    idx = PathIndex(paths[0])
    assert idx.score(tokens("add milk to my list")) == 0.0
    assert idx.score(tokens("add milk to my list"), skip=0) == round(1 - 4 / 6, 9)


def test_the_entry_builds_the_guard_and_reads_for_inspect():
    entry = {"method": "region-novelty", "field": "request", "alpha": 0.2, "paths": [TODO, FX],
             "calibration_scores": jackknife_scores([[tokens(t) for t in TODO], [tokens(t) for t in FX]]),
             "heldout": {"n": 4, "deopted": 1, "rate": 0.25}}
    g = build_guard(entry)
    assert isinstance(g, RegionNovelty) and g.describe()["paths"] == [4, 3]
    assert g.decide_output(rec(0, "add apples to my list"))[0]
    ok, p = g.decide_output(rec(0, "convert 5 km to my miles"))
    assert not ok and p is not None and p <= 0.2
    assert "novel input for path 0" in g.evaluate_output(rec(0, "convert 5 km to my miles")).reason
    assert not g.decide_output(rec(1, ""))[0]  # no words: the largest score
    e = guard_entry(entry)
    assert isinstance(e, RegionNoveltyEntry) and e.paths == (4, 3) and e.calibration_scores is None
    assert "held-out deopted 1/4" in e.lines()[0]
