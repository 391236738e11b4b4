"""FNV-1a 64 of many keys (the WebAssembly hasher, its numpy fallback) equals the one-key
definition, and the index check finds the first entry whose hash is not its key's."""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from auto_runtime import fnv
from auto_runtime.fnv import FNV64_OFFSET_BASIS, first_wrong_hash, fnv1a64, fnv1a64_array, fnv1a64_many


def test_the_definition_on_published_vectors():
    # FNV-1a 64 test vectors from the algorithm's reference test suite
    assert fnv1a64(b"") == FNV64_OFFSET_BASIS == 0xCBF29CE484222325
    assert fnv1a64(b"a") == 0xAF63DC4C8601EC8C
    assert fnv1a64(b"foobar") == 0x85944171F73967E8


@settings(max_examples=60, deadline=None)
@given(st.lists(st.binary(max_size=90), min_size=0, max_size=300))
def test_many_equals_one_at_a_time(keys):
    want = [fnv1a64(k) for k in keys]
    assert fnv1a64_many(keys) == want
    assert fnv._fnv1a64_numpy(keys).tolist() == want if keys else True


def _index(keys, address, wrong=None):
    """A table segment's index + keys region (the layout auto_runtime.table reads)."""
    n = len(keys)
    base = 24 * n
    idx = bytearray()
    region = b""
    for i, k in enumerate(keys):
        h = fnv1a64(k) ^ (1 if i == wrong else 0)
        idx += h.to_bytes(8, "little") + (address + base + len(region)).to_bytes(4, "little")
        idx += len(k).to_bytes(4, "little") + bytes(8)
        region += k
    return bytes(idx) + region


@pytest.mark.parametrize("n", [3, 64, 500])
def test_the_index_check_names_the_first_wrong_entry(n, monkeypatch):
    rnd = random.Random(n)
    keys = [bytes(rnd.randrange(256) for _ in range(rnd.randrange(60))) for _ in range(n)]
    for use_wasm in (True, False):
        if not use_wasm:
            monkeypatch.setattr(fnv, "_get_hasher", lambda: None)
        assert first_wrong_hash(_index(keys, 4096), n, 4096) == -1
        assert first_wrong_hash(_index(keys, 4096, wrong=n - 1), n, 4096) == n - 1
        assert first_wrong_hash(_index(keys, 70000, wrong=n // 2), n, 70000) == n // 2


def test_large_lists_are_hashed_in_parts(monkeypatch):
    keys = [bytes([i % 256]) * (i % 50) for i in range(3000)]
    monkeypatch.setattr(fnv, "MAX_HASHER_BYTES", fnv.PAGE + 2000)
    assert fnv1a64_array(keys).tolist() == [fnv1a64(k) for k in keys]
    assert fnv1a64_array(keys).dtype == np.uint64
