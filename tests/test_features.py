"""The featurizer against the spec in docs/architecture.md and a naive implementation."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from auto.models.specialist.features import (FeatureSpec, featurize, featurize_counts, featurize_many, featurize_row,
                           fnv1a32, frame)


def naive(text: str, spec: FeatureSpec):
    """Straight transcription of the spec: dict of counts in first-touch order."""
    b = text.encode("utf-8")
    b = bytes(c + 32 if 65 <= c <= 90 else c for c in b)
    framed = b"\x02" + b + b"\x03"
    counts: dict[int, int] = {}
    for n in range(spec.n_min, spec.n_max + 1):
        for i in range(len(framed) - n + 1):
            h = 2166136261
            for byte in bytes([n]) + framed[i:i + n]:
                h = ((h ^ byte) * 16777619) % 2**32
            k = h & (spec.buckets - 1)
            counts[k] = counts.get(k, 0) + 1
    norm = math.sqrt(sum(c * c for c in counts.values()))
    return list(counts), [c / norm for c in counts.values()]


def test_fnv1a_reference_vectors():
    # test vectors of 32-bit FNV-1a (draft-eastlake-fnv)
    assert fnv1a32(b"") == 0x811C9DC5
    assert fnv1a32(b"a") == 0xE40C292C
    assert fnv1a32(b"foobar") == 0xBF9CF968


def test_frame_folds_ascii_only():
    assert frame("AbZ") == b"\x02abz\x03"
    assert frame("ÀÉ ß") == b"\x02" + "ÀÉ ß".encode() + b"\x03"  # non-ASCII bytes unchanged
    assert frame("") == b"\x02\x03"


@pytest.mark.parametrize("kw", [dict(n_min=0, n_max=2, buckets=8), dict(n_min=3, n_max=2, buckets=8),
                                dict(n_min=1, n_max=9, buckets=8), dict(n_min=1, n_max=2, buckets=12),
                                dict(n_min=1, n_max=2, buckets=1), dict(n_min=1, n_max=2, buckets=1 << 21),
                                dict(n_min=1.0, n_max=2, buckets=8), dict(n_min=True, n_max=2, buckets=8)])
def test_spec_validation(kw):
    with pytest.raises(ValueError):
        FeatureSpec("t", **kw)
    with pytest.raises(ValueError):
        FeatureSpec("", 1, 2, 8)


def test_spec_dict_roundtrip_and_frozen():
    s = FeatureSpec("ticket", 2, 4, 1024)
    assert FeatureSpec.from_dict(s.to_dict()) == s
    assert s.to_dict() == {"field": "ticket", "n_min": 2, "n_max": 4, "buckets": 1024}
    with pytest.raises(Exception):
        s.n_min = 1
    with pytest.raises(ValueError):
        FeatureSpec.from_dict({"field": "x"})


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=60), st.integers(1, 4), st.integers(0, 3), st.sampled_from([2, 16, 256, 4096]))
def test_matches_naive(text, n_min, extra, buckets):
    spec = FeatureSpec("t", n_min, min(8, n_min + extra), buckets)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        assume(False)  # lone surrogates are not encodable (the artifact answers bad_json)
    idx, val = featurize(text, spec)
    nidx, nval = naive(text, spec)
    assert idx.tolist() == nidx  # first-touch order
    assert val.tolist() == nval  # bit-exact: exact integer sum of squares, one sqrt, one divide
    if idx.size:
        assert abs(float(np.dot(val, val)) - 1.0) < 1e-12
    assert ((idx >= 0) & (idx < buckets)).all()


def test_empty_vector():
    spec = FeatureSpec("t", 3, 5, 64)
    idx, val = featurize("", spec)  # framed text is 2 bytes < n_min
    assert idx.size == 0 and val.size == 0
    assert featurize_many([""], spec).nnz == 0
    idx, val = featurize("", FeatureSpec("t", 1, 2, 64))
    assert idx.size >= 1


def test_counts_and_many():
    spec = FeatureSpec("t", 1, 3, 512)
    texts = ["Hello, World", "", "héllo 🙂 wörld", "a" * 300]
    X = featurize_many(texts, spec)
    assert X.shape == (4, 512) and X.dtype == np.float64 and X.has_sorted_indices
    for i, t in enumerate(texts):
        idx, val = featurize(t, spec)
        row = np.zeros(512)
        row[idx] = val
        assert np.array_equal(X[i].toarray()[0], row)
    assert np.array_equal(featurize_row(texts[0], spec).toarray(), X[0].toarray())
    idx, cnt = featurize_counts("aaaa", FeatureSpec("t", 1, 1, 1 << 20))
    # framed \x02 a a a a \x03: unigrams \x02, a (x4), \x03
    assert sorted(cnt.tolist()) == [1, 1, 4]
    assert int(cnt.sum()) == 6


def naive_words(text: str, spec: FeatureSpec):
    """Step 5 of the spec transcribed: words are runs of [0-9a-z] or bytes >= 0x80 of the framed,
    folded text; unigram from the start state (basis ^ 0x81) * prime, bigram ((h_prev * prime) ^ h) * prime."""
    b = bytes(c + 32 if 65 <= c <= 90 else c for c in text.encode("utf-8"))
    words, cur = [], b""
    for c in b"\x02" + b + b"\x03":
        if 48 <= c <= 57 or 97 <= c <= 122 or c >= 128:
            cur += bytes([c])
        elif cur:
            words.append(cur)
            cur = b""
    out, prev = [], None
    for w in words:
        h = ((2166136261 ^ 0x81) * 16777619) % 2**32
        for c in w:
            h = ((h ^ c) * 16777619) % 2**32
        out.append(h & (spec.buckets - 1))
        if spec.word_max == 2 and prev is not None:
            out.append(((((prev * 16777619) % 2**32) ^ h) * 16777619) % 2**32 & (spec.buckets - 1))
        prev = h
    return out


@given(st.text(max_size=80) | st.sampled_from(["Set the ALARM for 7am, please!", "what's the weather", "café au lait"]))
@settings(max_examples=200, deadline=None)
def test_word_ngrams_follow_the_spec(text):
    spec = FeatureSpec("t", 3, 4, 256, word_max=2, word_weight=3)
    byte_only = FeatureSpec("t", 3, 4, 256)
    counts: dict[int, int] = {}
    chars, _ = naive(text, byte_only)
    cidx, ccounts = featurize_counts(text, byte_only)
    counts.update({int(k): int(c) for k, c in zip(cidx, ccounts)})
    for k in naive_words(text, spec):  # after every byte n-gram, each adding the word weight
        counts[k] = counts.get(k, 0) + 3
    idx, got = featurize_counts(text, spec)
    assert [int(i) for i in idx] == list(counts) and [int(c) for c in got] == list(counts.values())


def test_word_spec_round_trips_and_byte_only_dicts_are_unchanged():
    s = FeatureSpec("ticket", 3, 5, 1024, word_max=2, word_weight=2)
    assert FeatureSpec.from_dict(s.to_dict()) == s and s.to_dict()["word_max"] == 2
    assert "word_max" not in FeatureSpec("ticket", 3, 5, 1024).to_dict()
    assert len(featurize("set the alarm", s)[0]) > len(featurize("set the alarm", FeatureSpec("ticket", 3, 5, 1024))[0])
    for bad in ({"word_max": 3}, {"word_weight": 0}, {"word_weight": 17}):
        with pytest.raises(ValueError):
            FeatureSpec("ticket", 3, 5, 1024, **{"word_max": 1, **bad})
